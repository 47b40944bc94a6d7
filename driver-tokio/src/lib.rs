//! The tokio driver for the sans-IO FoundationDB client.
//!
//! The API — [`Database`], [`Transaction`], the retry loop, [`Error`] — is `fdb-api`'s,
//! the same for every driver; this crate is only its runtime. One background task owns the
//! [`Engine`] (the protocol core and the requests callers wait for) and does only IO: it opens
//! the sockets the core asks for, resolves host names (`tokio::net::lookup_host`), writes the
//! cluster file when the coordinators moved (on the blocking pool), writes what the core
//! transmits, feeds it what arrives, and wakes it at its deadlines.
//!
//! ```no_run
//! # async fn demo() -> Result<(), fdb_driver_tokio::Error> {
//! let db = fdb_driver_tokio::Database::open(None)?;
//! // The standard retry loop: the closure may run again after a conflict.
//! let n = db
//!     .run(|tx| async move {
//!         let n = tx.get(b"counter").await?.map_or(0, |v| v[0]) + 1;
//!         tx.set(b"counter", &[n]);
//!         Ok(n)
//!     })
//!     .await?;
//! println!("counter is now {n}");
//! # Ok(())
//! # }
//! ```
//!
//! # Where the loop runs
//!
//! A database's loop runs where it is opened ([`LoopPlacement::Auto`]):
//!
//! * inside a **multi-thread** runtime, on that runtime, sharing its workers with the
//!   callers: a turn of the loop yields once so that the callers it woke queue their next
//!   requests, which then go out in the same write, and no request crosses to another
//!   thread (see `tests/bench/BENCHMARKS.md`). Such a database stops with its runtime:
//!   later calls fail with [`Error::Shutdown`];
//! * in a **current-thread** runtime or **outside any runtime**, on a thread of its own
//!   (`fdb-client`, with a current-thread runtime of its own), as libfdb_c's network
//!   thread: the database is used from any runtime or executor
//!   (`futures::executor::block_on` too) and outlives the runtime it was opened in, so a
//!   `static` database shared by `#[tokio::test]`s (each its own runtime) works. On a
//!   current-thread runtime the loop would share the application's one thread and stop
//!   with that runtime, which often ends before the database (each `#[tokio::test]`).
//!
//! [`with_loop_placement`] chooses otherwise ([`LoopPlacement::OwnThread`] for a static
//! opened in a multi-thread runtime, [`LoopPlacement::CurrentRuntime`] to keep a
//! current-thread application on one thread).
//!
//! # Layers
//!
//! The tuple encoding, subspaces and the directory layer are the other bindings' (Python's
//! `fdb.tuple`, `fdb.Subspace`, `fdb.directory`), byte for byte, so data written through one
//! is read through the others.
//!
//! Tuples ([`protocol::tuple`]) pack to keys that sort as the tuples do:
//!
//! ```
//! use fdb_driver_tokio::protocol::tuple::{pack, unpack};
//!
//! let key = pack(&("users", 42i64, true));
//! assert_eq!(key, b"\x02users\x00\x15\x2a\x27");
//! let (table, id, active): (String, i64, bool) = unpack(&key).unwrap();
//! assert_eq!((table.as_str(), id, active), ("users", 42, true));
//! // Order is kept: (users, 42) sorts before (users, 43).
//! assert!(pack(&("users", 42i64)) < pack(&("users", 43i64)));
//! ```
//!
//! A [`Subspace`] is a prefix with the tuple encoding after it:
//!
//! ```
//! use fdb_driver_tokio::Subspace;
//!
//! let app = Subspace::from_bytes(&b"app"[..]);
//! let users = app.subspace(&("users",));
//! let key = users.pack(&(7i64, "email"));
//! assert!(users.contains(&key) && app.contains(&key));
//! let (id, field): (i64, String) = users.unpack(&key).unwrap();
//! assert_eq!((id, field.as_str()), (7, "email"));
//! // Every key of the subspace, for a range read or a clear.
//! let (begin, end) = users.range();
//! assert!(begin.as_slice() < key.as_slice() && key.as_slice() < end.as_slice());
//! ```
//!
//! The [`directory`] layer hands out short prefixes by path; the same directory opens the
//! same prefix from any binding:
//!
//! ```no_run
//! use fdb_driver_tokio::directory::{self, DirectoryLayer};
//!
//! # async fn demo() -> Result<(), directory::DirectoryError> {
//! let db = fdb_driver_tokio::Database::open(None)?;
//! let root = DirectoryLayer::default();
//! let users = directory::run(&db, |tx| {
//!     let root = root.clone();
//!     async move { root.create_or_open(&tx, &["app", "users"], None, None).await }
//! })
//! .await?;
//! let users = users.subspace()?.clone();
//! db.run(|tx| {
//!     let users = users.clone();
//!     async move {
//!         tx.set(&users.pack(&(7i64, "email")), b"ann@example.com");
//!         Ok(())
//!     }
//! })
//! .await?;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};

