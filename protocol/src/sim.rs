//! A simulated network for driving a [`Client`] in memory: tests, fuzzing, capture replays.
//!
//! [`Sim`] owns a client and its clock and plays the far end of every connection the client
//! opens, as quinn-proto's test `Pair` plays both endpoints: it accepts the connection (at once
//! by default; a test may instead accept, refuse or close each one itself), sends the server's
//! FlowTransport `ConnectPacket`, and decodes every packet the client writes into a
//! [`Request`] — its connection, the endpoint token it went to, the token it wants its reply
//! on, and the decoded message. A [`Server`] (a test's scripted cluster) answers what it
//! likes as requests arrive; the rest wait in [`Sim::requests`] until the test answers them:
//! with a typed `ErrorOr<T>` ([`Sim::reply`]), raw bytes, FDB's endpoint-not-found notice or
//! `broken_promise`. Pings are answered by the simulation unless the test wants them.
//!
//! Every method of `Sim` hands its input to the client and then *drives* it until it is quiet:
//! events collected (connect requests, cluster news; completions kept apart for
//! [`Sim::take`]), bytes decoded, the server's answers given. Calls made on
//! [`Sim::client`] directly are picked up by the next method, or by [`Sim::drive`]. Time moves
//! only when the test moves it — to the client's next deadline or to a given instant — and
//! nothing is random beyond the client's seed, so a run is a function of its inputs: the
//! property a fuzz target and a capture replay both need.
//!
//! The client breaking the driver contract is a panic here (writing to a connection it was
//! not given, bytes that do not frame, a request that does not decode, output that never
//! stops): those are client bugs the tests and fuzzers exist to find.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use bytes::{Bytes, BytesMut};
use core::time::Duration;

use crate::client::Client;
use crate::client::ClientConfig;
use crate::error::ErrorCode;
use crate::event::{Call, ClientError, Completion, Event, Outcome, Transmit};
use crate::framing::{encode_packet, ConnectPacket, FrameDecoder, Incoming, ProtocolVersion};
use crate::ids::{ConnectionId, RequestId, TransactionId};
use crate::messages::{decode_any, encode_reply, AnyMessage, ErrorOr, NetworkAddress, Void};
use crate::serializer::{encode_with, Message};
use crate::time::Instant;
use crate::uid::{well_known, Uid};

/// `UID::file_identifier`: FDB's endpoint-not-found notice is a bare UID.
const UID_FILE_IDENTIFIER: u32 = 15597147;

/// Rounds of client output without new time after which [`Sim::drive`] calls the client
/// runaway: every round needs fresh output, and a sane client goes quiet long before.
const MAX_ROUNDS: usize = 10_000;

/// Deadlines [`Sim::run`] lets pass before it gives up on a call.
const MAX_DEADLINES: usize = 1000;

/// One packet the client wrote, decoded.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The connection it came on.
    pub conn: ConnectionId,
    /// The endpoint token it was sent to.
    pub dest: Uid,
    /// The token it asks to be answered on (`None` only for a message that is not a request).
    pub reply: Option<Uid>,
    /// The message.
    pub msg: AnyMessage,
    /// The message as it travelled.
    pub bytes: Bytes,
}

impl Request {
    /// The reply token; a request always has one.
    fn reply_token(&self) -> Uid {
        self.reply
            .unwrap_or_else(|| panic!("{} asks for no reply", self.msg.name()))
    }
}

