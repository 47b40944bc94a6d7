//! One address's connection and its reconnection state, as FlowTransport keeps a `Peer` per
//! address (`fdbrpc/FlowTransport.actor.cpp`).

use alloc::vec::Vec;
use core::time::Duration;

use crate::connection::Connection;
use crate::messages::NetworkAddress;
use crate::time::Instant;
use crate::uid::Uid;

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

/// A connection to one address and the requests waiting on it.
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
        let (ip, v6) = a.ip.octets16();
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
pub(crate) struct Backoff {
    pub(crate) last_connect: Instant,
    pub(crate) delay: Duration,
    /// What the `Peer` counted, for the client status.
    pub(crate) stats: PeerStats,
}

/// FlowTransport's `Peer` counters, kept across an address's connections.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PeerStats {
    pub(crate) bytes_sent: u64,
    pub(crate) bytes_received: u64,
    /// Connects that failed before the connection was established (`connectFailedCount`).
    pub(crate) connect_failed: u32,
    /// Pings answered and ping timeouts of the connections closed so far.
    pub(crate) pings: (u32, u32),
    /// The peer's protocol version, as its last ConnectPacket said.
    pub(crate) protocol: Option<u64>,
    /// Whether the peer announced a protocol this client does not speak (`!Peer::compatible`).
    pub(crate) incompatible: bool,
}