use bytes::Bytes;
use fdb_protocol::ConnectionId;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use tokio::io::{AsyncRead, AsyncReadExt};
#[cfg(feature = "tls")]
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};
use tokio::task::AbortHandle;
use tracing::Instrument;

#[cfg(feature = "tls")]
use fdb_api::driver::server_name;
use fdb_api::driver::{persist_cluster_file, Clock, Driver, Engine, IoRequest, Op};

/// The API, the same for every driver; `driver` holds what only driver writers (and code
/// generic over drivers) need.
pub use fdb_api::*;

/// A database on the tokio runtime: [`fdb_api::Database`] over [`TokioDriver`], whose
/// methods are listed below. Opened with [`Database::open`]; where its loop runs:
/// [`LoopPlacement`].
pub type Database = fdb_api::Database<TokioDriver>;
/// A transaction on the tokio runtime ([`fdb_api::Transaction`]; methods below).
pub type Transaction = fdb_api::Transaction<TokioDriver>;
/// A tenant on the tokio runtime ([`fdb_api::Tenant`]; methods below).
pub type Tenant = fdb_api::Tenant<TokioDriver>;
/// A watch on the tokio runtime.
pub type Watch = fdb_api::Watch<TokioDriver>;
/// The snapshot view of a transaction on the tokio runtime.
pub type Snapshot = fdb_api::Snapshot<TokioDriver>;
/// A range read's batches, as a `Stream`.
pub type RangeStream = fdb_api::RangeStream<TokioDriver>;
/// A range read's rows, as a `Stream`.
pub type KeyValueStream = fdb_api::KeyValueStream<TokioDriver>;

/// What the engine reacts to: the API's ops and the socket tasks' news.
enum Input {
    Op(Op),
    Connected(ConnectionId, Writer),
    ConnectFailed(ConnectionId),
    Data(ConnectionId, Vec<u8>, Arc<Spares>),
    Closed(ConnectionId),
    Resolved(String, u16, Vec<IpAddr>),
}

/// The tokio driver: a handle to a database's loop ([`Database::driver`]). Cheap to clone;
/// the loop ends when the last handle is dropped. What it implements is in [`driver`].
#[derive(Clone)]
pub struct TokioDriver {
    shared: Arc<Shared>,
    /// Counts the handles: the last one dropped stops the loop.
    _alive: Arc<Alive>,
    clock: Clock,
}

/// Dropped with the last [`TokioDriver`]: tells the loop to end.
struct Alive(Arc<Shared>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
        self.0.wake.notify_one();
    }
}

/// Where a database's loop (its task and its connections' tasks) runs; chosen when the
/// database is opened (see [`with_loop_placement`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoopPlacement {
    /// On the multi-thread runtime the database is opened in; on a thread of its own when
    /// opened in a current-thread runtime or outside any runtime.
    #[default]
    Auto,
    /// On a thread of its own, with a current-thread runtime of its own, like libfdb_c's
    /// network thread: the database works from any runtime or executor and outlives the
    /// runtime it was opened in. The thread ends with the last handle.
    OwnThread,
    /// On the runtime the database is opened in, whatever its flavor; opening fails outside
    /// a runtime, and every call fails with [`Error::Shutdown`] once that runtime ends.
    CurrentRuntime,
}

thread_local! {
    static PLACEMENT: std::cell::Cell<LoopPlacement> =
        const { std::cell::Cell::new(LoopPlacement::Auto) };
}