/// The test's side of the cluster: sees each request as it arrives and may answer it through
/// the [`Wire`] at once. What it hands back waits in [`Sim::requests`] for the test.
pub trait Server {
    /// A request arrived. Answer it (or not) and return `None`, or return it to leave it to
    /// the test.
    fn serve(&mut self, wire: &mut Wire<'_>, req: Request) -> Option<Request>;
}

/// No server: every request waits for the test.
impl Server for () {
    fn serve(&mut self, _: &mut Wire<'_>, req: Request) -> Option<Request> {
        Some(req)
    }
}

/// A scripted cluster that answers the client's first `ClientDBInfo` request with `info`,
/// holds the long poll and read-version requests unanswered, and leaves the rest to the test.
#[cfg(test)]
pub(crate) struct InfoServer {
    pub(crate) info: crate::messages::coordination::ClientDBInfo,
}

#[cfg(test)]
impl Server for InfoServer {
    fn serve(&mut self, wire: &mut Wire<'_>, req: Request) -> Option<Request> {
        match &req.msg {
            AnyMessage::OpenDatabaseCoordRequest(r) if r.known_client_info_id == Uid::default() => {
                wire.reply(&req, crate::messages::ErrorOr::Ok(self.info.clone()));
                None
            }
            AnyMessage::OpenDatabaseCoordRequest(_) | AnyMessage::GetReadVersionRequest(_) => None,
            _ => Some(req),
        }
    }
}

/// Where a connection stands, as the simulated peer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// The client asked for it; not accepted yet.
    Connecting,
    /// Accepted: the client may write.
    Open,
    /// Refused, closed by the test, or closed by the client.
    Closed,
}

/// The far end of one connection.
struct Conn {
    addr: NetworkAddress,
    state: State,
    /// TLS connections carry no checksums (the TLS layer is the driver's).
    checksum: bool,
    /// What the client wrote, framed.
    decoder: FrameDecoder,
    /// The client's `ConnectPacket`, once it came.
    hello: Option<ConnectPacket>,
}

/// The server end of the simulated connections: what a [`Server`] answers through. Each
/// answer goes to the client at once; the enclosing [`Sim::drive`] picks up what follows.
pub struct Wire<'a> {
    client: &'a mut Client,
    now: Instant,
    conns: &'a BTreeMap<ConnectionId, Conn>,
}

impl Wire<'_> {
    /// The simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// One packet to `token` on `conn`, framed (and checksummed) as that connection is.
    pub fn send(&mut self, conn: ConnectionId, token: Uid, message: &[u8]) {
        let c = self
            .conns
            .get(&conn)
            .unwrap_or_else(|| panic!("{conn:?} was never opened"));
        let mut b = BytesMut::new();
        encode_packet(&mut b, token, message, c.checksum);
        self.client.handle_input(conn, self.now, &b);
    }

    /// Answers `req` with these message bytes.
    pub fn reply_bytes(&mut self, req: &Request, message: &[u8]) {
        self.send(req.conn, req.reply_token(), message)
    }

    /// Answers `req` as FDB does: `ErrorOr<T>` with `T`'s reply file identifier.
    pub fn reply<T: Message>(&mut self, req: &Request, reply: ErrorOr<T>) {
        self.reply_bytes(req, &encode_reply(&reply))
    }

    /// The peer does not know the endpoint `req` went to: what fdbserver sends for an unknown
    /// token (a bare UID to the well-known endpoint-not-found token).
    pub fn endpoint_not_found(&mut self, req: &Request) {
        let notice = encode_with(&req.dest, UID_FILE_IDENTIFIER);
        self.send(req.conn, well_known::ENDPOINT_NOT_FOUND, &notice)
    }

    /// The role behind `req`'s endpoint went away without answering (`broken_promise`).
    pub fn broken_promise(&mut self, req: &Request) {
        self.reply::<Void>(req, ErrorOr::Err(ErrorCode::BROKEN_PROMISE))
    }
}

/// A [`Client`], its clock, and the simulated far end of its connections, with a [`Server`]
/// answering requests. See the module docs.
pub struct Sim<S = ()> {
    /// The client under test. Calls on it are picked up by the next `Sim` method.
    pub client: Client,
    /// The scripted cluster.
    pub server: S,
    now: Instant,
    conns: BTreeMap<ConnectionId, Conn>,
    auto_accept: bool,
    answer_pings: bool,
    hello: Bytes,
    requests: Vec<Request>,
    events: Vec<Event>,
    done: Vec<Completion>,
}

impl Sim<()> {
    /// A client made from `config` at time zero, every request left to the test.
    pub fn new(config: ClientConfig) -> Sim<()> {
        Sim::with_server(config, ())
    }
}

