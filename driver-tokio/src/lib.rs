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

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use bytes::Bytes;
use fdb_protocol::ConnectionId;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt};
#[cfg(feature = "tls")]
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
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

/// What the loop reacts to: the API's ops and the socket tasks' news.
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
    tx: mpsc::UnboundedSender<Input>,
    clock: Clock,
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
        let (tx, rx) = mpsc::unbounded_channel();
        let clock = engine.clock();
        let span = tracing::info_span!("fdb_client");
        let task = run(engine, tx.downgrade(), rx).instrument(span);
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
        Ok(TokioDriver { tx, clock })
    }

    fn send(&self, op: Op) -> bool {
        self.tx.send(Input::Op(op)).is_ok()
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

async fn run(
    mut engine: Engine,
    me: mpsc::WeakUnboundedSender<Input>,
    mut rx: mpsc::UnboundedReceiver<Input>,
) {
    let mut writers: HashMap<ConnectionId, Writer> = HashMap::new();
    // The socket task of every connection the core has not closed.
    let mut sockets: HashMap<ConnectionId, AbortHandle> = HashMap::new();
    // One timer for the loop's life, moved when the core's deadline moves: a fresh `Sleep`
    // per wait registered and deregistered a timer entry every time.
    let timer = tokio::time::sleep_until(tokio::time::Instant::now());
    tokio::pin!(timer);
    let mut armed: Option<std::time::Instant> = None;
    // Whether this turn already let the other tasks run before its write, and whether the
    // wait that began it brought an input.
    let mut yielded = false;
    let mut woken_by_input = false;
    loop {
        // What is already queued is taken without the select and its timer: one wait per
        // burst of ops and replies, not one per input, and one write per connection for the
        // burst (at most `BATCH` inputs, each handled in microseconds, so no request waits
        // long for the others). The wait below runs after every batch: tokio's budget can make
        // it yield, and a deadline gets its turn.
        let mut batch = 0;
        loop {
            serve_io(&mut engine, &me, &mut writers, &mut sockets);
            if batch == BATCH {
                break;
            }
            match rx.try_recv() {
                Ok(input) => {
                    handle(&mut engine, &mut writers, &mut sockets, input);
                    batch += 1;
                }
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    flush(&mut engine, &writers);
                    return;
                }
            }
        }
        // A turn that took inputs while other callers wait lets the tasks it woke run once
        // before it writes: their requests then go out in the same write. (Otherwise the
        // task a caller wakes runs next, takes that caller's one request and writes it
        // alone: 2.2 sends per transaction in set100 ×32 on one worker thread.) With one
        // caller there is nobody to wait for, and a yield only wakes an idle worker thread:
        // get100 ×1 doubled its context switches.
        if (batch > 0 || woken_by_input) && !yielded && engine.waiting() > 1 {
            yielded = true;
            tokio::task::yield_now().await;
            continue;
        }
        yielded = false;
        woken_by_input = false;
        flush(&mut engine, &writers);
        let input = match engine.deadline() {
            Some(d) => {
                if armed != Some(d) {
                    timer.as_mut().reset(d.into());
                    armed = Some(d);
                }
                tokio::select! {
                    i = rx.recv() => i,
                    _ = timer.as_mut() => {
                        armed = None;
                        engine.handle_timeout();
                        continue;
                    }
                }
            }
            None => rx.recv().await,
        };
        let Some(input) = input else { return };
        handle(&mut engine, &mut writers, &mut sockets, input);
        woken_by_input = true;
    }
}

/// Writes what the core has for each connection: one write per connection per turn of the
/// loop, after the turn's inputs, since the core gathers a connection's frames into one
/// transmission. (Writing after each input sent nearly every request on its own: 1.12 sends
/// per transaction in set100 ×32, against 0.13 for the mio driver.)
fn flush(engine: &mut Engine, writers: &HashMap<ConnectionId, Writer>) {
    while let Some(t) = engine.poll_transmit() {
        if let Some(w) = writers.get(&t.conn) {
            w.write(t.data);
        }
    }
}

/// How many queued inputs the loop takes before it looks at the timer again.
const BATCH: usize = 64;

/// Carries out what the core asks of the IO side.
fn serve_io(
    engine: &mut Engine,
    me: &mpsc::WeakUnboundedSender<Input>,
    writers: &mut HashMap<ConnectionId, Writer>,
    sockets: &mut HashMap<ConnectionId, AbortHandle>,
) {
    while let Some(io) = engine.poll_io() {
        match io {
            IoRequest::Connect { conn, addr, tls } => match Wrap::of(engine, addr, tls) {
                Some(wrap) => {
                    let task = tokio::spawn(connect(conn, addr, wrap, me.clone()));
                    sockets.insert(conn, task.abort_handle());
                }
                None => engine.handle_connect_failed(conn),
            },
            IoRequest::Close { conn } => {
                // Also ends a connect still in progress (the core's connect timeout).
                writers.remove(&conn);
                if let Some(task) = sockets.remove(&conn) {
                    task.abort();
                }
            }
            IoRequest::Resolve { host, port } => {
                let me = me.clone();
                tokio::spawn(async move {
                    let ips = match tokio::net::lookup_host((host.as_str(), port)).await {
                        Ok(addrs) => addrs.map(|a| a.ip()).collect(),
                        Err(e) => {
                            tracing::warn!(%host, port, error = %e, "host name lookup failed");
                            Vec::new()
                        }
                    };
                    send(&me, Input::Resolved(host, port, ips));
                });
            }
            IoRequest::WriteClusterFile { path, cluster } => {
                tokio::task::spawn_blocking(move || persist_cluster_file(&path, &cluster));
            }
        }
    }
}

