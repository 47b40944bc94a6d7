//! mio driver for the sans-IO FoundationDB client in `fdb-protocol`: a blocking API over one
//! event loop that runs on the calling thread while a call waits.
//!
//! ```no_run
//! let mut db = fdb_driver_mio::Database::open(None).unwrap();
//! let n = db
//!     .run(|tx| {
//!         let n = tx.get(b"counter")?.map_or(0, |v| v[0]) + 1;
//!         tx.set(b"counter", &[n]);
//!         Ok(n)
//!     })
//!     .unwrap();
//! println!("counter is now {n}");
//! ```
//!
//! The loop only moves bytes and time: it opens the sockets the core asks for
//! ([`Event::Connect`]), resolves the host names it asks for ([`Event::Resolve`], with std's
//! blocking `ToSocketAddrs`), rewrites the cluster file when the coordinators moved
//! ([`Event::ClusterFileChanged`]), writes its transmits, feeds it what arrives and calls
//! `handle_timeout` at its deadlines.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant as StdInstant};

use bytes::Bytes;
use fdb_protocol::cluster_file::{cluster_file_search_order, ClusterFile, ClusterFileError};
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::types::Version;
use fdb_protocol::messages::types::{KeySelector, KeyValue};
use fdb_protocol::Instant;
use fdb_protocol::{
    Call, Client, ClientConfig, ClientError, Completion, ConnectionId, Event, Outcome, Priority,
    RequestId,
};
pub use fdb_protocol::{
    ConflictRangeType, RangeCursor, RangeOptions, RangeResult, TransactionId, TransactionOption,
};
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
    done: HashMap<RequestId, Completion>,
    /// The cluster file this database was opened from, rewritten when the coordinators move.
    cluster_file: Option<PathBuf>,
}

/// Replaces a cluster file's contents the way libfdb_c's `atomicReplace` does: write a
/// temporary file beside it, then rename it over the original.
pub fn replace_cluster_file(path: &Path, cluster: &ClusterFile) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(cluster.file_contents().as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// How long a blocking call waits by default.
pub const CALL_LIMIT: Duration = Duration::from_secs(30);

impl Error {
    /// The FDB error code, if this is an FDB error.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Client(e) => Some(e.code()),
            _ => None,
        }
    }
}

/// A pending watch (see [`Transaction::watch`]).
#[derive(Debug)]
pub struct Watch(Call<Version>);

/// A transaction borrowing its [`Database`]'s event loop. Calls block until done (at most
/// [`CALL_LIMIT`]); writes are buffered and never block.
pub struct Transaction<'a> {
    db: &'a mut Database,
    id: TransactionId,
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        let now = self.db.now();
        self.db.client.destroy_transaction(now, self.id);
    }
}

