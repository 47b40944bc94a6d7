//! The network: one connection per address, FlowTransport's reconnection backoff, the failure
//! monitor, and reply routing. Parts of the core send requests through [`Io::send`] with
//! the [`Route`] their reply should take; what comes back — a reply or the news that none will
//! come — is a [`Delivery`] for the client to hand to that part. The network knows nothing of
//! what the requests mean.
//!
//! As FlowTransport's `Peer` does (`fdbrpc/FlowTransport.actor.cpp`): an address whose
//! connection failed is not connected to again before `last connect + delay` (jittered); the
//! delay starts at [`INITIAL_RECONNECTION_TIME`] and grows ×[`RECONNECTION_TIME_GROWTH_RATE`]
//! per failure up to [`MAX_RECONNECTION_TIME`], and starts over when a connection lived longer
//! than [`RECONNECTION_RESET_TIME`]. Requests for such an address wait in its queue. A process
//! that answers with FDB's endpoint-not-found notice (the well-known token 0, carrying the token
//! it does not know), or with `broken_promise` (the role behind the endpoint ended), marks the
//! endpoint failed for good, and the requests waiting on it are lost.

mod failure;
mod peer;

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

pub(crate) use failure::FailureMonitor;
use peer::{AddrKey, Backoff, Peer, PeerState, PeerStats};

use crate::connection::{Connection, ConnectionError, MonitorTimes, CONNECTION_MONITOR_TIMEOUT};
use crate::error::ErrorCode;
use crate::event::{Event, Transmit};
use crate::framing::ProtocolVersion;
use crate::ids::ConnectionId;
use crate::knobs::{grown, Knobs};
use crate::messages::{reply_error, EnsureTable, NetworkAddress};
use crate::route::{Loss, Route};
use crate::serializer::{decode_root, encode_in, Message};
use crate::time::{Instant, Rng};
use crate::uid::{well_known, Uid};
use crate::version::Protocol;

pub use crate::knobs::{
    INITIAL_RECONNECTION_TIME, MAX_RECONNECTION_TIME, RECONNECTION_RESET_TIME,
    RECONNECTION_TIME_GROWTH_RATE,
};
/// How long a TCP connect may take by default (`connectionKeeper` gives `connect()` and the
/// TLS handshake `CONNECTION_MONITOR_TIMEOUT`, then fails with `connection_failed`).
pub const CONNECT_TIMEOUT: Duration = CONNECTION_MONITOR_TIMEOUT;

/// What a part of the core needs to act: the time, the client's randomness, the network to
/// send on and the event queue to tell the driver.
pub(crate) struct Io<'a> {
    pub(crate) now: Instant,
    pub(crate) rng: &'a mut Rng,
    pub(crate) net: &'a mut Network,
    pub(crate) events: &'a mut VecDeque<Event>,
}

impl Io<'_> {
    /// Sends `msg` to endpoint `dest` at `addr`; its reply (on token `reply`) takes `route`.
    // `send_sized` with no estimate: the short form for the callers that have none.
    pub(crate) fn send<M: Message>(
        &mut self,
        addr: &NetworkAddress,
        dest: Uid,
        msg: &M,
        reply: Uid,
        route: Route,
    ) {
        self.send_sized(addr, dest, msg, reply, route, 0);
    }

    /// [`Io::send`] of a message of about `size` encoded bytes (its buffer is made that
    /// large at once, not doubled up to it; `0`: no estimate).
    pub(crate) fn send_sized<M: Message>(
        &mut self,
        addr: &NetworkAddress,
        dest: Uid,
        msg: &M,
        reply: Uid,
        route: Route,
        size: usize,
    ) {
        let to = (addr, dest);
        let conn = self
            .net
            .write(self.now, self.rng, self.events, to, msg, size);
        self.net.await_reply(conn, dest, reply, route);
    }

    /// [`Io::send`] of a message already encoded (`bytes`, what `encode` makes).
    pub(crate) fn send_encoded(
        &mut self,
        addr: &NetworkAddress,
        dest: Uid,
        bytes: &[u8],
        reply: Uid,
        route: Route,
    ) {
        let conn = self.net.peer_for(self.now, self.rng, self.events, addr);
        self.net.live_peer(conn).conn.send(self.now, dest, bytes);
        self.net.await_reply(conn, dest, reply, route);
    }

    /// Sends a message that asks for no reply (FDB's `RequestStream::send` of a request
    /// without a `ReplyPromise`): nothing waits for it, so nothing is told if it is lost.
    pub(crate) fn send_one_way<M: Message>(&mut self, addr: &NetworkAddress, dest: Uid, msg: &M) {
        let to = (addr, dest);
        self.net.write(self.now, self.rng, self.events, to, msg, 0);
    }

    /// Picks one of `endpoints` (see [`FailureMonitor::pick`]).
    pub(crate) fn pick(&mut self, endpoints: &[(NetworkAddress, Uid)]) -> Option<usize> {
        self.net.failures.pick(endpoints, self.rng)
    }

    /// [`pick`](Self::pick) over `n` endpoints given by index (no list built).
    pub(crate) fn pick_among<'e>(
        &mut self,
        n: usize,
        endpoint: impl Fn(usize) -> (&'e NetworkAddress, Uid),
    ) -> Option<usize> {
        self.net.failures.pick_among(n, endpoint, self.rng)
    }

    /// A new random reply token.
    pub(crate) fn token(&mut self) -> Uid {
        self.rng.uid()
    }
}

