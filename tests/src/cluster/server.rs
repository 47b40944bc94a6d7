//! The cluster's processes as one sans-IO state machine: connections, request dispatch, the
//! roles' handlers and the fault switches. No sockets, threads or clock inside: a runner
//! hands it connections, the bytes they carry and the time ([`State::set_now`]), and takes
//! out what to write and which connections to close ([`State::take_io`]). The threaded
//! [`super::TestCluster`] runs it on loopback sockets, the simulation ([`crate::sim`]) on a
//! simulated network and clock: one implementation of the cluster's semantics for both.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use fdb_protocol::atomic;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::framing::{
    encode_packet, ConnectPacket, FrameDecoder, Incoming, ProtocolVersion,
};
use fdb_protocol::messages::commit::{
    mutation_type as mt, CommitID, CommitTransactionRequest, ExpireIdempotencyIdRequest,
    GetKeyServerLocationsReply, GetKeyServerLocationsRequest, GetTenantIdReply, MutationRef,
    ShardLocation, TagMapping,
};
use fdb_protocol::messages::coordination::{
    ClientDBInfo, ClusterControllerClientInterface, ClusterInterface, CommitProxyInterface,
    GrvProxyInterface, LeaderInfo, LocalityData, LocalityEntry, ProtocolInfoReply, StatusReply,
    TenantMode, VersionHistory,
};
use fdb_protocol::messages::exclusion::{ExclusionSafetyCheckReply, ExclusionSafetyCheckRequest};
use fdb_protocol::messages::grv::{GetReadVersionReply, GlobalConfigRefreshReply};
use fdb_protocol::messages::metrics::{
    DDMetricsRef, GetDDMetricsReply, GetDDMetricsRequest, GetHealthMetricsReply, HealthMetrics,
    StorageStats,
};
use fdb_protocol::messages::network::Endpoint;
use fdb_protocol::messages::storage::{
    GetKeyReply, GetKeyRequest, GetKeyValuesReply, GetKeyValuesRequest, GetMappedKeyValuesReply,
    GetValueReply, KeyValueBlob, SplitRangeReply, SplitRangeRequest, StorageMetrics,
    StorageServerInterface, WaitMetricsRequest, WatchValueReply,
};
use fdb_protocol::messages::types::{
    KeyRange, KeySelector, Tag, TenantInfo, Version, VersionVector, LATEST_VERSION,
};
use fdb_protocol::messages::workers::{encode_client_workers, ClientWorkerInterface};
use fdb_protocol::messages::EnsureTable;
use fdb_protocol::messages::{
    decode_any, encode_reply, AnyMessage, ErrorOr, IpAddress, NetworkAddress, NetworkAddressList,
    RequestStream, Void,
};
use fdb_protocol::serializer::{encode_with, Message};
use fdb_protocol::tuple;
use fdb_protocol::uid::well_known;
use fdb_protocol::{Instant, Uid};

use super::store::{split_points, Store};
use super::{TestClusterBuilder, INITIAL_VERSION};

mod mapped;

/// The end of the key space a storage server can hold (`allKeys.end`).
const ALL_KEYS_END: &[u8] = b"\xff\xff";
/// `\xff/metadataVersion`, whose value proxies report in read-version and commit replies.
const METADATA_VERSION_KEY: &[u8] = b"\xff/metadataVersion";
/// `excludedServersPrefix`: `fdbcli exclude` writes one key per excluded address under it.
const EXCLUDED_PREFIX: &[u8] = b"\xff/conf/excluded/";

/// Whether mutation `m` may change a key starting with `prefix`.
fn touches(m: &MutationRef, prefix: &[u8]) -> bool {
    if m.kind == mt::CLEAR_RANGE {
        let end = key_after_prefix(prefix);
        m.param1[..] < end[..] && &m.param2[..] > prefix
    } else {
        m.param1.starts_with(prefix)
    }
}

/// The first key after every key starting with `prefix`.
fn key_after_prefix(prefix: &[u8]) -> Vec<u8> {
    let mut e = prefix.to_vec();
    while e.last() == Some(&0xff) {
        e.pop();
    }
    if let Some(l) = e.last_mut() {
        *l += 1;
    }
    e
}
/// `UID::file_identifier`: the `ENDPOINT_NOT_FOUND` notice carries a bare UID.
const UID_FILE_IDENTIFIER: u32 = 15597147;

/// A role of the cluster, each in its own "process" (listening port).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Coordinator `i` (its address is in the cluster file).
    Coordinator(usize),
    /// The GRV proxy and the commit proxy (one process; the cluster controller lives there too).
    Proxies,
    /// The master, in a process of its own as fdbserver places it (the real 5-process
    /// cluster had the cluster controller on one process and the master on another). No
    /// client ever talks to it: killing or stopping it makes a recovery in which the proxies
    /// end (`broken_promise` for what they owed) and come back with new tokens in their own,
    /// still living, process; the master moves to a new process.
    Master,
    /// Storage server `i`.
    Storage(usize),
}

/// The kinds of request the cluster serves, for counters and faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestKind {
    OpenDatabase,
    GetLeader,
    ProtocolInfo,
    Ping,
    GlobalConfig,
    GetReadVersion,
    Commit,
    GetKeyServerLocations,
    GetValue,
    GetKey,
    GetKeyValues,
    /// `GetMappedKeyValuesRequest` (a storage server's `getMappedKeyValues` stream).
    GetMappedKeyValues,
    WatchValue,
    Status,
    /// `WaitMetricsRequest` (a storage server's byte-sample estimate of a range).
    WaitMetrics,
    /// `SplitRangeRequest` (`getRangeSplitPoints`).
    GetRangeSplitPoints,
    /// `GetTenantIdRequest` (a commit proxy's `getTenantId` stream).
    GetTenantId,
    /// `GetDDMetricsRequest` (a commit proxy's `getDDMetrics` stream).
    GetDDMetrics,
    /// `GetHealthMetricsRequest` (a GRV proxy's `getHealthMetrics` stream).
    GetHealthMetrics,
    /// `GetClientWorkersRequest` (the cluster controller's `getClientWorkers` stream).
    GetClientWorkers,
    /// `ExpireIdempotencyIdRequest` (a commit proxy's `expireIdempotencyId` stream; one-way).
    ExpireIdempotencyId,
    /// `ExclusionSafetyCheckRequest` (a commit proxy's `exclusionSafetyCheckReq` stream).
    ExclusionSafetyCheck,
}

impl RequestKind {
    fn of(msg: &AnyMessage) -> Option<RequestKind> {
        Some(match msg {
            AnyMessage::OpenDatabaseCoordRequest(_) => RequestKind::OpenDatabase,
            AnyMessage::GetLeaderRequest(_) => RequestKind::GetLeader,
            AnyMessage::ProtocolInfoRequest(_) => RequestKind::ProtocolInfo,
            AnyMessage::PingRequest(_) => RequestKind::Ping,
            AnyMessage::GlobalConfigRefreshRequest(_) => RequestKind::GlobalConfig,
            AnyMessage::GetReadVersionRequest(_) => RequestKind::GetReadVersion,
            AnyMessage::CommitTransactionRequest(_) => RequestKind::Commit,
            AnyMessage::GetKeyServerLocationsRequest(_) => RequestKind::GetKeyServerLocations,
            AnyMessage::GetValueRequest(_) => RequestKind::GetValue,
            AnyMessage::GetKeyRequest(_) => RequestKind::GetKey,
            AnyMessage::GetKeyValuesRequest(_) => RequestKind::GetKeyValues,
            AnyMessage::GetMappedKeyValuesRequest(_) => RequestKind::GetMappedKeyValues,
            AnyMessage::WatchValueRequest(_) => RequestKind::WatchValue,
            AnyMessage::StatusRequest(_) => RequestKind::Status,
            AnyMessage::WaitMetricsRequest(_) => RequestKind::WaitMetrics,
            AnyMessage::SplitRangeRequest(_) => RequestKind::GetRangeSplitPoints,
            AnyMessage::GetTenantIdRequest(_) => RequestKind::GetTenantId,
            AnyMessage::GetDDMetricsRequest(_) => RequestKind::GetDDMetrics,
            AnyMessage::GetHealthMetricsRequest(_) => RequestKind::GetHealthMetrics,
            AnyMessage::GetClientWorkersRequest(_) => RequestKind::GetClientWorkers,
            AnyMessage::ExclusionSafetyCheckRequest(_) => RequestKind::ExclusionSafetyCheck,
            _ => return None,
        })
    }
}

/// What an injected fault does to a request (see [`TestCluster::inject`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Injected {
    /// Answer with this FDB error instead of serving the request: in the reply's `error` field
    /// for storage reads (as a real storage server does), as `ErrorOr` error otherwise.
    Error(ErrorCode),
    /// Commits only: answer `commit_unknown_result` (1021), after applying the commit normally
    /// (`applied: true`; it may still fail resolution and not be applied) or without looking at
    /// it (`applied: false`).
    CommitUnknownResult { applied: bool },
    /// Read the request and never answer it (unless its role ends: then `broken_promise`).
    NoReply,
    /// Close the connection the request came on, without answering.
    CloseConnection,
}

/// How [`TestCluster::release_replies`] sends the replies it held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseOrder {
    InOrder,
    Reversed,
}

/// The shape of a recovery ([`TestCluster::recover_with`]); the default is what fdbserver
/// 7.3.77 was measured doing after a fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// How long the `ClientDBInfo` lists no proxies at all before the new ones are published
    /// (fdbserver: the new master's first registration carries none; the proxies follow
    /// about 100 ms later).
    pub without_proxies: Duration,
    /// Versions the new generation skips (`MAX_VERSIONS_IN_FLIGHT`, 100,000,000): every read
    /// version from before the recovery is then older than the resolver's window (storage
    /// servers keep serving it while it is younger than their window in time).
    pub version_jump: i64,
    /// `ClientDBInfo` publications after the new proxies, each with the same proxies and a
    /// new id (fdbserver publishes 8 to 14 per fault: later registrations of the recovering
    /// master, the global configuration history).
    pub republish: u32,
    /// Time between those publications.
    pub republish_interval: Duration,
    /// Commits stalled behind a stopped log when the recovery starts: recovered as committed
    /// (`true`: the logs that had them set the recovery version) or lost. Either way their
    /// clients get `broken_promise` from the ended proxy, never the outcome.
    pub stalled_commits_survive: bool,
}

impl Default for Recovery {
    fn default() -> Self {
        Recovery {
            without_proxies: Duration::from_millis(100),
            version_jump: 100_000_000,
            republish: 2,
            republish_interval: Duration::from_millis(200),
            stalled_commits_survive: true,
        }
    }
}

/// A shard as the cluster holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardInfo {
    pub begin: Vec<u8>,
    pub end: Vec<u8>,
    /// Indexes of the storage servers holding it.
    pub servers: Vec<usize>,
}

// ---------------------------------------------------------------------------------------------
// Connections

/// One connection to a process, as the core sees it: shared by every request still owed an
/// answer on it, so each sees when it closed.
pub(crate) struct Conn {
    /// The runner's name for it (unique over the cluster's life).
    pub(crate) id: u64,
    pub(crate) proc_idx: usize,
    closed: AtomicBool,
}