/// Runs `open` with every database it opens placed as `placement` says (the default is
/// [`LoopPlacement::Auto`]). For a database that must outlive the multi-thread runtime it is
/// opened in, such as a `static` shared by `#[tokio::test(flavor = "multi_thread")]`s:
///
/// ```no_run
/// use fdb_driver_tokio::{with_loop_placement, Database, LoopPlacement};
/// let db = with_loop_placement(LoopPlacement::OwnThread, || Database::open(None))?;
/// # Ok::<(), fdb_driver_tokio::Error>(())
/// ```
pub fn with_loop_placement<T>(placement: LoopPlacement, open: impl FnOnce() -> T) -> T {
    struct Restore(LoopPlacement);
    impl Drop for Restore {
        fn drop(&mut self) {
            PLACEMENT.with(|p| p.set(self.0));
        }
    }
    let _restore = Restore(PLACEMENT.with(|p| p.replace(placement)));
    open()
}

impl Driver for TokioDriver {
    /// Spawns the loop where [`LoopPlacement`] says: on the current multi-thread runtime (the
    /// tuned path: the loop shares the workers with its callers), else on a thread of its own.
    fn start(engine: Engine) -> Result<Self, Error> {
        let current = tokio::runtime::Handle::try_current();
        let handle = match (PLACEMENT.with(|p| p.get()), current) {
            (LoopPlacement::OwnThread, _) => None,
            (LoopPlacement::CurrentRuntime, Err(e)) => {
                return Err(Error::Io(std::io::Error::other(format!(
                    "LoopPlacement::CurrentRuntime needs a tokio runtime: {e}"
                ))))
            }
            (LoopPlacement::CurrentRuntime, Ok(h)) => Some(h),
            (LoopPlacement::Auto, Ok(h))
                if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread =>
            {
                Some(h)
            }
            (LoopPlacement::Auto, _) => None,
        };
        let clock = engine.clock();
        let span = tracing::info_span!("fdb_client");
        let shared = Arc::new(Shared {
            core: Mutex::new(Some(Core {
                engine,
                writers: HashMap::new(),
                sockets: HashMap::new(),
                io: VecDeque::new(),
                armed: None,
                owed: false,
                spare: VecDeque::new(),
            })),
            inbox: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            span: span.clone(),
        });
        let task = run(shared.clone()).instrument(span);
        match handle {
            Some(handle) => {
                handle.spawn(task);
            }
            None => {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .thread_name("fdb-client")
                    .build()
                    .map_err(Error::Io)?;
                std::thread::Builder::new()
                    .name("fdb-client".into())
                    .spawn(move || rt.block_on(task))
                    .map_err(Error::Io)?;
            }
        }
        Ok(TokioDriver {
            _alive: Arc::new(Alive(shared.clone())),
            shared,
            clock,
        })
    }

