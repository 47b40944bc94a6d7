//! tokio driver for the sans-IO FoundationDB client in `fdb-protocol`.
//!
//! One background task owns the protocol [`Client`] and does only IO: it opens the sockets
//! the core asks for, writes what it transmits, feeds it what arrives, and wakes it at its
//! deadlines. All protocol decisions are the core's.
//!
//! ```no_run
//! # async fn demo() -> Result<(), fdb_driver_tokio::Error> {
//! let db = fdb_driver_tokio::Database::open(None).await?;
//! let version = db.read_version().await?;
//! println!("read version {version}");
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use fdb_protocol::client::{
    Client, ClientConfig, ClientError, ConnectionId, Event, Priority, RequestId,
};
use fdb_protocol::cluster_file::{cluster_file_search_order, ClusterFile, ClusterFileError};
use fdb_protocol::messages::types::Version;
use fdb_protocol::messages::NetworkAddress;
use fdb_protocol::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

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

enum Command {
    ReadVersion(Priority, oneshot::Sender<Result<Version, ClientError>>),
}

enum Input {
    Command(Command),
    Connected(ConnectionId, mpsc::UnboundedSender<Bytes>),
    ConnectFailed(ConnectionId),
    Data(ConnectionId, Bytes),
    Closed(ConnectionId),
}

/// A handle to a FoundationDB database. Cheap to clone; the background task ends when the
/// last handle is dropped.
#[derive(Clone)]
pub struct Database {
    tx: mpsc::UnboundedSender<Input>,
}

impl Database {
    /// Opens the database named by a cluster file (see [`read_cluster_file`]).
    pub async fn open(cluster_file: Option<&Path>) -> Result<Database, Error> {
        let (_, cf) = read_cluster_file(cluster_file)?;
        Ok(Self::from_cluster_file(cf, rand_seed()))
    }

    /// Opens a database from a parsed cluster file, with an explicit seed for the core's
    /// randomness.
    pub fn from_cluster_file(cluster: ClusterFile, seed: u64) -> Database {
        let (tx, rx) = mpsc::unbounded_channel();
        let started = tokio::time::Instant::now();
        let now = Instant(started.elapsed());
        let client = Client::new(ClientConfig::new(cluster, seed), now);
        tokio::spawn(run(client, started, tx.downgrade(), rx));
        Database { tx }
    }

    /// A read version (GRV), at default priority.
    pub async fn read_version(&self) -> Result<Version, Error> {
        self.read_version_with(Priority::Default).await
    }

    /// A read version at the given priority.
    pub async fn read_version_with(&self, priority: Priority) -> Result<Version, Error> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Input::Command(Command::ReadVersion(priority, tx)))
            .map_err(|_| Error::Shutdown)?;
        rx.await
            .map_err(|_| Error::Shutdown)?
            .map_err(Error::Client)
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

async fn run(
    mut client: Client,
    started: tokio::time::Instant,
    me: mpsc::WeakUnboundedSender<Input>,
    mut rx: mpsc::UnboundedReceiver<Input>,
) {
    let now = || Instant(started.elapsed());
    let mut writers: HashMap<ConnectionId, mpsc::UnboundedSender<Bytes>> = HashMap::new();
    let mut waiting: HashMap<RequestId, oneshot::Sender<Result<Version, ClientError>>> =
        HashMap::new();
    loop {
        while let Some(ev) = client.poll_event() {
            match ev {
                Event::Connect { conn, addr } => {
                    tokio::spawn(connect(conn, socket_addr(&addr), me.clone()));
                }
                Event::Close { conn, .. } => {
                    writers.remove(&conn);
                }
                Event::ReadVersion { req, result } => {
                    if let Some(w) = waiting.remove(&req) {
                        let _ = w.send(result);
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
            Input::Command(Command::ReadVersion(p, reply)) => {
                let id = client.get_read_version(now(), p);
                waiting.insert(id, reply);
            }
            Input::Connected(conn, w) => {
                writers.insert(conn, w);
                client.handle_connected(conn, now());
            }
            Input::ConnectFailed(conn) => client.handle_connect_failed(conn, now()),
            Input::Data(conn, data) => client.handle_input(conn, now(), &data),
            Input::Closed(conn) => {
                writers.remove(&conn);
                client.handle_closed(conn, now());
            }
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