impl Conn {
    /// Whether the connection closed (either end).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// A reply on its way out.
struct Outgoing {
    conn: Arc<Conn>,
    token: Uid,
    body: Vec<u8>,
    /// What it answers (`None` for transport notices), so a role that ends can replace it.
    kind: Option<RequestKind>,
}

/// What the runner must do, in order.
pub(crate) enum Io {
    /// Write these bytes (whole frames) to the connection.
    Send(Arc<Conn>, Bytes),
    /// Close the connection.
    Close(Arc<Conn>),
}

/// A connection's incoming side: the frame decoder and the frames read and not yet served
/// (a stopped process serves none; `None` stands for undecodable bytes: the connection
/// closes once what came before them is served).
struct ConnInput {
    conn: Arc<Conn>,
    decoder: FrameDecoder,
    pending: VecDeque<Option<Incoming>>,
}

// ---------------------------------------------------------------------------------------------
// State

struct Process {
    role: Role,
    addr: SocketAddr,
    alive: bool,
    silent: bool,
    /// `SIGSTOP`ped: reads nothing and sends nothing until continued.
    stopped: Option<Stopped>,
    /// Killed at this time, and the cluster has not noticed yet.
    dead_since: Option<Instant>,
    /// Holds a transaction log of the current generation.
    log: bool,
    /// A proxies process whose roles a recovery moved to another process.
    retired: bool,
    /// Cluster keys this coordinator forwards, and the connection string it forwards to.
    forwards: Vec<(Bytes, Bytes)>,
    /// Bumped by every kill, so a runner knows its listener for the process is stale.
    pub(crate) generation: u64,
}

impl Process {
    /// A process just started with `role` at `addr`: alive, holding no log, forwarding nothing.
    fn new(role: Role, addr: SocketAddr) -> Process {
        Process {
            role,
            addr,
            alive: true,
            silent: false,
            stopped: None,
            dead_since: None,
            log: false,
            retired: false,
            forwards: Vec::new(),
            generation: 0,
        }
    }
}

/// A stopped process's state.
#[derive(Clone, Copy, Debug)]
struct Stopped {
    at: Instant,
    /// The newest version when it stopped (a storage server has nothing newer afterwards).
    version: Version,
    /// The cluster noticed (and recovered, if it had to).
    detected: bool,
}

/// A read-version or commit request the proxies hold while a log is stopped.
struct Stalled {
    conn: Arc<Conn>,
    kind: RequestKind,
    reply: Uid,
    msg: AnyMessage,
}

struct Watch {
    conn: Arc<Conn>,
    reply: Uid,
    ss: usize,
    key: Bytes,
    value: Option<Bytes>,
    deadline: Instant,
    /// The tenant the watch is in ([`TenantInfo::INVALID_TENANT`]: none); `key` is prefixed.
    tenant: i64,
}

/// A storage read (or watch) waiting for its version to arrive.
struct WaitingRead {
    conn: Arc<Conn>,
    ss: usize,
    msg: AnyMessage,
    version: Version,
    deadline: Instant,
}

pub(crate) struct State {
    pub(crate) cfg: TestClusterBuilder,
    /// The time now, as the runner last gave it ([`State::set_now`]); the versions follow it.
    now: Instant,
    /// The Unix time (seconds) at [`Instant::ZERO`], for what the cluster stamps with a date.
    unix_epoch: i64,
    /// Where new processes (a recovery's, a coordinator change's) get their addresses.
    new_addr: Box<dyn FnMut() -> SocketAddr + Send>,
    version_bump: i64,
    last_version: Version,
    store: Store,
    /// Committed write conflict ranges by version, oldest first.
    history: VecDeque<(Version, Vec<KeyRange>)>,
    boundaries: Vec<Bytes>,
    teams: Vec<Vec<usize>>,
    procs: Vec<Process>,
    info_id: Uid,
    cluster_id: Uid,
    grv_token: Uid,
    commit_token: Uid,
    /// The cluster controller's `ClusterInterface` (its first stream; the others follow),
    /// hosted with the proxies.
    cc_token: Uid,
    ss_ids: Vec<Uid>,
    ss_tokens: Vec<Uid>,
    metadata_version: Option<Bytes>,
    /// The connection string's `description:id` (a coordinator change gives a new id).
    connection: String,
    /// The processes of the current coordinators.
    coordinators: Vec<usize>,
    /// Held `OpenDatabaseCoordRequest`s: connection, reply token, cluster key.
    long_polls: Vec<(Arc<Conn>, Uid, Bytes)>,
    /// The proxies are in the `ClientDBInfo` (false between a recovery's start and its
    /// publication of the new proxies).
    proxies_published: bool,
    /// When a recovery publishes its new proxies, then its later publications.
    publish_at: Option<Instant>,
    republish_at: VecDeque<Instant>,
    recoveries: u64,
    /// A process the transaction system needs died or came back: a recovery is owed, and
    /// made as soon as a quorum of coordinators is up.
    recovery_due: bool,
    /// The resolver knows no writes before this version (a recovery starts it empty).
    resolver_floor: Version,
    /// Recent recoveries' version jumps: the last version before the jump, and the jump. A
    /// storage server stretches its MVCC window by the jumps its window still reaches back
    /// over (fdbserver's `recoveryVersionSkips`), so a read version from before a recovery
    /// stays readable until a window of versions has passed after the recovery (about five
    /// seconds), although the version jumped by 100,000,000.
    recent_jumps: VecDeque<(Version, i64)>,
    /// Replies a stopped process would have sent: they go out when it continues.
    frozen: Vec<Outgoing>,
    stalled: Vec<Stalled>,
    /// Storage servers catching up after a stop: the version they stopped at, and when they
    /// will have caught up.
    ss_lag: Vec<Option<(Version, Instant)>>,
    watches: Vec<Watch>,
    waiting: Vec<WaitingRead>,
    delayed: Vec<(Instant, Outgoing)>,
    held: Vec<Outgoing>,
    /// Storage servers whose reads lie ([`State::set_lying`]).
    lying: Vec<usize>,
    /// Requests read and never answered ([`Injected::NoReply`]): a role that ends answers
    /// them ([`TestCluster::end_role`]).
    parked: Vec<(Arc<Conn>, RequestKind, Uid)>,
    hold: Vec<Option<RequestKind>>,
    delays: Vec<(Option<RequestKind>, Duration)>,
    injections: Vec<(RequestKind, u32, Injected)>,
    counters: BTreeMap<RequestKind, u64>,
    /// The same, per process.
    proc_counters: BTreeMap<(usize, RequestKind), u64>,
    conns: Vec<Arc<Conn>>,
    /// Every open connection's incoming side, by id.
    inputs: BTreeMap<u64, ConnInput>,
    /// What the runner must do ([`State::take_io`]).
    io: Vec<Io>,
    /// Connections accepted so far.
    accepted: u64,
    protocol: u64,
    rng: u64,
    last_gc: Instant,
    /// When the next shard of an excluded server moves (`data_move_delay` after the
    /// exclude, then every `data_move_step`).
    move_at: Option<Instant>,
    /// Where the search for a server to take a moving shard goes on (round robin over
    /// the storage servers, from 0 at each exclude).
    move_candidate: usize,
    /// `wrong_shard_server` answers the storage servers sent.
    wrong_shard: u64,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn endpoint(addr: SocketAddr, token: Uid) -> RequestStream {
    RequestStream {
        endpoint: Endpoint {
            addresses: NetworkAddressList {
                address: NetworkAddress {
                    ip: IpAddress::from(addr.ip()),
                    port: addr.port(),
                    flags: 0,
                    from_hostname: false,
                },
                secondary_address: None,
            },
            token,
        },
    }
}

fn selector_in_range(sel: &KeySelector, begin: &[u8], end: &[u8]) -> bool {
    let k = &sel.key[..];
    k >= begin && if is_backward(sel) { k <= end } else { k < end }
}

fn is_backward(sel: &KeySelector) -> bool {
    !sel.or_equal && sel.offset <= 0
}

fn is_first_greater_or_equal(sel: &KeySelector) -> bool {
    !sel.or_equal && sel.offset == 1
}

fn ranges_intersect(a: &KeyRange, b: &KeyRange) -> bool {
    a.begin < b.end && b.begin < a.end
}

/// An error the way the transport sends it, whatever the request: `ErrorOr::Err(e)` with the
/// reply type's identifier (a dropped `ReplyPromise` sends `broken_promise` this way, even for
/// storage reads whose own errors travel inside the reply).
fn transport_error(kind: RequestKind, e: ErrorCode) -> Vec<u8> {
    match kind {
        RequestKind::GetValue => encode_reply::<GetValueReply>(&ErrorOr::Err(e)),
        RequestKind::GetKey => encode_reply::<GetKeyReply>(&ErrorOr::Err(e)),
        RequestKind::GetKeyValues => encode_reply::<GetKeyValuesReply>(&ErrorOr::Err(e)),
        _ => error_reply(kind, e),
    }
}

/// Encodes `ErrorOr::Err(e)` for the reply type of `kind`.
fn error_reply(kind: RequestKind, e: ErrorCode) -> Vec<u8> {
    match kind {
        RequestKind::OpenDatabase => encode_reply::<ClientDBInfo>(&ErrorOr::Err(e)),
        RequestKind::ProtocolInfo => encode_reply::<ProtocolInfoReply>(&ErrorOr::Err(e)),
        RequestKind::Ping | RequestKind::GetLeader => encode_reply::<Void>(&ErrorOr::Err(e)),
        RequestKind::GlobalConfig => encode_reply::<GlobalConfigRefreshReply>(&ErrorOr::Err(e)),
        RequestKind::GetReadVersion => encode_reply::<GetReadVersionReply>(&ErrorOr::Err(e)),
        RequestKind::Commit => encode_reply::<CommitID>(&ErrorOr::Err(e)),
        RequestKind::GetKeyServerLocations => {
            encode_reply::<GetKeyServerLocationsReply>(&ErrorOr::Err(e))
        }
        RequestKind::WatchValue => encode_reply::<WatchValueReply>(&ErrorOr::Err(e)),
        RequestKind::Status => encode_reply::<StatusReply>(&ErrorOr::Err(e)),
        // Plain replies, not `LoadBalancedReply`s: their errors travel in the `ErrorOr`.
        RequestKind::WaitMetrics => encode_reply::<StorageMetrics>(&ErrorOr::Err(e)),
        RequestKind::GetRangeSplitPoints => encode_reply::<SplitRangeReply>(&ErrorOr::Err(e)),
        RequestKind::GetTenantId => encode_reply::<GetTenantIdReply>(&ErrorOr::Err(e)),
        RequestKind::GetDDMetrics => encode_reply::<GetDDMetricsReply>(&ErrorOr::Err(e)),
        RequestKind::GetHealthMetrics => encode_reply::<GetHealthMetricsReply>(&ErrorOr::Err(e)),
        RequestKind::GetClientWorkers => encode_client_workers(&ErrorOr::Err(e)),
        // One-way: nothing is ever sent back (an empty body is never emitted).
        RequestKind::ExpireIdempotencyId => Vec::new(),
        RequestKind::ExclusionSafetyCheck => {
            encode_reply::<ExclusionSafetyCheckReply>(&ErrorOr::Err(e))
        }
        RequestKind::GetValue => ok(GetValueReply {
            penalty: 1.0,
            error: Some(e),
            ..Default::default()
        }),
        RequestKind::GetKey => ok(GetKeyReply {
            penalty: 1.0,
            error: Some(e),
            ..Default::default()
        }),
        RequestKind::GetKeyValues => ok(GetKeyValuesReply {
            penalty: 1.0,
            error: Some(e),
            ..Default::default()
        }),
        RequestKind::GetMappedKeyValues => ok(GetMappedKeyValuesReply {
            penalty: 1.0,
            error: Some(e),
            ..Default::default()
        }),
    }
}

/// The commit proxy's `transformVersionstampMutation`: the parameter's last four bytes are
/// the little-endian offset of a 10-byte placeholder, which becomes the commit version
/// (8 bytes, big-endian) and the batch index (2 bytes, big-endian); the offset goes. Written
/// here from FDB's rules, not shared with the client, so each can catch the other's mistakes.
fn stamp(param: &[u8], version: Version, batch_index: u16) -> Vec<u8> {
    let Some(split) = param.len().checked_sub(4) else {
        return param.to_vec();
    };
    let (body, tail) = param.split_at(split);
    let offset = u32::from(tail[0])
        | u32::from(tail[1]) << 8
        | u32::from(tail[2]) << 16
        | u32::from(tail[3]) << 24;
    let mut out = body.to_vec();
    let at = offset as usize;
    if at.checked_add(10).is_some_and(|end| end <= out.len()) {
        for i in 0..8 {
            out[at + i] = (version >> (56 - 8 * i)) as u8;
        }
        out[at + 8] = (batch_index >> 8) as u8;
        out[at + 9] = batch_index as u8;
    }
    out
}

/// `\xff/tenant/map/<id>`: the tenant map entry the management transactions write.
fn tenant_map_key(id: i64) -> Vec<u8> {
    [&b"\xff/tenant/map/"[..], &id.to_be_bytes()].concat()
}

/// A request's range in the database's key space (`prefix` on both ends).
fn prefixed_range(prefix: Option<&[u8]>, keys: &KeyRange) -> KeyRange {
    KeyRange::new(
        with_prefix(prefix, &keys.begin),
        with_prefix(prefix, &keys.end),
    )
}

/// The lock state of a stored tenant map entry (0 unlocked, 1 read-only, 2 locked); an
/// entry that does not decode counts as unlocked.
fn tenant_lock_state(value: &[u8]) -> u8 {
    fdb_protocol::messages::commit::TenantMapEntry::decode_value(value).map_or(0, |e| e.lock_state)
}

/// `prefix` (if any) then `key`.
fn with_prefix(prefix: Option<&[u8]>, key: &[u8]) -> Bytes {
    match prefix {
        Some(p) => Bytes::from([p, key].concat()),
        None => Bytes::copy_from_slice(key),
    }
}

/// `key` without `prefix` (a key outside the tenant never comes back: the search range is
/// clamped to it).
fn without_prefix(prefix: Option<&[u8]>, key: Bytes) -> Bytes {
    match prefix {
        Some(p) if key.starts_with(p) => key.slice(p.len()..),
        _ => key,
    }
}

/// `TenantAPI::clampRangeToTenant`: a shard's bounds cut to `[prefix, prefix + \xff)`.
fn clamp_to_tenant(prefix: Option<&[u8]>, begin: Bytes, end: Bytes) -> (Bytes, Bytes) {
    let Some(p) = prefix else {
        return (begin, end);
    };
    let b = if begin.starts_with(p) {
        begin
    } else {
        Bytes::copy_from_slice(p)
    };
    let e = if end.starts_with(p) {
        end
    } else {
        Bytes::from([p, b"\xff"].concat())
    };
    (b, e)
}

/// `verifyTenantPrefix`: every mutation of a tenant commit (but the metadata version key)
/// lies under the tenant's prefix; a versionstamp offset may not point into the prefix.
fn tenant_prefix_kept(id: i64, mutations: &[MutationRef]) -> bool {
    let p = id.to_be_bytes();
    mutations.iter().all(|m| {
        if &m.param1[..] == METADATA_VERSION_KEY {
            return true;
        }
        if !m.param1.starts_with(&p) {
            return false;
        }
        match m.kind {
            mt::CLEAR_RANGE => m.param2.starts_with(&p),
            mt::SET_VERSIONSTAMPED_KEY => {
                let n = m.param1.len();
                n >= 4 && {
                    let off = &m.param1[n - 4..];
                    u32::from_le_bytes([off[0], off[1], off[2], off[3]]) as usize >= p.len()
                }
            }
            _ => true,
        }
    })
}

fn ok<T: Message>(v: T) -> Vec<u8> {
    encode_reply(&ErrorOr::Ok(v))
}

fn reply_token(msg: &AnyMessage) -> Option<Uid> {
    Some(match msg {
        AnyMessage::OpenDatabaseCoordRequest(r) => r.reply.token,
        AnyMessage::GetLeaderRequest(r) => r.reply.token,
        AnyMessage::ProtocolInfoRequest(r) => r.reply.token,
        AnyMessage::PingRequest(r) => r.reply.token,
        AnyMessage::StatusRequest(r) => r.reply.token,
        AnyMessage::GlobalConfigRefreshRequest(r) => r.reply.token,
        AnyMessage::GetReadVersionRequest(r) => r.reply.token,
        AnyMessage::CommitTransactionRequest(r) => r.reply.token,
        AnyMessage::GetKeyServerLocationsRequest(r) => r.reply.token,
        AnyMessage::GetValueRequest(r) => r.reply.token,
        AnyMessage::GetKeyRequest(r) => r.reply.token,
        AnyMessage::GetKeyValuesRequest(r) => r.reply.token,
        AnyMessage::GetMappedKeyValuesRequest(r) => r.reply.token,
        AnyMessage::WatchValueRequest(r) => r.reply.token,
        AnyMessage::WaitMetricsRequest(r) => r.reply.token,
        AnyMessage::SplitRangeRequest(r) => r.reply.token,
        AnyMessage::GetTenantIdRequest(r) => r.reply.token,
        AnyMessage::GetDDMetricsRequest(r) => r.reply.token,
        AnyMessage::GetHealthMetricsRequest(r) => r.reply.token,
        AnyMessage::GetClientWorkersRequest(r) => r.reply.token,
        AnyMessage::ExclusionSafetyCheckRequest(r) => r.reply.token,
        _ => return None,
    })
}

/// Where a token leads on one process.
enum Route {
    WellKnown,
    ClusterController(u32),
    Grv(u32),
    Commit(u32),
    Storage(usize, u32),
    NotFound,
}

impl State {
    // --- versions -----------------------------------------------------------------------------

    fn clock(&self) -> Version {
        INITIAL_VERSION + self.now.0.as_micros() as i64 + self.version_bump
    }

    /// The newest committed version (and the version every read version is at most).
    fn current_version(&mut self) -> Version {
        let v = self.last_version.max(self.clock());
        self.last_version = v;
        v
    }

    /// The oldest version a storage server still reads at: the window behind the newest,
    /// stretched by the recovery jumps the window still reaches back over (see
    /// `recent_jumps`). Counted in versions, as fdbserver's `proposedOldestVersion` is.
    fn oldest_version(&mut self) -> Version {
        let current = self.current_version();
        loop {
            let stretch: i64 = self.recent_jumps.iter().map(|(_, j)| j).sum();
            let oldest = current - self.cfg.mvcc_window - stretch;
            match self.recent_jumps.front() {
                Some(&(before, _)) if oldest > before => {
                    self.recent_jumps.pop_front();
                }
                _ => return oldest,
            }
        }
    }

    fn new_token(&mut self) -> Uid {
        Uid::new(splitmix(&mut self.rng), splitmix(&mut self.rng))
    }

    // --- processes and shards ------------------------------------------------------------------

    /// The process holding `role` now (a recovery may have moved the proxies).
    fn proc_index(&self, role: Role) -> usize {
        self.procs
            .iter()
            .position(|p| p.role == role && !p.retired)
            .unwrap_or_else(|| panic!("test cluster: no process is {role:?}"))
    }

    fn is_stopped(&self, proc_idx: usize) -> bool {
        self.procs[proc_idx].stopped.is_some()
    }

    /// A stopped process holds a log of the current generation: commits cannot be made
    /// durable, so the proxies hold every commit and read version.
    fn log_stalled(&self) -> bool {
        self.procs
            .iter()
            .any(|p| p.log && (p.stopped.is_some() || !p.alive))
    }

    /// A majority of the current coordinators is up (alive and not stopped): a cluster
    /// controller can be elected, and a recovery made.
    fn coordinator_quorum(&self) -> bool {
        let up = self
            .coordinators
            .iter()
            .filter(|&&p| self.procs[p].alive && self.procs[p].stopped.is_none())
            .count();
        up * 2 > self.coordinators.len()
    }

    /// Whether process `p` holds a role whose loss makes a recovery: the proxies (of the
    /// current generation) or a log.
    fn needed_by_the_transaction_system(&self, p: usize) -> bool {
        let proc = &self.procs[p];
        !proc.retired && (matches!(proc.role, Role::Proxies | Role::Master) || proc.log)
    }