/// Feeds one input to the core.
fn handle(
    engine: &mut Engine,
    writers: &mut HashMap<ConnectionId, Writer>,
    sockets: &mut HashMap<ConnectionId, AbortHandle>,
    input: Input,
) {
    match input {
        Input::Op(op) => op(engine),
        Input::Connected(conn, w) => {
            // A connection the core already gave up on is dropped with `w`.
            if sockets.contains_key(&conn) {
                writers.insert(conn, w);
                engine.handle_connected(conn);
            }
        }
        Input::ConnectFailed(conn) => {
            if sockets.remove(&conn).is_some() {
                engine.handle_connect_failed(conn);
            }
        }
        Input::Data(conn, data, spares) => {
            engine.handle_input(conn, &data);
            spares.put(data);
        }
        Input::Closed(conn) => {
            writers.remove(&conn);
            if sockets.remove(&conn).is_some() {
                engine.handle_closed(conn);
            }
        }
        Input::Resolved(host, port, ips) => engine.handle_resolved(&host, port, &ips),
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

/// Socket tasks hold only weak senders, so dropping every handle ends the main task.
fn send(tx: &mpsc::WeakUnboundedSender<Input>, input: Input) -> bool {
    tx.upgrade().is_some_and(|tx| tx.send(input).is_ok())
}

/// Opens a connection (TCP, then the TLS handshake if wrapped) and serves it. The core's
/// connect timeout bounds both: it closes the connection, which aborts this task.
async fn connect(
    conn: ConnectionId,
    addr: SocketAddr,
    wrap: Wrap,
    tx: mpsc::WeakUnboundedSender<Input>,
) {
    let stream = match TcpStream::connect(addr).await {
        Ok(s) => s,
        Err(_) => {
            send(&tx, Input::ConnectFailed(conn));
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    match wrap {
        Wrap::Plain => serve_tcp(conn, stream, tx).await,
        #[cfg(feature = "tls")]
        Wrap::Tls(config) => {
            let connector = tokio_rustls::TlsConnector::from(config);
            match connector.connect(server_name(addr.ip()), stream).await {
                Ok(tls) => serve(conn, tls, tx).await,
                Err(error) => {
                    tracing::warn!(%addr, %error, "TLS handshake failed");
                    send(&tx, Input::ConnectFailed(conn));
                }
            }
        }
    }
}

/// Serves a plain TCP connection: the loop writes to the socket directly while it can, the
/// writer task takes what did not fit.
async fn serve_tcp(conn: ConnectionId, stream: TcpStream, tx: mpsc::WeakUnboundedSender<Input>) {
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
    if !send(&tx, Input::Connected(conn, writer)) {
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
    read_loop(conn, rd, tx).await;
}

/// Moves bytes between a connected stream and the loop until either side ends.
#[cfg(feature = "tls")]
async fn serve<S>(conn: ConnectionId, stream: S, tx: mpsc::WeakUnboundedSender<Input>)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (rd, mut wr) = tokio::io::split(stream);
    let (wtx, mut wrx) = mpsc::unbounded_channel::<Bytes>();
    let writer = Writer {
        queue: wtx,
        direct: None,
    };
    if !send(&tx, Input::Connected(conn, writer)) {
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
    read_loop(conn, rd, tx).await;
}

/// Hands what arrives on `rd` to the loop until the stream ends.
async fn read_loop<R: AsyncRead + Unpin>(
    conn: ConnectionId,
    mut rd: R,
    tx: mpsc::WeakUnboundedSender<Input>,
) {
    // Read straight into the chunk handed to the loop (`read_buf` fills its spare capacity,
    // unzeroed): reading into one buffer and copying into the chunk was a second copy of every
    // reply (1.7 % of the client's samples in range100 ×32).
    const READ_SIZE: usize = 64 * 1024;
    let spares = Arc::new(Spares::default());
    loop {
        let mut chunk = spares.take();
        chunk.reserve(READ_SIZE);
        match rd.read_buf(&mut chunk).await {
            Ok(0) | Err(_) => {
                send(&tx, Input::Closed(conn));
                return;
            }
            Ok(_) => {
                if !send(&tx, Input::Data(conn, chunk, spares.clone())) {
                    return;
                }
            }
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
