//! The half of a driver loop that is not IO, written once: the core [`Client`], the requests
//! the application waits for, and what to do with the core's events about the cluster file.
//! A driver owns one [`Engine`], feeds it socket bytes, connection news and time, and carries
//! out the [`IoRequest`]s it hands back; everything else is decided here or in the core.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::knobs::Knobs;
use fdb_protocol::{Client, ClientConfig, Completion, ConnectionId, Event, Instant, RequestId};
use futures_channel::oneshot;

use crate::cluster_file::reread_cluster_file;
use crate::tls::Tls;

/// Work for the loop: a closure run on the engine, on the loop's own thread, in the order sent.
pub type Op = Box<dyn FnOnce(&mut Engine) + Send>;

/// The time base shared by a driver's handles and its loop: the core's [`Instant`] is the time
/// since the loop started, on the wall clock or — for a simulation — on a manual one.
#[derive(Clone, Debug)]
pub struct Clock {
    origin: std::time::Instant,
    /// A manual clock's time (nanoseconds), moved by whoever holds it.
    manual: Option<Arc<AtomicU64>>,
}

impl Clock {
    /// A clock starting now.
    pub fn start() -> Clock {
        Clock {
            origin: std::time::Instant::now(),
            manual: None,
        }
    }

    /// A clock that reads `nanos` (nanoseconds since its origin) and moves only when that is
    /// stored to: a simulation's virtual time.
    pub fn manual(nanos: Arc<AtomicU64>) -> Clock {
        Clock {
            origin: std::time::Instant::now(),
            manual: Some(nanos),
        }
    }

    /// The core's time now.
    pub fn now(&self) -> Instant {
        match &self.manual {
            Some(n) => Instant(std::time::Duration::from_nanos(n.load(Ordering::SeqCst))),
            None => Instant(self.origin.elapsed()),
        }
    }

    /// The wall-clock instant of core time `t`.
    pub fn at(&self, t: Instant) -> std::time::Instant {
        self.origin + t.0
    }
}

/// What a driver must do for the engine.
#[derive(Debug, PartialEq, Eq)]
pub enum IoRequest {
    /// Open a TCP connection (TLS if `tls`) and report it with [`Engine::handle_connected`] or
    /// [`Engine::handle_connect_failed`].
    Connect {
        /// The connection's id.
        conn: ConnectionId,
        /// Where to connect.
        addr: SocketAddr,
        /// The address is a TLS one (`:tls` in the cluster file).
        tls: bool,
    },
    /// Close this connection (also one still connecting).
    Close {
        /// The connection's id.
        conn: ConnectionId,
    },
    /// Resolve a coordinator's host name; report every address with
    /// [`Engine::handle_resolved`] (none if the lookup failed).
    Resolve {
        /// The host name.
        host: String,
        /// Its port.
        port: u16,
    },
    /// Replace the cluster file's contents ([`crate::driver::persist_cluster_file`]); the driver
    /// chooses where blocking file IO runs.
    WriteClusterFile {
        /// The file the database was opened from.
        path: PathBuf,
        /// The connection string to write.
        cluster: ClusterFile,
    },
}

/// The core and the application's waiting requests. See the module docs.
pub struct Engine {
    client: Client,
    clock: Clock,
    /// By id, so that [`Engine::reap`] cancels in one order on every run (a simulation
    /// replays it).
    waiting: BTreeMap<RequestId, oneshot::Sender<Completion>>,
    /// The cluster file this database was opened from (rewritten when the coordinators move,
    /// read again when none answers).
    cluster_file: Option<PathBuf>,
    /// What `:tls` connections are wrapped in.
    tls: Tls,
}

impl Engine {
    /// A new engine for `cluster` under `knobs`; `cluster_file` is the file it came from, if
    /// any. TLS addresses are refused until [`Engine::with_tls`] gives it a TLS client.
    pub fn new(
        cluster: ClusterFile,
        seed: u64,
        cluster_file: Option<PathBuf>,
        clock: Clock,
        knobs: Knobs,
    ) -> Engine {
        let now = clock.now();
        let config = ClientConfig {
            knobs,
            ..ClientConfig::new(cluster, seed)
        };
        let mut client = Client::new(config, now);
        // `\xff\xff/cluster_file_path`: the file's path as given, or the memory record's id.
        let path = cluster_file.as_ref().map(|p| p.to_string_lossy());
        client.set_cluster_file_path(path.as_deref());
        Engine {
            client,
            clock,
            waiting: BTreeMap::new(),
            cluster_file,
            tls: Tls::unavailable(crate::tls::TlsError::NotBuilt),
        }
    }

    /// The engine with `tls` for its `:tls` connections.
    pub fn with_tls(mut self, tls: Tls) -> Engine {
        self.tls = tls;
        self
    }

    /// What the driver wraps `:tls` connections in.
    pub fn tls(&self) -> &Tls {
        &self.tls
    }

    /// The core, for a call.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// The core's time now.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The loop's clock.
    pub fn clock(&self) -> Clock {
        self.clock.clone()
    }

    /// `req`'s completion goes to `done`.
    pub fn expect(&mut self, req: RequestId, done: oneshot::Sender<Completion>) {
        self.waiting.insert(req, done);
    }