    /// Sends `o` now, or when its process continues.
    fn send_or_freeze(&mut self, out: &mut Vec<Outgoing>, o: Outgoing) {
        if self.is_stopped(o.conn.proc_idx) {
            self.frozen.push(o);
        } else {
            out.push(o);
        }
    }

    /// The version storage server `ss` has: the newest, or — catching up after a stop —
    /// the one it stopped at.
    fn ss_version(&mut self, ss: usize) -> Version {
        let current = self.current_version();
        match self.ss_lag[ss] {
            Some((v, until)) if self.now < until => v.min(current),
            Some(_) => {
                self.ss_lag[ss] = None;
                current
            }
            None => current,
        }
    }

    fn shard_end(&self, i: usize) -> Bytes {
        self.boundaries
            .get(i + 1)
            .cloned()
            .unwrap_or_else(|| Bytes::from_static(ALL_KEYS_END))
    }

    /// The shard holding `key` (keys past `\xff\xff` count as the last shard's).
    fn shard_containing(&self, key: &[u8]) -> usize {
        self.boundaries
            .partition_point(|b| &b[..] <= key)
            .saturating_sub(1)
    }

    /// The shard `r` with `r.begin < key <= r.end` (`rangeContainingKeyBefore`).
    fn shard_containing_key_before(&self, key: &[u8]) -> usize {
        self.boundaries
            .partition_point(|b| &b[..] < key)
            .saturating_sub(1)
    }

    fn serves(&self, ss: usize, key: &[u8]) -> bool {
        key < ALL_KEYS_END && self.teams[self.shard_containing(key)].contains(&ss)
    }

    /// `getShardKeyRange`: the largest run of shards on `ss` that lets it start resolving
    /// `sel`, or `wrong_shard_server`.
    fn shard_range(&self, ss: usize, sel: &KeySelector) -> Result<(Bytes, Bytes), ErrorCode> {
        let backward = is_backward(sel);
        if (!backward && &sel.key[..] >= ALL_KEYS_END) || &sel.key[..] > ALL_KEYS_END {
            return Err(ErrorCode::WRONG_SHARD_SERVER);
        }
        let i = if backward {
            self.shard_containing_key_before(&sel.key)
        } else {
            self.shard_containing(&sel.key)
        };
        if !self.teams[i].contains(&ss) {
            return Err(ErrorCode::WRONG_SHARD_SERVER);
        }
        let mut b = i;
        while b > 0 && self.teams[b - 1].contains(&ss) {
            b -= 1;
        }
        let mut e = i;
        while e + 1 < self.teams.len() && self.teams[e + 1].contains(&ss) {
            e += 1;
        }
        Ok((self.boundaries[b].clone(), self.shard_end(e)))
    }

    pub(crate) fn ss_interface(&self, i: usize) -> StorageServerInterface {
        let pid = format!("{:032x}", self.ss_ids[i].first as u128 | 0x5353 << 64);
        let entry = |k: &'static [u8], v: &str| LocalityEntry {
            key: Bytes::from_static(k),
            value: Some(Bytes::from(v.to_string())),
        };
        let mut data = vec![
            entry(b"machineid", &pid),
            entry(b"processid", &pid),
            entry(b"zoneid", &pid),
        ];
        if let Some(dc) = self.cfg.storage_dc_ids.get(i) {
            data.insert(0, entry(b"dcid", dc));
        }
        StorageServerInterface {
            unique_id: self.ss_ids[i],
            locality: LocalityData { data },
            get_value: endpoint(
                self.procs[self.proc_index(Role::Storage(i))].addr,
                self.ss_tokens[i],
            ),
            tss_pair_id: None,
            accepting_requests: true,
        }
    }

    pub(crate) fn client_db_info(&self) -> ClientDBInfo {
        let paddr = self.procs[self.proc_index(Role::Proxies)].addr;
        let pid = Some(Bytes::from(format!("{:032x}", self.grv_token.first)));
        let (grv_proxies, commit_proxies) = if self.proxies_published {
            (
                vec![GrvProxyInterface {
                    process_id: pid.clone(),
                    provisional: false,
                    get_consistent_read_version: endpoint(paddr, self.grv_token),
                }],
                vec![CommitProxyInterface {
                    process_id: pid,
                    provisional: false,
                    commit: endpoint(paddr, self.commit_token),
                }],
            )
        } else {
            (Vec::new(), Vec::new())
        };
        ClientDBInfo {
            grv_proxies,
            commit_proxies,
            id: self.info_id,
            cluster_id: self.cluster_id,
            tenant_mode: TenantMode {
                mode: self.cfg.tenant_mode,
            },
            history: self.global_config_history(),
            ..Default::default()
        }
    }

    /// The global-configuration history the cluster controller sends out
    /// (`monitorGlobalConfig`) once `\xff/globalConfig/v` is set: one entry per
    /// `\xff/globalConfig/h/<versionstamp>` row, at the commit version its key ends in, the
    /// first one without its mutations (it only tells the clients how far back the list
    /// goes); a row that does not decode, or another protocol version, turns it into the one
    /// `Version::MAX` entry that makes every client read the whole configuration again.
    fn global_config_history(&self) -> Vec<VersionHistory> {
        use fdb_protocol::{GLOBAL_CONFIG_HISTORY_PREFIX, GLOBAL_CONFIG_VERSION_KEY};
        if self
            .store
            .get(GLOBAL_CONFIG_VERSION_KEY, Version::MAX)
            .is_none()
        {
            return Vec::new();
        }
        let end = [GLOBAL_CONFIG_HISTORY_PREFIX, b"\xff"].concat();
        let (rows, _) = self.store.read_range(
            GLOBAL_CONFIG_HISTORY_PREFIX,
            &end,
            i32::MAX,
            i32::MAX,
            Version::MAX,
        );
        let ours = ProtocolVersion::V7_3.0.to_le_bytes();
        let mut history = Vec::new();
        for kv in rows {
            let version = kv.key[GLOBAL_CONFIG_HISTORY_PREFIX.len()..]
                .get(..8)
                .map(|b| i64::from_be_bytes(b.try_into().unwrap()));
            let entry = match (kv.value.get(..8), version) {
                (Some(pv), Some(version)) if pv == ours => {
                    fdb_protocol::serializer::decode_root::<VersionHistory>(&kv.value.slice(8..))
                        .ok()
                        .map(|vh| VersionHistory { version, ..vh })
                }
                _ => None,
            };
            match entry {
                Some(e) => history.push(e),
                None => {
                    return vec![VersionHistory {
                        version: Version::MAX,
                        mutations: Vec::new(),
                    }]
                }
            }
        }
        if let Some(first) = history.first_mut() {
            first.mutations.clear();
        }
        history
    }

    /// What a GRV proxy answers a global-config refresh with (`globalConfigRefresh`): every
    /// row under `\xff/globalConfig/k/` and the version `\xff/globalConfig/v` holds (the first
    /// 8 bytes of the versionstamp written there, big-endian; 0 while nothing was written).
    /// fdbserver serves a cached copy it re-reads every few seconds; the newest is one such.
    fn global_config_snapshot(&mut self) -> GlobalConfigRefreshReply {
        use fdb_protocol::{GLOBAL_CONFIG_KEYS_PREFIX, GLOBAL_CONFIG_VERSION_KEY};
        let v = self.current_version();
        let end = [GLOBAL_CONFIG_KEYS_PREFIX, b"\xff"].concat();
        let (data, _) =
            self.store
                .read_range(GLOBAL_CONFIG_KEYS_PREFIX, &end, i32::MAX, i32::MAX, v);
        let version = self
            .store
            .get(GLOBAL_CONFIG_VERSION_KEY, v)
            .and_then(|b| {
                b.get(..8)
                    .map(|h| i64::from_be_bytes(h.try_into().unwrap()))
            })
            .unwrap_or(0);
        GlobalConfigRefreshReply {
            result: fdb_protocol::messages::grv::RangeResult {
                data,
                ..Default::default()
            },
            version,
        }
    }

    fn leader_change_id(&self) -> Uid {
        Uid::new(self.cluster_id.first, self.cc_token.second)
    }

    /// `LeaderInfo` naming the cluster controller: its `ClusterControllerClientInterface`,
    /// serialized with the protocol version in front, as coordinators send it.
    fn leader_info(&self) -> LeaderInfo {
        let paddr = self.procs[self.proc_index(Role::Proxies)].addr;
        let s = |i: u32| endpoint(paddr, self.cc_token.adjusted(i));
        let cc = ClusterControllerClientInterface {
            client_interface: ClusterInterface {
                open_database: s(0),
                failure_monitoring: s(1),
                database_status: s(2),
                ping: s(3),
                get_client_workers: s(4),
                force_recovery: s(5),
                move_shard: s(6),
                repair_system_data: s(7),
                split_shard: s(8),
                trigger_audit: s(9),
            },
        };
        let mut info = ProtocolVersion::V7_3.version().to_le_bytes().to_vec();
        info.extend_from_slice(&fdb_protocol::serializer::encode(&cc));
        LeaderInfo {
            change_id: self.leader_change_id(),
            serialized_info: Bytes::from(info),
            forward: false,
        }
    }

    /// A small status document in the shape of the cluster controller's (`cluster` section).
    fn status_document(&self) -> String {
        let v = self.last_version.max(self.clock());
        let snapshot = self.store.snapshot(v);
        let bytes: usize = snapshot.iter().map(|(k, v)| k.len() + v.len()).sum();
        let coords: Vec<String> = self
            .coordinators
            .iter()
            .map(|&i| self.procs[i].addr.to_string())
            .collect();
        let processes: Vec<String> = self
            .procs
            .iter()
            .map(|p| {
                // A storage server's role with its space (`checkExclusion` reads it): the
                // store's bytes used, and a gigabyte free.
                let roles = match p.role {
                    Role::Storage(_) => format!(
                        concat!(
                            "{{\"role\":\"storage\",\"kvstore_used_bytes\":{},",
                            "\"kvstore_free_bytes\":1000000000,",
                            "\"kvstore_available_bytes\":1000000000}}"
                        ),
                        bytes
                    ),
                    _ => String::new(),
                };
                format!(
                    "\"{:?}\":{{\"address\":\"{}\",\"excluded\":false,\"role\":\"{:?}\",\"roles\":[{}],\"up\":{}}}",
                    p.role, p.addr, p.role, roles, p.alive
                )
            })
            .collect();
        format!(
            concat!(
                "{{\"generation\":1,\"protocol_version\":\"{:x}\",",
                "\"connection_string\":\"{}@{}\",\"database_available\":true,",
                "\"latest_version\":{},",
                "\"data\":{{\"partitions_count\":{},\"total_kv_size_bytes\":{},\"keys\":{}}},",
                "\"processes\":{{{}}},",
                "\"layers\":{{\"_valid\":true}},\"messages\":[],",
                "\"recovery_state\":{{\"name\":\"fully_recovered\"}}}}"
            ),
            ProtocolVersion::V7_3.version(),
            self.connection,
            coords.join(","),
            v,
            self.boundaries.len(),
            bytes,
            snapshot.len(),
            processes.join(",")
        )
    }

    fn route(&self, proc_idx: usize, token: Uid) -> Route {
        if token.is_well_known() {
            return Route::WellKnown;
        }
        if self.procs[proc_idx].retired {
            return Route::NotFound;
        }
        match self.procs[proc_idx].role {
            Role::Proxies => {
                if let Some(s) = (0..4).find(|&s| self.grv_token.adjusted(s) == token) {
                    return Route::Grv(s);
                }
                if let Some(s) = (0..10).find(|&s| self.cc_token.adjusted(s) == token) {
                    return Route::ClusterController(s);
                }
                // Every stream of a 7.3 `CommitProxyInterface` (the test cluster speaks 7.3).
                let last = fdb_protocol::version::Protocol::V7_3.commit_proxy_adjusted_endpoints();
                if let Some(s) = (0..=last).find(|&s| self.commit_token.adjusted(s) == token) {
                    return Route::Commit(s);
                }
                Route::NotFound
            }
            Role::Storage(i) => match (0..15).find(|&s| self.ss_tokens[i].adjusted(s) == token) {
                Some(s) => Route::Storage(i, s),
                None => Route::NotFound,
            },
            Role::Coordinator(_) | Role::Master => Route::NotFound,
        }
    }

    // --- replies and faults ---------------------------------------------------------------------

    /// Sends (or holds, or delays) a reply, according to the fault switches.
    fn emit(
        &mut self,
        out: &mut Vec<Outgoing>,
        conn: &Arc<Conn>,
        kind: RequestKind,
        token: Uid,
        body: Vec<u8>,
    ) {
        if self.procs[conn.proc_idx].silent {
            return;
        }
        let o = Outgoing {
            conn: conn.clone(),
            token,
            body,
            kind: Some(kind),
        };
        if self.hold.iter().any(|h| h.is_none_or(|k| k == kind)) {
            self.held.push(o);
            return;
        }
        let delay = self
            .delays
            .iter()
            .find(|(k, _)| *k == Some(kind))
            .or_else(|| self.delays.iter().find(|(k, _)| k.is_none()))
            .map(|(_, d)| *d);
        match delay {
            Some(d) if !d.is_zero() => self.delayed.push((self.now + d, o)),
            _ => self.send_or_freeze(out, o),
        }
    }

    fn take_injection(&mut self, kind: RequestKind) -> Option<Injected> {
        let i = self
            .injections
            .iter()
            .position(|(k, n, _)| *k == kind && *n > 0)?;
        let inj = self.injections[i].2;
        self.injections[i].1 -= 1;
        if self.injections[i].1 == 0 {
            self.injections.remove(i);
        }
        Some(inj)
    }

    // --- dispatch -------------------------------------------------------------------------------