/// What the network hands back for a request.
#[derive(Debug)]
pub(crate) enum Delivery {
    /// The reply arrived.
    Reply(Route, Bytes),
    /// No reply will come.
    Lost(Route, Loss),
    /// The peer at `addr` announced a protocol we do not speak; connection `conn` stays
    /// open until the client decides what that means (see [`crate::version`]).
    Incompatible {
        conn: ConnectionId,
        addr: NetworkAddress,
        version: ProtocolVersion,
    },
    /// The peer at `addr` announced the protocol we speak (its ConnectPacket arrived).
    Compatible { addr: NetworkAddress },
}

/// Connections, their backoff and failures, and the routes of replies still expected.
#[derive(Debug, Default)]
pub(crate) struct Network {
    next_conn: u64,
    peers: BTreeMap<ConnectionId, Peer>,
    /// Reply token → the connection the request went out on, and where its reply goes.
    pending: BTreeMap<Uid, (ConnectionId, Route)>,
    backoff: BTreeMap<AddrKey, Backoff>,
    failures: FailureMonitor,
    deliveries: VecDeque<Delivery>,
    /// The protocol new connections speak.
    protocol: Protocol,
    /// Where messages are encoded before their connection copies them (kept zeroed):
    /// sending allocates no buffer per message.
    scratch: Vec<u8>,
    /// The reconnection and connection monitor knobs.
    knobs: Knobs,
}

/// How the connection to one address stands, as the client status reports it
/// (`connectionStatusReport`).
#[derive(Clone, Debug)]
pub(crate) struct PeerReport {
    /// `failed`, `disconnected`, `connecting` or `connected`.
    pub(crate) status: &'static str,
    /// The counters, once the address was connected to (libfdb_c has a `Peer` for it).
    pub(crate) stats: Option<PeerStats>,
    /// How long ago the last connect started.
    pub(crate) since_connect: Duration,
}

impl Network {
    /// A network whose connections speak `protocol`, reconnecting and monitoring as `knobs`
    /// say.
    pub(crate) fn new(protocol: Protocol, knobs: &Knobs) -> Network {
        Network {
            protocol,
            knobs: *knobs,
            ..Network::default()
        }
    }

    /// The protocol connections speak.
    pub(crate) fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Speaks `protocol` from now on: every connection (made with the old one) is closed and
    /// what waited on it is lost with [`Loss::ProtocolChanged`], to be sent again on new
    /// connections.
    pub(crate) fn set_protocol(&mut self, events: &mut VecDeque<Event>, protocol: Protocol) {
        self.protocol = protocol;
        let ids: Vec<ConnectionId> = self.peers.keys().copied().collect();
        for id in ids {
            let Some(peer) = self.peers.remove(&id) else {
                continue;
            };
            let peer_version = peer
                .conn
                .incompatible_peer()
                .unwrap_or_else(|| protocol.version());
            events.push_back(Event::Close {
                conn: id,
                reason: ConnectionError::IncompatibleProtocol { peer: peer_version },
            });
            for (token, _) in peer.pending {
                if let Some((_, route)) = self.pending.remove(&token) {
                    self.deliveries
                        .push_back(Delivery::Lost(route, Loss::ProtocolChanged));
                }
            }
        }
        // The old addresses' backoff does not apply to the new protocol's first attempts.
        self.backoff.clear();
        self.failures.retain_addresses(|_| false);
    }

