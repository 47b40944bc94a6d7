//! The client state machine: cluster bootstrap, connections, read versions and the routing of
//! every request and reply, without IO. Transactions (`crate::transaction`) and the status
//! read (`crate::status`) are operations of this same [`Client`].
//!
//! # Driving it
//!
//! A driver owns the sockets and the clock and does exactly this, in a loop:
//!
//! 1. `poll_event()` until `None`. On [`Event::Connect`] open a TCP connection to `addr` and
//!    report [`Client::handle_connected`] or [`Client::handle_connect_failed`]; on
//!    [`Event::Close`] drop that socket (also one still connecting: the core gives a connect
//!    [`CONNECT_TIMEOUT`]). On [`Event::Resolve`] look the host name up (DNS, off the core)
//!    and report every address with [`Client::handle_resolved`] (none when the lookup
//!    failed). On [`Event::ClusterFileChanged`] a driver that read a cluster file writes
//!    [`ClusterFile::file_contents`] back to it; on [`Event::CoordinatorsUnreachable`] it reads
//!    the file again and hands a changed one to [`Client::set_cluster`].
//!    [`Event::Complete`] finishes an application request (a transaction call, a read
//!    version, a status read); the rest is information.
//! 2. `poll_transmit()` until `None`, writing each [`Transmit`] to its connection's socket.
//! 3. Wait for readable sockets, application calls, or the deadline `poll_timeout()`.
//!    Feed socket bytes with [`Client::handle_input`] (a closed socket: `handle_closed`), call
//!    [`Client::handle_timeout`] once the deadline passes, and go back to 1.
//!
//! Time is whatever monotonic clock the driver likes, passed in as [`Instant`]; randomness
//! (reply tokens, coordinator order, jitter) comes from the seed in [`ClientConfig`]. The same
//! inputs therefore always give the same outputs.
//!
//! # What it does, as libfdb_c does (`fdbclient/MonitorLeader.actor.cpp`)
//!
//! It shuffles the coordinators and asks one for `ClientDBInfo` with an
//! `OpenDatabaseCoordRequest`; once answered it asks again with the info's id, which the
//! coordinator holds until the proxies change. When a coordinator fails it moves to the next,
//! pausing [`COORDINATOR_RECONNECTION_DELAY`] after a full round. A coordinator given by
//! host name is resolved (by the driver) before each request that has no address for it, and
//! its address is forgotten when a request to it fails on the connection, as libfdb_c's
//! `tryGetReplyFromHostname` drops its DNS cache entry. A reply with `forward` moves the core
//! to the new connection string; once a coordinator of the new string answers, the core asks
//! the driver to persist it ([`Event::ClusterFileChanged`]), as `monitorProxiesOneGeneration`
//! does. Read versions go to a GRV proxy; requests that arrive while one is in flight are
//! batched into the next request.
//!
//! # Connections, as FlowTransport's `Peer` keeps them (`fdbrpc/FlowTransport.actor.cpp`)
//!
//! One connection per address. An address whose connection failed is not connected to again
//! before `last connect + delay` (jittered); the delay starts at [`INITIAL_RECONNECTION_TIME`]
//! and grows ×[`RECONNECTION_TIME_GROWTH_RATE`] per failure up to [`MAX_RECONNECTION_TIME`],
//! and starts over when a connection lived longer than [`RECONNECTION_RESET_TIME`]. Requests
//! for such an address wait in its queue; read versions prefer a proxy whose address did not
//! just fail. When a connection fails, what waited on it is retried (read versions, location
//! lookups, coordinator requests), moved to another replica (storage reads), or failed with
//! `commit_unknown_result` (commits). A process that answers with FDB's endpoint-not-found
//! notice (the well-known token 0, carrying the token it does not know) marks that endpoint
//! failed for good, and the request fails over the same way; when every proxy endpoint has
//! failed the request waits for the next `ClientDBInfo`. New proxies in `ClientDBInfo` re-send
//! read versions and location lookups in flight, and turn commits in flight into
//! `commit_unknown_result`, as NativeAPI's `onProxiesChanged` does.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt;
use core::time::Duration;

use crate::cluster_file::{ClusterFile, Coordinator};
use crate::connection::{Connection, ConnectionError, CONNECTION_MONITOR_TIMEOUT};
use crate::error::ErrorCode;
use crate::framing::ProtocolVersion;
use crate::messages::coordination::{
    ClientDBInfo, ClientVersionRef, CommitProxyInterface, GrvProxyInterface, Hostname,
    OpenDatabaseCoordRequest,
};
use crate::messages::grv::{GetReadVersionReply, GetReadVersionRequest};
use crate::messages::types::{SpanContext, Version, INVALID_VERSION};
use crate::messages::{
    decode_reply, reply_error, EnsureTable, ErrorOr, IpAddress, NetworkAddress, ReplyPromise,
};
use crate::serializer::{decode_root, encode, DecodeError, Message};
use crate::time::{Instant, Rng};
use crate::uid::{well_known, Uid};

/// `COORDINATOR_RECONNECTION_DELAY` (`fdbclient/ClientKnobs.cpp`).
pub const COORDINATOR_RECONNECTION_DELAY: Duration = Duration::from_secs(1);
/// `MAX_GRV_PROXY_CONNECTIONS`: a client talks to at most this many GRV proxies.
pub const MAX_GRV_PROXY_CONNECTIONS: usize = 3;
/// `MAX_BATCH_SIZE`: most transactions one GRV request may carry.
pub const MAX_GRV_BATCH: usize = 1000;
/// `MAX_COMMIT_PROXY_CONNECTIONS`: a client talks to at most this many commit proxies.
pub const MAX_COMMIT_PROXY_CONNECTIONS: usize = 5;
/// `INITIAL_RECONNECTION_TIME` (`flow/Knobs.cpp`): the first pause before reconnecting to an
/// address whose connection failed.
pub const INITIAL_RECONNECTION_TIME: Duration = Duration::from_millis(50);
/// `MAX_RECONNECTION_TIME`: the longest pause between connection attempts to one address.
pub const MAX_RECONNECTION_TIME: Duration = Duration::from_millis(500);
/// `RECONNECTION_TIME_GROWTH_RATE`: the pause grows by this factor with each failure.
pub const RECONNECTION_TIME_GROWTH_RATE: f64 = 1.2;
/// `RECONNECTION_RESET_TIME`: a connection that lived longer than this resets the pause.
pub const RECONNECTION_RESET_TIME: Duration = Duration::from_secs(5);
/// How long a TCP connect may take (`connectionKeeper` gives `connect()` and the TLS
/// handshake `CONNECTION_MONITOR_TIMEOUT`, then fails with `connection_failed`).
pub const CONNECT_TIMEOUT: Duration = CONNECTION_MONITOR_TIMEOUT;
/// `SimpleFailureMonitor` forgets its failed endpoints past this many.
const MAX_FAILED_ENDPOINTS: usize = 100_000;