    /// Runs `op` at once on the caller's thread when nobody else is running the engine
    /// (see [`Shared`]), else queues it for whoever is.
    fn send(&self, op: Op) -> bool {
        self.shared.feed(Input::Op(op))
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    fn supports_tls() -> bool {
        cfg!(feature = "tls")
    }
}

/// How a connection's socket is wrapped.
enum Wrap {
    Plain,
    #[cfg(feature = "tls")]
    Tls(std::sync::Arc<tokio_rustls::rustls::ClientConfig>),
}

impl Wrap {
    /// The wrapping for a connection to a TLS address or not; `None` when TLS is needed but
    /// not available (a TLS address is never connected to in plaintext).
    fn of(engine: &Engine, addr: SocketAddr, tls: bool) -> Option<Wrap> {
        if !tls {
            return Some(Wrap::Plain);
        }
        #[cfg(feature = "tls")]
        match engine.tls().client_config() {
            Ok(config) => Some(Wrap::Tls(config)),
            Err(error) => {
                tracing::warn!(%addr, %error, "refusing a TLS connection");
                None
            }
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = engine;
            tracing::warn!(%addr, error = %TlsError::NotBuilt, "refusing a TLS connection");
            None
        }
    }
}

/// A database's engine and what its callers and tasks share. Whoever has something for the
/// engine (a caller's op, a socket's bytes) and finds it free runs it there and then, on its
/// own thread, and writes what it produced: a request costs no wake-up of another task (on a
/// multi-thread runtime such wake-ups unpark the idle worker: 2.1 context switches per
/// transaction in set100 ×32 when every op and every read went through the loop task; see
/// `tests/bench/BENCHMARKS.md`). Whoever finds it busy queues the input in the inbox, and
/// the holder takes it before letting go. The loop task keeps what needs a runtime: timers,
/// connecting, name lookups, the cluster file.
struct Shared {
    /// `None` once the loop ended: calls fail with [`Error::Shutdown`].
    core: Mutex<Option<Core>>,
    /// Inputs that found the engine busy, in order.
    inbox: Mutex<VecDeque<Input>>,
    /// Wakes the loop task: IO for it to start, an earlier deadline, an inbox left over, or
    /// the last handle gone.
    wake: Notify,
    /// Every handle is dropped.
    closed: AtomicBool,
    /// The loop's span, entered wherever the engine runs.
    span: tracing::Span,
}

/// The engine and the IO state that goes with it, under [`Shared`]'s lock.
struct Core {
    engine: Engine,
    writers: HashMap<ConnectionId, Writer>,
    /// The socket task of every connection the core has not closed.
    sockets: HashMap<ConnectionId, AbortHandle>,
    /// What the loop task is to carry out.
    io: VecDeque<IoRequest>,
    /// The deadline the loop task sleeps until.
    armed: Option<std::time::Instant>,
    /// A socket task that woke several callers writes for them after they ran: their
    /// requests go out in one write (as on the mio driver, 0.1–0.3 sends per transaction
    /// at 32 workers instead of one per request). Nobody else writes meanwhile.
    owed: bool,
    /// The inbox's other buffer, swapped in to take it whole.
    spare: VecDeque<Input>,
}

/// What feeding the engine left the caller to do.
enum Fed {
    /// Nothing.
    Done,
    /// Let the tasks it woke run, then [`Shared::pay`].
    Owed,
    /// The loop ended.
    Gone,
}

/// How many times a caller takes the inbox over before leaving the rest to the loop task.
const ROUNDS: usize = 4;

impl Shared {
    /// The lock; a poisoned one (a panic in the engine) ends the engine, so its callers see
    /// [`Error::Shutdown`] instead of waiting forever.
    fn lock(&self) -> MutexGuard<'_, Option<Core>> {
        self.core.lock().unwrap_or_else(|p| {
            let mut g = p.into_inner();
            *g = None;
            g
        })
    }

    /// The lock if it is free.
    fn try_lock(&self) -> Option<MutexGuard<'_, Option<Core>>> {
        match self.core.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::WouldBlock) => None,
            Err(TryLockError::Poisoned(p)) => {
                let mut g = p.into_inner();
                *g = None;
                Some(g)
            }
        }
    }

    fn inbox(&self) -> MutexGuard<'_, VecDeque<Input>> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `input` and runs the engine if it is free. `false` once the loop ended.
    fn feed(&self, input: Input) -> bool {
        self.inbox().push_back(input);
        self.combine()
    }

    /// Runs the engine on the inbox, unless someone else holds it: they take it before they
    /// let go, and look at the inbox again after (so an input never waits for nobody).
    fn combine(&self) -> bool {
        for _ in 0..ROUNDS {
            {
                let Some(mut g) = self.try_lock() else {
                    return true;
                };
                let Some(core) = g.as_mut() else {
                    drop(g);
                    self.discard();
                    return false;
                };
                let _span = self.span.enter();
                core.drain(&self.inbox);
                core.finish(self, true);
            }
            if self.inbox().is_empty() {
                return true;
            }
        }
        self.wake.notify_one();
        true
    }

    /// Feeds bytes read from `conn`: from the read buffer itself when the engine is free.
    fn feed_data(&self, conn: ConnectionId, data: &[u8], spares: &Arc<Spares>) -> Fed {
        let owed = {
            let Some(mut g) = self.try_lock() else {
                let mut chunk = spares.take();
                chunk.extend_from_slice(data);
                return match self.feed(Input::Data(conn, chunk, spares.clone())) {
                    true => Fed::Done,
                    false => Fed::Gone,
                };
            };
            let Some(core) = g.as_mut() else {
                return Fed::Gone;
            };
            let _span = self.span.enter();
            // What came before these bytes goes first.
            core.drain(&self.inbox);
            let before = core.engine.waiting();
            core.engine.handle_input(conn, data);
            core.poll_io();
            let after = core.engine.waiting();
            // Callers were woken and others wait: they will have requests. With one caller
            // there is nobody to wait for (and a yield would only wake the idle worker).
            let owe = !core.owed && after < before && (before - after > 1 || after > 0);
            core.owed |= owe;
            core.finish(self, !owe);
            owe
        };
        if !self.inbox().is_empty() {
            self.combine();
        }
        if owed {
            Fed::Owed
        } else {
            Fed::Done
        }
    }

    /// Writes what the callers woken by [`Fed::Owed`] queued while they ran.
    fn pay(&self) {
        {
            let mut g = self.lock();
            let Some(core) = g.as_mut() else { return };
            let _span = self.span.enter();
            core.owed = false;
            core.drain(&self.inbox);
            core.finish(self, true);
        }
        if !self.inbox().is_empty() {
            self.combine();
        }
    }

    /// Drops what the inbox holds once the engine is gone: its callers see the loop gone.
    fn discard(&self) {
        let dropped = std::mem::take(&mut *self.inbox());
        drop(dropped);
    }
}