    fn on_packet(
        &mut self,
        conn: &Arc<Conn>,
        token: Uid,
        message: &Bytes,
        out: &mut Vec<Outgoing>,
    ) {
        let p = &self.procs[conn.proc_idx];
        if !p.alive {
            return;
        }
        let route = self.route(conn.proc_idx, token);
        if let Route::NotFound = route {
            // FlowTransport tells the sender the endpoint is gone (`EndpointNotFoundReceiver`).
            if !p.silent {
                let body = encode_with(&token, UID_FILE_IDENTIFIER);
                out.push(Outgoing {
                    conn: conn.clone(),
                    token: well_known::ENDPOINT_NOT_FOUND,
                    body,
                    kind: None,
                });
            }
            return;
        }
        let Ok(msg) = decode_any(message) else {
            return;
        };
        // The one request without a reply the cluster serves: a proxy's id expiry.
        if let AnyMessage::ExpireIdempotencyIdRequest(r) = &msg {
            if matches!(route, Route::Commit(s) if s == CommitProxyInterface::EXPIRE_IDEMPOTENCY_ID)
            {
                *self
                    .counters
                    .entry(RequestKind::ExpireIdempotencyId)
                    .or_default() += 1;
                self.expire_idempotency_id(r, out);
            }
            return;
        }
        let Some(kind) = RequestKind::of(&msg) else {
            return;
        };
        let Some(reply) = reply_token(&msg) else {
            return;
        };
        // Is this request type served at this token?
        let role = self.procs[conn.proc_idx].role;
        let expected = match (&route, kind) {
            (Route::WellKnown, RequestKind::Ping) => token == well_known::PING_PACKET,
            (Route::WellKnown, RequestKind::ProtocolInfo) => token == well_known::PROTOCOL_INFO,
            (Route::WellKnown, RequestKind::OpenDatabase) => {
                token == well_known::CLIENT_LEADER_REG_OPEN_DATABASE
                    && matches!(role, Role::Coordinator(_))
            }
            (Route::WellKnown, RequestKind::GetLeader) => {
                token == well_known::CLIENT_LEADER_REG_GET_LEADER
                    && matches!(role, Role::Coordinator(_))
            }
            (Route::ClusterController(s), RequestKind::Status) => *s == 2,
            (Route::ClusterController(s), RequestKind::GetClientWorkers) => *s == 4,
            (Route::Grv(s), RequestKind::GetReadVersion) => {
                *s == GrvProxyInterface::GET_CONSISTENT_READ_VERSION
            }
            (Route::Grv(s), RequestKind::GlobalConfig) => {
                *s == GrvProxyInterface::REFRESH_GLOBAL_CONFIG
            }
            (Route::Commit(s), RequestKind::Commit) => *s == CommitProxyInterface::COMMIT,
            (Route::Commit(s), RequestKind::GetKeyServerLocations) => {
                *s == CommitProxyInterface::GET_KEY_SERVERS_LOCATIONS
            }
            (Route::Commit(s), RequestKind::GetTenantId) => {
                *s == CommitProxyInterface::GET_TENANT_ID
            }
            (Route::Commit(s), RequestKind::GetDDMetrics) => {
                *s == CommitProxyInterface::GET_DD_METRICS
            }
            (Route::Commit(s), RequestKind::ExclusionSafetyCheck) => {
                *s == CommitProxyInterface::EXCLUSION_SAFETY_CHECK_REQ
            }
            (Route::Grv(s), RequestKind::GetHealthMetrics) => {
                *s == GrvProxyInterface::GET_HEALTH_METRICS
            }
            (Route::Storage(_, s), RequestKind::GetValue) => {
                *s == StorageServerInterface::GET_VALUE
            }
            (Route::Storage(_, s), RequestKind::GetKey) => *s == StorageServerInterface::GET_KEY,
            (Route::Storage(_, s), RequestKind::GetKeyValues) => {
                *s == StorageServerInterface::GET_KEY_VALUES
            }
            (Route::Storage(_, s), RequestKind::GetMappedKeyValues) => {
                *s == StorageServerInterface::GET_MAPPED_KEY_VALUES
            }
            (Route::Storage(_, s), RequestKind::WatchValue) => {
                *s == StorageServerInterface::WATCH_VALUE
            }
            (Route::Storage(_, s), RequestKind::WaitMetrics) => {
                *s == StorageServerInterface::WAIT_METRICS
            }
            (Route::Storage(_, s), RequestKind::GetRangeSplitPoints) => {
                *s == StorageServerInterface::GET_RANGE_SPLIT_POINTS
            }
            _ => false,
        };
        if !expected {
            return;
        }
        *self.counters.entry(kind).or_default() += 1;
        *self.proc_counters.entry((conn.proc_idx, kind)).or_default() += 1;

        if let Some(inj) = self.take_injection(kind) {
            match inj {
                Injected::Error(e) => {
                    let body = error_reply(kind, e);
                    self.emit(out, conn, kind, reply, body);
                    return;
                }
                Injected::NoReply => {
                    self.parked.push((conn.clone(), kind, reply));
                    return;
                }
                Injected::CloseConnection => {
                    self.close(conn);
                    return;
                }
                Injected::CommitUnknownResult { applied } => {
                    if let AnyMessage::CommitTransactionRequest(req) = &msg {
                        if applied {
                            let mut ignored = Vec::new();
                            let _ = self.commit(req, &mut ignored);
                            flush_later(out, ignored);
                        }
                        let body = error_reply(kind, ErrorCode::COMMIT_UNKNOWN_RESULT);
                        self.emit(out, conn, kind, reply, body);
                        return;
                    }
                    // Not a commit: serve it normally.
                }
            }
        }

        match msg {
            AnyMessage::PingRequest(_) => {
                self.emit(out, conn, kind, reply, ok(Void {}));
            }
            AnyMessage::ProtocolInfoRequest(_) => {
                let version = self.protocol;
                self.emit(out, conn, kind, reply, ok(ProtocolInfoReply { version }));
            }
            AnyMessage::GetLeaderRequest(r) => {
                if let Some(conn_str) = self.forward_of(conn.proc_idx, &r.key) {
                    // `leaderServer`: a forwarded key's leader is the new connection string.
                    let info = LeaderInfo {
                        change_id: Uid::default(),
                        serialized_info: conn_str,
                        forward: true,
                    };
                    let body = AnyMessage::Leader(ErrorOr::Ok(EnsureTable(Some(info)))).encode();
                    self.emit(out, conn, kind, reply, body);
                    return;
                }
                // The leader is the cluster controller; a client that knows it waits (the
                // test cluster never changes leader, so that wait is forever).
                if r.known_leader != self.leader_change_id() {
                    let info = self.leader_info();
                    let body = AnyMessage::Leader(ErrorOr::Ok(EnsureTable(Some(info)))).encode();
                    self.emit(out, conn, kind, reply, body);
                }
            }
            AnyMessage::StatusRequest(_) => {
                let body = ok(StatusReply {
                    status_str: Bytes::from(self.status_document()),
                });
                self.emit(out, conn, kind, reply, body);
            }
            AnyMessage::OpenDatabaseCoordRequest(r) => {
                if let Some(conn_str) = self.forward_of(conn.proc_idx, &r.cluster_key) {
                    let body = ok(self.forward_info(conn_str));
                    self.emit(out, conn, kind, reply, body);
                } else if r.known_client_info_id == self.info_id {
                    // Hold the long poll.
                    self.long_polls.push((conn.clone(), reply, r.cluster_key));
                } else {
                    let body = ok(self.client_db_info());
                    self.emit(out, conn, kind, reply, body);
                }
            }
            AnyMessage::GlobalConfigRefreshRequest(_) => {
                let body = ok(self.global_config_snapshot());
                self.emit(out, conn, kind, reply, body);
            }
            msg @ (AnyMessage::GetReadVersionRequest(_)
            | AnyMessage::CommitTransactionRequest(_))
                if self.log_stalled() =>
            {
                // A GRV proxy confirms the epoch with the logs; a commit waits for its push.
                self.stalled.push(Stalled {
                    conn: conn.clone(),
                    kind,
                    reply,
                    msg,
                });
            }
            AnyMessage::GetReadVersionRequest(_) => {
                let body = self.read_version_reply();
                self.emit(out, conn, kind, reply, body);
            }
            AnyMessage::GetKeyServerLocationsRequest(r) => {
                // `doKeyServerLocationRequest`: a lookup in a tenant names an existing tenant
                // (`tenant_not_found`), its keys get the prefix, and every shard is clamped to
                // the tenant's range (`clampRangeToTenant`).
                let body = if r.tenant.tenant_id == TenantInfo::INVALID_TENANT {
                    ok(self.locations(&r))
                } else if self
                    .store
                    .latest(&tenant_map_key(r.tenant.tenant_id))
                    .is_none()
                {
                    error_reply(kind, ErrorCode::TENANT_NOT_FOUND)
                } else {
                    let prefix = r.tenant.tenant_id.to_be_bytes();
                    let mut abs = r.clone();
                    abs.begin = with_prefix(Some(&prefix), &r.begin);
                    abs.end = r.end.as_ref().map(|e| with_prefix(Some(&prefix), e));
                    let mut rep = self.locations(&abs);
                    for loc in &mut rep.results {
                        let (b, e) = clamp_to_tenant(
                            Some(&prefix),
                            loc.range.begin.clone(),
                            loc.range.end.clone(),
                        );
                        loc.range = KeyRange::new(b, e);
                    }
                    ok(rep)
                };
                self.emit(out, conn, kind, reply, body);
            }
            AnyMessage::GetTenantIdRequest(r) => {
                // `doTenantIdRequest`: the proxy's name index, as of the last commit.
                let body = match self.tenant_id_of(&r.tenant_name) {
                    Some(id) => ok(GetTenantIdReply { tenant_id: id }),
                    None => error_reply(kind, ErrorCode::TENANT_NOT_FOUND),
                };
                self.emit(out, conn, kind, reply, body);
            }
            AnyMessage::GetClientWorkersRequest(_) => {
                let body = encode_client_workers(&ErrorOr::Ok(self.client_workers()));
                self.emit(out, conn, kind, reply, body);
            }
            AnyMessage::GetDDMetricsRequest(r) => {
                let body = ok(self.dd_metrics(&r));
                self.emit(out, conn, kind, reply, body);
            }
            AnyMessage::ExclusionSafetyCheckRequest(r) => {
                let body = ok(self.exclusion_safety_check(&r));
                self.emit(out, conn, kind, reply, body);
            }
            AnyMessage::GetHealthMetricsRequest(r) => {
                let metrics = self.health_metrics(r.detailed);
                let body = ok(GetHealthMetricsReply {
                    // `IncludeVersion` writes the version without the object-serializer flag.
                    serialized: Bytes::from(metrics.encode(self.protocol & 0x0FFF_FFFF_FFFF_FFFF)),
                });
                self.emit(out, conn, kind, reply, body);
            }
            AnyMessage::CommitTransactionRequest(r) => {
                let body = match self.commit(&r, out) {
                    Ok(id) => ok(id),
                    Err(e) => error_reply(kind, e),
                };
                self.emit(out, conn, kind, reply, body);
            }
            msg => {
                if let Route::Storage(ss, _) = route {
                    self.storage(conn, ss, msg, out, self.now + self.cfg.future_version_delay);
                }
            }
        }
    }

    fn read_version_reply(&mut self) -> Vec<u8> {
        ok(GetReadVersionReply {
            version: self.current_version(),
            metadata_version: self.metadata_version.clone(),
            ss_version_vector_delta: VersionVector::empty(-1),
            proxy_id: self.grv_token,
            ..Default::default()
        })
    }

    /// Serves what the proxies held while a log was stopped, in arrival order.
    fn unstall(&mut self, out: &mut Vec<Outgoing>) {
        for s in std::mem::take(&mut self.stalled) {
            if s.conn.is_closed() {
                continue;
            }
            let body = match &s.msg {
                AnyMessage::CommitTransactionRequest(r) => match self.commit(r, out) {
                    Ok(id) => ok(id),
                    Err(e) => error_reply(s.kind, e),
                },
                _ => self.read_version_reply(),
            };
            self.emit(out, &s.conn, s.kind, s.reply, body);
        }
    }

    // --- coordinators ---------------------------------------------------------------------------

    /// The connection string coordinator process `proc_idx` forwards `key` to, if it does.
    fn forward_of(&self, proc_idx: usize, key: &[u8]) -> Option<Bytes> {
        self.procs[proc_idx]
            .forwards
            .iter()
            .find(|(k, _)| k[..] == *key)
            .map(|(_, c)| c.clone())
    }

    /// What a coordinator answers for a forwarded key (`leaderServer`): a fresh id, the new
    /// connection string, nothing else.
    fn forward_info(&mut self, conn_str: Bytes) -> ClientDBInfo {
        ClientDBInfo {
            id: self.new_token(),
            forward: Some(conn_str),
            ..Default::default()
        }
    }

    /// The connection string: `description:id@coordinator,...`.
    fn connection_string(&self) -> String {
        let coords: Vec<String> = self
            .coordinators
            .iter()
            .map(|&i| self.procs[i].addr.to_string())
            .collect();
        format!("{}@{}", self.connection, coords.join(","))
    }

    /// The cluster controller's list of workers: every live process, its client interface's
    /// streams at tokens of its own.
    fn client_workers(&self) -> Vec<ClientWorkerInterface> {
        self.procs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.alive && !p.retired)
            .map(|(i, p)| {
                let token = |s: u64| Uid::new(self.cluster_id.first ^ (i as u64) << 8 ^ s, 0x776b);
                ClientWorkerInterface {
                    reboot: endpoint(p.addr, token(1)),
                    profiler: endpoint(p.addr, token(2)),
                    set_failure_injection: endpoint(p.addr, token(3)),
                }
            })
            .collect()
    }

    // --- commit proxy ---------------------------------------------------------------------------

    /// `fetchShardMetricsList`, through the commit proxy to the data distributor: each shard
    /// whose begin key is in `r.keys` (at most `shard_limit`), its bytes by the byte sample;
    /// this cluster measures no write rate.
    fn dd_metrics(&mut self, r: &GetDDMetricsRequest) -> GetDDMetricsReply {
        let v = self.current_version();
        let limit = usize::try_from(r.shard_limit).unwrap_or(0);
        let list = (0..self.boundaries.len())
            .filter(|&i| r.keys.begin <= self.boundaries[i] && self.boundaries[i] < r.keys.end)
            .take(limit)
            .map(|i| {
                let end = self.shard_end(i);
                let shard_bytes = self
                    .store
                    .byte_sample(&self.boundaries[i], &end, v, |_| true)
                    .iter()
                    .map(|(_, size)| size)
                    .sum();
                DDMetricsRef {
                    shard_bytes,
                    begin_key: self.boundaries[i].clone(),
                    shard_bytes_per_ksecond: 0,
                }
            })
            .collect();
        GetDDMetricsReply {
            storage_metrics_list: list,
        }
    }

    /// `proxyCheckSafeExclusion`, through the commit proxy to the data distributor
    /// (`ddExclusionSafetyCheck`): unsafe while the distributor has a single team (team
    /// building would get stuck), else safe when every team keeps
    /// `DD_EXCLUDE_MIN_REPLICAS` (1) server the exclusions do not name. The distributor's
    /// teams are taken to be every `replication`-sized set of storage servers (fdbserver
    /// builds `DESIRED_TEAMS_PER_SERVER`, 5, per server: every set, for clusters this small),
    /// so there is more than one when there are more servers than replicas, and one falls
    /// inside the exclusions when `replication` of the servers do. Logs are not asked about,
    /// as in 7.3.77; the coordinators are the client's to check.
    fn exclusion_safety_check(&self, r: &ExclusionSafetyCheckRequest) -> ExclusionSafetyCheckReply {
        let n = self.cfg.storage_servers;
        let replicas = self.cfg.replication.min(n);
        let named = (0..n)
            .filter(|&i| {
                let addr = self.procs[self.proc_index(Role::Storage(i))].addr;
                let ip = fdb_protocol::messages::IpAddress::from(addr.ip());
                r.exclusions
                    .iter()
                    .any(|e| e.ip == ip && (e.port == 0 || e.port == i32::from(addr.port())))
            })
            .count();
        ExclusionSafetyCheckReply {
            safe: n > replicas && named < replicas,
        }
    }

    /// The ratekeeper's health metrics, as an idle cluster shows them: every storage server
    /// `MAX_READ_TRANSACTION_LIFE_VERSIONS` (5,000,000) behind its durable version, queues of
    /// the bytes stored, no throttling; `detailed` adds each storage server and the one log.
    fn health_metrics(&mut self, detailed: bool) -> HealthMetrics {
        const LAG: i64 = 5_000_000;
        let v = self.current_version();
        let queue: i64 = self
            .store
            .byte_sample(b"", ALL_KEYS_END, v, |_| true)
            .iter()
            .map(|(_, size)| size)
            .sum();
        let mut m = HealthMetrics {
            worst_storage_queue: queue,
            limiting_storage_queue: queue,
            worst_storage_durability_lag: LAG,
            limiting_storage_durability_lag: LAG,
            worst_tlog_queue: queue,
            tps_limit: 1e6 / 3.0,
            batch_limited: false,
            ..HealthMetrics::default()
        };
        if detailed {
            let mut ids = self.ss_ids.clone();
            ids.sort_by_key(|u| (u.first, u.second));
            m.storage_stats = ids
                .into_iter()
                .map(|id| {
                    let stats = StorageStats {
                        storage_queue: queue,
                        storage_durability_lag: LAG,
                        disk_usage: 0.5,
                        cpu_usage: 1.25,
                    };
                    (id, stats)
                })
                .collect();
            m.tlog_queue = vec![(Uid::new(self.cluster_id.first, 0x6c6f67), queue)];
        }
        m
    }