/// Identifies one connection between core and driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionId(pub u64);

/// Identifies one application request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// Bytes for the driver to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub conn: ConnectionId,
    pub data: Bytes,
}

/// Transaction priority for read versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Priority {
    Batch,
    #[default]
    Default,
    SystemImmediate,
}

impl Priority {
    pub(crate) fn flags(self) -> u32 {
        match self {
            Priority::Batch => GetReadVersionRequest::PRIORITY_BATCH,
            Priority::Default => GetReadVersionRequest::PRIORITY_DEFAULT,
            Priority::SystemImmediate => GetReadVersionRequest::PRIORITY_SYSTEM_IMMEDIATE,
        }
    }
}

/// Why a request failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientError {
    /// The cluster answered with an FDB error.
    Fdb(ErrorCode),
    /// A reply could not be decoded.
    Decode(DecodeError),
}

impl ClientError {
    /// The FDB error code (an undecodable reply counts as `internal_error`).
    pub fn code(&self) -> ErrorCode {
        match self {
            ClientError::Fdb(e) => *e,
            ClientError::Decode(_) => ErrorCode::INTERNAL_ERROR,
        }
    }
}

impl From<ErrorCode> for ClientError {
    fn from(e: ErrorCode) -> Self {
        ClientError::Fdb(e)
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Fdb(e) => write!(f, "{e}"),
            ClientError::Decode(e) => write!(f, "undecodable reply: {e}"),
        }
    }
}

/// What the core tells the driver or the application.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// Open a connection to `addr` and report back with `handle_connected` /
    /// `handle_connect_failed`.
    Connect {
        conn: ConnectionId,
        addr: NetworkAddress,
    },
    /// Close this connection's socket; the core is done with it.
    Close {
        conn: ConnectionId,
        reason: ConnectionError,
    },
    /// New cluster information arrived (proxies changed).
    ClusterInfo {
        id: Uid,
        grv_proxies: usize,
        commit_proxies: usize,
    },
    /// A coordinator redirected us: the cluster now lives at this connection string. The
    /// core already switched to it; [`Event::ClusterFileChanged`] follows once one of its
    /// coordinators answers.
    Forward { connection_string: Bytes },
    /// Look up `host` (a coordinator named in the connection string) and report its addresses
    /// with [`Client::handle_resolved`] (an empty list if the lookup failed).
    Resolve { host: String, port: u16 },
    /// The core now uses this connection string, and a coordinator in it answered: a driver
    /// that read a cluster file replaces it with [`ClusterFile::file_contents`] (libfdb_c
    /// persists a forwarded connection string at exactly this point).
    ClusterFileChanged { cluster: ClusterFile },
    /// A full round of coordinators failed. A driver that read a cluster file reads it again
    /// and, if it now names other coordinators (an operator changed them), hands them over
    /// with [`Client::set_cluster`].
    CoordinatorsUnreachable,
    /// An application request finished (see [`Reply`] for what each request returns).
    Complete {
        req: RequestId,
        result: Result<Reply, ClientError>,
    },
}

/// What a finished request returns.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// A read version ([`Client::get_read_version`], [`Client::tx_read_version`]).
    Version(Version),
    /// A value ([`Client::get`]).
    Value(Option<Bytes>),
    /// A key ([`Client::get_key`]).
    Key(Bytes),
    /// Rows ([`Client::get_range`]).
    Range(crate::transaction::RangeResult),
    /// A commit: its version (`-1` for a read-only transaction) and versionstamp.
    Committed {
        version: Version,
        versionstamp: Option<[u8; 10]>,
    },
    /// `on_error` decided to retry: the transaction is reset and may run again.
    Retry,
    /// A watch fired: the key changed at this version.
    WatchFired(Version),
    /// An estimated size in bytes ([`Client::get_estimated_range_size_bytes`]).
    Size(i64),
    /// Keys ([`Client::get_range_split_points`]).
    Keys(Vec<Bytes>),
}

/// Settings of a [`Client`].
#[derive(Clone, Debug)]
pub struct ClientConfig {
    pub cluster: ClusterFile,
    /// Seeds all randomness.
    pub seed: u64,
    /// Sent to coordinators for their client statistics.
    pub trace_log_group: Bytes,
    /// The client version announced to the cluster.
    pub client_version: Bytes,
}

impl ClientConfig {
    pub fn new(cluster: ClusterFile, seed: u64) -> Self {
        ClientConfig {
            cluster,
            seed,
            trace_log_group: Bytes::from_static(b"default"),
            client_version: Bytes::from_static(b"7.3.77"),
        }
    }
}

/// Who waits for a read version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GrvWaiter {
    /// [`Client::get_read_version`].
    Request(RequestId),
    /// A transaction's first read or its commit.
    Tx(crate::transaction::TransactionId),
}

/// What a reply token is waiting for.
#[derive(Debug)]
pub(crate) enum Pending {
    OpenDatabase,
    Grv {
        flags: u32,
        waiters: Vec<GrvWaiter>,
    },
    /// A watch's check that the committed version reached the version it fired at.
    CommittedVersion {
        op: RequestId,
    },
    /// A key-location lookup for `key` (keys before it when `reverse`).
    Locations {
        key: Bytes,
        reverse: bool,
    },
    /// A storage read or watch for operation `op`.
    Storage {
        op: RequestId,
    },
    /// A commit of the transaction behind operation `op`.
    Commit {
        op: RequestId,
    },
    /// Part of a `\xff\xff/status/json` read.
    Status {
        op: RequestId,
        part: crate::status::StatusPart,
    },
    /// One shard's request of a metrics read (`epoch`: its pass).
    Metrics {
        op: RequestId,
        part: u32,
        epoch: u32,
    },
}

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PeerState {
    /// The address failed recently: connect at this time (`connectionKeeper`'s
    /// `reconnectionDelay`). Requests queue meanwhile.
    Waiting(Instant),
    /// The driver was asked to connect; it must have by this time.
    Connecting(Instant),
    Connected,
}

#[derive(Debug)]
pub(crate) struct Peer {
    pub(crate) addr: NetworkAddress,
    pub(crate) conn: Connection,
    pub(crate) state: PeerState,
    /// Requests waiting on this connection: (reply token, destination token).
    pub(crate) pending: Vec<(Uid, Uid)>,
}

