//! An in-process FoundationDB 7.3 test cluster: a small, honest server-side implementation
//! that speaks the real wire protocol (through `fdb-protocol`) on loopback TCP, for tests and
//! examples. Think miniredis, not a database.
//!
//! Its logic is one sans-IO state machine (`server.rs`: every process, connection, handler
//! and fault; bytes and time in, frames and closes out), run by two runners: the threaded
//! [`TestCluster`] on loopback sockets and the wall clock (`runner.rs`), and the
//! deterministic simulation ([`crate::sim`]) on a simulated network and a virtual clock.
//!
//! # What it serves
//!
//! * **Coordinators** (one port each, default 1): `OpenDatabaseCoordRequest` → `ClientDBInfo`,
//!   answered at once when the client's `known_client_info_id` differs from the current id and
//!   held (long poll) otherwise; the id changes whenever the proxies are restarted.
//! * **Proxies** (one port): the GRV proxy (read versions, global config) and the commit proxy
//!   (key locations, commits). The **master** runs in a process of its own ([`Role::Master`]),
//!   which no client talks to: killing or stopping it makes a recovery (after failure
//!   detection) in which the proxies end and come back, under new tokens, in their own
//!   process. Read versions are the latest committed version; versions start at
//!   [`INITIAL_VERSION`] (above 100,000,000, like a fresh fdbserver database past its first
//!   recovery), follow the wall clock at about 1,000,000 per second and every commit gets a
//!   version above every version handed out before. The MVCC windows are counted in versions
//!   (5,000,000 by default), as fdbserver's are.
//! * **Storage servers** (one port each, default 3): `GetValue`, `GetKey`, `GetKeyValues` and
//!   `WatchValue` at a version over a multi-version store, with FDB's key-selector rules
//!   (`findKey`), range limits (`limit`, `limit_bytes`, `more`) and errors
//!   (`transaction_too_old`, `future_version`, `wrong_shard_server`) in the reply's own
//!   `error` field, as a real storage server sends them. Also `WaitMetricsRequest` (answered
//!   at once with the range's bytes) and `SplitRangeRequest` (FDB's `getSplitPoints` walk),
//!   both from an exact byte sample (every pair at `key + value` bytes, where FDB samples
//!   about one pair per `(key + 100) * 250` bytes) at the newest version, and
//!   `wrong_shard_server` in the `ErrorOr` when the server does not hold the whole range.
//!   And `GetMappedKeyValues` as fdbserver 7.3.77 serves it (`server/mapped.rs`: its mapper
//!   rules and lenient tuples, its byte accounting, its errors; mapped keys and ranges the
//!   server does not hold are read anyway, as its fallback transaction does).
//! * Every process answers pings and `ProtocolInfoRequest`; a packet for a token the process
//!   does not know (e.g. an interface from before a restart) gets FDB's `ENDPOINT_NOT_FOUND`
//!   notice.
//!
//! The key space `["", "\xff\xff")` is cut into shards at [`DEFAULT_SPLIT_POINTS`] (or the
//! builder's split points), dealt round-robin to the storage servers, so a range read over
//! `a..z` already crosses four shards on three servers. Location replies look like a real
//! commit proxy's: the shards overlapping the request, each with its team's
//! `StorageServerInterface`s, plus tag mappings.
//!
//! Commits are resolved like FDB's resolver: a transaction conflicts when one of its read
//! conflict ranges intersects a write conflict range of a transaction committed at a version
//! above its `read_snapshot`; it is `transaction_too_old` when it has read conflict ranges and
//! its snapshot is older than the MVCC window (5,000,000 versions ≈ 5 s by default). Mutations
//! are applied in order at the commit version: sets, clears, atomic ops
//! ([`fdb_protocol::atomic::apply`]) and versionstamped keys/values
//! (FDB's `transformVersionstampMutation`, written out on its own, batch index 0). `report_conflicting_keys`
//! is honoured (the reply is a `CommitID` with version -1 and the conflicting indices).
//!
//! # Tenants
//!
//! The cluster serves tenants as fdbserver 7.3.77 does with `tenant_mode=optional_experimental`
//! (the default; [`TestClusterBuilder::tenant_mode`] picks disabled or required). Its tenant
//! map is the `\xff/tenant/...` keys the management transactions write into its store: the
//! commit proxy answers `GetTenantIdRequest` from `\xff/tenant/nameIndex/` as of the last
//! commit (`tenant_not_found` otherwise); a commit with a `TenantInfo` must keep every
//! mutation under the tenant's prefix (`illegal_tenant_access`) and name a tenant that exists
//! (`tenant_not_found`, before any conflict is looked at); storage requests with a
//! `TenantInfo` need the tenant at their read version (`tenant_not_found`), get the prefix
//! added to their keys, search only the tenant's range (`clampRangeToTenant`) and answer
//! tenant-relative keys; a watch in a tenant watches the prefixed key, needs the tenant at
//! the latest version and ends with `tenant_removed` when the tenant is deleted. Tenant locks
//! are read from the stored map entry's `lock_state`: a read-only or locked tenant refuses
//! commits without `lock_aware` (`tenant_locked`, the proxy's `lockedTenants`), a locked one
//! also reads without `lock_aware` in their `ReadOptions`, and watches (never lock-aware).
//! Tenant groups are plain metadata keys to the cluster, as to fdbserver. The mode is
//! published in the `ClientDBInfo` and stored at `\xff/conf/tenant_mode`. A
//! `GetKeyServerLocations` with a tenant (as libfdb_c 7.3 and this client send it) names an
//! existing tenant (`tenant_not_found`), is looked up with the prefix added and answers shard
//! bounds clamped to the tenant's range. Not served, in required mode: fdbserver's splitting
//! of raw clears at tenant bounds and its refusal of a tenant-map change mixed with normal writes (only raw
//! sets outside every tenant are refused). The proxy's tenant map never lags the commits
//! (fdbserver's `minTenantVersion` wait and `future_version` do not arise).
//!
//! # Faults
//!
//! See the methods of [`TestCluster`] under "Faults": dropping connections, delaying or
//! holding-then-reordering replies, hanging a role ([`TestCluster::set_silent`]: replies are
//! lost), killing and restarting a role (new tokens; restarting the proxies changes the
//! `ClientDBInfo` id so long polls fire), ending a role while its process lives (what it owed
//! is answered with `broken_promise`, as fdbserver answers the promises of a role that
//! ended), failing the next N requests of a kind with any FDB error, `commit_unknown_result`
//! with the commit applied or not, moving a shard to another server, jumping the version
//! forward. Requests are counted per kind and per process ([`TestCluster::requests`],
//! [`TestCluster::requests_to`]); [`TestCluster::injections_left`] says whether an
//! injection fired.
//!
//! Three faults take the shape fdbserver 7.3.77 gives them (measured by `real_faults.rs`):
//!
//! * **Recovery** ([`TestCluster::recover`], [`TestCluster::recover_with`]): the proxies end
//!   (`broken_promise` for what they owed); the `ClientDBInfo` first lists no proxies at all,
//!   then ~100 ms later the new ones, then the same ones again under new ids; the version
//!   jumps by `MAX_VERSIONS_IN_FLIGHT` and the resolver starts empty, so commits reading at
//!   older read versions are `transaction_too_old`; storage servers keep serving those
//!   versions until they leave the MVCC window in time (about 5 s after they were handed
//!   out), as fdbserver's did.
//! * **SIGSTOP** ([`TestCluster::sigstop`], [`TestCluster::sigcont`]): the process keeps its
//!   sockets and answers nothing, pings included; what clients send waits in the sockets and
//!   is served, late, when it continues, with the replies it owed. A stopped process holding
//!   the proxies or a log (builder: `logs_on_storage`) stalls every commit and read version;
//!   the cluster recovers without it (the proxies move to a new process) after the
//!   failure-detection delay *plus* the connection monitor's ping timeout
//!   (`stop_noticed_after`, 2 s): the sockets of a stopped process stay open, so it is
//!   noticed later than a killed one, and not at all if it continues before. Clients notice
//!   it only by their own ping timeouts too. A continued storage server catches up first
//!   (`future_version` meanwhile).
//! * **Exclude** (a commit writing `\xff/conf/excluded/IP:PORT`, as `fdbcli exclude` does):
//!   the shards of the storage servers at excluded addresses move to other servers, at once
//!   or (builder: `data_move_delay`, `data_move_step`) shard by shard in key order, as
//!   fdbserver's data distribution moves them (it took about 6 s for one storage process);
//!   the excluded server answers `wrong_shard_server` for each shard once it moved, and its
//!   watches on it fail so, while the shards not moved yet still answer from it. Clearing
//!   the key (`include`) moves nothing back. `\xff\xff/management/excluded/`, fdbcli 7.3's
//!   special-key way to write it, is the client's (this client does not serve it).
//! * **Coordinator change** ([`TestCluster::change_coordinators`]): new coordinator
//!   processes, a connection string with the same description and a new id; the old
//!   coordinators forward (`ClientDBInfo.forward`, held long polls included); a recovery
//!   follows.
//!
//! # Limits (plainly)
//!
//! * One OS process, one in-memory store, no durability, no real logs, no recovery
//!   protocol: all storage servers read the same store and only decide *whether* they serve a
//!   key by the shard map. A moved shard is readable at once, history included, on its new
//!   server. A "log" is a flag on a storage process: it only decides whether stopping that
//!   process stalls commits; which commits a recovery keeps is the [`Recovery`] shape's
//!   choice, not the outcome of locking real logs.
//! * The resolver keeps every commit's write ranges for the window and checks them linearly;
//!   commits are resolved one at a time, each in its own batch (`txn_batch_id` 0).
//! * Versions advance with the wall clock even without commits (like an idle cluster's empty
//!   batches), so `future_version` only happens for versions ahead of the clock or on a
//!   storage server catching up after a stop.
//! * No tenants, no locking (`lock_aware`), no idempotency ids, no TLS, no throttling, no
//!   TSS, no version vectors, no transaction size limits on the server side; status JSON is
//!   a small document of the `cluster` section.
//! * Coordinators serve any cluster key they do not forward (fdbserver refuses another
//!   description with `wrong_connection_file` and never answers an unknown id). A recovery
//!   happens only when asked for, after a stopped process's failure detection, or after a
//!   coordinator change: killing a process ([`TestCluster::kill`]) makes none, and
//!   [`TestCluster::end_role`] / [`TestCluster::restart`] publish new proxies at once, without
//!   fdbserver's empty list or version jump. `SIGSTOP` of a storage server or coordinator
//!   makes no recovery either (fdbserver's data distribution would, much later, re-replicate).
//! * [`TestCluster`]: a thread per connection; it is meant for a handful of clients, not for
//!   load. ([`crate::sim`] runs the same core on one thread, without sockets.)

