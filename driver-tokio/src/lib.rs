//! tokio driver for the sans-IO FoundationDB client in `fdb-protocol`.
//!
//! One background task owns the protocol [`Client`] and does only IO: it opens the sockets
//! the core asks for, resolves the host names it asks for (`tokio::net::lookup_host`),
//! rewrites the cluster file when the coordinators moved, writes what it transmits, feeds it
//! what arrives, and wakes it at its deadlines. All protocol decisions are the core's.
//!
//! ```no_run
//! # async fn demo() -> Result<(), fdb_driver_tokio::Error> {
//! let db = fdb_driver_tokio::Database::open(None).await?;
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

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use fdb_protocol::cluster_file::{cluster_file_search_order, ClusterFile, ClusterFileError};
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::types::Version;
use fdb_protocol::messages::types::{KeySelector, KeyValue};
use fdb_protocol::messages::NetworkAddress;
use fdb_protocol::Instant;
use fdb_protocol::{
    Client, ClientConfig, ClientError, Completion, ConnectionId, Event, Outcome, Priority,
    RequestId,
};
use fdb_protocol::{ConflictRangeType, RangeCursor, RangeResult, TransactionId, TransactionOption};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tracing::Instrument;

pub use fdb_protocol as protocol;

/// Errors from the driver.
#[derive(Debug)]
pub enum Error {
    /// No cluster file could be read.
    ClusterFileNotFound { tried: Vec<String> },
    /// The cluster file is malformed.
    ClusterFile(ClusterFileError),
    /// The cluster answered with an error, or a reply was malformed.
    Client(ClientError),
    /// The background task stopped.
    Shutdown,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ClusterFileNotFound { tried } => {
                write!(f, "no readable cluster file (tried {tried:?})")
            }
            Error::ClusterFile(e) => write!(f, "bad cluster file: {e}"),
            Error::Client(e) => write!(f, "{e}"),
            Error::Shutdown => write!(f, "the database task has stopped"),
        }
    }
}

impl std::error::Error for Error {}

/// Reads the cluster file the way libfdb_c finds it: the explicit path, else
/// `FDB_CLUSTER_FILE`, else `./fdb.cluster`, else the platform default.
pub fn read_cluster_file(explicit: Option<&Path>) -> Result<(PathBuf, ClusterFile), Error> {
    let explicit = explicit.map(|p| p.to_string_lossy().into_owned());
    let env = std::env::var("FDB_CLUSTER_FILE").ok();
    let tried = cluster_file_search_order(explicit.as_deref(), env.as_deref());
    for path in &tried {
        if let Ok(text) = std::fs::read_to_string(path) {
            let cf = ClusterFile::parse(&text).map_err(Error::ClusterFile)?;
            return Ok((PathBuf::from(path), cf));
        }
    }
    Err(Error::ClusterFileNotFound { tried })
}

/// A call into the core, run on the background task.
type Call = Box<dyn FnOnce(&mut Client, Instant) -> Option<RequestId> + Send>;
type ReplySender = oneshot::Sender<Completion>;

enum Input {
    Call(Call, Option<ReplySender>),
    Connected(ConnectionId, mpsc::UnboundedSender<Bytes>),
    ConnectFailed(ConnectionId),
    Data(ConnectionId, Bytes),
    Closed(ConnectionId),
    Resolved(String, u16, Vec<IpAddr>),
}

/// A handle to a FoundationDB database. Cheap to clone; the background task ends when the
/// last handle is dropped.
#[derive(Clone)]
pub struct Database {
    tx: mpsc::UnboundedSender<Input>,
    /// The task's clock origin: the core's `Instant` is the time since.
    started: tokio::time::Instant,
}

impl Database {
    /// Opens the database named by a cluster file (see [`read_cluster_file`]).
    /// The file is rewritten if the coordinators forward the client elsewhere.
    pub async fn open(cluster_file: Option<&Path>) -> Result<Database, Error> {
        let (path, cf) = read_cluster_file(cluster_file)?;
        Ok(Self::start(cf, rand_seed(), Some(path)))
    }