/// An address as FlowTransport compares peers: IP, port and TLS (not `from_hostname`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct AddrKey {
    ip: [u8; 16],
    v6: bool,
    port: u16,
    tls: bool,
}

impl AddrKey {
    pub(crate) fn of(a: &NetworkAddress) -> AddrKey {
        let (ip, v6) = match a.ip {
            IpAddress::V4(v) => {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&v.to_be_bytes());
                (b, false)
            }
            IpAddress::V6(b) => (b, true),
        };
        AddrKey {
            ip,
            v6,
            port: a.port,
            tls: a.is_tls(),
        }
    }
}

/// FlowTransport's per-address reconnection state (`Peer::lastConnectTime`,
/// `Peer::reconnectionDelay`), kept across connections.
#[derive(Clone, Copy, Debug)]
struct Backoff {
    last_connect: Instant,
    delay: Duration,
    /// The last connection to this address failed and none succeeded since.
    failed: bool,
}

/// One coordinator of the connection string.
#[derive(Clone, Debug)]
enum CoordinatorSlot {
    Address(NetworkAddress),
    /// A host name, and the address it last resolved to (until a request fails on it).
    Hostname {
        host: String,
        port: u16,
        tls: bool,
        resolved: Option<NetworkAddress>,
    },
}

impl CoordinatorSlot {
    fn describe(&self) -> String {
        match self {
            CoordinatorSlot::Address(a) => alloc::format!("{a}"),
            CoordinatorSlot::Hostname { host, port, .. } => alloc::format!("{host}:{port}"),
        }
    }
}

fn wire_address(a: &crate::cluster_file::NetworkAddress) -> NetworkAddress {
    NetworkAddress {
        ip: IpAddress::from(a.ip),
        port: a.port,
        flags: if a.tls { NetworkAddress::FLAG_TLS } else { 0 },
        from_hostname: false,
    }
}

/// What the coordinators are told about the connection string: its IP coordinators and its
/// host names, in connection-string order (`req.coordinators = cs.coords`,
/// `req.hostnames = cs.hostnames`).
fn wire_coordinators(cluster: &ClusterFile) -> (Vec<NetworkAddress>, Vec<Hostname>) {
    let mut addrs = Vec::new();
    let mut hosts = Vec::new();
    for c in &cluster.coordinators {
        match c {
            Coordinator::Address(a) => addrs.push(wire_address(a)),
            Coordinator::Hostname { host, port, tls } => hosts.push(Hostname {
                host: Bytes::from(host.clone().into_bytes()),
                service: Bytes::from(alloc::format!("{port}").into_bytes()),
                is_tls: *tls,
            }),
        }
    }
    (addrs, hosts)
}

/// Why requests on a connection are lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loss {
    /// The connection failed (FDB: the request may have been delivered).
    Disconnected,
    /// The process does not know the endpoint (FDB: `endpointNotFound`, then
    /// `request_maybe_delivered` for the waiting request).
    EndpointNotFound,
    /// The endpoint answered `broken_promise`: its role ended (same handling).
    BrokenPromise,
    /// New proxies replaced the ones the request went to (`onProxiesChanged`).
    ProxiesChanged,
}

/// The client protocol core. See the module docs for the driver contract.
pub struct Client {
    pub(crate) cfg: ClientConfig,
    pub(crate) rng: Rng,
    pub(crate) now: Instant,
    next_conn: u64,
    pub(crate) next_req: u64,
    pub(crate) peers: BTreeMap<ConnectionId, Peer>,
    pub(crate) pending: BTreeMap<Uid, (ConnectionId, Pending)>,
    pub(crate) events: VecDeque<Event>,
    coordinators: Vec<CoordinatorSlot>,
    /// What `OpenDatabaseCoordRequest` says about the connection string.
    wire_coordinators: Vec<NetworkAddress>,
    wire_hostnames: Vec<Hostname>,
    coordinator_index: usize,
    success_index: usize,
    /// Earliest time to ask a coordinator again (after a full failed round).
    open_db_at: Option<Instant>,
    open_db_outstanding: bool,
    /// The driver is resolving the current coordinator's host name.
    resolving: bool,
    /// We follow a forward whose connection string no coordinator confirmed yet.
    forward_unconfirmed: bool,
    backoff: BTreeMap<AddrKey, Backoff>,
    /// Endpoints a process said it does not know (`SimpleFailureMonitor::failedEndpoints`).
    failed_endpoints: BTreeSet<(AddrKey, Uid)>,
    /// `shrinkProxyList`'s memory: the proxy ids last seen and the subset chosen from them.
    last_grv_ids: Vec<Uid>,
    last_grv: Vec<GrvProxyInterface>,
    last_commit_ids: Vec<Uid>,
    last_commit: Vec<CommitProxyInterface>,
    pub(crate) db_info: Option<ClientDBInfo>,
    /// Read-version requests waiting to be sent, by request flags.
    grv_queue: BTreeMap<u32, Vec<GrvWaiter>>,
    grv_in_flight: BTreeMap<u32, bool>,
    pub(crate) engine: crate::transaction::Engine,
}

impl Client {
    /// Creates the core and starts bootstrapping at once (the first event asks for a
    /// connection to a coordinator).
    pub fn new(cfg: ClientConfig, now: Instant) -> Self {
        let mut rng = Rng::new(cfg.seed);
        let coordinators = Self::coordinator_slots(&cfg.cluster, &mut rng);
        let (wire_coordinators, wire_hostnames) = wire_coordinators(&cfg.cluster);
        let mut c = Client {
            cfg,
            rng,
            now,
            next_conn: 1,
            next_req: 1,
            peers: BTreeMap::new(),
            pending: BTreeMap::new(),
            events: VecDeque::new(),
            coordinators,
            wire_coordinators,
            wire_hostnames,
            coordinator_index: 0,
            success_index: 0,
            open_db_at: Some(now),
            open_db_outstanding: false,
            resolving: false,
            forward_unconfirmed: false,
            backoff: BTreeMap::new(),
            failed_endpoints: BTreeSet::new(),
            last_grv_ids: Vec::new(),
            last_grv: Vec::new(),
            last_commit_ids: Vec::new(),
            last_commit: Vec::new(),
            db_info: None,
            grv_queue: BTreeMap::new(),
            grv_in_flight: BTreeMap::new(),
            engine: crate::transaction::Engine::default(),
        };
        c.drive(now);
        c
    }

