//! The simulated network: connections between the clients' engines and the cluster's
//! processes, with FDB's (TCP's) ordering — a connection's bytes arrive in order in each
//! direction, its close after its bytes — and a delay per message drawn from the seed, so
//! messages on different connections overtake each other. Events wait in one queue ordered
//! by (time, sequence number): equal times keep the order they were made in.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fdb_protocol::ConnectionId;

use crate::cluster::server::Conn;

/// One connection: a client's end and, once accepted, a process's.
pub(crate) struct Link {
    pub(crate) client: usize,
    pub(crate) conn: ConnectionId,
    pub(crate) addr: SocketAddr,
    /// The process's end (after the connect reached it).
    pub(crate) server: Option<Arc<Conn>>,
    /// The client was told it is connected.
    pub(crate) connected: bool,
    /// The client has not closed its end (nor been told of a close).
    pub(crate) client_open: bool,
    /// The process has not closed its end (nor been told of a close).
    pub(crate) server_open: bool,
    /// When the last thing sent each way arrives: later sends arrive no earlier.
    pub(crate) to_server_at: Duration,
    pub(crate) to_client_at: Duration,
    /// A partition: everything sent this way is lost until the link is reset.
    pub(crate) cut_to_server: bool,
    pub(crate) cut_to_client: bool,
}

/// Something the network will do.
pub(crate) enum Ev {
    /// A connect reaches the process at the link's address.
    Connect(u64),
    /// The client learns its connect succeeded.
    Connected(u64),
    /// The client learns its connect was refused.
    Refused(u64),
    ToServer(u64, Bytes),
    ToClient(u64, Bytes),
    /// The process learns the client closed.
    ServerSeesClose(u64),
    /// The client learns the process closed.
    ClientSeesClose(u64),
    /// A fault the schedule planned (see [`super::Fault`]).
    Fault(super::Fault),
}

/// The links and the event queue.
#[derive(Default)]
pub(crate) struct Net {
    pub(crate) links: BTreeMap<u64, Link>,
    pub(crate) by_client: BTreeMap<(usize, ConnectionId), u64>,
    /// (time in nanoseconds, sequence number, slot), sorted latest first: the next event is
    /// the last, taken by a pop. The queue stays short (a few to a few dozen events), where
    /// an insert's copy of the keys behind it costs less than a heap's sifting both ways.
    /// The keys stay small; the events wait in `slots` (a free list reuses them, so no map
    /// is searched).
    queue: Vec<(u64, u64, u32)>,
    slots: Vec<Option<Ev>>,
    free: Vec<u32>,
    seq: u64,
    next_link: u64,
}

impl Net {
    /// Queues `ev` to happen at `at`.
    pub(crate) fn at(&mut self, at: Duration, ev: Ev) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(ev);
                i
            }
            None => {
                self.slots.push(Some(ev));
                (self.slots.len() - 1) as u32
            }
        };
        let key = (at.as_nanos() as u64, self.seq, slot);
        // After every later event (its sequence number is the largest yet, so an equal time
        // goes after the events already queued for it).
        let i = self.queue.partition_point(|q| *q > key);
        self.queue.insert(i, key);
    }

    /// When the next event happens.
    pub(crate) fn next_time(&self) -> Option<Duration> {
        self.queue.last().map(|q| Duration::from_nanos(q.0))
    }

    /// The next event if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Duration) -> Option<Ev> {
        match self.queue.last() {
            Some(q) if q.0 <= now.as_nanos() as u64 => {
                let (_, _, slot) = self.queue.pop()?;
                self.free.push(slot);
                self.slots[slot as usize].take()
            }
            _ => None,
        }
    }

    /// A new link for a client's connect.
    pub(crate) fn open(&mut self, client: usize, conn: ConnectionId, addr: SocketAddr) -> u64 {
        self.next_link += 1;
        let id = self.next_link;
        self.links.insert(
            id,
            Link {
                client,
                conn,
                addr,
                server: None,
                connected: false,
                client_open: true,
                server_open: false,
                to_server_at: Duration::ZERO,
                to_client_at: Duration::ZERO,
                cut_to_server: false,
                cut_to_client: false,
            },
        );
        self.by_client.insert((client, conn), id);
        id
    }

    /// Forgets links both ends are done with.
    pub(crate) fn reap(&mut self, id: u64) {
        if let Some(l) = self.links.get(&id) {
            if !l.client_open && !l.server_open {
                self.by_client.remove(&(l.client, l.conn));
                self.links.remove(&id);
            }
        }
    }
}