impl<S: Server> Sim<S> {
    /// A client made from `config` at time zero, with `server` answering.
    pub fn with_server(config: ClientConfig, server: S) -> Sim<S> {
        let mut hello = BytesMut::new();
        ConnectPacket::client(ProtocolVersion::V7_3).encode(&mut hello);
        Sim {
            client: Client::new(config, Instant::ZERO),
            server,
            now: Instant::ZERO,
            conns: BTreeMap::new(),
            auto_accept: true,
            answer_pings: true,
            hello: hello.freeze(),
            requests: Vec::new(),
            events: Vec::new(),
            done: Vec::new(),
        }
    }

    /// Whether connections are accepted as soon as the client asks for them (the default),
    /// or wait for [`Sim::accept`] / [`Sim::refuse`].
    pub fn set_auto_accept(&mut self, on: bool) {
        self.auto_accept = on;
    }

    /// Whether the simulation answers the connection monitor's pings itself (the default), or
    /// hands them on like any other request.
    pub fn set_answer_pings(&mut self, on: bool) {
        self.answer_pings = on;
    }

    /// The bytes the server sends first on every accepted connection (its `ConnectPacket`;
    /// by default a 7.3 one).
    pub fn set_hello(&mut self, hello: Bytes) {
        self.hello = hello;
    }

    // ----- time -----

    /// The simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// `N` transactions created now, for tests of how they meet.
    pub fn create_transactions<const N: usize>(&mut self) -> [TransactionId; N] {
        let now = self.now;
        core::array::from_fn(|_| self.client.create_transaction(now))
    }

    /// Moves the clock to `to` (not backwards) and lets the client's timers run.
    pub fn advance_to(&mut self, to: Instant) {
        assert!(
            to >= self.now,
            "time runs forward: {to:?} is before {:?}",
            self.now
        );
        self.now = to;
        self.client.handle_timeout(to);
        self.drive();
    }

    /// Moves the clock on by `d`.
    pub fn advance_by(&mut self, d: Duration) {
        self.advance_to(self.now + d)
    }

    /// Moves the clock to the client's next deadline (or leaves it, if that is now), and
    /// returns it; `None` if the client waits for nothing.
    pub fn advance(&mut self) -> Option<Instant> {
        self.drive();
        let at = self.client.poll_timeout()?.max(self.now);
        self.advance_to(at);
        Some(at)
    }

    /// Lets time pass up to `to`, deadline by deadline (at least a millisecond a step).
    pub fn run_until(&mut self, to: Instant) {
        self.drive();
        while self.now < to {
            let next = self
                .client
                .poll_timeout()
                .unwrap_or(to)
                .min(to)
                .max(self.now + Duration::from_millis(1))
                .min(to);
            self.advance_to(next);
        }
    }

    /// Lets time pass deadline by deadline until `call` finishes, and returns its result;
    /// `None` if it does not finish (the client waits for nothing, or a thousand deadlines
    /// passed).
    pub fn run<T: Outcome>(&mut self, call: Call<T>) -> Option<Result<T, ClientError>> {
        for _ in 0..MAX_DEADLINES {
            if let Some(r) = self.take(call) {
                return Some(r);
            }
            self.advance()?;
        }
        self.take(call)
    }

    // ----- connections -----

    /// The connections the client asked for since the last call (their connect events,
    /// taken out of [`Sim::events`]).
    pub fn connects(&mut self) -> Vec<(ConnectionId, NetworkAddress)> {
        self.drive();
        let mut out = Vec::new();
        self.events.retain(|e| match e {
            Event::Connect { conn, addr } => {
                out.push((*conn, addr.clone()));
                false
            }
            _ => true,
        });
        out
    }

    /// The connection is up: the client is told, and the server's `ConnectPacket` follows.
    pub fn accept(&mut self, conn: ConnectionId) {
        self.open(conn);
        self.drive();
    }

    /// The connection attempt failed.
    pub fn refuse(&mut self, conn: ConnectionId) {
        let state = self.conns.get(&conn).map(|c| c.state);
        assert_eq!(state, Some(State::Connecting), "{conn:?} is not connecting");
        self.end(conn);
        self.client.handle_connect_failed(conn, self.now);
        self.drive();
    }

    /// The peer closed the connection.
    pub fn close(&mut self, conn: ConnectionId) {
        self.end(conn);
        self.client.handle_closed(conn, self.now);
        self.drive();
    }