    /// The id the name index `\xff/tenant/nameIndex/<tuple(name)>` gives `name`, as of the
    /// last commit.
    fn tenant_id_of(&self, name: &[u8]) -> Option<i64> {
        let mut key = b"\xff/tenant/nameIndex/".to_vec();
        key.extend_from_slice(&tuple::pack(&(name.to_vec(),)));
        let v = self.store.latest(&key)?;
        tuple::unpack::<(i64,)>(&v).ok().map(|(id,)| id)
    }

    fn locations(&self, r: &GetKeyServerLocationsRequest) -> GetKeyServerLocationsReply {
        let mut idx = Vec::new();
        match &r.end {
            None => idx.push(if r.reverse {
                self.shard_containing_key_before(&r.begin)
            } else {
                self.shard_containing(&r.begin)
            }),
            Some(end) if !r.reverse => {
                let mut i = self.shard_containing(&r.begin);
                while i < self.teams.len() && (idx.len() as i32) < r.limit.max(1) {
                    if self.boundaries[i][..] >= end[..] {
                        break;
                    }
                    idx.push(i);
                    i += 1;
                }
            }
            Some(end) => {
                let mut i = self.shard_containing_key_before(end);
                while (idx.len() as i32) < r.limit.max(1) && r.begin[..] < self.shard_end(i)[..] {
                    idx.push(i);
                    if i == 0 {
                        break;
                    }
                    i -= 1;
                }
            }
        }
        let mut rep = GetKeyServerLocationsReply::default();
        for i in idx {
            let servers: Vec<StorageServerInterface> = self.teams[i]
                .iter()
                .map(|&s| self.ss_interface(s))
                .collect();
            for &s in &self.teams[i] {
                rep.results_tag_mapping.push(TagMapping {
                    ss_id: self.ss_ids[s],
                    tag: Tag {
                        locality: 0,
                        id: s as u16,
                    },
                });
            }
            rep.results.push(ShardLocation {
                range: KeyRange::new(self.boundaries[i].clone(), self.shard_end(i)),
                servers,
            });
        }
        rep
    }

    /// Resolves and applies one transaction in a batch of its own.
    fn commit(
        &mut self,
        req: &CommitTransactionRequest,
        out: &mut Vec<Outgoing>,
    ) -> Result<CommitID, ErrorCode> {
        let tr = &req.transaction;
        // `verifyTenantPrefix` (as the proxy receives the commit), then the tenant itself
        // (`validateAndProcessTenantAccess`, which answers before any resolver outcome).
        if req.tenant_info.tenant_id != TenantInfo::INVALID_TENANT {
            let id = req.tenant_info.tenant_id;
            if !tenant_prefix_kept(id, &tr.mutations) {
                return Err(ErrorCode::ILLEGAL_TENANT_ACCESS);
            }
            let Some(entry) = self.store.latest(&tenant_map_key(id)) else {
                return Err(ErrorCode::TENANT_NOT_FOUND);
            };
            // The proxy's `lockedTenants`: read-only and locked tenants refuse commits that
            // are not lock-aware.
            if req.flags & CommitTransactionRequest::FLAG_IS_LOCK_AWARE == 0
                && tenant_lock_state(&entry) != 0
            {
                return Err(ErrorCode::TENANT_LOCKED);
            }
        } else if self.cfg.tenant_mode == 2 {
            // A raw commit on a cluster requiring tenants writes normal keys only inside
            // existing tenants (`validTenantAccess`). Clears pass as they are here (fdbserver
            // keeps only their parts inside tenants).
            let outside = tr.mutations.iter().any(|m| {
                m.kind != mt::CLEAR_RANGE
                    && &m.param1[..] < b"\xff".as_slice()
                    && !(m.param1.len() >= 8
                        && self
                            .store
                            .latest(&[&b"\xff/tenant/map/"[..], &m.param1[..8]].concat())
                            .is_some())
            });
            if outside {
                return Err(ErrorCode::ILLEGAL_TENANT_ACCESS);
            }
        }
        let version = self.last_version.max(self.clock() - 1) + 1;
        let oldest = version - self.cfg.mvcc_window;
        // A resolver checks reads against the writes it knows: not those before its window,
        // nor those before the recovery that started it.
        if (tr.read_snapshot < oldest || tr.read_snapshot < self.resolver_floor)
            && !tr.read_conflict_ranges.is_empty()
        {
            return Err(ErrorCode::TRANSACTION_TOO_OLD);
        }
        let mut conflicting = Vec::new();
        for (i, r) in tr.read_conflict_ranges.iter().enumerate() {
            #[cfg(feature = "planted-bugs")]
            if crate::sim::plant::is(crate::sim::plant::Plant::SkipReadConflictRange)
                && i + 1 == tr.read_conflict_ranges.len()
            {
                continue;
            }
            let hit = self
                .history
                .iter()
                .rev()
                .take_while(|(v, _)| *v > tr.read_snapshot)
                .any(|(_, ws)| ws.iter().any(|w| ranges_intersect(r, w)));
            if hit {
                conflicting.push(i as i32);
                if !tr.report_conflicting_keys {
                    break;
                }
            }
        }
        #[cfg(feature = "planted-bugs")]
        if crate::sim::plant::is(crate::sim::plant::Plant::ResolverIgnoresConflicts) {
            conflicting.clear();
        }
        if !conflicting.is_empty() {
            if tr.report_conflicting_keys {
                return Ok(CommitID {
                    version: -1,
                    txn_batch_id: 0,
                    metadata_version: None,
                    conflicting_kr_indices: Some(conflicting),
                });
            }
            return Err(ErrorCode::NOT_COMMITTED);
        }
        self.last_version = version;
        self.apply(&tr.mutations, version, 0);
        if !req.idempotency_id.is_empty() {
            // The proxy's row of the batch's ids (`buildIdempotencyIdMutations`); here every
            // batch holds one transaction, at batch index 0.
            let (key, value) = self.idempotency_row(version, &req.idempotency_id);
            self.store.put(key, Some(value), version);
        }
        // The cluster controller watches the global-config version key and sends the history
        // out when it moves.
        if tr
            .mutations
            .iter()
            .any(|m| touches(m, fdb_protocol::GLOBAL_CONFIG_VERSION_KEY))
        {
            self.info_changed(out);
        }
        if tr.mutations.iter().any(|m| touches(m, EXCLUDED_PREFIX)) {
            self.move_candidate = 0;
            if self.cfg.data_move_delay.is_zero() {
                while self.move_one_off_excluded(out) {}
                self.move_at = None;
            } else {
                self.move_at = Some(self.now + self.cfg.data_move_delay);
            }
        }
        self.history
            .push_back((version, tr.write_conflict_ranges.clone()));
        while self.history.front().is_some_and(|(v, _)| *v < oldest) {
            self.history.pop_front();
        }
        self.fire_watches(version, out);
        Ok(CommitID {
            version,
            txn_batch_id: 0,
            metadata_version: self.metadata_version.clone(),
            conflicting_kr_indices: None,
        })
    }

    /// The row a commit proxy writes for an id committed at `version` in batch 0:
    /// `\xff\x02/idmp/` + version (big-endian) + the batch index's high byte, holding the
    /// protocol version and the time (as `BinaryWriter` with `IncludeVersion` writes them),
    /// then the id's length, the id and the batch index's low byte.
    fn idempotency_row(&self, version: Version, id: &[u8]) -> (Bytes, Bytes) {
        let mut key = b"\xff\x02/idmp/".to_vec();
        key.extend_from_slice(&version.to_be_bytes());
        key.push(0);
        let mut value = (self.protocol & 0x0FFF_FFFF_FFFF_FFFF)
            .to_le_bytes()
            .to_vec();
        let secs = self.unix_epoch + self.now.0.as_secs() as i64;
        value.extend_from_slice(&secs.to_le_bytes());
        value.push(id.len() as u8);
        value.extend_from_slice(id);
        value.push(0);
        (Bytes::from(key), Bytes::from(value))
    }

    /// `idempotencyIdsExpireServer`: once every id of a row is expired (here each row holds
    /// one), the proxy clears the row with its next batch, which fdbserver commits within
    /// its batch interval even when no client commits; here it is a commit of its own.
    fn expire_idempotency_id(&mut self, r: &ExpireIdempotencyIdRequest, out: &mut Vec<Outgoing>) {
        let mut key = b"\xff\x02/idmp/".to_vec();
        key.extend_from_slice(&r.commit_version.to_be_bytes());
        key.push(r.batch_index_high_byte);
        if self.store.latest(&key).is_none() {
            return;
        }
        let version = self.last_version.max(self.clock() - 1) + 1;
        self.last_version = version;
        let end = [&key[..], b"\x00"].concat();
        self.store.clear_range(&key, &end, version);
        self.fire_watches(version, out);
    }

    /// Data distribution after `exclude`, one shard: the first shard (in key order) that a
    /// storage server at an excluded address (`\xff/conf/excluded/IP:PORT`, or `IP` for all
    /// its ports) holds moves to servers that are not excluded, keeping the team's size
    /// where enough servers are left (fdbserver's data distribution moves them so, shard
    /// by shard over seconds: 6 s for a storage process of the 5-process cluster of
    /// `real_faults.rs`; here all at the commit, or one every `data_move_step` from
    /// `data_move_delay` after it). The excluded server then answers `wrong_shard_server`
    /// for that shard, and its watches on it fail so. `include` (clearing the key) moves
    /// nothing back: fdbserver only rebalances onto it over time. Returns whether a shard
    /// moved.
    fn move_one_off_excluded(&mut self, out: &mut Vec<Outgoing>) -> bool {
        let end = key_after_prefix(EXCLUDED_PREFIX);
        let excluded: Vec<String> = self
            .store
            .live(EXCLUDED_PREFIX, &end, Version::MAX, false)
            .map(|(k, _)| String::from_utf8_lossy(&k[EXCLUDED_PREFIX.len()..]).into_owned())
            .collect();
        let n = self.cfg.storage_servers;
        let out_of_service: Vec<bool> = (0..n)
            .map(|i| {
                let addr = self.procs[self.proc_index(Role::Storage(i))].addr;
                excluded
                    .iter()
                    .any(|e| *e == addr.to_string() || *e == addr.ip().to_string())
            })
            .collect();
        for t in 0..self.teams.len() {
            if !self.teams[t].iter().any(|&s| out_of_service[s]) {
                continue;
            }
            let want = self.teams[t].len();
            let mut team: Vec<usize> = self.teams[t]
                .iter()
                .copied()
                .filter(|&s| !out_of_service[s])
                .collect();
            let mut next = self.move_candidate;
            for _ in 0..n {
                if team.len() >= want {
                    break;
                }
                let cand = next % n;
                next += 1;
                if !out_of_service[cand] && !team.contains(&cand) {
                    team.push(cand);
                }
            }
            // With no server left to take it, the shard stays (fdbserver's exclude would
            // wait, or refuse unless forced).
            if !team.is_empty() {
                self.move_candidate = next;
                self.teams[t] = team;
                self.fail_moved_watches(out);
                return true;
            }
        }
        false
    }

    /// A storage server's error answer to a read or watch (`wrong_shard_server` counted).
    fn storage_refusal(&mut self, kind: RequestKind, e: ErrorCode) -> Vec<u8> {
        if e == ErrorCode::WRONG_SHARD_SERVER {
            self.wrong_shard += 1;
        }
        error_reply(kind, e)
    }

    /// Watches on servers that no longer serve their key end with `wrong_shard_server`.
    fn fail_moved_watches(&mut self, out: &mut Vec<Outgoing>) {
        let mut moved = Vec::new();
        let mut j = 0;
        while j < self.watches.len() {
            let w = &self.watches[j];
            if !self.serves(w.ss, &w.key) {
                moved.push(self.watches.swap_remove(j));
            } else {
                j += 1;
            }
        }
        for w in moved {
            let body = self.storage_refusal(RequestKind::WatchValue, ErrorCode::WRONG_SHARD_SERVER);
            self.emit(out, &w.conn, RequestKind::WatchValue, w.reply, body);
        }
    }

    fn apply(&mut self, mutations: &[MutationRef], version: Version, batch_index: u16) {
        for m in mutations {
            match m.kind {
                mt::SET_VALUE => self
                    .store
                    .put(m.param1.clone(), Some(m.param2.clone()), version),
                mt::CLEAR_RANGE => self.store.clear_range(&m.param1, &m.param2, version),
                mt::SET_VERSIONSTAMPED_KEY => {
                    let key = stamp(&m.param1, version, batch_index);
                    self.store
                        .put(Bytes::from(key), Some(m.param2.clone()), version);
                }
                mt::SET_VERSIONSTAMPED_VALUE => {
                    let value = stamp(&m.param2, version, batch_index);
                    self.store
                        .put(m.param1.clone(), Some(Bytes::from(value)), version);
                }
                k if atomic::is_atomic_op(k) => {
                    let existing = self.store.latest(&m.param1);
                    let new = atomic::apply(k, existing.as_deref(), &m.param2);
                    self.store
                        .put(m.param1.clone(), new.map(Bytes::from), version);
                }
                _ => {} // debug and no-op mutations
            }
        }
        if mutations.iter().any(|m| match m.kind {
            mt::CLEAR_RANGE => {
                &m.param1[..] <= METADATA_VERSION_KEY && METADATA_VERSION_KEY < &m.param2[..]
            }
            _ => &m.param1[..] == METADATA_VERSION_KEY,
        }) {
            self.metadata_version = self.store.latest(METADATA_VERSION_KEY);
        }
    }

    // --- storage servers ------------------------------------------------------------------------

