//! One FlowTransport connection to one peer, without IO (`Peer` in
//! `fdbrpc/FlowTransport.actor.cpp`).
//!
//! It owns the ConnectPacket exchange, the protocol-version check, framing both ways, and the
//! connection monitor: like libfdb_c it pings the peer about once a second and gives up when a
//! ping goes unanswered for [`CONNECTION_MONITOR_TIMEOUT`] *and* nothing else arrived either.

use alloc::collections::VecDeque;
use bytes::{Bytes, BytesMut};
use core::fmt;
use core::time::Duration;

use crate::framing::{
    encode_packet, ConnectPacket, FrameDecoder, FrameError, Incoming, Packet, ProtocolVersion,
};
use crate::knobs::Knobs;
use crate::messages::coordination::PingRequest;
use crate::messages::ReplyPromise;
use crate::serializer::encode;
use crate::time::{Instant, Rng};
use crate::uid::{well_known, Uid};

pub use crate::knobs::{
    CONNECTION_MONITOR_IDLE_TIMEOUT, CONNECTION_MONITOR_LOOP_TIME, CONNECTION_MONITOR_TIMEOUT,
};

/// Why a connection ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectionError {
    /// The byte stream broke the framing rules (bad checksum, oversize packet...).
    Frame(FrameError),
    /// The peer speaks a protocol we cannot (FDB: `incompatible_protocol_version`).
    IncompatibleProtocol {
        /// The version the peer announced.
        peer: ProtocolVersion,
    },
    /// The ping went unanswered and nothing else arrived (FDB: `connection_failed`).
    Timeout,
    /// Nothing was sent or expected for a long time (FDB: `connection_idle`).
    Idle,
    /// The driver reported the socket closed or failed.
    Closed,
}

impl fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectionError::Frame(e) => write!(f, "framing error: {e}"),
            ConnectionError::IncompatibleProtocol { peer } => {
                write!(f, "peer speaks incompatible protocol {peer}")
            }
            ConnectionError::Timeout => write!(f, "connection monitor timed out"),
            ConnectionError::Idle => write!(f, "connection idle"),
            ConnectionError::Closed => write!(f, "connection closed"),
        }
    }
}

#[derive(Debug)]
enum State {
    /// Our ConnectPacket is queued; waiting for the peer's.
    Handshake,
    Established,
    /// The peer announced a version we do not speak. FlowTransport keeps such a connection
    /// open, but fdbserver sends nothing on it except its own pings, so its version is all
    /// there is to learn from it.
    Incompatible,
    Failed(ConnectionError),
}

#[derive(Debug)]
struct Ping {
    token: Uid,
    /// `bytes_received` when the current timeout window started.
    bytes_at_window: u64,
    window_ends: Instant,
}

/// A FlowTransport connection's protocol state.
#[derive(Debug)]
pub(crate) struct Connection {
    state: State,
    decoder: FrameDecoder,
    out: BytesMut,
    with_checksum: bool,
    version: ProtocolVersion,
    peer: Option<ConnectPacket>,
    /// The version of a peer that announced one we do not speak (kept once the connection
    /// fails too: what it announced is still news).
    incompatible: Option<ProtocolVersion>,
    incoming: VecDeque<Packet>,
    bytes_received: u64,
    last_data_sent: Instant,
    outstanding: usize,
    next_ping: Instant,
    ping: Option<Ping>,
    monitor: bool,
    /// Pings answered and ping windows that passed unanswered while other data arrived
    /// (`Peer::pingLatencies`' samples, `Peer::timeoutCount`).
    pings: (u32, u32),
    times: MonitorTimes,
}

/// The connection monitor's times: the `CONNECTION_MONITOR_*` flow knobs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MonitorTimes {
    /// How often a ping goes out.
    pub(crate) loop_time: Duration,
    /// How long a ping may go unanswered while nothing arrives.
    pub(crate) timeout: Duration,
    /// How long a connection may go unused before it is closed.
    pub(crate) idle_timeout: Duration,
}