    /// The address the client opened `conn` to.
    pub fn addr(&self, conn: ConnectionId) -> Option<&NetworkAddress> {
        self.conns.get(&conn).map(|c| &c.addr)
    }

    /// The `ConnectPacket` the client sent on `conn`.
    pub fn client_hello(&self, conn: ConnectionId) -> Option<&ConnectPacket> {
        self.conns.get(&conn).and_then(|c| c.hello.as_ref())
    }

    fn open(&mut self, conn: ConnectionId) {
        let c = self
            .conns
            .get_mut(&conn)
            .unwrap_or_else(|| panic!("the client never asked for {conn:?}"));
        assert_eq!(c.state, State::Connecting, "{conn:?} is not connecting");
        c.state = State::Open;
        self.client.handle_connected(conn, self.now);
        self.client.handle_input(conn, self.now, &self.hello);
    }

    fn end(&mut self, conn: ConnectionId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.state = State::Closed;
        }
    }

    // ----- answers -----

    fn wire(&mut self) -> Wire<'_> {
        Wire {
            client: &mut self.client,
            now: self.now,
            conns: &self.conns,
        }
    }

    /// One packet to `token` on `conn` (see [`Wire::send`]).
    pub fn send(&mut self, conn: ConnectionId, token: Uid, message: &[u8]) {
        self.wire().send(conn, token, message);
        self.drive();
    }

    /// Answers `req` with these message bytes.
    pub fn reply_bytes(&mut self, req: &Request, message: &[u8]) {
        self.wire().reply_bytes(req, message);
        self.drive();
    }

    /// Answers `req` with an `ErrorOr<T>`, as FDB encodes it.
    pub fn reply<T: Message>(&mut self, req: &Request, reply: ErrorOr<T>) {
        self.wire().reply(req, reply);
        self.drive();
    }

    /// Tells the client `req`'s endpoint is unknown (see [`Wire::endpoint_not_found`]).
    pub fn endpoint_not_found(&mut self, req: &Request) {
        self.wire().endpoint_not_found(req);
        self.drive();
    }

    /// Answers `req` with `broken_promise`.
    pub fn broken_promise(&mut self, req: &Request) {
        self.wire().broken_promise(req);
        self.drive();
    }

    /// Answers several requests of one connection in a single read, as a server that flushed
    /// them together: the client takes them all in before it runs again.
    pub fn reply_together(&mut self, answers: &[(&Request, &[u8])]) {
        let Some((first, _)) = answers.first() else {
            return;
        };
        let conn = first.conn;
        let checksum = self
            .conns
            .get(&conn)
            .unwrap_or_else(|| panic!("{conn:?} was never opened"))
            .checksum;
        let mut b = BytesMut::new();
        for (req, message) in answers {
            assert_eq!(req.conn, conn, "answers together share a connection");
            encode_packet(&mut b, req.reply_token(), message, checksum);
        }
        self.client.handle_input(conn, self.now, &b);
        self.drive();
    }

    // ----- what came out -----

    /// The requests waiting for the test, oldest first.
    pub fn requests(&self) -> &[Request] {
        &self.requests
    }

    /// Every waiting request, taken.
    pub fn take_requests(&mut self) -> Vec<Request> {
        self.drive();
        core::mem::take(&mut self.requests)
    }

    /// The oldest waiting request that `pick` chooses, taken.
    pub fn take_request(&mut self, pick: impl FnMut(&Request) -> bool) -> Option<Request> {
        self.drive();
        let i = self.requests.iter().position(pick)?;
        Some(self.requests.remove(i))
    }

    /// The client's events so far, but completions.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The client's events so far, but completions, taken.
    pub fn take_events(&mut self) -> Vec<Event> {
        self.drive();
        core::mem::take(&mut self.events)
    }

    /// The completions not taken yet, in the order they came.
    pub fn completions(&self) -> &[Completion] {
        &self.done
    }

    /// Every completion not taken yet.
    pub fn take_completions(&mut self) -> Vec<Completion> {
        self.drive();
        core::mem::take(&mut self.done)
    }

    /// The completion of request `id`, if it came.
    pub fn take_completion(&mut self, id: RequestId) -> Option<Completion> {
        self.drive();
        let i = self.done.iter().position(|c| c.request() == id)?;
        Some(self.done.remove(i))
    }

    /// The result of `call`, if it finished.
    pub fn take<T: Outcome>(&mut self, call: Call<T>) -> Option<Result<T, ClientError>> {
        self.take_completion(call.id()).map(|c| call.take(c))
    }

    // ----- the loop -----

    /// Runs the client until it is quiet: events collected, connections accepted (when
    /// automatic), what it wrote decoded and served, and a deadline that has come (one the
    /// client set for now: a read-version window of zero length) handled, as a driver's
    /// next turn would.
    pub fn drive(&mut self) {
        for _ in 0..MAX_ROUNDS {
            let mut progress = false;
            while let Some(ev) = self.client.poll_event() {
                progress = true;
                self.on_event(ev);
            }
            while let Some(t) = self.client.poll_transmit() {
                progress = true;
                self.on_transmit(t);
            }
            if !progress && self.client.poll_timeout().is_some_and(|d| d <= self.now) {
                progress = true;
                self.client.handle_timeout(self.now);
            }
            if !progress {
                return;
            }
        }
        panic!("the client never goes quiet: {MAX_ROUNDS} rounds of output at one instant");
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Complete(c) => return self.done.push(c),
            Event::Connect { conn, ref addr } => {
                let conn_state = Conn {
                    addr: addr.clone(),
                    state: State::Connecting,
                    checksum: !addr.is_tls(),
                    decoder: FrameDecoder::new(true, !addr.is_tls()),
                    hello: None,
                };
                assert!(
                    self.conns.insert(conn, conn_state).is_none(),
                    "{conn:?} opened twice"
                );
                if self.auto_accept {
                    self.open(conn);
                }
            }
            Event::Close { conn, .. } => self.end(conn),
            _ => {}
        }
        self.events.push(ev);
    }

    fn on_transmit(&mut self, t: Transmit) {
        let c = self
            .conns
            .get_mut(&t.conn)
            .unwrap_or_else(|| panic!("the client wrote to {:?}, never opened", t.conn));
        assert_eq!(
            c.state,
            State::Open,
            "the client wrote to {:?}, which is not connected",
            t.conn
        );
        c.decoder.feed(&t.data);
        let mut packets = Vec::new();
        loop {
            match c.decoder.next_frame() {
                Ok(None) => break,
                Ok(Some(Incoming::Connect(p))) => c.hello = Some(p),
                Ok(Some(Incoming::Packet(p))) => packets.push(p),
                Err(e) => panic!("the client wrote bytes that do not frame: {e}"),
            }
        }
        for p in packets {
            let msg = decode_any(&p.message)
                .unwrap_or_else(|e| panic!("the client sent an undecodable request: {e}"));
            let req = Request {
                conn: t.conn,
                dest: p.token,
                reply: msg.reply_token(),
                msg,
                bytes: p.message,
            };
            self.serve(req);
        }
    }

    fn serve(&mut self, req: Request) {
        let mut wire = Wire {
            client: &mut self.client,
            now: self.now,
            conns: &self.conns,
        };
        if self.answer_pings && matches!(req.msg, AnyMessage::PingRequest(_)) {
            return wire.reply(&req, ErrorOr::Ok(Void {}));
        }
        if let Some(req) = self.server.serve(&mut wire, req) {
            self.requests.push(req);
        }
    }
}