    /// How many requests the application still waits for.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Gives up on every request whose caller stopped waiting (a dropped future): the core
    /// cancels them, so they send nothing more.
    pub fn reap(&mut self) {
        let gone: Vec<RequestId> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.is_canceled())
            .map(|(r, _)| *r)
            .collect();
        let now = self.now();
        for r in gone {
            self.waiting.remove(&r);
            self.client.cancel(now, r);
        }
    }

    /// Handles the core's events: completions reach their callers and the cluster-file
    /// policy is applied; what needs IO is handed to the driver, one request at a time.
    pub fn poll_io(&mut self) -> Option<IoRequest> {
        while let Some(ev) = self.client.poll_event() {
            match ev {
                Event::Complete(done) => {
                    if let Some(w) = self.waiting.remove(&done.request()) {
                        let _ = w.send(done);
                    }
                }
                // Plaintext turned off (7.4's `TLS_disable_plaintext_connection`): such a
                // connection fails at once, never handed to the driver to try.
                Event::Connect { conn, addr } if !addr.is_tls() && !self.tls.allows_plaintext() => {
                    tracing::warn!(%addr, "refusing a plaintext connection (plaintext is off)");
                    self.handle_connect_failed(conn);
                }
                Event::Connect { conn, addr } => {
                    return Some(IoRequest::Connect {
                        conn,
                        addr: SocketAddr::new(addr.ip.into(), addr.port),
                        tls: addr.is_tls(),
                    })
                }
                Event::Close { conn, .. } => return Some(IoRequest::Close { conn }),
                Event::Resolve { host, port } => return Some(IoRequest::Resolve { host, port }),
                Event::ClusterFileChanged { cluster } => {
                    if let Some(path) = self.cluster_file.clone() {
                        return Some(IoRequest::WriteClusterFile { path, cluster });
                    }
                }
                Event::CoordinatorsUnreachable => {
                    let changed = self
                        .cluster_file
                        .as_deref()
                        .and_then(|p| reread_cluster_file(p, self.client.confirmed_cluster()));
                    if let Some(cf) = changed {
                        let now = self.now();
                        self.client.set_cluster(now, cf);
                    }
                }
                // The core logs it (`tracing`); nothing for the driver to do.
                Event::ProtocolChanged { .. } => {}
            }
        }
        None
    }

    /// Bytes to write to a connection.
    pub fn poll_transmit(&mut self) -> Option<fdb_protocol::Transmit> {
        self.client.poll_transmit()
    }

    /// When [`Engine::handle_timeout`] must run.
    pub fn deadline(&self) -> Option<std::time::Instant> {
        self.client.poll_timeout().map(|t| self.clock.at(t))
    }

    /// Lets time pass.
    pub fn handle_timeout(&mut self) {
        let now = self.now();
        self.client.handle_timeout(now);
    }

    /// The driver connected `conn`.
    pub fn handle_connected(&mut self, conn: ConnectionId) {
        let now = self.now();
        self.client.handle_connected(conn, now);
    }

    /// The driver could not connect `conn`.
    pub fn handle_connect_failed(&mut self, conn: ConnectionId) {
        let now = self.now();
        self.client.handle_connect_failed(conn, now);
    }

    /// `conn` closed.
    pub fn handle_closed(&mut self, conn: ConnectionId) {
        let now = self.now();
        self.client.handle_closed(conn, now);
    }

    /// Bytes arrived on `conn`.
    pub fn handle_input(&mut self, conn: ConnectionId, data: &[u8]) {
        let now = self.now();
        self.client.handle_input(conn, now, data);
    }

    /// A host name resolved to `ips` (none: the lookup failed).
    pub fn handle_resolved(&mut self, host: &str, port: u16, ips: &[IpAddr]) {
        let now = self.now();
        self.client.handle_resolved(now, host, port, ips);
    }
}

/// A seed for the core's randomness from what the process has: std's per-process hasher keys
/// and the wall clock (two clients started together still differ).
pub fn entropy_seed() -> u64 {
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

std::thread_local! {
    /// This thread's own sequence for [`random_u64`], when a simulation set one.
    static SEEDED: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Makes the API's own randomness on this thread (directory prefixes, random ids) a
/// sequence from `seed` (`None`: the process-wide one again): a simulation running the
/// application on one thread replays it then.
pub fn seed_thread_randomness(seed: Option<u64>) {
    SEEDED.with(|s| s.set(seed));
}

/// A fresh value for what only needs to be spread out, not secret (directory prefixes,
/// random UIDs): splitmix64 over one process-wide counter seeded by [`entropy_seed`], or
/// over this thread's (see [`seed_thread_randomness`]).
pub(crate) fn random_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static STATE: OnceLock<AtomicU64> = OnceLock::new();
    let s = match SEEDED.with(|s| s.get()) {
        Some(s) => {
            SEEDED.with(|c| c.set(Some(s.wrapping_add(0x9e37_79b9_7f4a_7c15))));
            s
        }
        None => STATE
            .get_or_init(|| AtomicU64::new(entropy_seed()))
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed),
    };
    let mut z = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