    /// Serves a storage request, or parks it until its version arrives (or `deadline`).
    fn storage(
        &mut self,
        conn: &Arc<Conn>,
        ss: usize,
        msg: AnyMessage,
        out: &mut Vec<Outgoing>,
        deadline: Instant,
    ) {
        let Some(kind) = RequestKind::of(&msg) else {
            return;
        };
        let Some(reply) = reply_token(&msg) else {
            return;
        };
        // Metrics read no version: they answer from the server's current byte sample.
        match msg {
            AnyMessage::WaitMetricsRequest(r) => {
                let body = match self.wait_metrics(ss, &r) {
                    Ok(m) => ok(m),
                    Err(e) => error_reply(kind, e),
                };
                return self.emit(out, conn, kind, reply, body);
            }
            AnyMessage::SplitRangeRequest(r) => {
                let body = match self.range_split_points(ss, &r) {
                    Ok(m) => ok(m),
                    Err(e) => error_reply(kind, e),
                };
                return self.emit(out, conn, kind, reply, body);
            }
            _ => {}
        }
        let asked = match &msg {
            AnyMessage::GetValueRequest(r) => r.version,
            AnyMessage::GetKeyRequest(r) => r.version,
            AnyMessage::GetKeyValuesRequest(r) => r.version,
            AnyMessage::GetMappedKeyValuesRequest(r) => r.version,
            AnyMessage::WatchValueRequest(r) => r.version,
            _ => return,
        };
        let oldest = self.oldest_version();
        let current = self.ss_version(ss);
        let version = if asked == LATEST_VERSION {
            current
        } else {
            asked
        };
        // Watches only wait for their version (`waitForVersionNoTooOld`).
        if kind != RequestKind::WatchValue && (version < oldest || version <= 0) {
            let body = error_reply(kind, ErrorCode::TRANSACTION_TOO_OLD);
            self.emit(out, conn, kind, reply, body);
            return;
        }
        if version > current {
            if self.now >= deadline {
                let body = error_reply(kind, ErrorCode::FUTURE_VERSION);
                self.emit(out, conn, kind, reply, body);
            } else {
                self.waiting.push(WaitingRead {
                    conn: conn.clone(),
                    ss,
                    msg,
                    version,
                    deadline,
                });
            }
            return;
        }
        // `checkTenantEntry`: a tenant request names a tenant that exists at its version; its
        // keys are the tenant's (the prefix goes on here and comes off the reply).
        let tenant = match &msg {
            AnyMessage::GetValueRequest(r) => r.tenant_info.tenant_id,
            AnyMessage::GetKeyRequest(r) => r.tenant_info.tenant_id,
            AnyMessage::GetKeyValuesRequest(r) => r.tenant_info.tenant_id,
            AnyMessage::GetMappedKeyValuesRequest(r) => r.tenant_info.tenant_id,
            AnyMessage::WatchValueRequest(r) => r.tenant_info.tenant_id,
            _ => TenantInfo::INVALID_TENANT,
        };
        let prefix = (tenant != TenantInfo::INVALID_TENANT).then(|| tenant.to_be_bytes());
        // A watch checks its tenant at the latest version (`watchValueWaitForVersion`).
        let exists = |st: &Self| match kind {
            RequestKind::WatchValue => st.store.latest(&tenant_map_key(tenant)).is_some(),
            _ => st.store.get(&tenant_map_key(tenant), version).is_some(),
        };
        if prefix.is_some() && !exists(self) {
            let body = error_reply(kind, ErrorCode::TENANT_NOT_FOUND);
            self.emit(out, conn, kind, reply, body);
            return;
        }
        // ... and a locked tenant (not merely read-only) refuses reads that are not
        // lock-aware (`tenant_locked`).
        let lock_aware = match &msg {
            AnyMessage::GetValueRequest(r) => r.options.as_ref().map(|o| o.lock_aware),
            AnyMessage::GetKeyRequest(r) => r.options.as_ref().map(|o| o.lock_aware),
            AnyMessage::GetKeyValuesRequest(r) => r.options.as_ref().map(|o| o.lock_aware),
            AnyMessage::GetMappedKeyValuesRequest(r) => r.options.as_ref().map(|o| o.lock_aware),
            // A watch is never lock-aware (`watchValueWaitForVersion`), and looks at the
            // latest version.
            _ => None,
        };
        if prefix.is_some() && !lock_aware.unwrap_or(false) {
            let entry = match kind {
                RequestKind::WatchValue => self.store.latest(&tenant_map_key(tenant)),
                _ => self.store.get(&tenant_map_key(tenant), version),
            };
            let locked = entry.is_some_and(|v| tenant_lock_state(&v) == 2);
            if locked {
                let body = error_reply(kind, ErrorCode::TENANT_LOCKED);
                self.emit(out, conn, kind, reply, body);
                return;
            }
        }
        let prefix = prefix.as_ref().map(|p| &p[..]);
        let body = match msg {
            AnyMessage::GetValueRequest(r) => {
                let key = with_prefix(prefix, &r.key);
                if !self.serves(ss, &key) {
                    self.storage_refusal(kind, ErrorCode::WRONG_SHARD_SERVER)
                } else {
                    let mut value = self.store.get(&key, version);
                    if self.lying.contains(&ss) {
                        value = value.map(lie);
                    }
                    ok(GetValueReply {
                        penalty: 1.0,
                        error: None,
                        value,
                        cached: false,
                    })
                }
            }
            AnyMessage::GetKeyRequest(r) => match self.get_key(ss, &r, version, prefix) {
                Ok(sel) => ok(GetKeyReply {
                    penalty: 1.0,
                    error: None,
                    sel,
                    cached: false,
                }),
                Err(e) => self.storage_refusal(kind, e),
            },
            AnyMessage::GetKeyValuesRequest(r) => {
                match self.get_key_values(ss, &r, version, prefix) {
                    Ok(mut rep) => {
                        if self.lying.contains(&ss) {
                            for kv in &mut rep.data.0 {
                                kv.value = lie(kv.value.clone());
                            }
                        }
                        ok(rep)
                    }
                    Err(e) => self.storage_refusal(kind, e),
                }
            }
            AnyMessage::GetMappedKeyValuesRequest(r) => {
                match self.get_mapped_key_values(ss, &r, version, prefix) {
                    Ok(rep) => ok(rep),
                    Err(e) => self.storage_refusal(kind, e),
                }
            }
            AnyMessage::WatchValueRequest(r) => {
                let key = with_prefix(prefix, &r.key);
                if !self.serves(ss, &key) {
                    self.storage_refusal(kind, ErrorCode::WRONG_SHARD_SERVER)
                } else if self.store.latest(&key) != r.value {
                    ok(WatchValueReply {
                        version: current,
                        cached: false,
                    })
                } else {
                    let deadline = self.now + self.cfg.watch_timeout;
                    self.watches.push(Watch {
                        conn: conn.clone(),
                        reply,
                        ss,
                        key,
                        value: r.value,
                        deadline,
                        tenant,
                    });
                    return;
                }
            }
            _ => return,
        };
        self.emit(out, conn, kind, reply, body);
    }

    /// `isReadable(keys)`: `ss` holds every shard overlapping `[begin, end)`.
    fn serves_range(&self, ss: usize, begin: &[u8], end: &[u8]) -> bool {
        if end > ALL_KEYS_END {
            return false;
        }
        let mut i = self.shard_containing(begin);
        loop {
            if !self.teams[i].contains(&ss) {
                return false;
            }
            i += 1;
            if i >= self.teams.len() || self.boundaries[i][..] >= *end {
                return true;
            }
        }
    }

    /// `waitMetrics` for a request whose bounds the current metrics are already outside of
    /// (the client's `min.bytes = 0, max.bytes = -1`): the byte-sample estimate at once.
    /// Other bounds are answered at once too: this cluster keeps no waiters for metrics.
    fn wait_metrics(
        &mut self,
        ss: usize,
        r: &WaitMetricsRequest,
    ) -> Result<StorageMetrics, ErrorCode> {
        let prefix = self.metrics_tenant(&r.tenant_info)?;
        let keys = &prefixed_range(prefix.as_ref().map(|p| &p[..]), &r.keys);
        if !self.serves_range(ss, &keys.begin, &keys.end) {
            return Err(ErrorCode::WRONG_SHARD_SERVER);
        }
        let v = self.current_version();
        let bytes = self
            .store
            .byte_sample(&keys.begin, &keys.end, v, |_| true)
            .iter()
            .map(|(_, size)| size)
            .sum();
        Ok(StorageMetrics {
            bytes,
            ..Default::default()
        })
    }

    /// `getRangeSplitPoints` (`StorageServerMetrics::getSplitPoints`) over this server's
    /// byte sample.
    fn range_split_points(
        &mut self,
        ss: usize,
        r: &SplitRangeRequest,
    ) -> Result<SplitRangeReply, ErrorCode> {
        let prefix = self.metrics_tenant(&r.tenant_info)?;
        let prefix = prefix.as_ref().map(|p| &p[..]);
        let keys = &prefixed_range(prefix, &r.keys);
        if !self.serves_range(ss, &keys.begin, &keys.end) {
            return Err(ErrorCode::WRONG_SHARD_SERVER);
        }
        let v = self.current_version();
        // Up to `end` included: a point may be `end` itself; one past it ends the walk anyway.
        let sample =
            self.store
                .byte_sample(&keys.begin, &super::store::key_after(&keys.end), v, |k| {
                    self.serves(ss, k)
                });
        let points = split_points(&sample, &keys.begin, &keys.end, r.chunk_size);
        Ok(SplitRangeReply {
            split_points: points
                .into_iter()
                .map(|p| without_prefix(prefix, p))
                .collect(),
        })
    }

    /// `checkTenantEntry` of a metrics request, at the latest version: the prefix of the
    /// tenant it names (`None` for none), `tenant_not_found` if there is no such tenant.
    fn metrics_tenant(&self, t: &TenantInfo) -> Result<Option<[u8; 8]>, ErrorCode> {
        if t.tenant_id == TenantInfo::INVALID_TENANT {
            return Ok(None);
        }
        if self.store.latest(&tenant_map_key(t.tenant_id)).is_none() {
            return Err(ErrorCode::TENANT_NOT_FOUND);
        }
        Ok(Some(t.tenant_id.to_be_bytes()))
    }

    fn get_key(
        &self,
        ss: usize,
        r: &GetKeyRequest,
        v: Version,
        tenant: Option<&[u8]>,
    ) -> Result<KeySelector, ErrorCode> {
        let mut sel = r.sel.clone();
        sel.key = with_prefix(tenant, &sel.key);
        let (begin, end) = self.shard_range(ss, &sel)?;
        let (begin, end) = clamp_to_tenant(tenant, begin, end);
        let (k, offset) = self.store.find_key(&sel, &begin, &end, v);
        let k = without_prefix(tenant, k);
        Ok(match offset {
            0 => KeySelector::new(k, true, 0),
            o if o < 0 => KeySelector::new(k, false, 1 + o),
            o => KeySelector::new(k, false, o),
        })
    }

    fn get_key_values(
        &self,
        ss: usize,
        r: &GetKeyValuesRequest,
        v: Version,
        tenant: Option<&[u8]>,
    ) -> Result<GetKeyValuesReply, ErrorCode> {
        let (mut rb, mut re) = (r.begin.clone(), r.end.clone());
        rb.key = with_prefix(tenant, &rb.key);
        re.key = with_prefix(tenant, &re.key);
        let r = &GetKeyValuesRequest {
            begin: rb,
            end: re,
            ..r.clone()
        };
        let (sb, se) = self.shard_range(ss, &r.begin)?;
        let end_ok = selector_in_range(&r.end, &sb, &se)
            || (is_first_greater_or_equal(&r.end) && r.end.key == se);
        if !end_ok {
            return Err(ErrorCode::WRONG_SHARD_SERVER);
        }
        let (sb, se) = clamp_to_tenant(tenant, sb, se);
        let resolve = |sel: &KeySelector| {
            if is_first_greater_or_equal(sel) {
                (sel.key.clone(), 0)
            } else {
                self.store.find_key(sel, &sb, &se, v)
            }
        };
        let (begin, o1) = resolve(&r.begin);
        let (end, o2) = resolve(&r.end);
        if (o1 != 0 && o1 != 1) || (o2 != 0 && o2 != 1) {
            return Err(ErrorCode::WRONG_SHARD_SERVER);
        }
        if begin >= end {
            return Ok(GetKeyValuesReply {
                penalty: 1.0,
                version: v,
                more: false,
                ..Default::default()
            });
        }
        let (mut rows, more) = self
            .store
            .read_range(&begin, &end, r.limit, r.limit_bytes, v);
        if tenant.is_some() {
            for row in rows.iter_mut() {
                row.key = without_prefix(tenant, row.key.clone());
            }
        }
        Ok(GetKeyValuesReply {
            penalty: 1.0,
            error: None,
            data: KeyValueBlob(rows),
            version: v,
            more,
            cached: false,
        })
    }

    /// Answers the watches whose value changed, each at its storage server's version (which
    /// may be past the change's `version`, as on a real storage server).
    fn fire_watches(&mut self, version: Version, out: &mut Vec<Outgoing>) {
        let mut fired = Vec::new();
        let mut i = 0;
        while i < self.watches.len() {
            let w = &self.watches[i];
            let removed = w.tenant != TenantInfo::INVALID_TENANT
                && self.store.latest(&tenant_map_key(w.tenant)).is_none();
            if removed || self.store.latest(&w.key) != w.value {
                fired.push((self.watches.swap_remove(i), removed));
            } else {
                i += 1;
            }
        }
        for (w, removed) in fired {
            // `watchWaitForValueChange`: a tenant deleted under the watch ends it.
            let body = if removed {
                error_reply(RequestKind::WatchValue, ErrorCode::TENANT_REMOVED)
            } else {
                ok(WatchValueReply {
                    version: self.ss_version(w.ss).max(version),
                    cached: false,
                })
            };
            self.emit(out, &w.conn, RequestKind::WatchValue, w.reply, body);
        }
    }

    /// Time-driven work: a recovery's publications, delayed replies, parked reads, watch
    /// timeouts, forgetting history. True when a stopped process that the transaction
    /// system needs has gone unnoticed for the failure-detection delay: the caller recovers.
    fn tick(&mut self, out: &mut Vec<Outgoing>) -> bool {
        let now = self.now;
        if self.publish_at.is_some_and(|t| t <= now) {
            self.publish_at = None;
            self.proxies_published = true;
            self.info_changed(out);
        } else if self.publish_at.is_none() && self.republish_at.front().is_some_and(|t| *t <= now)
        {
            self.republish_at.pop_front();
            self.info_changed(out);
        }
        let delay = self.cfg.failure_detection_delay;
        // A stopped process keeps its sockets open: it is noticed only once a ping to it went
        // unanswered for the connection monitor's timeout, later than a killed one.
        let stop_delay = delay + self.cfg.stop_noticed_after;
        let stopped = self.procs.iter().any(|p| {
            !p.retired
                && (matches!(p.role, Role::Proxies | Role::Master) || p.log)
                && p.stopped
                    .is_some_and(|s| !s.detected && now.saturating_since(s.at) >= stop_delay)
        });
        // A killed process is noticed after the same delay; the recovery it makes waits
        // for a coordinator quorum.
        for p in 0..self.procs.len() {
            if self.needed_by_the_transaction_system(p)
                && self.procs[p]
                    .dead_since
                    .is_some_and(|t| now.saturating_since(t) >= delay)
            {
                self.procs[p].dead_since = None;
                self.recovery_due = true;
            }
        }
        let failed = (stopped || self.recovery_due) && self.coordinator_quorum();
        if self.move_at.is_some_and(|t| t <= now) {
            self.move_at = None;
            let step = self.cfg.data_move_step;
            let mut moved = self.move_one_off_excluded(out);
            while moved && step.is_zero() {
                moved = self.move_one_off_excluded(out);
            }
            if moved {
                self.move_at = Some(now + step);
            }
        }
        let mut i = 0;
        while i < self.delayed.len() {
            if self.delayed[i].0 <= now {
                let o = self.delayed.remove(i).1;
                self.send_or_freeze(out, o);
            } else {
                i += 1;
            }
        }
        if !self.waiting.is_empty() {
            let versions: Vec<Version> = (0..self.ss_lag.len())
                .map(|ss| self.ss_version(ss))
                .collect();
            let ready: Vec<WaitingRead> = {
                let (ready, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting)
                    .into_iter()
                    .partition(|w| w.version <= versions[w.ss] || w.deadline <= now);
                self.waiting = wait;
                ready
            };
            for w in ready {
                if !w.conn.is_closed() {
                    self.storage(&w.conn, w.ss, w.msg, out, w.deadline);
                }
            }
        }
        let mut timed_out = Vec::new();
        let mut i = 0;
        while i < self.watches.len() {
            if self.watches[i].deadline <= now || self.watches[i].conn.is_closed() {
                timed_out.push(self.watches.swap_remove(i));
            } else {
                i += 1;
            }
        }
        for w in timed_out {
            let body = error_reply(RequestKind::WatchValue, ErrorCode::TIMED_OUT);
            self.emit(out, &w.conn, RequestKind::WatchValue, w.reply, body);
        }
        if now.saturating_since(self.last_gc) > Duration::from_millis(250) {
            self.last_gc = now;
            let oldest = self.oldest_version();
            self.store.forget_before(oldest);
            self.long_polls.retain(|(c, _, _)| !c.is_closed());
            self.parked.retain(|(c, _, _)| !c.is_closed());
            self.conns.retain(|c| !c.is_closed());
        }
        failed
    }