/// A request stream at `127.0.0.1:port` with `token`: the interfaces the core's scripted
/// clusters hand out in their tests and the fuzzer.
pub(crate) fn loopback_stream(port: u16, token: Uid) -> crate::messages::RequestStream {
    use crate::messages::{Endpoint, IpAddress, NetworkAddressList, RequestStream};
    RequestStream {
        endpoint: Endpoint {
            addresses: NetworkAddressList {
                address: NetworkAddress {
                    ip: IpAddress::V4(0x7f00_0001),
                    port,
                    flags: 0,
                    from_hostname: false,
                },
                secondary_address: None,
            },
            token,
        },
    }
}

/// One GRV proxy (token `1:0x10`) and one commit proxy (`2:0x20`) at `127.0.0.1:4500`, the
/// coordinator's address in the unit tests and the fuzzer.
pub(crate) fn loopback_proxies() -> crate::messages::coordination::ClientDBInfo {
    use crate::messages::coordination::{ClientDBInfo, CommitProxyInterface, GrvProxyInterface};
    ClientDBInfo {
        grv_proxies: alloc::vec![GrvProxyInterface {
            get_consistent_read_version: loopback_stream(4500, Uid::new(1, 0x10)),
            ..Default::default()
        }],
        commit_proxies: alloc::vec![CommitProxyInterface {
            commit: loopback_stream(4500, Uid::new(2, 0x20)),
            ..Default::default()
        }],
        id: Uid::new(3, 3),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_file::ClusterFile;
    use crate::connection::ConnectionError;
    use crate::connection::CONNECTION_MONITOR_TIMEOUT;
    use crate::grv::Priority;
    use crate::messages::coordination::ClientDBInfo;
    use crate::messages::grv::GetReadVersionReply;
    use alloc::string::ToString;

    const GRV: Uid = Uid::new(1, 0x10);

    fn sim() -> Sim {
        Sim::new(ClientConfig::new(
            ClusterFile::parse("t:t@127.0.0.1:4500").unwrap(),
            3,
        ))
    }

    /// One GRV proxy and one commit proxy at the coordinator's address.
    fn info() -> ClientDBInfo {
        loopback_proxies()
    }

    /// A GRV proxy's answer: read version `version`.
    fn read_version(version: i64) -> ErrorOr<GetReadVersionReply> {
        ErrorOr::Ok(GetReadVersionReply {
            version,
            ..Default::default()
        })
    }

    /// Answers the bootstrap request; returns the long poll.
    fn bootstrap(s: &mut Sim) -> Request {
        let open = s
            .take_request(|r| r.dest == well_known::CLIENT_LEADER_REG_OPEN_DATABASE)
            .expect("the client asks a coordinator first");
        assert!(matches!(open.msg, AnyMessage::OpenDatabaseCoordRequest(_)));
        s.reply(&open, ErrorOr::Ok(info()));
        s.take_request(|r| matches!(r.msg, AnyMessage::OpenDatabaseCoordRequest(_)))
            .expect("the long poll")
    }

    /// A packed set (`key | 0 | value` in one buffer) is the same write as a set of the
    /// two buffers: read back from the transaction, sized alike; a buffer without the zero
    /// after the key is refused.
    #[test]
    fn a_packed_set_is_a_set() {
        let mut s = sim();
        let now = s.now();
        let [a, b] = s.create_transactions();
        for (k, v) in [(&b"k1"[..], &b"v1"[..]), (b"", b"empty key"), (b"k2", b"")] {
            s.client.set(a, k, v).unwrap();
            let packed = [k, &[0][..], v].concat();
            s.client
                .set_packed(b, Bytes::from(packed), k.len())
                .unwrap();
        }
        assert_eq!(
            s.client.get_approximate_size(a),
            s.client.get_approximate_size(b)
        );
        for k in [&b"k1"[..], b"", b"k2"] {
            let (ra, rb) = (
                s.client.get(now, a, k, false),
                s.client.get(now, b, k, false),
            );
            assert_eq!(s.take(ra), s.take(rb));
            assert!(s.take(rb).is_none());
        }
        let c = s.client.create_transaction(now);
        let e = s.client.set_packed(c, Bytes::from_static(b"k1v1"), 2);
        assert_eq!(e.unwrap_err().code(), ErrorCode::CLIENT_INVALID_OPERATION);
        let e = s.client.set_packed(c, Bytes::from_static(b"k1"), 2);
        assert_eq!(e.unwrap_err().code(), ErrorCode::CLIENT_INVALID_OPERATION);
    }

    #[test]
    fn a_read_version_round_trip() {
        let mut s = sim();
        let poll = bootstrap(&mut s);
        assert_eq!(poll.conn, s.connects()[0].0);
        let info = s.client.cluster_info().expect("the cluster's proxies");
        assert_eq!(info.grv_proxies.len(), 1);
        let call = s.client.get_read_version(s.now(), Priority::Default);
        let grv = s
            .take_request(|r| r.dest == GRV)
            .expect("a read version request");
        assert_eq!(grv.reply, grv.msg.reply_token());
        assert_eq!(s.take(call), None, "not before the answer");
        s.reply(&grv, read_version(42));
        assert_eq!(s.take(call), Some(Ok(42)));
        assert_eq!(s.take(call), None, "a completion is taken once");
    }

    #[test]
    fn nothing_is_written_before_the_test_accepts() {
        let mut s = sim();
        s.set_auto_accept(false);
        let c = s.connects();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].1.to_string(), "127.0.0.1:4500");
        assert!(s.take_requests().is_empty());
        // Refused: the client tries again after its reconnection delay, on a new connection.
        s.refuse(c[0].0);
        assert!(s.connects().is_empty());
        let at = s.advance().expect("a reconnection deadline");
        assert!(at > Instant::ZERO);
        let again = s.connects();
        assert_eq!(again.len(), 1);
        assert_ne!(again[0].0, c[0].0);
        s.accept(again[0].0);
        assert!(s.client_hello(again[0].0).is_some());
        assert_eq!(s.take_requests().len(), 1);
    }

    #[test]
    fn pings_are_answered_unless_the_test_wants_them() {
        for answer in [true, false] {
            let mut s = sim();
            s.set_answer_pings(answer);
            let _poll = bootstrap(&mut s);
            s.run_until(Instant::ZERO + CONNECTION_MONITOR_TIMEOUT * 3);
            let pings = s
                .take_requests()
                .iter()
                .filter(|r| matches!(r.msg, AnyMessage::PingRequest(_)))
                .count();
            let timed_out = s.take_events().iter().any(|e| {
                matches!(
                    e,
                    Event::Close {
                        reason: ConnectionError::Timeout,
                        ..
                    }
                )
            });
            if answer {
                assert_eq!((pings, timed_out), (0, false));
            } else {
                assert!(pings > 0);
                assert!(timed_out, "an unanswered ping ends the connection");
            }
        }
    }

    /// A server that answers the bootstrap and keeps a log.
    struct Coordinator(Vec<&'static str>);

    impl Server for Coordinator {
        fn serve(&mut self, wire: &mut Wire<'_>, req: Request) -> Option<Request> {
            self.0.push(req.msg.name());
            match req.msg {
                AnyMessage::OpenDatabaseCoordRequest(ref r)
                    if r.known_client_info_id == Uid::default() =>
                {
                    wire.reply(&req, ErrorOr::Ok(info()));
                    None
                }
                _ => Some(req),
            }
        }
    }

    #[test]
    fn a_server_answers_as_requests_arrive() {
        let mut s = Sim::with_server(
            ClientConfig::new(ClusterFile::parse("t:t@127.0.0.1:4500").unwrap(), 3),
            Coordinator(Vec::new()),
        );
        let call = s.client.get_read_version(s.now(), Priority::Default);
        let left = s.take_requests();
        // The bootstrap was answered inside the drive: the read version and the long poll
        // followed in the same drive, and are the test's.
        let mut seen = s.server.0.clone();
        seen.sort();
        assert_eq!(
            seen,
            [
                "GetReadVersionRequest",
                "OpenDatabaseCoordRequest",
                "OpenDatabaseCoordRequest"
            ]
        );
        assert_eq!(left.len(), 2);
        let grv = left.iter().find(|r| r.dest == GRV).unwrap();
        s.broken_promise(grv);
        // broken_promise marks the proxy's endpoint gone: the read version waits for new
        // proxies rather than failing, and goes to them once they come.
        assert!(s.take_completions().is_empty());
        assert!(s.take_requests().is_empty());
        let mut next = info();
        next.id = Uid::new(4, 4);
        next.grv_proxies[0]
            .get_consistent_read_version
            .endpoint
            .token = Uid::new(5, 0x50);
        let poll = left.iter().find(|r| r.dest != GRV).unwrap();
        s.reply(poll, ErrorOr::Ok(next));
        let again = s
            .take_request(|r| r.dest == Uid::new(5, 0x50))
            .expect("re-sent to the new proxy");
        s.reply(&again, read_version(7));
        assert_eq!(s.take(call), Some(Ok(7)));
    }
}