pub(crate) mod checks;
mod raw_client;
mod runner;
pub(crate) mod server;
mod store;

pub use raw_client::{stream_addr, RawClient, RawError};
pub use runner::TestCluster;
pub use server::{Injected, Recovery, ReleaseOrder, RequestKind, Role, ShardInfo};
pub use store::{key_after, ROW_OVERHEAD_BYTES};

use std::time::Duration;

/// Where the default cluster cuts the key space: tuple-encoded keys (`\x01` bytes, `\x02`
/// strings...) get two shards, ASCII upper case and digits one, lower case four, and the
/// system keys (`\xff...`) their own.
pub const DEFAULT_SPLIT_POINTS: &[&[u8]] =
    &[b"\x02", b"\x02m", b"A", b"a", b"h", b"p", b"w", b"\xff"];

/// FDB's `MAX_READ_TRANSACTION_LIFE_VERSIONS`: reads and commits older than this many versions
/// behind the newest are `transaction_too_old`.
pub const DEFAULT_MVCC_WINDOW: i64 = 5_000_000;

/// Where the cluster's versions start (they then follow the clock at 1,000,000 per second).
/// A fresh fdbserver 7.3.77 database is already past a recovery: `configure new` commits at
/// version 1 in a first generation, which ends after about 120,000 versions, and the next
/// generation starts `MAX_VERSIONS_IN_FLIGHT` (100,000,000) versions later; a real cluster
/// answered 100,289,084 for its first read version. So read version 1 is older than every
/// window from the start, as on fdbserver (where the storage servers and the resolver count
/// their windows in versions).
pub const INITIAL_VERSION: i64 = 100_000_000;