    /// Closes `conn` as a peer we cannot speak to; what waited on it is lost.
    pub(crate) fn close_incompatible(
        &mut self,
        now: Instant,
        events: &mut VecDeque<Event>,
        conn: ConnectionId,
    ) {
        let peer = match self
            .peers
            .get(&conn)
            .and_then(|p| p.conn.incompatible_peer())
        {
            Some(v) => v,
            None => return,
        };
        self.drop_peer(
            now,
            events,
            conn,
            ConnectionError::IncompatibleProtocol { peer },
        );
    }

    /// The connection to `addr` for the client status.
    pub(crate) fn peer_report(&self, now: Instant, addr: &NetworkAddress) -> PeerReport {
        let key = AddrKey::of(addr);
        let live = self.peers.values().find(|p| AddrKey::of(&p.addr) == key);
        let status = if self.failures.address_failed(addr) {
            "failed"
        } else {
            match live.map(|p| p.state) {
                None => "disconnected",
                Some(PeerState::Connected) => "connected",
                Some(_) => "connecting",
            }
        };
        let b = self.backoff.get(&key);
        let stats = b.map(|b| {
            let mut s = b.stats;
            if let Some(p) = live {
                let (answered, timeouts) = p.conn.ping_counts();
                s.pings.0 += answered;
                s.pings.1 += timeouts;
            }
            s
        });
        PeerReport {
            status,
            stats,
            since_connect: b.map_or(Duration::ZERO, |b| now.saturating_since(b.last_connect)),
        }
    }

    /// What the network knows of failed endpoints and addresses.
    pub(crate) fn failures(&self) -> &FailureMonitor {
        &self.failures
    }

    /// Notes that the request sent to endpoint `dest` on `conn` waits for a reply on token
    /// `reply`, which takes `route`: the peer's list (lost when the connection goes) and the
    /// network's table.
    fn await_reply(&mut self, conn: ConnectionId, dest: Uid, reply: Uid, route: Route) {
        self.live_peer(conn).pending.push((reply, dest));
        self.pending.insert(reply, (conn, route));
    }

    /// The peer of `conn`, just returned by [`Network::peer_for`].
    fn live_peer(&mut self, conn: ConnectionId) -> &mut Peer {
        self.peers
            .get_mut(&conn)
            .expect("peer_for returns a live peer")
    }

    /// Queues `msg` for endpoint `dest` on the connection to `addr` (opened if need be),
    /// returning that connection.
    fn write<M: Message>(
        &mut self,
        now: Instant,
        rng: &mut Rng,
        events: &mut VecDeque<Event>,
        (addr, dest): (&NetworkAddress, Uid),
        msg: &M,
        size_hint: usize,
    ) -> ConnectionId {
        let conn = self.peer_for(now, rng, events, addr);
        let peer = self
            .peers
            .get_mut(&conn)
            .expect("peer_for returns a live peer");
        encode_in(msg, &mut self.scratch, size_hint, |bytes| {
            peer.conn.send(now, dest, bytes)
        });
        conn
    }

    /// Forgets the request waiting on reply token `t`, returning its route.
    pub(crate) fn forget(&mut self, t: Uid) -> Option<Route> {
        let (conn, route) = self.pending.remove(&t)?;
        if let Some(peer) = self.peers.get_mut(&conn) {
            peer.pending.retain(|(r, _)| *r != t);
        }
        Some(route)
    }

    /// Forgets every request whose route matches, returning their routes (in token order).
    pub(crate) fn forget_where(&mut self, matches: impl Fn(&Route) -> bool) -> Vec<Route> {
        let tokens: Vec<Uid> = self
            .pending
            .iter()
            .filter(|(_, (_, r))| matches(r))
            .map(|(t, _)| *t)
            .collect();
        tokens.into_iter().filter_map(|t| self.forget(t)).collect()
    }

    /// The next reply or loss for the client to route.
    pub(crate) fn poll_delivery(&mut self) -> Option<Delivery> {
        self.deliveries.pop_front()
    }

    /// Bytes to write, for connections the driver has reported connected.
    pub(crate) fn poll_transmit(&mut self) -> Option<Transmit> {
        for (id, p) in self.peers.iter_mut() {
            if p.state != PeerState::Connected {
                continue;
            }
            if let Some(data) = p.conn.poll_transmit() {
                if let Some(b) = self.backoff.get_mut(&AddrKey::of(&p.addr)) {
                    b.stats.bytes_sent += data.len() as u64;
                }
                return Some(Transmit { conn: *id, data });
            }
        }
        None
    }