    /// What a role ending in process `p` owed (held, delayed and parked replies, stalled
    /// requests, reads waiting for a version, watches), answered with `broken_promise` as
    /// fdbserver answers the promises of a role that ended.
    fn end_role_of(&mut self, p: usize, out: &mut Vec<Outgoing>) {
        let mut owed: Vec<(Arc<Conn>, RequestKind, Uid)> = Vec::new();
        let mine = |c: &Arc<Conn>| c.proc_idx == p;
        for o in std::mem::take(&mut self.held) {
            match o.kind {
                Some(k) if mine(&o.conn) => owed.push((o.conn, k, o.token)),
                _ => self.held.push(o),
            }
        }
        for (at, o) in std::mem::take(&mut self.delayed) {
            match o.kind {
                Some(k) if mine(&o.conn) => owed.push((o.conn, k, o.token)),
                _ => self.delayed.push((at, o)),
            }
        }
        for (c, k, t) in std::mem::take(&mut self.parked) {
            if mine(&c) {
                owed.push((c, k, t));
            } else {
                self.parked.push((c, k, t));
            }
        }
        for s in std::mem::take(&mut self.stalled) {
            if mine(&s.conn) {
                owed.push((s.conn, s.kind, s.reply));
            } else {
                self.stalled.push(s);
            }
        }
        for w in std::mem::take(&mut self.waiting) {
            match (RequestKind::of(&w.msg), reply_token(&w.msg)) {
                (Some(k), Some(t)) if mine(&w.conn) => owed.push((w.conn, k, t)),
                _ => self.waiting.push(w),
            }
        }
        for w in std::mem::take(&mut self.watches) {
            if mine(&w.conn) {
                owed.push((w.conn, RequestKind::WatchValue, w.reply));
            } else {
                self.watches.push(w);
            }
        }
        for (conn, kind, token) in owed {
            let o = Outgoing {
                conn,
                token,
                body: transport_error(kind, ErrorCode::BROKEN_PROMISE),
                kind: Some(kind),
            };
            self.send_or_freeze(out, o);
        }
    }

    /// A recovery ([`TestCluster::recover_with`]); the proxies move to a new process when
    /// theirs is stopped or dead.
    fn recover(&mut self, shape: &Recovery, out: &mut Vec<Outgoing>) {
        let now = self.now;
        let new_proxies = {
            let p = &self.procs[self.proc_index(Role::Proxies)];
            (!p.alive || p.stopped.is_some()).then(|| (self.new_addr)())
        };
        // What the old logs had decides what survives of the commits stalled behind one.
        if shape.stalled_commits_survive {
            let stalled = std::mem::take(&mut self.stalled);
            for s in &stalled {
                if let AnyMessage::CommitTransactionRequest(r) = &s.msg {
                    let _ = self.commit(r, out);
                }
            }
            self.stalled = stalled;
        }
        let p = self.proc_index(Role::Proxies);
        self.end_role_of(p, out);
        for s in std::mem::take(&mut self.stalled) {
            let o = Outgoing {
                conn: s.conn,
                token: s.reply,
                body: transport_error(s.kind, ErrorCode::BROKEN_PROMISE),
                kind: Some(s.kind),
            };
            self.send_or_freeze(out, o);
        }
        if let Some(addr) = new_proxies {
            self.procs[p].retired = true;
            self.procs.push(Process::new(Role::Proxies, addr));
        }
        // A master that failed is replaced by one in a new process (which serves nothing a
        // client reaches: its address refuses connections).
        let m = self.proc_index(Role::Master);
        if !self.procs[m].alive || self.procs[m].stopped.is_some() {
            self.procs[m].retired = true;
            let addr = (self.new_addr)();
            self.procs.push(Process::new(Role::Master, addr));
        }
        // The new generation recruits logs on live processes only.
        for proc in &mut self.procs {
            if proc.stopped.is_some() || !proc.alive {
                proc.log = false;
                proc.dead_since = None;
            }
            if let Some(s) = &mut proc.stopped {
                s.detected = true;
            }
        }
        self.grv_token = self.new_token();
        self.commit_token = self.new_token();
        self.cc_token = self.new_token();
        let before = self.current_version();
        self.version_bump += shape.version_jump.max(0);
        self.recent_jumps
            .push_back((before, shape.version_jump.max(0)));
        self.resolver_floor = self.current_version();
        self.history.clear();
        self.recoveries += 1;
        self.recovery_due = false;
        // The first registration of the new master names no proxies.
        self.proxies_published = false;
        self.info_changed(out);
        self.publish_at = Some(now + shape.without_proxies);
        self.republish_at = (1..=shape.republish)
            .map(|i| now + shape.without_proxies + shape.republish_interval * i)
            .collect();
    }
}

impl State {
    /// The `ClientDBInfo` changed: answer every held long poll.
    fn info_changed(&mut self, out: &mut Vec<Outgoing>) {
        self.info_id = self.new_token();
        // Encoded only for someone waiting (a simulated run publishes at every recovery).
        if self.long_polls.is_empty() {
            return;
        }
        let body = ok(self.client_db_info());
        for (conn, reply, _) in std::mem::take(&mut self.long_polls) {
            self.emit(out, &conn, RequestKind::OpenDatabase, reply, body.clone());
        }
    }
}

/// Replies produced while serving a fault (e.g. watches fired by an "unknown result" commit)
/// still go out.
fn flush_later(out: &mut Vec<Outgoing>, more: Vec<Outgoing>) {
    out.extend(more);
}

// ---------------------------------------------------------------------------------------------
// The runner's side: processes, connections, bytes, time

impl State {
    /// The roles of a new cluster, one process each, in process order: the coordinators,
    /// the proxies, the master, the storage servers. A runner gives [`State::new`] one
    /// address for each.
    pub(crate) fn initial_roles(cfg: &TestClusterBuilder) -> Vec<Role> {
        let mut roles: Vec<Role> = (0..cfg.coordinators).map(Role::Coordinator).collect();
        roles.push(Role::Proxies);
        roles.push(Role::Master);
        roles.extend((0..cfg.storage_servers).map(Role::Storage));
        roles
    }

    /// A cluster at [`Instant::ZERO`] whose processes are at `addrs` (see
    /// [`State::initial_roles`]); `seed` makes its tokens and ids, `unix_epoch` is the Unix
    /// time (seconds) at [`Instant::ZERO`], `new_addr` gives processes started later their
    /// addresses.
    pub(crate) fn new(
        cfg: TestClusterBuilder,
        addrs: &[SocketAddr],
        seed: u64,
        unix_epoch: i64,
        new_addr: Box<dyn FnMut() -> SocketAddr + Send>,
    ) -> State {
        let roles = Self::initial_roles(&cfg);
        assert_eq!(roles.len(), addrs.len(), "one address per process");
        let procs: Vec<Process> = roles
            .iter()
            .zip(addrs)
            .map(|(&role, &addr)| Process {
                log: matches!(role, Role::Storage(i) if cfg.log_storage.contains(&i)),
                ..Process::new(role, addr)
            })
            .collect();

        let mut points: Vec<Bytes> = cfg
            .split_points
            .iter()
            .filter(|p| !p.is_empty() && &p[..] < ALL_KEYS_END)
            .map(|p| Bytes::copy_from_slice(p))
            .collect();
        points.sort();
        points.dedup();
        let mut boundaries = vec![Bytes::new()];
        boundaries.extend(points);
        let n = cfg.storage_servers;
        let replication = cfg.replication.min(n);
        let teams = (0..boundaries.len())
            .map(|i| (0..replication).map(|j| (i + j) % n).collect())
            .collect();

        let mut st = State {
            now: Instant::ZERO,
            unix_epoch,
            new_addr,
            version_bump: 0,
            last_version: 0,
            store: Store::default(),
            history: VecDeque::new(),
            boundaries,
            teams,
            procs,
            info_id: Uid::default(),
            cluster_id: Uid::default(),
            grv_token: Uid::default(),
            commit_token: Uid::default(),
            cc_token: Uid::default(),
            ss_ids: Vec::new(),
            ss_tokens: Vec::new(),
            metadata_version: None,
            connection: cfg.description.clone(),
            coordinators: (0..cfg.coordinators).collect(),
            long_polls: Vec::new(),
            proxies_published: true,
            publish_at: None,
            republish_at: VecDeque::new(),
            recoveries: 0,
            recovery_due: false,
            resolver_floor: 0,
            recent_jumps: VecDeque::new(),
            frozen: Vec::new(),
            stalled: Vec::new(),
            ss_lag: vec![None; n],
            watches: Vec::new(),
            waiting: Vec::new(),
            delayed: Vec::new(),
            held: Vec::new(),
            lying: Vec::new(),
            parked: Vec::new(),
            hold: Vec::new(),
            delays: Vec::new(),
            injections: Vec::new(),
            counters: BTreeMap::new(),
            proc_counters: BTreeMap::new(),
            conns: Vec::new(),
            inputs: BTreeMap::new(),
            io: Vec::new(),
            accepted: 0,
            protocol: ProtocolVersion::V7_3.with_object_serializer_flag().0,
            rng: seed,
            last_gc: Instant::ZERO,
            move_at: None,
            move_candidate: 0,
            wrong_shard: 0,
            cfg,
        };
        if st.cfg.tenant_mode != 0 {
            // What `configure tenant_mode=...` leaves in the database.
            let mode = Bytes::from(st.cfg.tenant_mode.to_string());
            st.store
                .put(Bytes::from_static(b"\xff/conf/tenant_mode"), Some(mode), 1);
        }
        st.info_id = st.new_token();
        st.cluster_id = st.new_token();
        st.grv_token = st.new_token();
        st.commit_token = st.new_token();
        st.cc_token = st.new_token();
        for _ in 0..n {
            let id = st.new_token();
            let tok = st.new_token();
            st.ss_ids.push(id);
            st.ss_tokens.push(tok);
        }
        // fdbserver keeps the connection string it runs on at `\xff/coordinators`.
        let cs = Bytes::from(st.connection_string());
        st.store
            .put(Bytes::from_static(b"\xff/coordinators"), Some(cs), 1);
        // And the replication `configure single` leaves.
        for key in [
            &b"\xff/conf/storage_replicas"[..],
            b"\xff/conf/log_replicas",
        ] {
            st.store
                .put(Bytes::from_static(key), Some(Bytes::from_static(b"1")), 1);
        }
        st
    }

    /// Time passed: the cluster is at `now` (never earlier than it was).
    pub(crate) fn set_now(&mut self, now: Instant) {
        self.now = self.now.max(now);
    }

    /// What the runner must do now, in order.
    pub(crate) fn take_io(&mut self) -> Vec<Io> {
        std::mem::take(&mut self.io)
    }

    /// [`State::take_io`] into `into` (empty), which leaves its allocation here: a caller
    /// that hands the same buffer back each time allocates none per step.
    pub(crate) fn swap_io(&mut self, into: &mut Vec<Io>) {
        debug_assert!(into.is_empty());
        std::mem::swap(&mut self.io, into);
    }