    /// The coordinators in the order `monitorProxiesOneGeneration` tries them: host names,
    /// then addresses, shuffled so clients spread over them.
    fn coordinator_slots(cluster: &ClusterFile, rng: &mut Rng) -> Vec<CoordinatorSlot> {
        let hosts = cluster.coordinators.iter().filter_map(|c| match c {
            Coordinator::Hostname { host, port, tls } => Some(CoordinatorSlot::Hostname {
                host: host.clone(),
                port: *port,
                tls: *tls,
                resolved: None,
            }),
            Coordinator::Address(_) => None,
        });
        let addrs = cluster.coordinators.iter().filter_map(|c| match c {
            Coordinator::Address(a) => Some(CoordinatorSlot::Address(wire_address(a))),
            Coordinator::Hostname { .. } => None,
        });
        let mut slots: Vec<CoordinatorSlot> = hosts.chain(addrs).collect();
        for i in (1..slots.len()).rev() {
            let j = rng.below(i + 1);
            slots.swap(i, j);
        }
        slots
    }

    /// Replaces the coordinator list with these addresses, in this order (the connection
    /// string itself stays; see [`Client::set_cluster`] to change it).
    pub fn set_coordinators(&mut self, now: Instant, coordinators: Vec<NetworkAddress>) {
        self.now = now;
        self.wire_coordinators = coordinators.clone();
        self.wire_hostnames = Vec::new();
        self.coordinators = coordinators
            .into_iter()
            .map(CoordinatorSlot::Address)
            .collect();
        self.restart_bootstrap(now);
        self.drive(now);
    }

    /// Switches to another connection string (a re-read cluster file, say): the coordinator
    /// request in flight is abandoned and the new coordinators are asked at once.
    pub fn set_cluster(&mut self, now: Instant, cluster: ClusterFile) {
        self.now = now;
        self.forward_unconfirmed = false;
        self.switch_cluster(cluster);
        self.drive(now);
    }

    /// The connection string in use (changes when a coordinator forwards us).
    pub fn cluster(&self) -> &ClusterFile {
        &self.cfg.cluster
    }

    fn switch_cluster(&mut self, cluster: ClusterFile) {
        tracing::info!(connection_string = %cluster, "switching coordinators");
        self.coordinators = Self::coordinator_slots(&cluster, &mut self.rng);
        let (addrs, hosts) = wire_coordinators(&cluster);
        self.wire_coordinators = addrs;
        self.wire_hostnames = hosts;
        self.cfg.cluster = cluster;
        self.restart_bootstrap(self.now);
    }

    /// Forgets the coordinator request in flight and starts a new round at once.
    fn restart_bootstrap(&mut self, now: Instant) {
        let stale: Vec<Uid> = self
            .pending
            .iter()
            .filter(|(_, (_, p))| matches!(p, Pending::OpenDatabase))
            .map(|(t, _)| *t)
            .collect();
        for t in stale {
            self.forget(t);
        }
        self.open_db_outstanding = false;
        self.resolving = false;
        self.coordinator_index = 0;
        self.success_index = 0;
        self.open_db_at = Some(now);
    }

    /// The driver resolved `host:port` (asked by [`Event::Resolve`]); `addrs` is empty if the
    /// lookup failed. Like `Hostname::resolve`, one of the addresses is picked at random.
    pub fn handle_resolved(
        &mut self,
        now: Instant,
        host: &str,
        port: u16,
        addrs: &[core::net::IpAddr],
    ) {
        self.now = now;
        if !self.resolving {
            return;
        }
        let pick = if addrs.is_empty() {
            None
        } else {
            Some(addrs[self.rng.below(addrs.len())])
        };
        let Some(CoordinatorSlot::Hostname {
            host: h,
            port: p,
            tls,
            resolved,
        }) = self.coordinators.get_mut(self.coordinator_index)
        else {
            return;
        };
        if h != host || *p != port {
            return;
        }
        self.resolving = false;
        match pick {
            Some(ip) => {
                let addr = NetworkAddress {
                    ip: IpAddress::from(ip),
                    port,
                    flags: if *tls { NetworkAddress::FLAG_TLS } else { 0 },
                    from_hostname: true,
                };
                tracing::debug!(host, port, addr = %addr, "coordinator resolved");
                *resolved = Some(addr);
                self.open_db_at = Some(now);
            }
            None => {
                // `tryGetReplyFromHostname`: `lookup_failed`, the next coordinator.
                tracing::warn!(host, port, "coordinator host name did not resolve");
                self.next_coordinator();
            }
        }
        self.drive(now);
    }

    /// The current cluster information, once known.
    pub fn cluster_info(&self) -> Option<&ClientDBInfo> {
        self.db_info.as_ref()
    }