    /// The earliest time at which [`Network::handle_timeout`] must run.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.peers
            .values()
            .filter_map(|p| match p.state {
                PeerState::Connected => p.conn.poll_timeout(),
                PeerState::Waiting(t) | PeerState::Connecting(t) => Some(t),
            })
            .min()
    }

    /// Lets time pass: reconnections due, connects that took too long, connection monitors.
    pub(crate) fn handle_timeout(
        &mut self,
        now: Instant,
        rng: &mut Rng,
        events: &mut VecDeque<Event>,
    ) {
        let ids: Vec<ConnectionId> = self.peers.keys().copied().collect();
        for id in ids {
            let Some(p) = self.peers.get_mut(&id) else {
                continue;
            };
            match p.state {
                PeerState::Waiting(t) if now >= t => self.start_connect(now, events, id),
                PeerState::Waiting(_) => {}
                PeerState::Connecting(deadline) if now >= deadline => {
                    // `connectionKeeper`: connect() did not finish in time.
                    self.drop_peer(now, events, id, ConnectionError::Timeout);
                }
                PeerState::Connecting(_) => {}
                PeerState::Connected => {
                    p.conn.set_outstanding(p.pending.len());
                    if let Err(e) = p.conn.handle_timeout(now, rng) {
                        self.drop_peer(now, events, id, e);
                    }
                }
            }
        }
    }

    /// The driver connected `conn`.
    pub(crate) fn handle_connected(&mut self, conn: ConnectionId) {
        let Some(p) = self.peers.get_mut(&conn) else {
            return;
        };
        if !matches!(p.state, PeerState::Connecting(_)) {
            return;
        }
        p.state = PeerState::Connected;
        tracing::debug!(conn = conn.0, addr = %p.addr, "connected");
        self.failures.set_address_failed(&p.addr, false);
    }

    /// The driver could not connect `conn`, or saw it close.
    pub(crate) fn handle_closed(
        &mut self,
        now: Instant,
        events: &mut VecDeque<Event>,
        conn: ConnectionId,
    ) {
        self.drop_peer(now, events, conn, ConnectionError::Closed);
    }

    /// Bytes read from `conn`: its replies (and losses) become deliveries.
    pub(crate) fn handle_input(
        &mut self,
        now: Instant,
        events: &mut VecDeque<Event>,
        conn: ConnectionId,
        data: &[u8],
    ) {
        let Some(p) = self.peers.get_mut(&conn) else {
            return;
        };
        if p.state != PeerState::Connected {
            return;
        }
        let was_incompatible = p.conn.incompatible_peer().is_some();
        let had_announced = p.conn.peer_protocol().is_some();
        let result = p.conn.handle_input(now, data);
        // What the peer announced counts even if the bytes after its ConnectPacket break the
        // framing (FlowTransport records the peer's version as soon as it reads the packet).
        let incompatible = p.conn.incompatible_peer();
        if let (Some(version), false) = (incompatible, was_incompatible) {
            tracing::info!(conn = conn.0, addr = %p.addr, peer = %version, "peer speaks another protocol");
            self.deliveries.push_back(Delivery::Incompatible {
                conn,
                addr: p.addr.clone(),
                version,
            });
        } else if incompatible.is_none() && !had_announced && p.conn.peer_protocol().is_some() {
            self.deliveries.push_back(Delivery::Compatible {
                addr: p.addr.clone(),
            });
        }
        if let Some(b) = self.backoff.get_mut(&AddrKey::of(&p.addr)) {
            b.stats.bytes_received += data.len() as u64;
            if let Some(v) = p.conn.peer_protocol() {
                b.stats.protocol = Some(v.0);
            }
            b.stats.incompatible = incompatible.is_some();
        }
        if let Err(e) = result {
            self.drop_peer(now, events, conn, e);
            return;
        }
        while let Some(pkt) = self.peers.get_mut(&conn).and_then(|p| p.conn.poll_packet()) {
            if incompatible.is_some() {
                // fdbserver sends nothing but its pings to a peer of another protocol
                // (`sendPacket`); anything else claiming to come from it is dropped.
                continue;
            }
            if pkt.token == well_known::ENDPOINT_NOT_FOUND {
                self.on_endpoint_not_found(conn, &pkt.message);
                continue;
            }
            let Some((on, route)) = self.pending.remove(&pkt.token) else {
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
                if let (Some(dest), Some(p)) = (dest, self.peers.get(&on)) {
                    self.failures.endpoint_gone(&p.addr, dest);
                }
                self.deliveries
                    .push_back(Delivery::Lost(route, Loss::BrokenPromise));
                continue;
            }
            self.deliveries
                .push_back(Delivery::Reply(route, pkt.message));
        }
    }

    /// The connection to `addr`, opening one if needed (one connection per address, as
    /// FlowTransport keeps one `Peer` per address). An address that failed recently is
    /// connected to only after its reconnection delay.
    fn peer_for(
        &mut self,
        now: Instant,
        rng: &mut Rng,
        events: &mut VecDeque<Event>,
        addr: &NetworkAddress,
    ) -> ConnectionId {
        let key = AddrKey::of(addr);
        if let Some((id, _)) = self.peers.iter().find(|(_, p)| AddrKey::of(&p.addr) == key) {
            return *id;
        }
        self.next_conn += 1;
        let id = ConnectionId(self.next_conn);
        let conn = Connection::new(now, addr.is_tls(), self.protocol.version())
            .with_times(MonitorTimes::of(&self.knobs));
        // `delayJittered(max(0, lastConnectTime + reconnectionDelay - now))`.
        let wait = self.backoff.get(&key).map_or(Duration::ZERO, |b| {
            (b.last_connect + b.delay).saturating_since(now)
        });
        let wait = if wait.is_zero() {
            wait
        } else {
            rng.jittered(wait)
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
            self.start_connect(now, events, id);
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
    fn start_connect(&mut self, now: Instant, events: &mut VecDeque<Event>, id: ConnectionId) {
        let Some(p) = self.peers.get_mut(&id) else {
            return;
        };
        p.state = PeerState::Connecting(now + self.knobs.connection_monitor_timeout);
        let key = AddrKey::of(&p.addr);
        let b = self.backoff.entry(key).or_insert(Backoff {
            last_connect: now,
            delay: self.knobs.initial_reconnection_time,
            stats: PeerStats::default(),
        });
        b.last_connect = now;
        tracing::debug!(conn = id.0, addr = %p.addr, "connecting");
        events.push_back(Event::Connect {
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
        let addr = peer.addr.clone();
        self.failures.endpoint_gone(&addr, dest);
        for r in lost {
            if let Some(route) = self.forget(r) {
                self.deliveries
                    .push_back(Delivery::Lost(route, Loss::EndpointNotFound));
            }
        }
    }

    /// Forgets a connection; what waited on it is lost.
    fn drop_peer(
        &mut self,
        now: Instant,
        events: &mut VecDeque<Event>,
        id: ConnectionId,
        reason: ConnectionError,
    ) {
        let Some(peer) = self.peers.remove(&id) else {
            return;
        };
        if matches!(reason, ConnectionError::Idle) {
            tracing::debug!(conn = id.0, addr = %peer.addr, "idle connection closed");
        } else {
            tracing::info!(conn = id.0, addr = %peer.addr, %reason, "connection failed");
        }
        if !matches!(peer.state, PeerState::Waiting(_)) {
            // `connectionKeeper`'s catch block.
            let key = AddrKey::of(&peer.addr);
            if let Some(b) = self.backoff.get_mut(&key) {
                if matches!(peer.state, PeerState::Connecting(_)) {
                    b.stats.connect_failed += 1;
                }
                let (answered, timeouts) = peer.conn.ping_counts();
                b.stats.pings.0 += answered;
                b.stats.pings.1 += timeouts;
                let k = &self.knobs;
                b.delay = if now.saturating_since(b.last_connect) > k.reconnection_reset_time {
                    k.initial_reconnection_time
                } else {
                    grown(
                        b.delay,
                        k.reconnection_time_growth_rate,
                        k.max_reconnection_time,
                    )
                };
                self.failures.set_address_failed(&peer.addr, true);
            }
            self.prune_backoff(now);
        }
        events.push_back(Event::Close { conn: id, reason });
        for (token, _) in peer.pending {
            if let Some((_, route)) = self.pending.remove(&token) {
                self.deliveries
                    .push_back(Delivery::Lost(route, Loss::Disconnected));
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
        let reset = self.knobs.reconnection_reset_time;
        self.backoff
            .retain(|k, b| live.contains(k) || now.saturating_since(b.last_connect) <= reset);
        let backoff = &self.backoff;
        self.failures.retain_addresses(|k| backoff.contains_key(k));
    }
}