/// Configures a [`TestCluster`] before it starts.
#[derive(Clone, Debug)]
pub struct TestClusterBuilder {
    pub(crate) storage_servers: usize,
    pub(crate) coordinators: usize,
    pub(crate) replication: usize,
    pub(crate) split_points: Vec<Vec<u8>>,
    pub(crate) mvcc_window: i64,
    pub(crate) future_version_delay: Duration,
    pub(crate) watch_timeout: Duration,
    pub(crate) description: String,
    pub(crate) log_storage: Vec<usize>,
    pub(crate) failure_detection_delay: Duration,
    pub(crate) stop_noticed_after: Duration,
    pub(crate) catch_up: Duration,
    pub(crate) recovery: Recovery,
    pub(crate) tenant_mode: u32,
    pub(crate) data_move_delay: Duration,
    pub(crate) data_move_step: Duration,
    pub(crate) storage_dc_ids: Vec<String>,
}

impl Default for TestClusterBuilder {
    fn default() -> Self {
        TestClusterBuilder {
            storage_servers: 3,
            coordinators: 1,
            replication: 1,
            split_points: DEFAULT_SPLIT_POINTS.iter().map(|s| s.to_vec()).collect(),
            mvcc_window: DEFAULT_MVCC_WINDOW,
            future_version_delay: Duration::from_secs(1),
            watch_timeout: Duration::from_secs(30),
            description: "test:cluster".into(),
            log_storage: Vec::new(),
            failure_detection_delay: Duration::from_secs(1),
            stop_noticed_after: Duration::from_secs(13),
            catch_up: Duration::from_millis(1500),
            recovery: Recovery::default(),
            tenant_mode: 1,
            data_move_delay: Duration::ZERO,
            data_move_step: Duration::from_millis(100),
            storage_dc_ids: Vec::new(),
        }
    }
}