impl Core {
    /// Takes what is queued, in order (a bounded number of times: the inbox may keep
    /// filling).
    fn drain(&mut self, inbox: &Mutex<VecDeque<Input>>) {
        for _ in 0..ROUNDS {
            {
                let mut q = inbox.lock().unwrap_or_else(PoisonError::into_inner);
                if q.is_empty() {
                    return;
                }
                std::mem::swap(&mut *q, &mut self.spare);
            }
            while let Some(input) = self.spare.pop_front() {
                self.handle(input);
                self.poll_io();
            }
        }
    }

    /// Delivers the core's completions and keeps what needs IO for the loop task.
    fn poll_io(&mut self) {
        while let Some(io) = self.engine.poll_io() {
            self.io.push_back(io);
        }
    }

    /// Ends a turn on the engine: writes (unless a socket task owes the write), and wakes
    /// the loop task when it has IO to start or a deadline earlier than its own.
    fn finish(&mut self, shared: &Shared, write: bool) {
        if write && !self.owed {
            self.flush();
        }
        let d = self.engine.deadline();
        let earlier = d.is_some_and(|d| self.armed.is_none_or(|a| d < a));
        if earlier || !self.io.is_empty() {
            self.armed = d.or(self.armed);
            shared.wake.notify_one();
        }
    }

    /// Writes what the core has for each connection: one write per connection per turn,
    /// since the core gathers a connection's frames into one transmission.
    fn flush(&mut self) {
        while let Some(t) = self.engine.poll_transmit() {
            if let Some(w) = self.writers.get(&t.conn) {
                w.write(t.data);
            }
        }
    }

    /// Feeds one input to the core.
    fn handle(&mut self, input: Input) {
        let engine = &mut self.engine;
        match input {
            Input::Op(op) => op(engine),
            Input::Connected(conn, w) => {
                // A connection the core already gave up on is dropped with `w`.
                if self.sockets.contains_key(&conn) {
                    self.writers.insert(conn, w);
                    engine.handle_connected(conn);
                }
            }
            Input::ConnectFailed(conn) => {
                if self.sockets.remove(&conn).is_some() {
                    engine.handle_connect_failed(conn);
                }
            }
            Input::Data(conn, data, spares) => {
                engine.handle_input(conn, &data);
                spares.put(data);
            }
            Input::Closed(conn) => {
                self.writers.remove(&conn);
                if self.sockets.remove(&conn).is_some() {
                    engine.handle_closed(conn);
                }
            }
            Input::Resolved(host, port, ips) => engine.handle_resolved(&host, port, &ips),
        }
    }