    /// Opens the database named by the cluster file at `path` with an explicit seed; the file
    /// is rewritten if the coordinators forward the client elsewhere.
    pub fn open_file_with_seed(path: &Path, seed: u64) -> Result<Database, Error> {
        let (path, cf) = read_cluster_file(Some(path))?;
        Ok(Self::start(cf, seed, Some(path)))
    }

    /// Opens a database from a parsed cluster file, with an explicit seed for the core's
    /// randomness.
    pub fn from_cluster_file(cluster: ClusterFile, seed: u64) -> Database {
        Self::start(cluster, seed, None)
    }

    fn start(cluster: ClusterFile, seed: u64, path: Option<PathBuf>) -> Database {
        let (tx, rx) = mpsc::unbounded_channel();
        let started = tokio::time::Instant::now();
        let now = Instant(started.elapsed());
        let span = tracing::info_span!("fdb_client", cluster = %cluster);
        let client = Client::new(ClientConfig::new(cluster, seed), now);
        tokio::spawn(run(client, started, tx.downgrade(), rx, path).instrument(span));
        Database { tx, started }
    }

    /// The connection string in use (it changes when the coordinators forward the client).
    pub async fn cluster(&self) -> Result<ClusterFile, Error> {
        let (tx, rx) = oneshot::channel();
        self.call_sync(move |c, _| {
            let _ = tx.send(c.cluster().clone());
        });
        rx.await.map_err(|_| Error::Shutdown)
    }

    /// A read version (GRV), at default priority.
    pub async fn read_version(&self) -> Result<Version, Error> {
        self.read_version_with(Priority::Default).await
    }

    /// A read version at the given priority.
    pub async fn read_version_with(&self, priority: Priority) -> Result<Version, Error> {
        self.call(move |c, now| c.get_read_version(now, priority))
            .await
    }

    /// Options every transaction created from now on starts with (and returns to on reset),
    /// like libfdb_c's `transaction_*` database options.
    pub fn set_transaction_defaults(&self, defaults: Vec<TransactionOption>) {
        self.call_sync(move |c, _| c.set_transaction_defaults(defaults));
    }

    /// A new transaction.
    pub fn create_transaction(&self) -> Transaction {
        Transaction {
            inner: Arc::new(TxInner {
                db: self.clone(),
                id: Arc::new(TxCell {
                    id: OnceLock::new(),
                    created: Instant(self.started.elapsed()),
                }),
                pending: std::sync::Mutex::new(Vec::new()),
            }),
        }
    }

    /// Runs `f` in a transaction and commits it, retrying as `on_error` allows (the standard
    /// FDB retry loop). `f` may run several times: keep side effects inside the transaction.
    pub async fn run<T, F, Fut>(&self, mut f: F) -> Result<T, Error>
    where
        F: FnMut(Transaction) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let tx = self.create_transaction();
        loop {
            let err = match f(tx.clone()).await {
                Ok(v) => match tx.commit().await {
                    Ok(_) => return Ok(v),
                    Err(e) => e,
                },
                Err(e) => e,
            };
            let Some(code) = err.code() else {
                return Err(err);
            };
            // `on_error` fails with the error itself when it must not retry.
            tx.on_error(code).await?;
        }
    }

    fn send(&self, input: Input) -> Result<(), Error> {
        self.tx.send(input).map_err(|_| Error::Shutdown)
    }

    async fn call<T, F>(&self, f: F) -> Result<T, Error>
    where
        T: Outcome,
        F: FnOnce(&mut Client, Instant) -> fdb_protocol::Call<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.send(Input::Call(
            Box::new(move |c, now| Some(f(c, now).id())),
            Some(tx),
        ))?;
        let done = rx.await.map_err(|_| Error::Shutdown)?;
        T::from_completion(done).map_err(Error::Client)
    }

    fn call_sync<F>(&self, f: F)
    where
        F: FnOnce(&mut Client, Instant) + Send + 'static,
    {
        let _ = self.send(Input::Call(
            Box::new(move |c, now| {
                f(c, now);
                None
            }),
            None,
        ));
    }
}

