//! The client state machine: cluster bootstrap and read versions, without IO.
//!
//! # Driving it
//!
//! A driver owns the sockets and the clock and does exactly this, in a loop:
//!
//! 1. `poll_event()` until `None`. On [`Event::Connect`] open a TCP connection to `addr` and
//!    report [`Client::handle_connected`] or [`Client::handle_connect_failed`]; on
//!    [`Event::Close`] drop that socket. Other events are results for the application.
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
//! pausing [`COORDINATOR_RECONNECTION_DELAY`] after a full round. Read versions go to a GRV
//! proxy; requests that arrive while one is in flight are batched into the next request.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt;
use core::time::Duration;

use crate::cluster_file::{ClusterFile, Coordinator};
use crate::connection::{Connection, ConnectionError};
use crate::error::ErrorCode;
use crate::framing::ProtocolVersion;
use crate::messages::coordination::{ClientDBInfo, ClientVersionRef, OpenDatabaseCoordRequest};
use crate::messages::grv::{GetReadVersionReply, GetReadVersionRequest};
use crate::messages::types::{SpanContext, Version, INVALID_VERSION};
use crate::messages::{decode_reply, ErrorOr, IpAddress, NetworkAddress, ReplyPromise};
use crate::serializer::{encode, DecodeError, Message};
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
    /// A coordinator redirected us: the cluster now lives at this connection string.
    Forward { connection_string: Bytes },
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
}