    /// Carries out what the core asks of the IO side (on the loop task: it spawns).
    fn serve_io(&mut self, shared: &Arc<Shared>) {
        while let Some(io) = self.io.pop_front() {
            match io {
                IoRequest::Connect { conn, addr, tls } => match Wrap::of(&self.engine, addr, tls) {
                    Some(wrap) => {
                        let task = tokio::spawn(connect(conn, addr, wrap, shared.clone()));
                        self.sockets.insert(conn, task.abort_handle());
                    }
                    None => {
                        self.engine.handle_connect_failed(conn);
                        self.poll_io();
                    }
                },
                IoRequest::Close { conn } => {
                    // Also ends a connect still in progress (the core's connect timeout).
                    self.writers.remove(&conn);
                    if let Some(task) = self.sockets.remove(&conn) {
                        task.abort();
                        // It may have owed a write when it was stopped.
                        self.owed = false;
                    }
                }
                IoRequest::Resolve { host, port } => {
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let ips = match tokio::net::lookup_host((host.as_str(), port)).await {
                            Ok(addrs) => addrs.map(|a| a.ip()).collect(),
                            Err(e) => {
                                tracing::warn!(%host, port, error = %e, "host name lookup failed");
                                Vec::new()
                            }
                        };
                        shared.feed(Input::Resolved(host, port, ips));
                    });
                }
                IoRequest::WriteClusterFile { path, cluster } => {
                    tokio::task::spawn_blocking(move || persist_cluster_file(&path, &cluster));
                }
            }
        }
    }
}

/// Ends the engine with the loop task, also when the runtime drops it: waiting callers see
/// [`Error::Shutdown`], and the socket tasks stop.
struct Stop(Arc<Shared>);

impl Drop for Stop {
    fn drop(&mut self) {
        let core = self.0.lock().take();
        if let Some(core) = &core {
            for task in core.sockets.values() {
                task.abort();
            }
        }
        drop(core);
        self.0.discard();
    }
}

/// The loop task: the engine's deadlines and what needs the runtime (see [`Shared`]).
async fn run(shared: Arc<Shared>) {
    let _stop = Stop(shared.clone());
    // One timer for the loop's life, moved when the core's deadline moves: a fresh `Sleep`
    // per wait registered and deregistered a timer entry every time.
    let timer = tokio::time::sleep_until(tokio::time::Instant::now());
    tokio::pin!(timer);
    let mut armed: Option<std::time::Instant> = None;
    let mut fired = false;
    loop {
        let deadline = {
            let mut g = shared.lock();
            let Some(core) = g.as_mut() else { return };
            if shared.closed.load(Ordering::Acquire) {
                core.drain(&shared.inbox);
                core.flush();
                return;
            }
            core.drain(&shared.inbox);
            if std::mem::take(&mut fired) {
                core.engine.handle_timeout();
                core.poll_io();
            }
            core.serve_io(&shared);
            if !core.owed {
                core.flush();
            }
            core.armed = core.engine.deadline();
            core.armed
        };
        if !shared.inbox().is_empty() {
            continue;
        }
        match deadline {
            Some(d) => {
                if armed != Some(d) {
                    timer.as_mut().reset(d.into());
                    armed = Some(d);
                }
                tokio::select! {
                    _ = shared.wake.notified() => {}
                    _ = timer.as_mut() => {
                        armed = None;
                        fired = true;
                    }
                }
            }
            None => shared.wake.notified().await,
        }
    }
}

/// Where the loop puts a connection's bytes: its writer task's queue, and for plain TCP the
/// socket itself, written from the loop while nothing is queued (no hop to the writer task
/// for a request that fits in the socket's buffer).
struct Writer {
    queue: mpsc::UnboundedSender<Bytes>,
    direct: Option<Direct>,
}

/// A plain TCP socket shared by the loop and its writer task.
struct Direct {
    socket: Arc<OwnedWriteHalf>,
    /// Chunks handed to the writer task and not yet written whole. Only the loop adds,
    /// so when it reads 0 every queued byte is already in the socket and writing directly
    /// keeps the order.
    queued: Arc<AtomicUsize>,
}