/// A buffered write, applied by the background task before this transaction's next call.
type PendingWrite = Box<dyn FnOnce(&mut Client, Instant, TransactionId) + Send>;

struct TxInner {
    db: Database,
    /// Created by the core on the first call that reaches it.
    id: Arc<TxCell>,
    /// Writes not yet handed to the task: they travel with the next call (one message and
    /// one wake-up instead of one per write; the core sees them in the same order).
    pending: std::sync::Mutex<Vec<PendingWrite>>,
}

impl TxInner {
    fn take_pending(&self) -> Vec<PendingWrite> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Runs the buffered writes, then yields the transaction id.
fn apply(cell: &TxCell, writes: Vec<PendingWrite>, c: &mut Client, now: Instant) -> TransactionId {
    let id = tx_id(cell, c, now);
    for w in writes {
        w(c, now, id);
    }
    id
}

impl Drop for TxInner {
    fn drop(&mut self) {
        let id = self.id.clone();
        self.db.call_sync(move |c, now| {
            if let Some(id) = id.id.get() {
                c.destroy_transaction(now, *id);
            }
        });
    }
}

fn tx_id(cell: &TxCell, c: &mut Client, now: Instant) -> TransactionId {
    *cell
        .id
        .get_or_init(|| c.create_transaction_at(now, cell.created))
}

/// The core's transaction id, created by the task on first use, and when the application
/// created it.
struct TxCell {
    id: OnceLock<TransactionId>,
    created: Instant,
}

/// A transaction. Cheap to clone (clones share the transaction); dropped with its last clone.
///
/// Writes (`set`, `clear`, atomic ops) are buffered in the core and never wait; an invalid
/// write (a key too large, say) fails the next read or the commit, as in libfdb_c.
#[derive(Clone)]
pub struct Transaction {
    inner: Arc<TxInner>,
}

/// Options for [`Transaction::get_range`]: limits and direction.
pub use fdb_protocol::RangeOptions;

impl Transaction {
    async fn call<T, F>(&self, f: F) -> Result<T, Error>
    where
        T: Outcome,
        F: FnOnce(&mut Client, Instant, TransactionId) -> fdb_protocol::Call<T> + Send + 'static,
    {
        let cell = self.inner.id.clone();
        let writes = self.inner.take_pending();
        self.inner
            .db
            .call(move |c, now| {
                let id = apply(&cell, writes, c, now);
                f(c, now, id)
            })
            .await
    }

    fn write<F>(&self, f: F)
    where
        F: FnOnce(&mut Client, Instant, TransactionId) + Send + 'static,
    {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(f));
    }

    /// Sets a transaction option.
    pub fn set_option(&self, opt: TransactionOption) {
        self.write(move |c, now, id| {
            let _ = c.set_option(now, id, opt);
        });
    }

    /// The read version, fetching it if the transaction has none yet.
    pub async fn get_read_version(&self) -> Result<Version, Error> {
        self.call(|c, now, id| c.tx_read_version(now, id)).await
    }

    /// Uses this read version instead of asking a proxy.
    pub fn set_read_version(&self, version: Version) {
        self.write(move |c, _, id| {
            let _ = c.set_read_version(id, version);
        });
    }

    async fn get_inner(&self, key: &[u8], snapshot: bool) -> Result<Option<Bytes>, Error> {
        let key = Bytes::copy_from_slice(key);
        self.call(move |c, now, id| c.get(now, id, &key, snapshot))
            .await
    }

