//! mio driver for the sans-IO FoundationDB client in `fdb-protocol`: a blocking API over one
//! event loop that runs on the calling thread while a call waits.
//!
//! ```no_run
//! let mut db = fdb_driver_mio::Database::open(None).unwrap();
//! println!("read version {}", db.read_version().unwrap());
//! ```
//!
//! The loop only moves bytes and time: it opens the sockets the core asks for
//! ([`Event::Connect`]), writes its transmits, feeds it what arrives and calls
//! `handle_timeout` at its deadlines.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant as StdInstant};

use fdb_protocol::client::{
    Client, ClientConfig, ClientError, ConnectionId, Event, Priority, RequestId,
};
use fdb_protocol::cluster_file::{cluster_file_search_order, ClusterFile, ClusterFileError};
use fdb_protocol::messages::types::Version;
use fdb_protocol::time::Instant;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

pub use fdb_protocol as protocol;

/// Errors from the driver.
#[derive(Debug)]
pub enum Error {
    ClusterFileNotFound {
        tried: Vec<String>,
    },
    ClusterFile(ClusterFileError),
    Client(ClientError),
    /// The call did not complete within its time limit.
    TimedOut,
    Io(std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ClusterFileNotFound { tried } => {
                write!(f, "no readable cluster file (tried {tried:?})")
            }
            Error::ClusterFile(e) => write!(f, "bad cluster file: {e}"),
            Error::Client(e) => write!(f, "{e}"),
            Error::TimedOut => write!(f, "timed out"),
            Error::Io(e) => write!(f, "io: {e}"),
        }
    }
}

impl std::error::Error for Error {}

struct Socket {
    stream: TcpStream,
    connected: bool,
    out: VecDeque<u8>,
}

/// A database handle driving its own mio event loop.
pub struct Database {
    client: Client,
    poll: Poll,
    started: StdInstant,
    sockets: HashMap<ConnectionId, Socket>,
    done: HashMap<RequestId, Result<Version, ClientError>>,
}

impl Database {
    /// Opens the database named by a cluster file, searched for as libfdb_c does.
    pub fn open(cluster_file: Option<&Path>) -> Result<Database, Error> {
        let explicit = cluster_file.map(|p| p.to_string_lossy().into_owned());
        let env = std::env::var("FDB_CLUSTER_FILE").ok();
        let tried = cluster_file_search_order(explicit.as_deref(), env.as_deref());
        for path in &tried {
            if let Ok(text) = std::fs::read_to_string(path) {
                let cf = ClusterFile::parse(&text).map_err(Error::ClusterFile)?;
                // A fresh Instant's elapsed() is ~0: seed from std's per-process random
                // hasher keys and the wall clock instead, as the tokio driver does.
                use std::hash::{BuildHasher, Hasher};
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
                h.write_u128(wall.unwrap_or_default().as_nanos());
                let seed = h.finish();
                return Self::from_cluster_file(cf, seed);
            }
        }
        Err(Error::ClusterFileNotFound { tried })
    }

    /// Opens a database from a parsed cluster file with an explicit seed.
    pub fn from_cluster_file(cluster: ClusterFile, seed: u64) -> Result<Database, Error> {
        let started = StdInstant::now();
        let client = Client::new(ClientConfig::new(cluster, seed), Instant::ZERO);
        Ok(Database {
            client,
            poll: Poll::new().map_err(Error::Io)?,
            started,
            sockets: HashMap::new(),
            done: HashMap::new(),
        })
    }

    fn now(&self) -> Instant {
        Instant(self.started.elapsed())
    }

    /// A read version at default priority, waiting at most 30 s.
    pub fn read_version(&mut self) -> Result<Version, Error> {
        self.read_version_with(Priority::Default, Duration::from_secs(30))
    }

    /// A read version at `priority`, waiting at most `limit`.
    pub fn read_version_with(
        &mut self,
        priority: Priority,
        limit: Duration,
    ) -> Result<Version, Error> {
        let now = self.now();
        let id = self.client.get_read_version(now, priority);
        let deadline = StdInstant::now() + limit;
        loop {
            self.step(deadline)?;
            if let Some(r) = self.done.remove(&id) {
                return r.map_err(Error::Client);
            }
            if StdInstant::now() >= deadline {
                return Err(Error::TimedOut);
            }
        }
    }