impl Transaction<'_> {
    fn call<T: Outcome>(
        &mut self,
        f: impl FnOnce(&mut Client, Instant, TransactionId) -> Call<T>,
    ) -> Result<T, Error> {
        let now = self.db.now();
        let req = f(&mut self.db.client, now, self.id);
        self.db.wait(req, CALL_LIMIT)
    }

    pub fn set_option(&mut self, opt: TransactionOption) -> Result<(), Error> {
        let now = self.db.now();
        self.db
            .client
            .set_option(now, self.id, opt)
            .map_err(Error::Client)
    }

    pub fn get_read_version(&mut self) -> Result<Version, Error> {
        self.call(|c, now, id| c.tx_read_version(now, id))
    }

    pub fn get(&mut self, key: &[u8]) -> Result<Option<Bytes>, Error> {
        self.call(|c, now, id| c.get(now, id, key, false))
    }

    pub fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Bytes>, Error> {
        self.call(|c, now, id| c.get(now, id, key, true))
    }

    pub fn get_key(&mut self, sel: KeySelector, snapshot: bool) -> Result<Bytes, Error> {
        self.call(|c, now, id| c.get_key(now, id, sel, snapshot))
    }

    /// About how many bytes `[begin, end)` holds, by the storage servers' byte samples
    /// (`fdb_transaction_get_estimated_range_size_bytes`).
    pub fn get_estimated_range_size_bytes(
        &mut self,
        begin: &[u8],
        end: &[u8],
    ) -> Result<i64, Error> {
        self.call(|c, now, id| c.get_estimated_range_size_bytes(now, id, begin, end))
    }

    /// Keys cutting `[begin, end)` into chunks of about `chunk_size` bytes, from `begin` to
    /// `end` (`fdb_transaction_get_range_split_points`).
    pub fn get_range_split_points(
        &mut self,
        begin: &[u8],
        end: &[u8],
        chunk_size: i64,
    ) -> Result<Vec<Bytes>, Error> {
        self.call(|c, now, id| c.get_range_split_points(now, id, begin, end, chunk_size))
    }

    /// One batch of rows between two selectors.
    pub fn get_range_batch(
        &mut self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Result<RangeResult, Error> {
        self.call(|c, now, id| c.get_range(now, id, begin, end, opts, snapshot))
    }

    /// Every row in `[begin, end)` (at most `limit` if non-zero), in batches.
    pub fn get_range(
        &mut self,
        begin: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<KeyValue>, Error> {
        let mut cursor = RangeCursor::new(
            KeySelector::first_greater_or_equal(Bytes::copy_from_slice(begin)),
            KeySelector::first_greater_or_equal(Bytes::copy_from_slice(end)),
            RangeOptions {
                limit,
                ..RangeOptions::default()
            },
        );
        while let Some((b, e, o)) = cursor.next_request() {
            let batch = self.get_range_batch(b, e, o, false)?;
            cursor.feed(batch);
        }
        Ok(cursor.into_rows())
    }

    pub fn set(&mut self, key: &[u8], value: &[u8]) {
        let _ = self.db.client.set(self.id, key, value);
    }

    pub fn clear(&mut self, key: &[u8]) {
        let _ = self.db.client.clear(self.id, key);
    }

    pub fn clear_range(&mut self, begin: &[u8], end: &[u8]) {
        let _ = self.db.client.clear_range(self.id, begin, end);
    }

    pub fn atomic_op(&mut self, key: &[u8], param: &[u8], kind: u8) {
        let _ = self.db.client.atomic_op(self.id, key, param, kind);
    }

    pub fn add_conflict_range(&mut self, begin: &[u8], end: &[u8], kind: ConflictRangeType) {
        let _ = self.db.client.add_conflict_range(self.id, begin, end, kind);
    }

    /// Commits; returns the commit version (`-1` when nothing was written).
    pub fn commit(&mut self) -> Result<Version, Error> {
        self.call(|c, now, id| c.commit(now, id))
            .map(|c: fdb_protocol::Committed| c.version)
    }

    pub fn versionstamp(&self) -> Option<[u8; 10]> {
        self.db.client.versionstamp(self.id)
    }

    /// Waits the backoff and resets the transaction if `code` is retryable, else fails.
    pub fn on_error(&mut self, code: ErrorCode) -> Result<(), Error> {
        self.call(|c, now, id| c.on_error(now, id, code))
    }

    pub fn reset(&mut self) {
        let now = self.db.now();
        self.db.client.reset_transaction(now, self.id);
    }

    /// Registers a watch; it starts at commit. Wait for it with [`Database::wait_watch`].
    pub fn watch(&mut self, key: &[u8]) -> Watch {
        let now = self.db.now();
        Watch(self.db.client.watch(now, self.id, key))
    }
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
                let mut db = Self::from_cluster_file(cf, seed)?;
                db.cluster_file = Some(PathBuf::from(path));
                return Ok(db);
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
            cluster_file: None,
        })
    }

    /// Opens the database named by the cluster file at `path` with an explicit seed; the file
    /// is rewritten if the coordinators forward the client elsewhere.
    pub fn open_file_with_seed(path: &Path, seed: u64) -> Result<Database, Error> {
        let bytes = std::fs::read(path).map_err(Error::Io)?;
        let cf = ClusterFile::parse_file_bytes(&bytes).map_err(Error::ClusterFile)?;
        let mut db = Self::from_cluster_file(cf, seed)?;
        db.cluster_file = Some(path.to_path_buf());
        Ok(db)
    }

    /// The connection string in use (it changes when the coordinators forward the client).
    pub fn cluster(&self) -> &ClusterFile {
        self.client.cluster()
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
        self.wait(id, limit)
    }

    /// Runs the loop until `call` finishes, at most `limit`.
    pub fn wait<T: Outcome>(&mut self, call: Call<T>, limit: Duration) -> Result<T, Error> {
        let deadline = StdInstant::now() + limit;
        let id = call.id();
        loop {
            if let Some(done) = self.done.remove(&id) {
                return call.take(done).map_err(Error::Client);
            }
            self.step(deadline, id)?;
            if let Some(done) = self.done.remove(&id) {
                return call.take(done).map_err(Error::Client);
            }
            if StdInstant::now() >= deadline {
                let now = self.now();
                self.client.cancel(now, id);
                return Err(Error::TimedOut);
            }
        }
    }

    /// Options every transaction created from now on starts with (and returns to on reset),
    /// like libfdb_c's `transaction_*` database options.
    pub fn set_transaction_defaults(&mut self, defaults: Vec<TransactionOption>) {
        self.client.set_transaction_defaults(defaults);
    }

    /// A new transaction; it lives as long as the returned handle.
    pub fn create_transaction(&mut self) -> Transaction<'_> {
        let now = self.now();
        let id = self.client.create_transaction(now);
        Transaction { db: self, id }
    }

    /// Runs `f` in a transaction and commits it, retrying as `on_error` allows (the standard
    /// FDB retry loop).
    pub fn run<T>(
        &mut self,
        mut f: impl FnMut(&mut Transaction<'_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut tx = self.create_transaction();
        loop {
            let err = match f(&mut tx) {
                Ok(v) => match tx.commit() {
                    Ok(_) => return Ok(v),
                    Err(e) => e,
                },
                Err(e) => e,
            };
            let Some(code) = err.code() else {
                return Err(err);
            };
            tx.on_error(code)?;
        }
    }

    /// Waits for a watch to fire, at most `limit`.
    pub fn wait_watch(&mut self, w: Watch, limit: Duration) -> Result<Version, Error> {
        self.wait(w.0, limit)
    }

    /// Cancels a watch.
    pub fn cancel_watch(&mut self, w: Watch) {
        let now = self.now();
        self.client.cancel(now, w.0.id());
    }

    /// One turn of the loop: events, transmits, then wait for IO or the next deadline.
    fn step(&mut self, call_deadline: StdInstant, waiting_for: RequestId) -> Result<(), Error> {
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
                Event::Complete(done) => {
                    self.done.insert(done.request(), done);
                }
                Event::Resolve { host, port } => {
                    // Blocking, like the rest of this driver's calls.
                    let ips: Vec<IpAddr> = match (host.as_str(), port).to_socket_addrs() {
                        Ok(addrs) => addrs.map(|a| a.ip()).collect(),
                        Err(e) => {
                            tracing::warn!(%host, port, error = %e, "host name lookup failed");
                            Vec::new()
                        }
                    };
                    let now = self.now();
                    self.client.handle_resolved(now, &host, port, &ips);
                }
                Event::CoordinatorsUnreachable => {
                    if let Some(cf) =
                        reread_cluster_file(self.cluster_file.as_deref(), self.client.cluster())
                    {
                        let now = self.now();
                        self.client.set_cluster(now, cf);
                    }
                }
                Event::ClusterFileChanged { cluster } => {
                    if let Some(path) = &self.cluster_file {
                        match replace_cluster_file(path, &cluster) {
                            Ok(()) => tracing::info!(
                                path = %path.display(),
                                connection_string = %cluster,
                                "cluster file updated"
                            ),
                            Err(e) => tracing::warn!(
                                path = %path.display(),
                                error = %e,
                                "cannot update the cluster file"
                            ),
                        }
                    }
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
        if self.done.contains_key(&waiting_for) {
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

/// Reads the cluster file again after every coordinator failed: if it now holds another
/// connection string (an operator moved the coordinators), that is the one to use.
fn reread_cluster_file(path: Option<&Path>, current: &ClusterFile) -> Option<ClusterFile> {
    let bytes = std::fs::read(path?).ok()?;
    let cf = ClusterFile::parse_file_bytes(&bytes).ok()?;
    if cf.to_string() == current.to_string() {
        return None;
    }
    tracing::info!(connection_string = %cf, "the cluster file changed: using it");
    Some(cf)
}