impl MonitorTimes {
    /// The times `knobs` set.
    pub(crate) fn of(knobs: &Knobs) -> Self {
        MonitorTimes {
            loop_time: knobs.connection_monitor_loop_time,
            timeout: knobs.connection_monitor_timeout,
            idle_timeout: knobs.connection_monitor_idle_timeout,
        }
    }
}

impl Default for MonitorTimes {
    fn default() -> Self {
        MonitorTimes::of(&Knobs::default())
    }
}

impl Connection {
    /// Starts an outgoing connection: our ConnectPacket goes first. `tls` drops the packet
    /// checksums, as FDB does on TLS connections.
    pub(crate) fn new(now: Instant, tls: bool, version: ProtocolVersion) -> Self {
        let mut out = BytesMut::with_capacity(256);
        ConnectPacket::client(version).encode(&mut out);
        Connection {
            state: State::Handshake,
            decoder: FrameDecoder::new(true, !tls),
            out,
            with_checksum: !tls,
            version,
            peer: None,
            incompatible: None,
            incoming: VecDeque::new(),
            bytes_received: 0,
            last_data_sent: now,
            outstanding: 0,
            next_ping: now + CONNECTION_MONITOR_LOOP_TIME,
            ping: None,
            monitor: true,
            pings: (0, 0),
            times: MonitorTimes::default(),
        }
    }

    /// The connection with the monitor's times `times`.
    pub(crate) fn with_times(mut self, times: MonitorTimes) -> Self {
        self.next_ping = self.last_data_sent + times.loop_time;
        self.times = times;
        self
    }

    /// Turns the ping monitor off (for tests of other behaviour, and for server roles).
    #[cfg(test)]
    pub(crate) fn without_monitor(mut self) -> Self {
        self.monitor = false;
        self
    }

    /// The peer's protocol version, once its ConnectPacket arrived.
    pub(crate) fn peer_protocol(&self) -> Option<ProtocolVersion> {
        self.peer.as_ref().map(|p| p.protocol_version())
    }

    /// Pings answered, and ping timeouts survived (see [`Connection::handle_timeout`]).
    pub(crate) fn ping_counts(&self) -> (u32, u32) {
        self.pings
    }

    /// The peer's ConnectPacket, once received.
    #[cfg(test)]
    pub(crate) fn peer(&self) -> Option<&ConnectPacket> {
        self.peer.as_ref()
    }

    #[cfg(test)]
    pub(crate) fn is_established(&self) -> bool {
        matches!(self.state, State::Established)
    }

    /// The version of a peer that announced one we do not speak.
    pub(crate) fn incompatible_peer(&self) -> Option<ProtocolVersion> {
        self.incompatible
    }

    /// Why the connection failed, if it did.
    pub(crate) fn error(&self) -> Option<&ConnectionError> {
        match &self.state {
            State::Failed(e) => Some(e),
            _ => None,
        }
    }

    fn fail(&mut self, e: ConnectionError) {
        if !matches!(self.state, State::Failed(_)) {
            self.state = State::Failed(e);
            self.out.clear();
            self.ping = None;
        }
    }

    /// Bytes read from the socket.
    pub(crate) fn handle_input(
        &mut self,
        now: Instant,
        data: &[u8],
    ) -> Result<(), ConnectionError> {
        if let Some(e) = self.error() {
            return Err(e.clone());
        }
        self.bytes_received += data.len() as u64;
        self.decoder.feed(data);
        loop {
            match self.decoder.next_frame() {
                Ok(None) => return Ok(()),
                Ok(Some(Incoming::Connect(p))) => {
                    let peer = p.protocol_version();
                    if !peer.has_object_serializer_flag() {
                        // Not even a peer with stable interfaces: nothing to read from it.
                        let e = ConnectionError::IncompatibleProtocol { peer };
                        self.fail(e.clone());
                        return Err(e);
                    }
                    self.state = if self.version.accepts(peer) {
                        State::Established
                    } else {
                        self.incompatible = Some(peer);
                        State::Incompatible
                    };
                    self.peer = Some(p);
                }
                Ok(Some(Incoming::Packet(p))) => {
                    if let Some(ping) = &self.ping {
                        if p.token == ping.token {
                            self.pings.0 += 1;
                            self.ping = None;
                            self.next_ping = now + self.times.loop_time;
                            continue;
                        }
                    }
                    self.incoming.push_back(p);
                }
                Err(e) => {
                    let e = ConnectionError::Frame(e);
                    self.fail(e.clone());
                    return Err(e);
                }
            }
        }
    }