impl TestClusterBuilder {
    /// Number of storage servers, each on its own port (at least 1; default 3).
    pub fn storage_servers(mut self, n: usize) -> Self {
        self.storage_servers = n.max(1);
        self
    }
    /// The datacenter id (`--locality-dcid`) of each storage server, in order; servers past
    /// the list have none (the default for all), as a process started without one.
    pub fn storage_dc_ids<I, S>(mut self, ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.storage_dc_ids = ids.into_iter().map(Into::into).collect();
        self
    }
    /// Number of coordinators, each on its own port (at least 1; default 1).
    pub fn coordinators(mut self, n: usize) -> Self {
        self.coordinators = n.max(1);
        self
    }
    /// Storage servers per shard (default 1; capped at the number of servers). With more than
    /// one, shard `i` lives on servers `i, i+1, ...` (mod n).
    pub fn replication(mut self, n: usize) -> Self {
        self.replication = n.max(1);
        self
    }
    /// Shard boundaries (sorted and deduplicated; `""` is implied).
    pub fn split_points<I, K>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = K>,
        K: AsRef<[u8]>,
    {
        self.split_points = keys.into_iter().map(|k| k.as_ref().to_vec()).collect();
        self
    }
    /// The MVCC window in versions (default [`DEFAULT_MVCC_WINDOW`]).
    pub fn mvcc_window(mut self, versions: i64) -> Self {
        self.mvcc_window = versions.max(1);
        self
    }
    /// How long a storage server waits for a future version before `future_version`
    /// (default 1 s, FDB's `FUTURE_VERSION_DELAY`).
    pub fn future_version_delay(mut self, d: Duration) -> Self {
        self.future_version_delay = d;
        self
    }
    /// How long a watch is held before the storage server answers `timed_out` (default 30 s,
    /// FDB's `WATCH_TIMEOUT`).
    pub fn watch_timeout(mut self, d: Duration) -> Self {
        self.watch_timeout = d;
        self
    }
    /// The `description:id` part of the cluster file (default `test:cluster`).
    pub fn description(mut self, d: impl Into<String>) -> Self {
        self.description = d.into();
        self
    }
    /// Storage servers whose processes also hold a transaction log (default none: the log
    /// lives with the proxies). Stopping such a process ([`TestCluster::sigstop`]) stalls
    /// every commit and read version, as a stopped tLog stalls fdbserver's commit pipeline.
    pub fn logs_on_storage<I: IntoIterator<Item = usize>>(mut self, servers: I) -> Self {
        self.log_storage = servers.into_iter().collect();
        self
    }
    /// How long a stopped process holding the proxies or a log goes unnoticed before the
    /// cluster recovers without it (default 1 s; fdbserver's failure detection takes about
    /// as long, the whole recovery several seconds).
    pub fn failure_detection_delay(mut self, d: Duration) -> Self {
        self.failure_detection_delay = d;
        self
    }
    /// How much later than a killed one a stopped process is noticed (default 13 s, what
    /// fdbserver 7.3.77 took in `real_faults.rs`: commits stopped for 4.2 s when the master's
    /// process was killed, for 17.6 s when a log and commit proxy's process was stopped). A
    /// killed process refuses connections, and FlowTransport marks a peer failed once its
    /// connection has stayed failed for `FAILURE_DETECTION_DELAY` (4 s). A `SIGSTOP`ped one
    /// keeps its sockets and the kernel still completes connects to it: the connection
    /// monitor drops a connection whose ping went unanswered for `CONNECTION_MONITOR_TIMEOUT`
    /// (2 s), but each reconnect that succeeds resets that failure clock (and a client marks
    /// the peer available again), so a stopped process is noticed much later, and never if
    /// it continues before.
    pub fn stop_noticed_after(mut self, d: Duration) -> Self {
        self.stop_noticed_after = d;
        self
    }
    /// How long a storage server takes, once continued after [`TestCluster::sigstop`], to
    /// catch up with the versions it missed (default 1.5 s: longer than the
    /// `future_version_delay`, so a read at a fresh version right after the `SIGCONT` gets
    /// `future_version`, as fdbserver 7.3.77's storage servers answered after a SIGSTOP).
    pub fn catch_up(mut self, d: Duration) -> Self {
        self.catch_up = d;
        self
    }
    /// The shape of the recoveries the cluster goes through by itself (after failure
    /// detection, a coordinator change); default [`Recovery::default`].
    pub fn recovery(mut self, r: Recovery) -> Self {
        self.recovery = r;
        self
    }
    /// The cluster's tenant mode: 0 disabled, 1 optional (the default, as `cluster.sh`
    /// configures fdbserver: `tenant_mode=optional_experimental`), 2 required. It is published
    /// in the `ClientDBInfo` and stored at `\xff/conf/tenant_mode` (absent when disabled).
    pub fn tenant_mode(mut self, mode: u32) -> Self {
        self.tenant_mode = mode.min(2);
        self
    }
    /// How long data distribution waits before it moves the first shard off an excluded
    /// storage server (default zero: every shard moves at the exclude's commit). Until a
    /// shard moves its old team serves its reads and takes its commits as before, as
    /// fdbserver's do while a move is in flight (about 6 s for a storage process of the
    /// 5-process cluster of `real_faults.rs`); a new exclude meanwhile starts the wait
    /// again. After it the shards move one at a time, in key order, one every
    /// [`TestClusterBuilder::data_move_step`], as fdbserver's data distribution moves shard
    /// by shard: meanwhile some shards answer from their new team and the others still from
    /// the old one. [`TestCluster::move_next_shard`] moves the next one at once.
    pub fn data_move_delay(mut self, d: Duration) -> Self {
        self.data_move_delay = d;
        self
    }
    /// The time between two shard moves off an excluded server once they started (default
    /// 100 ms; see [`TestClusterBuilder::data_move_delay`]).
    pub fn data_move_step(mut self, d: Duration) -> Self {
        self.data_move_step = d;
        self
    }
    /// Binds every port on loopback and starts serving.
    pub fn start(self) -> TestCluster {
        TestCluster::start_with(self)
    }
}