    /// Each process's role, in process order (what [`State::processes`] lists, without
    /// building the list).
    pub(crate) fn roles(&self) -> impl Iterator<Item = Role> + '_ {
        self.procs.iter().map(|p| p.role)
    }

    /// The first process at `addr` that is up (alive and not retired).
    pub(crate) fn up_at(&self, addr: SocketAddr) -> Option<usize> {
        (self.procs.iter()).position(|p| p.alive && !p.retired && p.addr == addr)
    }

    /// Every process: its role, its address, whether it is up (alive and not retired).
    pub(crate) fn processes(&self) -> Vec<(Role, SocketAddr, bool)> {
        self.procs
            .iter()
            .map(|p| (p.role, p.addr, p.alive && !p.retired))
            .collect()
    }

    /// A connection to process `proc_idx` was accepted; `None` when the process is down
    /// (the runner refuses it).
    pub(crate) fn accept(&mut self, proc_idx: usize, id: u64) -> Option<Arc<Conn>> {
        if !self.procs.get(proc_idx)?.alive {
            return None;
        }
        let conn = Arc::new(Conn {
            id,
            proc_idx,
            closed: AtomicBool::new(false),
        });
        self.accepted += 1;
        self.conns.push(conn.clone());
        self.inputs.insert(
            id,
            ConnInput {
                conn: conn.clone(),
                decoder: FrameDecoder::new(true, true),
                pending: VecDeque::new(),
            },
        );
        Some(conn)
    }

    /// Bytes arrived on `conn`. A stopped process keeps them unread until it continues.
    pub(crate) fn input(&mut self, conn: &Arc<Conn>, bytes: &[u8]) {
        let Some(c) = self.inputs.get_mut(&conn.id) else {
            return;
        };
        c.decoder.feed(bytes);
        loop {
            match c.decoder.next_frame() {
                Ok(Some(f)) => c.pending.push_back(Some(f)),
                Ok(None) => break,
                Err(_) => {
                    c.pending.push_back(None);
                    break;
                }
            }
        }
        Self::pings_first(&mut c.pending);
        self.serve_pending(conn.id);
    }

    /// Pings read together with other requests are answered first: fdbserver's ping receiver
    /// replies as the packet is delivered, a storage read yields first (seen after a
    /// SIGCONT: a ping sent after a read was answered before it).
    fn pings_first(pending: &mut VecDeque<Option<Incoming>>) {
        let first_served = |f: &Option<Incoming>| match f {
            Some(Incoming::Connect(_)) => true,
            Some(Incoming::Packet(p)) => p.token == well_known::PING_PACKET,
            _ => false,
        };
        let (first, rest): (VecDeque<_>, VecDeque<_>) = pending.drain(..).partition(first_served);
        *pending = first;
        pending.extend(rest);
    }

    /// Serves what waits on connection `id`, unless its process is stopped.
    fn serve_pending(&mut self, id: u64) {
        loop {
            let Some(c) = self.inputs.get_mut(&id) else {
                return;
            };
            let conn = c.conn.clone();
            if conn.is_closed() || self.procs[conn.proc_idx].stopped.is_some() {
                return;
            }
            let Some(frame) = self.inputs.get_mut(&id).and_then(|c| c.pending.pop_front()) else {
                return;
            };
            match frame {
                None => return self.close(&conn),
                Some(Incoming::Connect(_)) => {
                    let addr = self.procs[conn.proc_idx].addr;
                    let mut p = ConnectPacket::client(ProtocolVersion::V7_3);
                    p.protocol_version = self.protocol;
                    p.canonical_remote_port = addr.port();
                    p.connection_id = 0;
                    if let std::net::IpAddr::V4(v) = addr.ip() {
                        p.canonical_remote_ip4 = u32::from(v);
                    }
                    let mut hello = BytesMut::new();
                    p.encode(&mut hello);
                    self.io.push(Io::Send(conn, hello.freeze()));
                }
                Some(Incoming::Packet(pkt)) => {
                    let mut out = Vec::new();
                    self.on_packet(&conn, pkt.token, &pkt.message, &mut out);
                    self.flush(out);
                }
            }
        }
    }

    /// The far end closed `conn` (or the runner lost it).
    pub(crate) fn closed(&mut self, conn: &Arc<Conn>) {
        conn.closed.store(true, Ordering::SeqCst);
        self.inputs.remove(&conn.id);
    }

    /// Closes `conn` from this end.
    fn close(&mut self, conn: &Arc<Conn>) {
        if !conn.is_closed() {
            self.closed(conn);
            self.io.push(Io::Close(conn.clone()));
        }
    }

    /// Frames the replies for the wire.
    fn flush(&mut self, out: Vec<Outgoing>) {
        for o in out {
            let mut b = BytesMut::new();
            encode_packet(&mut b, o.token, &o.body, true);
            self.io.push(Io::Send(o.conn, b.freeze()));
        }
    }

    /// When [`State::handle_timeout`] has work next (`None`: nothing is waiting for time).
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let detect = self.cfg.failure_detection_delay;
        let stop_delay = detect + self.cfg.stop_noticed_after;
        let version_at = |v: Version| {
            Instant(Duration::from_micros(
                (v - INITIAL_VERSION - self.version_bump).max(0) as u64,
            ))
        };
        let publish = match self.publish_at {
            Some(t) => Some(t),
            None => self.republish_at.front().copied(),
        };
        let stops = self.procs.iter().filter_map(|p| {
            let s = p.stopped.filter(|s| !s.detected)?;
            let needed = !p.retired && (matches!(p.role, Role::Proxies | Role::Master) || p.log);
            needed.then(|| s.at + stop_delay)
        });
        // (The cheap test first: few processes are dead.)
        let deaths = (0..self.procs.len()).filter_map(|p| {
            let since = self.procs[p].dead_since?;
            self.needed_by_the_transaction_system(p)
                .then(|| since + detect)
        });
        let waiting = self.waiting.iter().map(|w| {
            let caught_up = match self.ss_lag[w.ss] {
                Some((_, until)) => until.max(version_at(w.version)),
                None => version_at(w.version),
            };
            w.deadline.min(caught_up)
        });
        // Forgetting history past the window, and connections closed.
        let gc = Some(self.last_gc + Duration::from_millis(251));
        publish
            .into_iter()
            .chain(stops)
            .chain(deaths)
            .chain(self.move_at)
            .chain(self.delayed.iter().map(|(t, _)| *t))
            .chain(waiting)
            .chain(self.watches.iter().map(|w| w.deadline))
            .chain(gc)
            .min()
    }

    /// Does what is due at the time set: publications, delayed replies, reads whose version
    /// arrived, watch timeouts, failure detection (and the recovery it makes).
    pub(crate) fn handle_timeout(&mut self) {
        let mut out = Vec::new();
        let failed = self.tick(&mut out);
        self.flush(out);
        if failed {
            let shape = self.cfg.recovery.clone();
            self.recover_with(&shape);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What a test asks of the cluster (see `TestCluster`, which runs each on its sockets)

impl State {
    pub(crate) fn cluster_file_string(&self) -> String {
        self.connection_string()
    }

    pub(crate) fn addr(&self, role: Role) -> SocketAddr {
        self.procs[self.proc_index(role)].addr
    }

    pub(crate) fn shards(&self) -> Vec<ShardInfo> {
        (0..self.teams.len())
            .map(|i| ShardInfo {
                begin: self.boundaries[i].to_vec(),
                end: self.shard_end(i).to_vec(),
                servers: self.teams[i].clone(),
            })
            .collect()
    }

    pub(crate) fn servers_of(&self, key: &[u8]) -> Vec<usize> {
        self.teams[self.shard_containing(key)].clone()
    }

    pub(crate) fn snapshot(&mut self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let v = self.current_version();
        self.store.snapshot(v)
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.store.latest(key).map(|b| b.to_vec())
    }

    /// Commits `mutations` directly (no conflict check; watches fire).
    pub(crate) fn apply_direct(&mut self, mutations: &[MutationRef]) -> Version {
        let mut out = Vec::new();
        let version = self.last_version.max(self.clock() - 1) + 1;
        self.last_version = version;
        self.apply(mutations, version, 0);
        let ranges = mutations
            .iter()
            .map(|m| match m.kind {
                mt::CLEAR_RANGE => KeyRange::new(m.param1.clone(), m.param2.clone()),
                _ => KeyRange::single_key(&m.param1),
            })
            .collect();
        self.history.push_back((version, ranges));
        self.fire_watches(version, &mut out);
        self.flush(out);
        version
    }

    pub(crate) fn requests(&self, kind: RequestKind) -> u64 {
        self.counters.get(&kind).copied().unwrap_or(0)
    }

    pub(crate) fn request_counts(&self) -> BTreeMap<RequestKind, u64> {
        self.counters.clone()
    }

    pub(crate) fn requests_to(&self, role: Role, kind: RequestKind) -> u64 {
        self.proc_counters
            .iter()
            .filter(|((p, k), _)| *k == kind && self.procs[*p].role == role)
            .map(|(_, n)| n)
            .sum()
    }

    pub(crate) fn reset_counters(&mut self) {
        self.counters.clear();
        self.proc_counters.clear();
    }

    pub(crate) fn injections_left(&self, kind: Option<RequestKind>) -> u32 {
        self.injections
            .iter()
            .filter(|(k, _, _)| kind.is_none_or(|want| *k == want))
            .map(|(_, n, _)| n)
            .sum()
    }

    pub(crate) fn connections_accepted(&self) -> u64 {
        self.accepted
    }

    pub(crate) fn pending_watches(&self) -> usize {
        self.watches.len()
    }

    pub(crate) fn connection_count(&self) -> usize {
        self.conns.iter().filter(|c| !c.is_closed()).count()
    }

    // --- faults ----------------------------------------------------------------------------------

    /// Closes the open connections of process `p` (`None`: of every process).
    pub(crate) fn drop_connections_of(&mut self, p: Option<usize>) {
        let conns: Vec<Arc<Conn>> = self
            .conns
            .iter()
            .filter(|c| p.is_none_or(|p| c.proc_idx == p))
            .cloned()
            .collect();
        for c in conns {
            self.close(&c);
        }
    }

    pub(crate) fn drop_role_connections(&mut self, role: Role) {
        let p = self.proc_index(role);
        self.drop_connections_of(Some(p));
    }

    pub(crate) fn set_reply_delay(&mut self, kind: Option<RequestKind>, delay: Duration) {
        self.delays.retain(|(k, _)| *k != kind);
        if !delay.is_zero() {
            self.delays.push((kind, delay));
        }
    }

    pub(crate) fn hold_replies(&mut self, kind: Option<RequestKind>) {
        self.hold.push(kind);
    }

    pub(crate) fn release_replies(&mut self, order: ReleaseOrder) -> usize {
        let mut out = Vec::new();
        self.hold.clear();
        let mut held = std::mem::take(&mut self.held);
        if order == ReleaseOrder::Reversed {
            held.reverse();
        }
        let n = held.len();
        for o in held {
            self.send_or_freeze(&mut out, o);
        }
        self.flush(out);
        n
    }

    pub(crate) fn held_replies(&self) -> usize {
        self.held.len()
    }

    /// Storage server `ss` answers every value it reads (point and range reads) with a `!`
    /// after it, or again the truth.
    pub(crate) fn set_lying(&mut self, ss: usize, lying: bool) {
        self.lying.retain(|&s| s != ss);
        if lying {
            self.lying.push(ss);
        }
    }

    pub(crate) fn set_silent(&mut self, role: Role, silent: bool) {
        let p = self.proc_index(role);
        self.procs[p].silent = silent;
    }

    pub(crate) fn set_all_silent(&mut self, silent: bool) {
        for p in &mut self.procs {
            p.silent = silent;
        }
    }

    pub(crate) fn inject(&mut self, kind: RequestKind, count: u32, what: Injected) {
        if count > 0 {
            self.injections.push((kind, count, what));
        }
    }

    pub(crate) fn clear_faults(&mut self) {
        self.delays.clear();
        self.injections.clear();
        for p in &mut self.procs {
            p.silent = false;
        }
        let stopped: Vec<Role> = self
            .procs
            .iter()
            .filter(|p| p.stopped.is_some())
            .map(|p| p.role)
            .collect();
        for r in stopped {
            self.sigcont(r);
        }
        self.release_replies(ReleaseOrder::InOrder);
    }

    /// Kills a role's process (see `TestCluster::kill`); false if it was down already.
    pub(crate) fn kill(&mut self, role: Role) -> bool {
        let p = self.proc_index(role);
        if !self.procs[p].alive {
            return false;
        }
        self.procs[p].alive = false;
        self.procs[p].stopped = None;
        self.procs[p].dead_since = Some(self.now);
        self.procs[p].generation += 1;
        self.frozen.retain(|o| o.conn.proc_idx != p);
        self.drop_connections_of(Some(p));
        true
    }

    pub(crate) fn end_role(&mut self, role: Role) {
        let mut out = Vec::new();
        let p = self.proc_index(role);
        self.end_role_of(p, &mut out);
        match role {
            Role::Proxies => {
                self.grv_token = self.new_token();
                self.commit_token = self.new_token();
                self.cc_token = self.new_token();
                self.info_changed(&mut out);
            }
            Role::Storage(i) => self.ss_tokens[i] = self.new_token(),
            // A coordinator's endpoints are well known: it has no tokens to lose.
            Role::Coordinator(_) | Role::Master => {}
        }
        self.flush(out);
    }

    /// Restarts a role's process (killing it first if it is up) at the same address.
    pub(crate) fn restart(&mut self, role: Role) {
        self.kill(role);
        let mut out = Vec::new();
        let p = self.proc_index(role);
        if self.procs[p].dead_since.take().is_some() && self.needed_by_the_transaction_system(p) {
            self.recovery_due = true;
        }
        match role {
            Role::Proxies => {
                self.grv_token = self.new_token();
                self.commit_token = self.new_token();
                self.cc_token = self.new_token();
            }
            Role::Storage(i) => {
                self.ss_tokens[i] = self.new_token();
            }
            Role::Coordinator(_) | Role::Master => {}
        }
        self.procs[p].alive = true;
        self.procs[p].silent = false;
        self.procs[p].stopped = None;
        let proxies = self.proc_index(Role::Proxies);
        let proxies_up = self.procs[proxies].alive && self.procs[proxies].stopped.is_none();
        if self.recovery_due && self.coordinator_quorum() && proxies_up {
            // Everything it needs is up: the recovery is made now, the proxies staying
            // where they are (with the proxies down, the ticker makes it, moving them).
            let shape = self.cfg.recovery.clone();
            self.recover(&shape, &mut out);
        } else if role == Role::Proxies {
            // New tokens are a new `ClientDBInfo`.
            self.info_changed(&mut out);
        }
        self.flush(out);
    }

    pub(crate) fn is_alive(&self, role: Role) -> bool {
        self.procs[self.proc_index(role)].alive
    }

    pub(crate) fn move_shard(&mut self, key: &[u8], to: usize) {
        let mut out = Vec::new();
        assert!(to < self.cfg.storage_servers, "no storage server {to}");
        let i = self.shard_containing(key);
        // The team's list reused: a simulated run moves a shard every few milliseconds.
        self.teams[i].clear();
        self.teams[i].push(to);
        self.fail_moved_watches(&mut out);
        self.flush(out);
    }

    pub(crate) fn move_next_shard(&mut self) -> bool {
        let mut out = Vec::new();
        let moved = self.move_one_off_excluded(&mut out);
        self.flush(out);
        moved
    }

    pub(crate) fn wrong_shard_replies(&self) -> u64 {
        self.wrong_shard
    }

    pub(crate) fn advance_version(&mut self, versions: i64) {
        self.version_bump += versions.max(0);
        self.current_version();
    }

    pub(crate) fn recover_with(&mut self, shape: &Recovery) {
        let mut out = Vec::new();
        self.recover(shape, &mut out);
        self.flush(out);
    }

    pub(crate) fn recoveries(&self) -> u64 {
        self.recoveries
    }

    pub(crate) fn sigstop(&mut self, role: Role) {
        let p = self.proc_index(role);
        if !self.procs[p].alive || self.procs[p].stopped.is_some() {
            return;
        }
        let version = self.current_version();
        self.procs[p].stopped = Some(Stopped {
            at: self.now,
            version,
            detected: false,
        });
    }

    /// Continues every stopped process that held `role`: the replies it owed go out, then
    /// what waited on its connections is served (pings first).
    pub(crate) fn sigcont(&mut self, role: Role) {
        let mut out = Vec::new();
        let now = self.now;
        let catch_up = self.cfg.catch_up;
        let continued: Vec<usize> = (0..self.procs.len())
            .filter(|&i| self.procs[i].role == role && self.procs[i].stopped.is_some())
            .collect();
        for &p in &continued {
            let s = self.procs[p].stopped.take().expect("stopped");
            if let Role::Storage(i) = role {
                self.ss_lag[i] = Some((s.version, now + catch_up));
            }
        }
        let (late, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.frozen)
            .into_iter()
            .partition(|o| continued.contains(&o.conn.proc_idx));
        self.frozen = rest;
        out.extend(late);
        if !self.log_stalled() {
            self.unstall(&mut out);
        }
        self.flush(out);
        let waiting: Vec<u64> = self
            .inputs
            .values()
            .filter(|c| continued.contains(&c.conn.proc_idx))
            .map(|c| c.conn.id)
            .collect();
        for id in waiting {
            if let Some(c) = self.inputs.get_mut(&id) {
                Self::pings_first(&mut c.pending);
            }
            self.serve_pending(id);
        }
    }

    pub(crate) fn role_is_stopped(&self, role: Role) -> bool {
        self.is_stopped(self.proc_index(role))
    }

    /// `fdbcli coordinators` (see `TestCluster::change_coordinators`): the new
    /// coordinators get addresses of their own, a recovery follows. The new connection
    /// string.
    /// The current coordinators, as the `i` of their `Role::Coordinator(i)`.
    pub(crate) fn coordinator_roles(&self) -> Vec<usize> {
        (self.coordinators.iter())
            .filter_map(|&p| match self.procs[p].role {
                Role::Coordinator(i) => Some(i),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn change_coordinators(&mut self, keep: &[usize], add: usize) -> String {
        let mut out = Vec::new();
        let old_key = Bytes::from(self.connection.clone());
        let old_set = self.coordinators.clone();
        let mut new_set: Vec<usize> = keep
            .iter()
            .map(|&i| {
                let p = self.proc_index(Role::Coordinator(i));
                assert!(old_set.contains(&p), "coordinator {i} is not a current one");
                p
            })
            .collect();
        let next = self
            .procs
            .iter()
            .filter_map(|p| match p.role {
                Role::Coordinator(i) => Some(i + 1),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        for j in 0..add {
            let addr = (self.new_addr)();
            self.procs
                .push(Process::new(Role::Coordinator(next + j), addr));
            new_set.push(self.procs.len() - 1);
        }
        assert!(!new_set.is_empty(), "a cluster needs a coordinator");
        // `changeQuorum`: the description stays, the id is 32 random alphanumerics.
        const ALNUM: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let description = self
            .connection
            .split(':')
            .next()
            .unwrap_or_default()
            .to_string();
        let id: String = (0..32)
            .map(|_| ALNUM[(splitmix(&mut self.rng) % ALNUM.len() as u64) as usize] as char)
            .collect();
        self.connection = format!("{description}:{id}");
        self.coordinators = new_set;
        let conn_str = self.connection_string();
        let forward = Bytes::from(conn_str.clone());
        for &p in &old_set {
            self.procs[p]
                .forwards
                .push((old_key.clone(), forward.clone()));
        }
        // `ForwardRequest`: the long polls held for the old key end with the forward.
        for (conn, reply, key) in std::mem::take(&mut self.long_polls) {
            if key == old_key && old_set.contains(&conn.proc_idx) {
                let body = ok(self.forward_info(forward.clone()));
                self.emit(&mut out, &conn, RequestKind::OpenDatabase, reply, body);
            } else {
                self.long_polls.push((conn, reply, key));
            }
        }
        self.flush(out);
        let shape = self.cfg.recovery.clone();
        self.recover_with(&shape);
        conn_str
    }

    pub(crate) fn set_protocol_version(&mut self, v: ProtocolVersion) {
        self.protocol = v.0;
    }

    /// The process holding `role` now.
    pub(crate) fn proc_of(&self, role: Role) -> usize {
        self.proc_index(role)
    }

    /// How many times process `p` was killed.
    pub(crate) fn procs_generation(&self, p: usize) -> u64 {
        self.procs[p].generation
    }

    pub(crate) fn storage_server_count(&self) -> usize {
        self.cfg.storage_servers
    }

    pub(crate) fn newest_version(&mut self) -> Version {
        self.current_version()
    }
}

/// What a lying storage server answers for `value`.
fn lie(value: Bytes) -> Bytes {
    let mut v = value.to_vec();
    v.push(b'!');
    Bytes::from(v)
}
