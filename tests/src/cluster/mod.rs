//! An in-process FoundationDB 7.3 test cluster: a small, honest server-side implementation
//! that speaks the real wire protocol (through `fdb-protocol`) on loopback TCP, for tests and
//! examples. Think miniredis, not a database.
//!
//! # What it serves
//!
//! * **Coordinators** (one port each, default 1): `OpenDatabaseCoordRequest` → `ClientDBInfo`,
//!   answered at once when the client's `known_client_info_id` differs from the current id and
//!   held (long poll) otherwise; the id changes whenever the proxies are restarted.
//! * **Proxies** (one port): the GRV proxy (read versions, global config) and the commit proxy
//!   (key locations, commits). Read versions are the latest committed version; versions follow
//!   the wall clock at about 1,000,000 per second and every commit gets a version above every
//!   version handed out before.
//! * **Storage servers** (one port each, default 3): `GetValue`, `GetKey`, `GetKeyValues` and
//!   `WatchValue` at a version over a multi-version store, with FDB's key-selector rules
//!   (`findKey`), range limits (`limit`, `limit_bytes`, `more`) and errors
//!   (`transaction_too_old`, `future_version`, `wrong_shard_server`) in the reply's own
//!   `error` field, as a real storage server sends them. Also `WaitMetricsRequest` (answered
//!   at once with the range's bytes) and `SplitRangeRequest` (FDB's `getSplitPoints` walk),
//!   both from an exact byte sample (every pair at `key + value` bytes, where FDB samples
//!   about one pair per `(key + 100) * 250` bytes) at the newest version, and
//!   `wrong_shard_server` in the `ErrorOr` when the server does not hold the whole range.
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
//! ([`fdb_protocol::atomic::transform_versionstamp`], batch index 0). `report_conflicting_keys`
//! is honoured (the reply is a `CommitID` with version -1 and the conflicting indices).
//!
//! # Faults
//!
//! See the methods of [`TestCluster`] under "Faults": dropping connections, delaying or
//! holding-then-reordering replies, hanging a role, killing and restarting a role (new tokens;
//! restarting the proxies changes the `ClientDBInfo` id so long polls fire), ending a role while
//! its process lives, as a recovery does (what it owed is answered with `broken_promise`, as
//! fdbserver answers the promises of a role that ended), failing the next N
//! requests of a kind with any FDB error, `commit_unknown_result` with the commit applied or
//! not, moving a shard to another server, jumping the version forward. Requests are counted per
//! kind ([`TestCluster::requests`]).
//!
//! # Limits (plainly)
//!
//! * One OS process, one in-memory store, no durability, no logs, no recovery protocol: all
//!   storage servers read the same store and only decide *whether* they serve a key by the
//!   shard map. A moved shard is readable at once, history included, on its new server.
//! * The resolver keeps every commit's write ranges for the window and checks them linearly;
//!   commits are resolved one at a time, each in its own batch (`txn_batch_id` 0).
//! * Versions advance with the wall clock even without commits (like an idle cluster's empty
//!   batches), so `future_version` only happens for versions ahead of the clock.
//! * No tenants, no locking (`lock_aware`), no idempotency ids, no TLS, no status JSON
//!   (`GetLeaderRequest` goes unanswered), no throttling, no TSS, no version vectors, no
//!   transaction size limits on the server side.
//! * Restarting a role keeps the resolver's history (a real recovery would lose it and make
//!   older transactions `transaction_too_old`; use [`TestCluster::advance_version`] to get that).
//! * Thread per connection; it is meant for a handful of clients, not for load.

mod raw_client;
mod server;
mod store;

pub use raw_client::{stream_addr, RawClient, RawError};
pub use server::{Injected, ReleaseOrder, RequestKind, Role, ShardInfo, TestCluster};
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
        }
    }
}

impl TestClusterBuilder {
    /// Number of storage servers, each on its own port (at least 1; default 3).
    pub fn storage_servers(mut self, n: usize) -> Self {
        self.storage_servers = n.max(1);
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
    /// Binds every port on loopback and starts serving.
    pub fn start(self) -> TestCluster {
        TestCluster::start_with(self)
    }
}