    /// One turn of the loop: events, transmits, then wait for IO or the next deadline.
    fn step(&mut self, call_deadline: StdInstant) -> Result<(), Error> {
        while let Some(ev) = self.client.poll_event() {
            match ev {
                Event::Connect { conn, addr } => {
                    let sa = SocketAddr::new(addr.ip.into(), addr.port);
                    match TcpStream::connect(sa) {
                        Ok(mut stream) => {
                            let _ = stream.set_nodelay(true);
                            self.poll
                                .registry()
                                .register(
                                    &mut stream,
                                    Token(conn.0 as usize),
                                    Interest::READABLE | Interest::WRITABLE,
                                )
                                .map_err(Error::Io)?;
                            self.sockets.insert(
                                conn,
                                Socket {
                                    stream,
                                    connected: false,
                                    out: VecDeque::new(),
                                },
                            );
                        }
                        Err(_) => {
                            let now = self.now();
                            self.client.handle_connect_failed(conn, now);
                        }
                    }
                }
                Event::Close { conn, .. } => {
                    if let Some(mut s) = self.sockets.remove(&conn) {
                        let _ = self.poll.registry().deregister(&mut s.stream);
                    }
                }
                Event::ReadVersion { req, result } => {
                    self.done.insert(req, result);
                }
                Event::ClusterInfo { .. } | Event::Forward { .. } => {}
            }
        }
        while let Some(t) = self.client.poll_transmit() {
            if let Some(s) = self.sockets.get_mut(&t.conn) {
                s.out.extend(t.data.iter());
            }
        }
        let ids: Vec<ConnectionId> = self.sockets.keys().copied().collect();
        for id in ids {
            self.flush(id);
        }
        if !self.done.is_empty() {
            return Ok(());
        }
        let core_deadline = self.client.poll_timeout().map(|t| self.started + t.0);
        let wake = core_deadline.map_or(call_deadline, |d| d.min(call_deadline));
        let timeout = wake.saturating_duration_since(StdInstant::now());
        let mut events = Events::with_capacity(64);
        match self.poll.poll(&mut events, Some(timeout)) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::Io(e)),
        }
        for ev in events.iter() {
            let id = ConnectionId(ev.token().0 as u64);
            if ev.is_writable() {
                self.on_writable(id);
            }
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                self.on_readable(id);
            }
        }
        let now = self.now();
        if core_deadline.is_some_and(|d| StdInstant::now() >= d) {
            self.client.handle_timeout(now);
        }
        Ok(())
    }

    fn on_writable(&mut self, id: ConnectionId) {
        let now = self.now();
        let Some(s) = self.sockets.get_mut(&id) else {
            return;
        };
        if !s.connected {
            match s.stream.peer_addr() {
                Ok(_) => {
                    s.connected = true;
                    self.client.handle_connected(id, now);
                    while let Some(t) = self.client.poll_transmit() {
                        if let Some(s) = self.sockets.get_mut(&t.conn) {
                            s.out.extend(t.data.iter());
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::NotConnected => {
                    if matches!(s.stream.take_error(), Ok(Some(_)) | Err(_)) {
                        self.fail(id);
                    }
                    return;
                }
                Err(_) => {
                    self.fail(id);
                    return;
                }
            }
        }
        self.flush(id);
    }

    fn flush(&mut self, id: ConnectionId) {
        let Some(s) = self.sockets.get_mut(&id) else {
            return;
        };
        if !s.connected {
            return;
        }
        while !s.out.is_empty() {
            let (a, _) = s.out.as_slices();
            match s.stream.write(a) {
                Ok(0) => break,
                Ok(n) => {
                    s.out.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    self.fail(id);
                    return;
                }
            }
        }
    }

    fn on_readable(&mut self, id: ConnectionId) {
        let mut buf = [0u8; 64 * 1024];
        loop {
            let Some(s) = self.sockets.get_mut(&id) else {
                return;
            };
            if !s.connected {
                return;
            }
            match s.stream.read(&mut buf) {
                Ok(0) => {
                    self.fail(id);
                    return;
                }
                Ok(n) => {
                    let now = self.now();
                    self.client.handle_input(id, now, &buf[..n]);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    self.fail(id);
                    return;
                }
            }
        }
    }

    fn fail(&mut self, id: ConnectionId) {
        let now = self.now();
        let connected = match self.sockets.remove(&id) {
            Some(mut s) => {
                let _ = self.poll.registry().deregister(&mut s.stream);
                s.connected
            }
            None => return,
        };
        if connected {
            self.client.handle_closed(id, now);
        } else {
            self.client.handle_connect_failed(id, now);
        }
    }
}