    /// Reads a key.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Bytes>, Error> {
        self.get_inner(key, false).await
    }

    /// Reads a key without adding a read conflict range.
    pub async fn snapshot_get(&self, key: &[u8]) -> Result<Option<Bytes>, Error> {
        self.get_inner(key, true).await
    }

    /// Resolves a key selector.
    pub async fn get_key(&self, sel: KeySelector, snapshot: bool) -> Result<Bytes, Error> {
        self.call(move |c, now, id| c.get_key(now, id, sel, snapshot))
            .await
    }

    /// About how many bytes `[begin, end)` holds, by the storage servers' byte samples
    /// (`fdb_transaction_get_estimated_range_size_bytes`).
    pub async fn get_estimated_range_size_bytes(
        &self,
        begin: &[u8],
        end: &[u8],
    ) -> Result<i64, Error> {
        let (begin, end) = (Bytes::copy_from_slice(begin), Bytes::copy_from_slice(end));
        self.call(move |c, now, id| c.get_estimated_range_size_bytes(now, id, &begin, &end))
            .await
    }

    /// Keys cutting `[begin, end)` into chunks of about `chunk_size` bytes, from `begin` to
    /// `end` (`fdb_transaction_get_range_split_points`).
    pub async fn get_range_split_points(
        &self,
        begin: &[u8],
        end: &[u8],
        chunk_size: i64,
    ) -> Result<Vec<Bytes>, Error> {
        let (begin, end) = (Bytes::copy_from_slice(begin), Bytes::copy_from_slice(end));
        self.call(move |c, now, id| c.get_range_split_points(now, id, &begin, &end, chunk_size))
            .await
    }

    /// One batch of rows between two selectors (`fdb_transaction_get_range`).
    pub async fn get_range_batch(
        &self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Result<RangeResult, Error> {
        self.call(move |c, now, id| c.get_range(now, id, begin, end, opts, snapshot))
            .await
    }

    /// Every row in `[begin, end)` (at most `limit` if non-zero), fetched in batches as the
    /// bindings' range iterators do.
    pub async fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<KeyValue>, Error> {
        self.get_range_with(
            KeySelector::first_greater_or_equal(Bytes::copy_from_slice(begin)),
            KeySelector::first_greater_or_equal(Bytes::copy_from_slice(end)),
            RangeOptions {
                limit,
                ..RangeOptions::default()
            },
            false,
        )
        .await
    }

    /// Every row between two selectors, batch after batch (reverse, snapshot and streaming
    /// mode as in `opts`; `opts.limit` bounds the total).
    pub async fn get_range_with(
        &self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>, Error> {
        let mut cursor = RangeCursor::new(begin, end, opts);
        while let Some((b, e, o)) = cursor.next_request() {
            cursor.feed(self.get_range_batch(b, e, o, snapshot).await?);
        }
        Ok(cursor.into_rows())
    }

    /// Sets a key.
    pub fn set(&self, key: &[u8], value: &[u8]) {
        let (k, v) = (Bytes::copy_from_slice(key), Bytes::copy_from_slice(value));
        self.write(move |c, _, id| {
            let _ = c.set_bytes(id, k, v);
        });
    }

    /// Clears a key.
    pub fn clear(&self, key: &[u8]) {
        let k = key.to_vec();
        self.write(move |c, _, id| {
            let _ = c.clear(id, &k);
        });
    }

    /// Clears `[begin, end)`.
    pub fn clear_range(&self, begin: &[u8], end: &[u8]) {
        let (b, e) = (begin.to_vec(), end.to_vec());
        self.write(move |c, _, id| {
            let _ = c.clear_range(id, &b, &e);
        });
    }

    /// An atomic operation (`fdb_protocol::messages::commit::mutation_type`).
    pub fn atomic_op(&self, key: &[u8], param: &[u8], kind: u8) {
        let (k, p) = (key.to_vec(), param.to_vec());
        self.write(move |c, _, id| {
            let _ = c.atomic_op(id, &k, &p, kind);
        });
    }

    /// Adds a read or write conflict range.
    pub fn add_conflict_range(&self, begin: &[u8], end: &[u8], kind: ConflictRangeType) {
        let (b, e) = (begin.to_vec(), end.to_vec());
        self.write(move |c, _, id| {
            let _ = c.add_conflict_range(id, &b, &e, kind);
        });
    }

    /// Commits; returns the commit version (`-1` when nothing was written).
    pub async fn commit(&self) -> Result<Version, Error> {
        self.call(|c, now, id| c.commit(now, id))
            .await
            .map(|c: fdb_protocol::Committed| c.version)
    }

    /// The versionstamp of the committed transaction.
    pub async fn versionstamp(&self) -> Result<Option<[u8; 10]>, Error> {
        let cell = self.inner.id.clone();
        let writes = self.inner.take_pending();
        let (tx, rx) = oneshot::channel();
        self.inner.db.call_sync(move |c, now| {
            let id = apply(&cell, writes, c, now);
            let _ = tx.send(c.versionstamp(id));
        });
        rx.await.map_err(|_| Error::Shutdown)
    }

    /// `on_error`: waits the backoff and resets the transaction if `code` is retryable;
    /// otherwise fails with it.
    pub async fn on_error(&self, code: ErrorCode) -> Result<(), Error> {
        self.call(move |c, now, id| c.on_error(now, id, code)).await
    }

    /// Resets the transaction (options too).
    pub fn reset(&self) {
        // Immediate, like libfdb_c's: it cancels what the transaction has outstanding.
        let cell = self.inner.id.clone();
        let writes = self.inner.take_pending();
        self.inner.db.call_sync(move |c, now| {
            let id = apply(&cell, writes, c, now);
            c.reset_transaction(now, id);
        });
    }

    /// Watches a key. The watch starts when the transaction commits and resolves when the
    /// key's value changes; dropping the future cancels it.
    pub fn watch(&self, key: &[u8]) -> Watch {
        let key = key.to_vec();
        let cell = self.inner.id.clone();
        let writes = self.inner.take_pending();
        let (tx, rx) = oneshot::channel();
        let (idtx, idrx) = std::sync::mpsc::channel();
        let _ = self.inner.db.send(Input::Call(
            Box::new(move |c, now| {
                let id = apply(&cell, writes, c, now);
                let req = c.watch(now, id, &key).id();
                let _ = idtx.send(req);
                Some(req)
            }),
            Some(tx),
        ));
        Watch {
            rx,
            req: idrx,
            db: self.inner.db.clone(),
        }
    }
}

/// A pending watch; resolves to the version at which the key changed.
pub struct Watch {
    rx: oneshot::Receiver<Completion>,
    req: std::sync::mpsc::Receiver<RequestId>,
    db: Database,
}

impl Future for Watch {
    type Output = Result<Version, Error>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(_)) => Poll::Ready(Err(Error::Shutdown)),
            Poll::Ready(Ok(done)) => {
                Poll::Ready(Version::from_completion(done).map_err(Error::Client))
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // The id arrives once the task ran the call; cancel it then.
        let req = std::mem::replace(&mut self.req, std::sync::mpsc::channel().1);
        self.db.call_sync(move |c, now| {
            if let Ok(r) = req.try_recv() {
                c.cancel(now, r);
            }
        });
    }
}