    /// Queues one packet to `token`. Packets may be queued during the handshake: the peer
    /// reads them after our ConnectPacket, as libfdb_c does.
    pub(crate) fn send(&mut self, now: Instant, token: Uid, message: &[u8]) {
        if matches!(self.state, State::Failed(_)) {
            return;
        }
        encode_packet(&mut self.out, token, message, self.with_checksum);
        if token != well_known::PING_PACKET {
            self.last_data_sent = now;
        }
    }

    /// How many requests on this connection await replies; the idle check leaves busy
    /// connections alone.
    pub(crate) fn set_outstanding(&mut self, n: usize) {
        self.outstanding = n;
    }

    /// Bytes to write to the socket, if any.
    pub(crate) fn poll_transmit(&mut self) -> Option<Bytes> {
        if self.out.is_empty() {
            None
        } else {
            Some(self.out.split().freeze())
        }
    }

    /// The next packet addressed to us.
    pub(crate) fn poll_packet(&mut self) -> Option<Packet> {
        self.incoming.pop_front()
    }

    /// When [`Connection::handle_timeout`] must next be called.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        if !self.monitor || matches!(self.state, State::Failed(_)) {
            return None;
        }
        let monitor = match &self.ping {
            Some(p) => p.window_ends,
            None => self.next_ping,
        };
        // The idle close applies only to a connection nothing waits on; a busy one past
        // its idle time must not ask to be woken for a check that does nothing (that
        // would spin the driver until its requests finish).
        if self.outstanding > 0 {
            return Some(monitor);
        }
        Some(monitor.min(self.last_data_sent + self.times.idle_timeout))
    }

    /// Runs the connection monitor.
    pub(crate) fn handle_timeout(
        &mut self,
        now: Instant,
        rng: &mut Rng,
    ) -> Result<(), ConnectionError> {
        if let Some(e) = self.error() {
            return Err(e.clone());
        }
        if !self.monitor {
            return Ok(());
        }
        if self.outstanding == 0 && now >= self.last_data_sent + self.times.idle_timeout {
            self.fail(ConnectionError::Idle);
            return Err(ConnectionError::Idle);
        }
        match &mut self.ping {
            Some(p) if now >= p.window_ends => {
                if p.bytes_at_window == self.bytes_received {
                    self.fail(ConnectionError::Timeout);
                    return Err(ConnectionError::Timeout);
                }
                // Data is flowing, the reply is just slow: keep waiting.
                self.pings.1 += 1;
                p.bytes_at_window = self.bytes_received;
                p.window_ends = now + self.times.timeout;
            }
            Some(_) => {}
            None if now >= self.next_ping => {
                let token = rng.uid();
                let msg = encode(&PingRequest {
                    reply: ReplyPromise { token },
                });
                encode_packet(
                    &mut self.out,
                    well_known::PING_PACKET,
                    &msg,
                    self.with_checksum,
                );
                self.ping = Some(Ping {
                    token,
                    bytes_at_window: self.bytes_received,
                    window_ends: now + self.times.timeout,
                });
                self.next_ping = now + rng.jittered(self.times.loop_time);
            }
            None => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framing::{encode_packet, CONNECT_PACKET_BODY_LEN};
    use crate::messages::{encode_reply, ErrorOr, Void};
    use bytes::BufMut;

    fn server_connect() -> BytesMut {
        let mut b = BytesMut::new();
        let mut p = ConnectPacket::client(ProtocolVersion::V7_3);
        p.canonical_remote_port = 4500;
        p.connection_id = 1;
        p.encode(&mut b);
        b
    }

    fn t(s: f64) -> Instant {
        Instant::from_secs_f64(s)
    }

    #[test]
    fn handshake_then_packets() {
        let mut c = Connection::new(t(0.0), false, ProtocolVersion::V7_3);
        let hello = c.poll_transmit().unwrap();
        assert_eq!(hello.len(), 44);
        c.send(t(0.0), Uid::new(1, 2), b"abcd");
        assert!(c.poll_transmit().is_some());
        let mut b = server_connect();
        encode_packet(&mut b, Uid::new(9, 9), b"reply", true);
        for byte in b.iter() {
            c.handle_input(t(0.1), &[*byte]).unwrap();
        }
        assert!(c.is_established());
        assert_eq!(c.peer().unwrap().canonical_remote_port, 4500);
        let p = c.poll_packet().unwrap();
        assert_eq!(p.token, Uid::new(9, 9));
        assert_eq!(&p.message[..], b"reply");
    }

    #[test]
    fn incompatible_peer_stays_for_stable_endpoints() {
        // A 7.4 server answering a 7.3 client: the connection stays open (its protocol info
        // and pings still answer) but is not established.
        let mut c = Connection::new(t(0.0), false, ProtocolVersion::V7_3);
        c.poll_transmit();
        let mut b = BytesMut::new();
        ConnectPacket::client(ProtocolVersion::V7_4).encode(&mut b);
        encode_packet(&mut b, Uid::new(9, 9), b"info", true);
        c.handle_input(t(0.0), &b).unwrap();
        assert!(!c.is_established());
        assert_eq!(
            c.incompatible_peer(),
            Some(ProtocolVersion(0x1FDB_00B0_7400_0000))
        );
        assert_eq!(c.poll_packet().unwrap().token, Uid::new(9, 9));
    }

    #[test]
    fn peer_without_object_serializer_is_refused() {
        let mut c = Connection::new(t(0.0), false, ProtocolVersion::V7_3);
        let mut b = BytesMut::new();
        b.put_u32_le(CONNECT_PACKET_BODY_LEN);
        b.put_u64_le(0x0FDB_00B0_6300_0000);
        b.put_bytes(0, CONNECT_PACKET_BODY_LEN as usize - 8);
        let e = c.handle_input(t(0.0), &b).unwrap_err();
        assert_eq!(
            e,
            ConnectionError::IncompatibleProtocol {
                peer: ProtocolVersion(0x0FDB_00B0_6300_0000)
            }
        );
        assert!(c.poll_transmit().is_none());
        assert!(c.handle_input(t(0.0), b"more").is_err());
    }

    #[test]
    fn ping_answered_keeps_connection() {
        let mut rng = Rng::new(1);
        let mut c = Connection::new(t(0.0), false, ProtocolVersion::V7_3);
        c.poll_transmit();
        c.handle_input(t(0.0), &server_connect()).unwrap();
        let at = c.poll_timeout().unwrap();
        assert_eq!(at, t(1.0));
        c.handle_timeout(at, &mut rng).unwrap();
        let sent = c.poll_transmit().expect("a ping");
        // The ping goes to the well-known ping token.
        assert_eq!(&sent[12..28], &well_known::PING_PACKET.to_bytes());
        let token = c.ping.as_ref().unwrap().token;
        let mut reply = BytesMut::new();
        encode_packet(
            &mut reply,
            token,
            &encode_reply(&ErrorOr::Ok(Void {})),
            true,
        );
        c.handle_input(t(1.5), &reply).unwrap();
        assert!(
            c.poll_packet().is_none(),
            "ping replies are consumed by the monitor"
        );
        assert!(c.ping.is_none());
        c.handle_timeout(t(3.6), &mut rng).unwrap();
        assert!(c.is_established());
    }

    #[test]
    fn silent_peer_times_out_but_slow_busy_peer_does_not() {
        let mut rng = Rng::new(1);
        let mut c = Connection::new(t(0.0), false, ProtocolVersion::V7_3);
        c.handle_input(t(0.0), &server_connect()).unwrap();
        c.handle_timeout(t(1.0), &mut rng).unwrap();
        // Other traffic arrives during the window: the connection lives on.
        let mut b = BytesMut::new();
        encode_packet(&mut b, Uid::new(5, 5), b"data", true);
        c.handle_input(t(2.0), &b).unwrap();
        c.handle_timeout(t(3.0), &mut rng).unwrap();
        // Then silence for a whole window.
        assert_eq!(
            c.handle_timeout(t(5.0), &mut rng),
            Err(ConnectionError::Timeout)
        );
        assert_eq!(c.error(), Some(&ConnectionError::Timeout));
    }

    #[test]
    fn busy_connection_past_its_idle_time_asks_for_no_wake_up_in_the_past() {
        // A request that waits long (a watch) and nothing sent for longer than the idle
        // time (or the clock stepped forward): the monitor's next wake-up must still be
        // ahead, or a driver calls `handle_timeout` again and again at the same instant.
        let mut rng = Rng::new(1);
        let mut c = Connection::new(t(0.0), false, ProtocolVersion::V7_3);
        c.handle_input(t(0.0), &server_connect()).unwrap();
        c.set_outstanding(1);
        c.handle_timeout(t(181.0), &mut rng).unwrap();
        assert!(c.ping.is_some(), "a ping went out");
        let next = c.poll_timeout().expect("the monitor runs");
        assert!(next > t(181.0), "next wake-up {next:?} is not ahead of now");
        // Once nothing waits, the idle close comes at the next check.
        c.set_outstanding(0);
        assert_eq!(c.poll_timeout(), Some(t(180.0)));
        assert_eq!(
            c.handle_timeout(t(181.5), &mut rng),
            Err(ConnectionError::Idle)
        );
    }

    /// The `CONNECTION_MONITOR_*` knobs: a ping every 0.25 s, answered within 0.5 s, and
    /// a connection unused for 10 s closed.
    #[test]
    fn the_monitor_keeps_the_times_the_knobs_set() {
        let knobs = Knobs::default()
            .with("connection_monitor_loop_time", "0.25")
            .unwrap()
            .with("connection_monitor_timeout", "0.5")
            .unwrap()
            .with("connection_monitor_idle_timeout", "10")
            .unwrap();
        let mut rng = Rng::new(1);
        let new = || {
            Connection::new(t(0.0), false, ProtocolVersion::V7_3)
                .with_times(MonitorTimes::of(&knobs))
        };
        let mut c = new();
        c.handle_input(t(0.0), &server_connect()).unwrap();
        c.set_outstanding(1);
        assert_eq!(c.poll_timeout(), Some(t(0.25)), "the first ping");
        c.handle_timeout(t(0.25), &mut rng).unwrap();
        assert!(c.ping.is_some());
        c.handle_timeout(t(0.7), &mut rng).unwrap();
        assert_eq!(
            c.handle_timeout(t(0.75), &mut rng),
            Err(ConnectionError::Timeout),
            "half a second of silence"
        );
        let mut c = new();
        c.handle_input(t(0.0), &server_connect()).unwrap();
        c.set_outstanding(0);
        (c.ping, c.next_ping) = (None, t(10_000.0));
        assert_eq!(
            c.handle_timeout(t(10.0), &mut rng),
            Err(ConnectionError::Idle)
        );
    }

    #[test]
    fn idle_connection_closes() {
        let mut rng = Rng::new(1);
        let mut c = Connection::new(t(0.0), false, ProtocolVersion::V7_3).without_monitor();
        assert_eq!(c.poll_timeout(), None);
        c.handle_timeout(t(1000.0), &mut rng).unwrap();
        let mut c = Connection::new(t(0.0), false, ProtocolVersion::V7_3);
        c.set_outstanding(0);
        c.ping = None;
        c.next_ping = t(10_000.0);
        assert_eq!(
            c.handle_timeout(t(181.0), &mut rng),
            Err(ConnectionError::Idle)
        );
    }
}