    /// The next event for the driver or application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Bytes to write, for connections the driver has reported connected.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        for (id, p) in self.peers.iter_mut() {
            if p.state != PeerState::Connected {
                continue;
            }
            if let Some(data) = p.conn.poll_transmit() {
                return Some(Transmit { conn: *id, data });
            }
        }
        None
    }

    /// The earliest time at which [`Client::handle_timeout`] must run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let conns = self.peers.values().filter_map(|p| match p.state {
            PeerState::Connected => p.conn.poll_timeout(),
            PeerState::Waiting(t) | PeerState::Connecting(t) => Some(t),
        });
        let open = if self.open_db_outstanding || self.resolving {
            None
        } else {
            self.open_db_at
        };
        conns.chain(open).chain(self.engine.next_timer()).min()
    }

    /// Lets time pass.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        let ids: Vec<ConnectionId> = self.peers.keys().copied().collect();
        for id in ids {
            let Some(p) = self.peers.get_mut(&id) else {
                continue;
            };
            match p.state {
                PeerState::Waiting(t) if now >= t => self.start_connect(id),
                PeerState::Waiting(_) => {}
                PeerState::Connecting(deadline) if now >= deadline => {
                    // `connectionKeeper`: connect() did not finish in time.
                    self.drop_peer(id, ConnectionError::Timeout);
                }
                PeerState::Connecting(_) => {}
                PeerState::Connected => {
                    p.conn.set_outstanding(p.pending.len());
                    if let Err(e) = p.conn.handle_timeout(now, &mut self.rng) {
                        self.drop_peer(id, e);
                    }
                }
            }
        }
        self.fire_timers(now);
        self.drive(now);
    }

    /// The driver connected `conn`.
    pub fn handle_connected(&mut self, conn: ConnectionId, now: Instant) {
        self.now = now;
        let Some(p) = self.peers.get_mut(&conn) else {
            return;
        };
        if !matches!(p.state, PeerState::Connecting(_)) {
            return;
        }
        p.state = PeerState::Connected;
        tracing::debug!(conn = conn.0, addr = %p.addr, "connected");
        if let Some(b) = self.backoff.get_mut(&AddrKey::of(&p.addr)) {
            b.failed = false;
        }
    }

    /// The driver could not connect `conn`.
    pub fn handle_connect_failed(&mut self, conn: ConnectionId, now: Instant) {
        self.now = now;
        self.drop_peer(conn, ConnectionError::Closed);
        self.drive(now);
    }

    /// The driver saw `conn` close.
    pub fn handle_closed(&mut self, conn: ConnectionId, now: Instant) {
        self.now = now;
        self.drop_peer(conn, ConnectionError::Closed);
        self.drive(now);
    }

    /// Bytes read from `conn`.
    pub fn handle_input(&mut self, conn: ConnectionId, now: Instant, data: &[u8]) {
        self.now = now;
        let Some(p) = self.peers.get_mut(&conn) else {
            return;
        };
        if p.state != PeerState::Connected {
            return;
        }
        if let Err(e) = p.conn.handle_input(now, data) {
            self.drop_peer(conn, e);
            self.drive(now);
            return;
        }
        while let Some(pkt) = self.peers.get_mut(&conn).and_then(|p| p.conn.poll_packet()) {
            if pkt.token == well_known::ENDPOINT_NOT_FOUND {
                self.on_endpoint_not_found(conn, &pkt.message);
                continue;
            }
            let Some((on, pending)) = self.pending.remove(&pkt.token) else {
                // A reply to something we gave up on, or a stray packet: ignore it, as FDB
                // does for unknown endpoints on the client side.
                continue;
            };
            let mut dest = None;
            if let Some(p) = self.peers.get_mut(&on) {
                dest = p.pending.iter().find(|(t, _)| *t == pkt.token).map(|e| e.1);
                p.pending.retain(|(t, _)| *t != pkt.token);
            }
            if reply_error(&pkt.message) == Some(ErrorCode::BROKEN_PROMISE) {
                // The role behind the endpoint ended (a recovery, an excluded server) and
                // dropped its promises. `waitValueOrSignal` takes that for the endpoint's
                // failure: it is marked gone and the request fails over (commits become
                // `request_maybe_delivered`), as for the endpoint-not-found notice.
                tracing::info!(token = %pkt.token, "broken promise: the endpoint is gone");
                if let Some(dest) = dest {
                    self.endpoint_gone(on, dest);
                }
                self.lose(pending, Loss::BrokenPromise);
                continue;
            }
            self.complete(pending, &pkt.message);
        }
        self.drive(now);
    }

    /// Asks for a read version. The answer comes as [`Event::Complete`] with
    /// [`Reply::Version`].
    pub fn get_read_version(&mut self, now: Instant, priority: Priority) -> RequestId {
        self.now = now;
        let id = self.new_request_id();
        self.queue_grv(priority.flags(), GrvWaiter::Request(id));
        self.drive(now);
        id
    }

    pub(crate) fn new_request_id(&mut self) -> RequestId {
        let id = RequestId(self.next_req);
        self.next_req += 1;
        id
    }

    pub(crate) fn queue_grv(&mut self, flags: u32, waiter: GrvWaiter) {
        self.grv_queue.entry(flags).or_default().push(waiter);
    }

    pub(crate) fn finish(&mut self, req: RequestId, result: Result<Reply, ClientError>) {
        self.events.push_back(Event::Complete { req, result });
    }

    fn complete(&mut self, pending: Pending, message: &Bytes) {
        match pending {
            Pending::OpenDatabase => {
                self.open_db_outstanding = false;
                match decode_reply::<ClientDBInfo>(message) {
                    Ok(ErrorOr::Ok(info)) => self.accept_db_info(info),
                    Ok(ErrorOr::Err(e)) => {
                        tracing::debug!(error = %e, "coordinator answered with an error");
                        self.next_coordinator();
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "undecodable ClientDBInfo");
                        self.next_coordinator();
                    }
                }
            }
            Pending::Grv { flags, waiters } => {
                self.grv_in_flight.insert(flags, false);
                let mut locked = false;
                let result = match decode_reply::<GetReadVersionReply>(message) {
                    Ok(ErrorOr::Ok(r)) => {
                        locked = r.locked;
                        Ok(r.version)
                    }
                    Ok(ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
                    Err(e) => Err(ClientError::Decode(e)),
                };
                for w in waiters {
                    match w {
                        GrvWaiter::Request(req) => {
                            self.finish(req, result.clone().map(Reply::Version))
                        }
                        GrvWaiter::Tx(tx) => self.on_tx_read_version(tx, result.clone(), locked),
                    }
                }
            }
            Pending::CommittedVersion { op } => {
                let r = match decode_reply::<GetReadVersionReply>(message) {
                    Ok(ErrorOr::Ok(r)) => Ok(r.version),
                    Ok(ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
                    Err(e) => Err(ClientError::Decode(e)),
                };
                self.on_watch_committed(op, r)
            }
            Pending::Locations { key, reverse } => self.on_locations(key, reverse, message),
            Pending::Storage { op } => self.on_storage_reply(op, message),
            Pending::Commit { op } => self.on_commit_reply(op, message),
            Pending::Status { op, part } => self.on_status_reply(op, part, message),
            Pending::Metrics { op, part, epoch } => self.on_metrics_reply(op, part, epoch, message),
        }
    }

    fn accept_db_info(&mut self, mut info: ClientDBInfo) {
        if let Some(fwd) = info.forward.take() {
            self.follow_forward(fwd);
            return;
        }
        self.success_index = self.coordinator_index;
        if self.forward_unconfirmed {
            // `monitorProxiesOneGeneration`: the first answer from the forwarded coordinators
            // makes the intermediate connection string the persisted one.
            self.forward_unconfirmed = false;
            self.events.push_back(Event::ClusterFileChanged {
                cluster: self.cfg.cluster.clone(),
            });
        }
        self.shrink_proxy_list(&mut info);
        self.events.push_back(Event::ClusterInfo {
            id: info.id,
            grv_proxies: info.grv_proxies.len(),
            commit_proxies: info.commit_proxies.len(),
        });
        let proxies_changed = self.db_info.as_ref().is_some_and(|old| {
            old.commit_proxies != info.commit_proxies || old.grv_proxies != info.grv_proxies
        });
        if self.db_info.as_ref().map(|i| i.id) != Some(info.id) {
            tracing::info!(
                id = %info.id,
                grv_proxies = info.grv_proxies.len(),
                commit_proxies = info.commit_proxies.len(),
                proxies_changed,
                "cluster info"
            );
        }
        self.db_info = Some(info);
        if proxies_changed {
            // The location cache stays: libfdb_c keeps it across proxy changes and relies on
            // `wrong_shard_server` / failed endpoints to correct it.
            self.fail_over_from_old_proxies();
        }
        self.wake_cluster_waiters();
        // Long-poll for the next change right away.
        self.open_db_at = Some(self.now);
    }

    /// `shrinkProxyList`: with more proxies than the client may talk to, use a random subset,
    /// and keep using the same subset while the proxies stay the same.
    fn shrink_proxy_list(&mut self, info: &mut ClientDBInfo) {
        if info.commit_proxies.len() > MAX_COMMIT_PROXY_CONNECTIONS {
            let ids: Vec<Uid> = info
                .commit_proxies
                .iter()
                .map(|p| p.commit.endpoint.token)
                .collect();
            if ids != self.last_commit_ids {
                self.last_commit_ids = ids;
                let mut chosen = info.commit_proxies.clone();
                self.shuffle(&mut chosen);
                chosen.truncate(MAX_COMMIT_PROXY_CONNECTIONS);
                self.last_commit = chosen;
            }
            info.commit_proxies = self.last_commit.clone();
        }
        if info.grv_proxies.len() > MAX_GRV_PROXY_CONNECTIONS {
            let ids: Vec<Uid> = info
                .grv_proxies
                .iter()
                .map(|p| p.get_consistent_read_version.endpoint.token)
                .collect();
            if ids != self.last_grv_ids {
                self.last_grv_ids = ids;
                let mut chosen = info.grv_proxies.clone();
                self.shuffle(&mut chosen);
                chosen.truncate(MAX_GRV_PROXY_CONNECTIONS);
                self.last_grv = chosen;
            }
            info.grv_proxies = self.last_grv.clone();
        }
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.rng.below(i + 1);
            v.swap(i, j);
        }
    }

    /// New proxies: what was sent to the old ones is re-sent (read versions, locations) or
    /// may have been committed (`tryCommit` throws `request_maybe_delivered` on
    /// `onProxiesChanged`).
    fn fail_over_from_old_proxies(&mut self) {
        let stale: Vec<Uid> = self
            .pending
            .iter()
            .filter(|(_, (_, p))| {
                matches!(
                    p,
                    Pending::Grv { .. } | Pending::Locations { .. } | Pending::Commit { .. }
                )
            })
            .map(|(t, _)| *t)
            .collect();
        for t in stale {
            if let Some(p) = self.forget(t) {
                self.lose(p, Loss::ProxiesChanged);
            }
        }
    }

    /// A coordinator says the cluster moved: switch to the new connection string and carry
    /// on bootstrapping there (`MonitorProxiesForwarding`).
    fn follow_forward(&mut self, fwd: Bytes) {
        match ClusterFile::parse_bytes(&fwd) {
            Ok(cluster) if !cluster.coordinators.is_empty() => {
                tracing::info!(
                    from = %self.cfg.cluster,
                    to = %cluster,
                    "coordinators forwarded the client"
                );
                self.events.push_back(Event::Forward {
                    connection_string: fwd,
                });
                self.forward_unconfirmed = true;
                self.switch_cluster(cluster);
            }
            _ => {
                tracing::warn!("coordinator forwarded to an invalid connection string");
                self.next_coordinator();
            }
        }
    }

    /// Every coordinator: how the cluster file names it, and its address if known (a host
    /// name not resolved yet has none).
    pub(crate) fn coordinator_targets(&self) -> Vec<(String, Option<NetworkAddress>)> {
        self.coordinators
            .iter()
            .map(|c| match c {
                CoordinatorSlot::Address(a) => (c.describe(), Some(a.clone())),
                CoordinatorSlot::Hostname { resolved, .. } => (c.describe(), resolved.clone()),
            })
            .collect()
    }

    fn next_coordinator(&mut self) {
        if self.coordinators.is_empty() {
            return;
        }
        self.coordinator_index = (self.coordinator_index + 1) % self.coordinators.len();
        let full_round = self.coordinator_index == self.success_index;
        tracing::debug!(
            coordinator = %self.coordinators[self.coordinator_index].describe(),
            full_round,
            "trying the next coordinator"
        );
        self.open_db_at = Some(if full_round {
            self.now + COORDINATOR_RECONNECTION_DELAY
        } else {
            self.now
        });
        if full_round {
            self.events.push_back(Event::CoordinatorsUnreachable);
        }
    }

    /// Sends whatever can be sent now.
    pub(crate) fn drive(&mut self, now: Instant) {
        if !self.open_db_outstanding
            && !self.resolving
            && self.open_db_at.is_some_and(|t| now >= t)
            && !self.coordinators.is_empty()
        {
            self.open_db_at = None;
            self.send_open_database(now);
        }
        // Operations first: they may queue read versions to send right below.
        if self.db_info.is_some() {
            self.run_ready_ops();
        }
        if self
            .db_info
            .as_ref()
            .is_some_and(|i| !i.grv_proxies.is_empty())
        {
            let ready: Vec<u32> = self
                .grv_queue
                .iter()
                .filter(|(f, q)| {
                    !q.is_empty() && !self.grv_in_flight.get(f).copied().unwrap_or(false)
                })
                .map(|(f, _)| *f)
                .collect();
            for f in ready {
                self.send_grv(now, f);
            }
        }
    }

    fn send_open_database(&mut self, now: Instant) {
        let addr = match &self.coordinators[self.coordinator_index] {
            CoordinatorSlot::Address(a) => a.clone(),
            CoordinatorSlot::Hostname {
                resolved: Some(a), ..
            } => a.clone(),
            CoordinatorSlot::Hostname { host, port, .. } => {
                // `Hostname::resolve` happens outside the core.
                self.resolving = true;
                self.events.push_back(Event::Resolve {
                    host: host.clone(),
                    port: *port,
                });
                return;
            }
        };
        let token = self.rng.uid();
        let req = OpenDatabaseCoordRequest {
            issues: Vec::new(),
            supported_versions: alloc::vec![ClientVersionRef {
                client_version: self.cfg.client_version.clone(),
                source_version: Bytes::new(),
                // FDB prints it with `%llx`: no leading zero.
                protocol_version: Bytes::from(alloc::format!(
                    "{:x}",
                    ProtocolVersion::V7_3.version()
                )),
            }],
            trace_log_group: self.cfg.trace_log_group.clone(),
            known_client_info_id: self.db_info.as_ref().map(|i| i.id).unwrap_or_default(),
            cluster_key: Bytes::from(self.cfg.cluster.cluster_key()),
            coordinators: self.wire_coordinators.clone(),
            reply: ReplyPromise { token },
            hostnames: self.wire_hostnames.clone(),
            internal: false,
        };
        self.open_db_outstanding = true;
        self.send(
            now,
            &addr,
            well_known::CLIENT_LEADER_REG_OPEN_DATABASE,
            &req,
            token,
            Pending::OpenDatabase,
        );
    }

    /// Whether a process told us it does not know this endpoint.
    pub(crate) fn endpoint_failed(&self, addr: &NetworkAddress, token: Uid) -> bool {
        self.failed_endpoints.contains(&(AddrKey::of(addr), token))
    }

    /// Whether the last connection to `addr` failed and none succeeded since.
    fn address_failed(&self, addr: &NetworkAddress) -> bool {
        self.backoff
            .get(&AddrKey::of(addr))
            .is_some_and(|b| b.failed)
    }

    /// Picks one of `n` alternatives like `basicLoadBalance`: never one whose endpoint is known
    /// gone (`None` if all are: wait for new proxies), preferably one whose address did not
    /// just fail.
    fn pick_alternative(&mut self, endpoints: &[(NetworkAddress, Uid)]) -> Option<usize> {
        let alive: Vec<usize> = (0..endpoints.len())
            .filter(|&i| !self.endpoint_failed(&endpoints[i].0, endpoints[i].1))
            .collect();
        if alive.is_empty() {
            return None;
        }
        let healthy: Vec<usize> = alive
            .iter()
            .copied()
            .filter(|&i| !self.address_failed(&endpoints[i].0))
            .collect();
        let from = if healthy.is_empty() { &alive } else { &healthy };
        Some(from[self.rng.below(from.len())])
    }

    /// A commit proxy to send stream `stream` to (see `CommitProxyInterface`), skipping
    /// proxies whose endpoint is gone; `None` while there is none (wait for the cluster).
    pub(crate) fn pick_commit_proxy(&mut self, stream: u32) -> Option<CommitProxyInterface> {
        let proxies = self.db_info.as_ref()?.commit_proxies.clone();
        let endpoints: Vec<(NetworkAddress, Uid)> = proxies
            .iter()
            .map(|p| {
                (
                    p.commit.endpoint.addresses.address.clone(),
                    p.stream(stream),
                )
            })
            .collect();
        let i = self.pick_alternative(&endpoints)?;
        Some(proxies[i].clone())
    }

    /// A GRV proxy's read-version endpoint to ask, skipping proxies whose endpoint is gone;
    /// `None` while there is none (wait for the next `ClientDBInfo`).
    pub(crate) fn grv_endpoint(&mut self) -> Option<(NetworkAddress, Uid)> {
        let info = self.db_info.as_ref()?;
        let mut endpoints: Vec<(NetworkAddress, Uid)> = info
            .grv_proxies
            .iter()
            .map(|p| {
                let e = &p.get_consistent_read_version.endpoint;
                (e.addresses.address.clone(), e.token)
            })
            .collect();
        let i = self.pick_alternative(&endpoints)?;
        Some(endpoints.swap_remove(i))
    }

    fn send_grv(&mut self, now: Instant, flags: u32) {
        let Some((addr, dest)) = self.grv_endpoint() else {
            return;
        };
        let queue = self.grv_queue.entry(flags).or_default();
        let n = queue.len().min(MAX_GRV_BATCH);
        let waiters: Vec<GrvWaiter> = queue.drain(..n).collect();
        let token = self.rng.uid();
        let req = GetReadVersionRequest {
            transaction_count: waiters.len() as u32,
            flags,
            tags: Vec::new(),
            debug_id: None,
            reply: ReplyPromise { token },
            // libfdb_c always sends a fresh span id, with a zero trace id when unsampled.
            span_context: SpanContext {
                trace_id: Uid::default(),
                span_id: self.rng.next_u64(),
                flags: 0,
            },
            max_version: INVALID_VERSION,
        };
        self.grv_in_flight.insert(flags, true);
        self.send(
            now,
            &addr,
            dest,
            &req,
            token,
            Pending::Grv { flags, waiters },
        );
    }

    /// Sends `msg` to endpoint `dest` at `addr`, expecting a reply on token `reply`.
    pub(crate) fn send<M: Message>(
        &mut self,
        now: Instant,
        addr: &NetworkAddress,
        dest: Uid,
        msg: &M,
        reply: Uid,
        pending: Pending,
    ) {
        let conn = self.peer_for(now, addr);
        let bytes = encode(msg);
        let p = self
            .peers
            .get_mut(&conn)
            .expect("peer_for returns a live peer");
        p.conn.send(now, dest, &bytes);
        p.pending.push((reply, dest));
        self.pending.insert(reply, (conn, pending));
    }

    /// The connection to `addr`, opening one if needed (one connection per address, as
    /// FlowTransport keeps one `Peer` per address). An address that failed recently is
    /// connected to only after its reconnection delay.
    fn peer_for(&mut self, now: Instant, addr: &NetworkAddress) -> ConnectionId {
        let key = AddrKey::of(addr);
        if let Some((id, _)) = self.peers.iter().find(|(_, p)| AddrKey::of(&p.addr) == key) {
            return *id;
        }
        let id = ConnectionId(self.next_conn);
        self.next_conn += 1;
        let conn = Connection::new(now, addr.is_tls(), ProtocolVersion::V7_3);
        // `delayJittered(max(0, lastConnectTime + reconnectionDelay - now))`.
        let wait = self.backoff.get(&key).map_or(Duration::ZERO, |b| {
            (b.last_connect + b.delay).saturating_since(now)
        });
        let wait = if wait.is_zero() {
            wait
        } else {
            self.rng.jittered(wait)
        };
        self.peers.insert(
            id,
            Peer {
                addr: addr.clone(),
                conn,
                state: PeerState::Waiting(now + wait),
                pending: Vec::new(),
            },
        );
        if wait.is_zero() {
            self.start_connect(id);
        } else {
            tracing::debug!(
                conn = id.0,
                addr = %addr,
                delay_ms = wait.as_millis() as u64,
                "reconnecting after a delay"
            );
        }
        id
    }

    /// Asks the driver to connect a waiting peer.
    fn start_connect(&mut self, id: ConnectionId) {
        let now = self.now;
        let Some(p) = self.peers.get_mut(&id) else {
            return;
        };
        p.state = PeerState::Connecting(now + CONNECT_TIMEOUT);
        let key = AddrKey::of(&p.addr);
        let b = self.backoff.entry(key).or_insert(Backoff {
            last_connect: now,
            delay: INITIAL_RECONNECTION_TIME,
            failed: false,
        });
        b.last_connect = now;
        tracing::debug!(conn = id.0, addr = %p.addr, "connecting");
        self.events.push_back(Event::Connect {
            conn: id,
            addr: p.addr.clone(),
        });
    }

    /// Handles FDB's endpoint-not-found notice: its payload is the token the process does not
    /// know (a bare `UID` root; also accepted wrapped in a one-member table).
    fn on_endpoint_not_found(&mut self, conn: ConnectionId, message: &Bytes) {
        let plain = decode_root::<Uid>(message).ok();
        let wrapped = decode_root::<EnsureTable<Uid>>(message).ok().map(|t| t.0);
        let Some(peer) = self.peers.get_mut(&conn) else {
            return;
        };
        let hit = |t: Uid| Some(t) == plain || Some(t) == wrapped;
        let Some(dest) = peer
            .pending
            .iter()
            .map(|(_, d)| *d)
            .find(|d| hit(*d))
            .or(plain)
        else {
            return;
        };
        tracing::info!(addr = %peer.addr, token = %dest, "endpoint not found");
        let lost: Vec<Uid> = peer
            .pending
            .iter()
            .filter(|(_, d)| *d == dest)
            .map(|(r, _)| *r)
            .collect();
        self.endpoint_gone(conn, dest);
        for r in lost {
            if let Some(p) = self.forget(r) {
                self.lose(p, Loss::EndpointNotFound);
            }
        }
    }

    /// Marks endpoint `dest` of `conn`'s process as gone for good
    /// (`SimpleFailureMonitor::endpointNotFound`). Well-known endpoints are never marked: a
    /// coordinator that lost one will serve it again.
    fn endpoint_gone(&mut self, conn: ConnectionId, dest: Uid) {
        let Some(peer) = self.peers.get(&conn) else {
            return;
        };
        if dest.is_well_known() {
            return;
        }
        if self.failed_endpoints.len() >= MAX_FAILED_ENDPOINTS {
            self.failed_endpoints.clear();
        }
        self.failed_endpoints
            .insert((AddrKey::of(&peer.addr), dest));
    }

    /// Forgets the request waiting on reply token `t`, returning what it waited for.
    fn forget(&mut self, t: Uid) -> Option<Pending> {
        let (conn, p) = self.pending.remove(&t)?;
        if let Some(peer) = self.peers.get_mut(&conn) {
            peer.pending.retain(|(r, _)| *r != t);
        }
        Some(p)
    }

    /// A request will get no reply: retry it, fail it over or fail it, as libfdb_c does.
    fn lose(&mut self, pending: Pending, why: Loss) {
        match pending {
            Pending::OpenDatabase => {
                self.open_db_outstanding = false;
                // `tryGetReplyFromHostname` drops the DNS cache entry on a connection failure.
                if let Some(CoordinatorSlot::Hostname { resolved, .. }) =
                    self.coordinators.get_mut(self.coordinator_index)
                {
                    *resolved = None;
                }
                self.next_coordinator();
            }
            Pending::Grv { flags, waiters } => {
                // Asking for a read version is idempotent: queue it again (at the front)
                // for another proxy, as the load balancer would.
                tracing::debug!(
                    ?why,
                    transactions = waiters.len(),
                    "re-sending read version"
                );
                self.grv_in_flight.insert(flags, false);
                let q = self.grv_queue.entry(flags).or_default();
                let rest = core::mem::take(q);
                q.extend(waiters);
                q.extend(rest);
            }
            Pending::CommittedVersion { op } => self.on_watch_confirm_lost(op),
            Pending::Locations { key, reverse } => {
                tracing::debug!(?why, "re-sending key location lookup");
                self.engine.locating.remove(&(key, reverse));
                // Whoever waited for it asks again (another proxy, or the same one once it
                // is reachable).
                self.wake_cluster_waiters();
            }
            Pending::Storage { op } => {
                tracing::debug!(?why, op = op.0, "storage request lost, failing over");
                self.on_storage_lost(op)
            }
            Pending::Commit { op } => {
                // Even an endpoint-not-found commit surfaces as `commit_unknown_result`:
                // `basicLoadBalance` with `AtMostOnce` turns it into
                // `request_maybe_delivered`, which `tryCommit` reports that way.
                tracing::info!(?why, op = op.0, "commit outcome unknown");
                self.on_commit_lost(op)
            }
            Pending::Status { op, part } => self.on_status_lost(op, part),
            Pending::Metrics { op, part, epoch } => self.on_metrics_lost(op, part, epoch),
        }
    }

    /// Forgets a connection and fails or retries what waited on it.
    fn drop_peer(&mut self, id: ConnectionId, reason: ConnectionError) {
        let Some(peer) = self.peers.remove(&id) else {
            return;
        };
        let now = self.now;
        if matches!(reason, ConnectionError::Idle) {
            tracing::debug!(conn = id.0, addr = %peer.addr, "idle connection closed");
        } else {
            tracing::info!(conn = id.0, addr = %peer.addr, %reason, "connection failed");
        }
        if !matches!(peer.state, PeerState::Waiting(_)) {
            // `connectionKeeper`'s catch block.
            let key = AddrKey::of(&peer.addr);
            if let Some(b) = self.backoff.get_mut(&key) {
                b.delay = if now.saturating_since(b.last_connect) > RECONNECTION_RESET_TIME {
                    INITIAL_RECONNECTION_TIME
                } else {
                    b.delay
                        .mul_f64(RECONNECTION_TIME_GROWTH_RATE)
                        .min(MAX_RECONNECTION_TIME)
                };
                b.failed = true;
            }
            self.prune_backoff(now);
        }
        self.events.push_back(Event::Close { conn: id, reason });
        for (token, _) in peer.pending {
            if let Some((_, p)) = self.pending.remove(&token) {
                self.lose(p, Loss::Disconnected);
            }
        }
    }

    /// Forgets reconnection state nobody needs any more (a `Peer` without references is
    /// destroyed in FlowTransport, and a new one starts afresh).
    fn prune_backoff(&mut self, now: Instant) {
        if self.backoff.len() < 64 {
            return;
        }
        let live: BTreeSet<AddrKey> = self.peers.values().map(|p| AddrKey::of(&p.addr)).collect();
        self.backoff.retain(|k, b| {
            live.contains(k) || now.saturating_since(b.last_connect) <= RECONNECTION_RESET_TIME
        });
    }
}