impl Error {
    /// The FDB error code, if this is an FDB error.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Client(e) => Some(e.code()),
            _ => None,
        }
    }
}

fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish()
}

fn socket_addr(a: &NetworkAddress) -> SocketAddr {
    SocketAddr::new(a.ip.into(), a.port)
}

/// Replaces a cluster file's contents the way libfdb_c's `atomicReplace` does: write a
/// temporary file beside it, then rename it over the original.
pub fn replace_cluster_file(path: &Path, cluster: &ClusterFile) -> std::io::Result<()> {
    use std::io::Write;
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

async fn run(
    mut client: Client,
    started: tokio::time::Instant,
    me: mpsc::WeakUnboundedSender<Input>,
    mut rx: mpsc::UnboundedReceiver<Input>,
    cluster_file: Option<PathBuf>,
) {
    let now = || Instant(started.elapsed());
    let mut writers: HashMap<ConnectionId, mpsc::UnboundedSender<Bytes>> = HashMap::new();
    // The socket task of every connection the core has not closed.
    let mut sockets: HashMap<ConnectionId, AbortHandle> = HashMap::new();
    let mut waiting: HashMap<RequestId, ReplySender> = HashMap::new();
    loop {
        while let Some(ev) = client.poll_event() {
            match ev {
                Event::Connect { conn, addr } => {
                    let task = tokio::spawn(connect(conn, socket_addr(&addr), me.clone()));
                    sockets.insert(conn, task.abort_handle());
                }
                Event::Close { conn, .. } => {
                    // Also ends a connect still in progress (the core's connect timeout).
                    writers.remove(&conn);
                    if let Some(task) = sockets.remove(&conn) {
                        task.abort();
                    }
                }
                Event::Complete(done) => {
                    if let Some(w) = waiting.remove(&done.request()) {
                        let _ = w.send(done);
                    }
                }
                Event::Resolve { host, port } => {
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
                Event::CoordinatorsUnreachable => {
                    if let Some(cf) = reread_cluster_file(cluster_file.as_deref(), client.cluster())
                    {
                        client.set_cluster(now(), cf);
                    }
                }
                Event::ClusterFileChanged { cluster } => {
                    if let Some(path) = cluster_file.clone() {
                        tokio::task::spawn_blocking(move || {
                            match replace_cluster_file(&path, &cluster) {
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
                        });
                    }
                }
                Event::ClusterInfo { .. } | Event::Forward { .. } => {}
            }
        }
        while let Some(t) = client.poll_transmit() {
            if let Some(w) = writers.get(&t.conn) {
                let _ = w.send(t.data);
            }
        }
        let deadline = client.poll_timeout().map(|t| started + t.0);
        let input = match deadline {
            Some(d) => tokio::select! {
                i = rx.recv() => i,
                _ = tokio::time::sleep_until(d) => { client.handle_timeout(now()); continue; }
            },
            None => rx.recv().await,
        };
        let Some(input) = input else { return };
        match input {
            Input::Call(call, reply) => {
                if let (Some(id), Some(reply)) = (call(&mut client, now()), reply) {
                    waiting.insert(id, reply);
                }
            }
            Input::Connected(conn, w) => {
                // A connection the core already gave up on is dropped with `w`.
                if sockets.contains_key(&conn) {
                    writers.insert(conn, w);
                    client.handle_connected(conn, now());
                }
            }
            Input::ConnectFailed(conn) => {
                if sockets.remove(&conn).is_some() {
                    client.handle_connect_failed(conn, now());
                }
            }
            Input::Data(conn, data) => client.handle_input(conn, now(), &data),
            Input::Closed(conn) => {
                writers.remove(&conn);
                if sockets.remove(&conn).is_some() {
                    client.handle_closed(conn, now());
                }
            }
            Input::Resolved(host, port, ips) => client.handle_resolved(now(), &host, port, &ips),
        }
    }
}

/// Socket tasks hold only weak senders, so dropping every `Database` ends the main task.
fn send(tx: &mpsc::WeakUnboundedSender<Input>, input: Input) -> bool {
    tx.upgrade().is_some_and(|tx| tx.send(input).is_ok())
}

async fn connect(conn: ConnectionId, addr: SocketAddr, tx: mpsc::WeakUnboundedSender<Input>) {
    let stream = match TcpStream::connect(addr).await {
        Ok(s) => s,
        Err(_) => {
            send(&tx, Input::ConnectFailed(conn));
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let (wtx, mut wrx) = mpsc::unbounded_channel::<Bytes>();
    if !send(&tx, Input::Connected(conn, wtx)) {
        return;
    }
    tokio::spawn(async move {
        while let Some(b) = wrx.recv().await {
            if wr.write_all(&b).await.is_err() {
                break;
            }
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match rd.read(&mut buf).await {
            Ok(0) | Err(_) => {
                send(&tx, Input::Closed(conn));
                return;
            }
            Ok(n) => {
                if !send(&tx, Input::Data(conn, Bytes::copy_from_slice(&buf[..n]))) {
                    return;
                }
            }
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