#[derive(Debug)]
pub(crate) struct Peer {
    pub(crate) addr: NetworkAddress,
    pub(crate) conn: Connection,
    pub(crate) connected: bool,
    /// Reply tokens waiting on this connection.
    pub(crate) pending: Vec<Uid>,
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
    coordinators: Vec<NetworkAddress>,
    coordinator_index: usize,
    success_index: usize,
    /// Earliest time to ask a coordinator again (after a full failed round).
    open_db_at: Option<Instant>,
    open_db_outstanding: bool,
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
        let mut coordinators: Vec<NetworkAddress> = cfg
            .cluster
            .coordinators
            .iter()
            .filter_map(|c| match c {
                Coordinator::Address(a) => Some(NetworkAddress {
                    ip: IpAddress::from(a.ip),
                    port: a.port,
                    flags: if a.tls { NetworkAddress::FLAG_TLS } else { 0 },
                    from_hostname: false,
                }),
                // Name resolution is the driver's job; resolved hostnames arrive through
                // `set_coordinators`.
                Coordinator::Hostname { .. } => None,
            })
            .collect();
        // FDB shuffles the coordinators so clients spread over them.
        for i in (1..coordinators.len()).rev() {
            let j = rng.below(i + 1);
            coordinators.swap(i, j);
        }
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
            coordinator_index: 0,
            success_index: 0,
            open_db_at: Some(now),
            open_db_outstanding: false,
            db_info: None,
            grv_queue: BTreeMap::new(),
            grv_in_flight: BTreeMap::new(),
            engine: crate::transaction::Engine::default(),
        };
        c.drive(now);
        c
    }

    /// Replaces the coordinator list (e.g. after the driver resolved hostnames).
    pub fn set_coordinators(&mut self, now: Instant, coordinators: Vec<NetworkAddress>) {
        self.coordinators = coordinators;
        self.coordinator_index = 0;
        self.success_index = 0;
        if !self.open_db_outstanding {
            self.open_db_at = Some(now);
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
            if !p.connected {
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
        let conns = self
            .peers
            .values()
            .filter(|p| p.connected)
            .filter_map(|p| p.conn.poll_timeout());
        let open = if self.open_db_outstanding {
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
            if !p.connected {
                continue;
            }
            p.conn.set_outstanding(p.pending.len());
            if let Err(e) = p.conn.handle_timeout(now, &mut self.rng) {
                self.drop_peer(id, e);
            }
        }
        self.fire_timers(now);
        self.drive(now);
    }

    /// The driver connected `conn`.
    pub fn handle_connected(&mut self, conn: ConnectionId, now: Instant) {
        self.now = now;
        if let Some(p) = self.peers.get_mut(&conn) {
            p.connected = true;
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
        if let Err(e) = p.conn.handle_input(now, data) {
            self.drop_peer(conn, e);
            self.drive(now);
            return;
        }
        while let Some(pkt) = self.peers.get_mut(&conn).and_then(|p| p.conn.poll_packet()) {
            let Some((on, pending)) = self.pending.remove(&pkt.token) else {
                // A reply to something we gave up on, or a stray packet: ignore it, as FDB
                // does for unknown endpoints on the client side.
                continue;
            };
            if let Some(p) = self.peers.get_mut(&on) {
                p.pending.retain(|t| *t != pkt.token);
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
                    Ok(ErrorOr::Err(_)) | Err(_) => self.next_coordinator(),
                }
            }
            Pending::Grv { flags, waiters } => {
                self.grv_in_flight.insert(flags, false);
                let result = match decode_reply::<GetReadVersionReply>(message) {
                    Ok(ErrorOr::Ok(r)) => Ok(r.version),
                    Ok(ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
                    Err(e) => Err(ClientError::Decode(e)),
                };
                for w in waiters {
                    match w {
                        GrvWaiter::Request(req) => {
                            self.finish(req, result.clone().map(Reply::Version))
                        }
                        GrvWaiter::Tx(tx) => self.on_tx_read_version(tx, result.clone()),
                    }
                }
            }
            Pending::Locations { key, reverse } => self.on_locations(key, reverse, message),
            Pending::Storage { op } => self.on_storage_reply(op, message),
            Pending::Commit { op } => self.on_commit_reply(op, message),
        }
    }

    fn accept_db_info(&mut self, mut info: ClientDBInfo) {
        if let Some(fwd) = info.forward.take() {
            self.events.push_back(Event::Forward {
                connection_string: fwd,
            });
            return;
        }
        self.success_index = self.coordinator_index;
        // Like `shrinkProxyList`, talk to a bounded, random subset of proxies.
        while info.grv_proxies.len() > MAX_GRV_PROXY_CONNECTIONS {
            let i = self.rng.below(info.grv_proxies.len());
            info.grv_proxies.swap_remove(i);
        }
        while info.commit_proxies.len() > MAX_COMMIT_PROXY_CONNECTIONS {
            let i = self.rng.below(info.commit_proxies.len());
            info.commit_proxies.swap_remove(i);
        }
        self.events.push_back(Event::ClusterInfo {
            id: info.id,
            grv_proxies: info.grv_proxies.len(),
            commit_proxies: info.commit_proxies.len(),
        });
        let proxies_changed = self.db_info.as_ref().is_some_and(|old| {
            old.commit_proxies != info.commit_proxies || old.grv_proxies != info.grv_proxies
        });
        self.db_info = Some(info);
        if proxies_changed {
            // New proxies may mean moved data: FDB drops its location cache with them.
            self.engine.locations.clear();
            self.engine.locating.clear();
        }
        self.wake_cluster_waiters();
        // Long-poll for the next change right away.
        self.open_db_at = Some(self.now);
    }

    fn next_coordinator(&mut self) {
        if self.coordinators.is_empty() {
            return;
        }
        self.coordinator_index = (self.coordinator_index + 1) % self.coordinators.len();
        self.open_db_at = Some(if self.coordinator_index == self.success_index {
            self.now + COORDINATOR_RECONNECTION_DELAY
        } else {
            self.now
        });
    }

    /// Sends whatever can be sent now.
    pub(crate) fn drive(&mut self, now: Instant) {
        if !self.open_db_outstanding
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
        let addr = self.coordinators[self.coordinator_index].clone();
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
            coordinators: self.coordinators.clone(),
            reply: ReplyPromise { token },
            hostnames: Vec::new(),
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

    fn send_grv(&mut self, now: Instant, flags: u32) {
        let Some(info) = &self.db_info else { return };
        let queue = self.grv_queue.entry(flags).or_default();
        let n = queue.len().min(MAX_GRV_BATCH);
        let waiters: Vec<GrvWaiter> = queue.drain(..n).collect();
        let proxy = &info.grv_proxies[self.rng.below(info.grv_proxies.len())];
        let endpoint = proxy.get_consistent_read_version.endpoint.clone();
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
            &endpoint.addresses.address,
            endpoint.token,
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
        p.pending.push(reply);
        self.pending.insert(reply, (conn, pending));
    }

    /// The connection to `addr`, opening one if needed (one connection per address, as
    /// FlowTransport keeps one `Peer` per address).
    fn peer_for(&mut self, now: Instant, addr: &NetworkAddress) -> ConnectionId {
        if let Some((id, _)) = self.peers.iter().find(|(_, p)| p.addr == *addr) {
            return *id;
        }
        let id = ConnectionId(self.next_conn);
        self.next_conn += 1;
        let conn = Connection::new(now, addr.is_tls(), ProtocolVersion::V7_3);
        self.peers.insert(
            id,
            Peer {
                addr: addr.clone(),
                conn,
                connected: false,
                pending: Vec::new(),
            },
        );
        self.events.push_back(Event::Connect {
            conn: id,
            addr: addr.clone(),
        });
        id
    }

    /// Forgets a connection and fails or retries what waited on it.
    fn drop_peer(&mut self, id: ConnectionId, reason: ConnectionError) {
        let Some(peer) = self.peers.remove(&id) else {
            return;
        };
        self.events.push_back(Event::Close { conn: id, reason });
        for token in peer.pending {
            match self.pending.remove(&token) {
                Some((_, Pending::OpenDatabase)) => {
                    self.open_db_outstanding = false;
                    self.next_coordinator();
                }
                Some((_, Pending::Grv { flags, waiters })) => {
                    // Asking for a read version is idempotent: queue it again (at the front)
                    // for another proxy, as the load balancer would.
                    self.grv_in_flight.insert(flags, false);
                    let q = self.grv_queue.entry(flags).or_default();
                    let rest = core::mem::take(q);
                    q.extend(waiters);
                    q.extend(rest);
                }
                Some((_, Pending::Locations { key, reverse })) => {
                    self.engine.locating.remove(&(key, reverse));
                }
                Some((_, Pending::Storage { op })) => self.on_storage_lost(op),
                Some((_, Pending::Commit { op })) => self.on_commit_lost(op),
                None => {}
            }
        }
    }
}