impl Writer {
    fn write(&self, mut data: Bytes) {
        if let Some(d) = &self.direct {
            if d.queued.load(Ordering::Acquire) == 0 {
                match d.socket.try_write(&data) {
                    Ok(n) if n == data.len() => return,
                    Ok(n) => {
                        let _ = data.split_to(n);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    // The reading side sees the connection end and reports it.
                    Err(_) => return,
                }
            }
            d.queued.fetch_add(1, Ordering::AcqRel);
        }
        let _ = self.queue.send(data);
    }
}

/// Opens a connection (TCP, then the TLS handshake if wrapped) and serves it. The core's
/// connect timeout bounds both: it closes the connection, which aborts this task.
async fn connect(conn: ConnectionId, addr: SocketAddr, wrap: Wrap, shared: Arc<Shared>) {
    let stream = match TcpStream::connect(addr).await {
        Ok(s) => s,
        Err(_) => {
            shared.feed(Input::ConnectFailed(conn));
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    match wrap {
        Wrap::Plain => serve_tcp(conn, stream, shared).await,
        #[cfg(feature = "tls")]
        Wrap::Tls(config) => {
            let connector = tokio_rustls::TlsConnector::from(config);
            match connector.connect(server_name(addr.ip()), stream).await {
                Ok(tls) => serve(conn, tls, shared).await,
                Err(error) => {
                    tracing::warn!(%addr, %error, "TLS handshake failed");
                    shared.feed(Input::ConnectFailed(conn));
                }
            }
        }
    }
}

/// Serves a plain TCP connection: the loop writes to the socket directly while it can, the
/// writer task takes what did not fit.
async fn serve_tcp(conn: ConnectionId, stream: TcpStream, shared: Arc<Shared>) {
    let (rd, wr) = stream.into_split();
    let socket = Arc::new(wr);
    let queued = Arc::new(AtomicUsize::new(0));
    let (wtx, mut wrx) = mpsc::unbounded_channel::<Bytes>();
    let writer = Writer {
        queue: wtx,
        direct: Some(Direct {
            socket: socket.clone(),
            queued: queued.clone(),
        }),
    };
    if !shared.feed(Input::Connected(conn, writer)) {
        return;
    }
    tokio::spawn(async move {
        while let Some(b) = wrx.recv().await {
            let mut rest = &b[..];
            while !rest.is_empty() {
                if socket.writable().await.is_err() {
                    return;
                }
                match socket.try_write(rest) {
                    Ok(n) => rest = &rest[n..],
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return,
                }
            }
            queued.fetch_sub(1, Ordering::AcqRel);
        }
    });
    read_loop(conn, rd, shared).await;
}

/// Moves bytes between a connected stream and the loop until either side ends.
#[cfg(feature = "tls")]
async fn serve<S>(conn: ConnectionId, stream: S, shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (rd, mut wr) = tokio::io::split(stream);
    let (wtx, mut wrx) = mpsc::unbounded_channel::<Bytes>();
    let writer = Writer {
        queue: wtx,
        direct: None,
    };
    if !shared.feed(Input::Connected(conn, writer)) {
        return;
    }
    tokio::spawn(async move {
        while let Some(b) = wrx.recv().await {
            if wr.write_all(&b).await.is_err() {
                break;
            }
            // Take what else is queued before flushing (TLS: one flush per batch of records).
            while let Ok(b) = wrx.try_recv() {
                if wr.write_all(&b).await.is_err() {
                    return;
                }
            }
            if wr.flush().await.is_err() {
                break;
            }
        }
    });
    read_loop(conn, rd, shared).await;
}

/// Hands what arrives on `rd` to the engine until the stream ends.
async fn read_loop<R: AsyncRead + Unpin>(conn: ConnectionId, mut rd: R, shared: Arc<Shared>) {
    let mut buf = vec![0u8; 64 * 1024];
    let spares = Arc::new(Spares::default());
    loop {
        match rd.read(&mut buf).await {
            Ok(0) | Err(_) => {
                shared.feed(Input::Closed(conn));
                return;
            }
            Ok(n) => match shared.feed_data(conn, &buf[..n], &spares) {
                Fed::Done => {}
                Fed::Owed => {
                    // The callers these bytes woke run first and queue their requests.
                    tokio::task::yield_now().await;
                    shared.pay();
                }
                Fed::Gone => return,
            },
        }
    }
}

/// The buffers a connection's reads were handed to the loop in, back from the loop once it
/// fed them to the core: a read reuses one instead of allocating its own.
#[derive(Default)]
struct Spares(std::sync::Mutex<Vec<Vec<u8>>>);

impl Spares {
    /// At most this many wait for reuse; more are freed.
    const KEEP: usize = 8;

    fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .ok()
            .and_then(|mut v| v.pop())
            .unwrap_or_default()
    }

    fn put(&self, mut chunk: Vec<u8>) {
        chunk.clear();
        if let Ok(mut v) = self.0.lock() {
            if v.len() < Self::KEEP {
                v.push(chunk);
            }
        }
    }
}

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
