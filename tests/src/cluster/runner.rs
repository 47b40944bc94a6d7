//! The threaded runner: the cluster core ([`super::server::State`]) on loopback TCP. One
//! listener thread per process, one reader thread per connection, one ticker thread for
//! time; each hands the core what happened and the time, under one mutex, and writes out
//! what the core asks for after releasing it. Nothing here decides anything about FDB.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant as StdInstant};

use fdb_protocol::messages::coordination::ClientDBInfo;
use fdb_protocol::messages::storage::StorageServerInterface;
use fdb_protocol::Instant;

use super::server::{Conn, Io, RequestKind, Role, State};
use super::TestClusterBuilder;

/// A connection's socket (the core holds the connection itself).
struct Sock {
    writer: Mutex<TcpStream>,
    /// A handle for shutting the socket down even while a writer is blocked.
    shut: TcpStream,
}

impl Sock {
    fn write(&self, bytes: &[u8]) -> bool {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        w.write_all(bytes).is_ok()
    }
    fn close(&self) {
        let _ = self.shut.shutdown(Shutdown::Both);
    }
}

struct Inner {
    state: Mutex<State>,
    /// Where the core's time starts.
    origin: StdInstant,
    stopped: AtomicBool,
    conn_ids: AtomicU64,
    socks: Mutex<BTreeMap<u64, Arc<Sock>>>,
    /// Listeners bound for processes the core started (recoveries, coordinator changes),
    /// waiting for their accept threads.
    bound: Arc<Mutex<Vec<TcpListener>>>,
    accept_threads: Mutex<BTreeMap<usize, JoinHandle<()>>>,
}

impl Inner {
    /// The core, at the time now.
    fn lock(&self) -> MutexGuard<'_, State> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.set_now(Instant(self.origin.elapsed()));
        st
    }

    /// Runs `f` on the core, then does the IO it asked for and gives new processes their
    /// listeners.
    fn with<R>(self: &Arc<Self>, f: impl FnOnce(&mut State) -> R) -> R {
        let (r, io, procs) = {
            let mut st = self.lock();
            let r = f(&mut st);
            (r, st.take_io(), st.processes())
        };
        self.perform(io);
        self.adopt(&procs);
        r
    }

    fn perform(&self, io: Vec<Io>) {
        for action in io {
            match action {
                Io::Send(conn, bytes) => {
                    let sock = self.socks.lock().unwrap().get(&conn.id).cloned();
                    if let Some(s) = sock {
                        if !s.write(&bytes) {
                            s.close();
                            self.lock().closed(&conn);
                        }
                    }
                }
                Io::Close(conn) => {
                    if let Some(s) = self.socks.lock().unwrap().remove(&conn.id) {
                        s.close();
                    }
                }
            }
        }
    }

    /// Starts accepting on the listeners bound for new processes (a new master's address
    /// refuses connections, as it serves nothing a client reaches).
    fn adopt(self: &Arc<Self>, procs: &[(Role, SocketAddr, bool)]) {
        let bound: Vec<TcpListener> = std::mem::take(&mut *self.bound.lock().unwrap());
        for l in bound {
            let Ok(addr) = l.local_addr() else { continue };
            let Some(p) = procs.iter().position(|(_, a, _)| *a == addr) else {
                continue;
            };
            if procs[p].0 == Role::Master {
                continue;
            }
            self.spawn_accept(l, p);
        }
    }

    fn spawn_accept(self: &Arc<Self>, listener: TcpListener, p: usize) {
        let generation = self.lock().procs_generation(p);
        let inner = self.clone();
        let h = thread::spawn(move || accept_loop(inner, listener, p, generation));
        self.accept_threads.lock().unwrap().insert(p, h);
    }
}

fn accept_loop(inner: Arc<Inner>, listener: TcpListener, proc_idx: usize, generation: u64) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let id = inner.conn_ids.fetch_add(1, Ordering::SeqCst);
        let conn = {
            let mut st = inner.lock();
            if inner.stopped.load(Ordering::SeqCst) || st.procs_generation(proc_idx) != generation {
                return; // drops the listener: the port refuses connections from now on
            }
            let _ = stream.set_nodelay(true);
            let (Ok(w), Ok(shut)) = (stream.try_clone(), stream.try_clone()) else {
                continue;
            };
            let _ = w.set_write_timeout(Some(Duration::from_secs(10)));
            let Some(conn) = st.accept(proc_idx, id) else {
                continue;
            };
            let sock = Arc::new(Sock {
                writer: Mutex::new(w),
                shut,
            });
            inner.socks.lock().unwrap().insert(id, sock);
            conn
        };
        let inner2 = inner.clone();
        thread::spawn(move || serve_conn(inner2, conn, stream));
    }
}

/// Reads what arrives on a connection and hands it to the core (which keeps it unread while
/// the process is stopped).
fn serve_conn(inner: Arc<Inner>, conn: Arc<Conn>, mut stream: TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if inner.stopped.load(Ordering::SeqCst) || conn.is_closed() {
            break;
        }
        inner.with(|st| st.input(&conn, &buf[..n]));
    }
    inner.with(|st| st.closed(&conn));
    if let Some(s) = inner.socks.lock().unwrap().remove(&conn.id) {
        s.close();
    }
}

fn bind_retry(addr: SocketAddr) -> TcpListener {
    let start = StdInstant::now();
    loop {
        match TcpListener::bind(addr) {
            Ok(l) => return l,
            Err(e) if start.elapsed() > Duration::from_secs(5) => {
                panic!("test cluster: cannot bind {addr} again: {e}")
            }
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The public handle

/// A running in-process cluster (see the [module docs](super)). Stops when dropped.
pub struct TestCluster {
    inner: Arc<Inner>,
    ticker: Option<JoinHandle<()>>,
}

impl TestCluster {
    /// Starts the default cluster: 1 coordinator, proxies, 3 storage servers, shards split at
    /// [`super::DEFAULT_SPLIT_POINTS`].
    pub fn start() -> TestCluster {
        TestClusterBuilder::default().start()
    }

    /// Configures a cluster before starting it.
    pub fn builder() -> TestClusterBuilder {
        TestClusterBuilder::default()
    }

    pub(crate) fn start_with(cfg: TestClusterBuilder) -> TestCluster {
        let roles = State::initial_roles(&cfg);
        let listeners: Vec<TcpListener> = roles
            .iter()
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind loopback"))
            .collect();
        let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ ((addrs[0].port() as u64) << 32);
        let unix_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let bound = Arc::new(Mutex::new(Vec::new()));
        let bound2 = bound.clone();
        let new_addr = Box::new(move || {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
            let addr = l.local_addr().expect("a bound address");
            bound2.lock().unwrap().push(l);
            addr
        });
        let inner = Arc::new(Inner {
            state: Mutex::new(State::new(cfg, &addrs, seed, unix_epoch, new_addr)),
            origin: StdInstant::now(),
            stopped: AtomicBool::new(false),
            conn_ids: AtomicU64::new(0),
            socks: Mutex::new(BTreeMap::new()),
            bound,
            accept_threads: Mutex::new(BTreeMap::new()),
        });
        for (i, l) in listeners.into_iter().enumerate() {
            inner.spawn_accept(l, i);
        }
        let inner2 = inner.clone();
        let ticker = thread::spawn(move || {
            while !inner2.stopped.load(Ordering::SeqCst) {
                inner2.with(|st| st.handle_timeout());
                thread::sleep(Duration::from_millis(1));
            }
        });
        TestCluster {
            inner,
            ticker: Some(ticker),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        self.inner.with(f)
    }

    super::checks::checks_and_faults!();

    // --- what only the threaded runner has ----------------------------------------------------

    /// Writes `fdb.cluster` into `dir` and returns its path.
    pub fn write_cluster_file(&self, dir: &Path) -> PathBuf {
        let path = dir.join("fdb.cluster");
        std::fs::write(&path, self.cluster_file_string() + "\n").expect("write cluster file");
        path
    }

    /// The address of a role's process.
    pub fn addr(&self, role: Role) -> SocketAddr {
        self.with(|st| st.addr(role))
    }

    /// The first coordinator's address.
    pub fn coordinator_addr(&self) -> SocketAddr {
        self.addr(Role::Coordinator(0))
    }

    /// The current `ClientDBInfo` (what a coordinator would answer).
    pub fn client_db_info(&self) -> ClientDBInfo {
        self.with(|st| st.client_db_info())
    }

    /// The current interface of storage server `i`.
    pub fn storage_interface(&self, i: usize) -> StorageServerInterface {
        self.with(|st| st.ss_interface(i))
    }

    /// All request counters.
    pub fn request_counts(&self) -> BTreeMap<RequestKind, u64> {
        self.with(|st| st.request_counts())
    }

    /// Zeroes the request counters.
    pub fn reset_counters(&self) {
        self.with(|st| st.reset_counters())
    }

    /// Injected faults not consumed yet (the sum of the counts given to
    /// [`TestCluster::inject`] and its shorthands, minus the requests they hit), for `kind`
    /// or for every kind: a test asserts its injection fired by seeing this reach 0.
    pub fn injections_left(&self, kind: Option<RequestKind>) -> u32 {
        self.with(|st| st.injections_left(kind))
    }

    /// Watches currently held by storage servers.
    pub fn pending_watches(&self) -> usize {
        self.with(|st| st.pending_watches())
    }

    /// Open connections (all processes).
    pub fn connection_count(&self) -> usize {
        self.with(|st| st.connection_count())
    }

    /// Replies currently held by [`TestCluster::hold_replies`].
    pub fn held_replies(&self) -> usize {
        self.with(|st| st.held_replies())
    }

    /// Faults: a hung process. It keeps its connections and reads requests but answers nothing
    /// (not even pings) until unset. Replies produced meanwhile are lost.
    pub fn set_silent(&self, role: Role, silent: bool) {
        self.with(|st| st.set_silent(role, silent))
    }

    /// Faults: storage server `ss` lies: every value its point and range reads return has a
    /// `!` appended (a replica that went wrong), until unset.
    pub fn set_lying(&self, ss: usize, lying: bool) {
        self.with(|st| st.set_lying(ss, lying))
    }

    /// Faults: every process hung (see [`TestCluster::set_silent`]), or all resumed.
    pub fn set_all_silent(&self, silent: bool) {
        self.with(|st| st.set_all_silent(silent))
    }

    /// Faults: kills a role's process: its port stops listening (connections are refused) and
    /// its connections close. Pending long polls, watches and parked reads on it are lost.
    pub fn kill(&self, role: Role) {
        let (killed, p, addr) = self.with(|st| (st.kill(role), st.proc_of(role), st.addr(role)));
        if !killed {
            return;
        }
        // Wake the accept loop so it sees the new generation and drops the listener.
        let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
        let handle = self.inner.accept_threads.lock().unwrap().remove(&p);
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    /// Faults: restarts a killed role (or restarts a live one: kill, then start) on the same
    /// port. Proxies and storage servers come back with new endpoint tokens (old tokens get
    /// `ENDPOINT_NOT_FOUND`). Storage servers keep their unique ids and shards.
    ///
    /// Like a restarted fdbserver, the process does not take up again a role the
    /// transaction system had given it: a restart of the proxies' process, or of one that
    /// holds a log, makes a recovery in the builder's shape (at once, or when a coordinator
    /// quorum is up again), after which the proxies are back on this port and the log is
    /// gone. A recovery that failure detection already made for the killed process is not
    /// made again.
    pub fn restart(&self, role: Role) {
        self.kill(role);
        let listener = bind_retry(self.addr(role));
        let p = self.with(|st| {
            st.restart(role);
            st.proc_of(role)
        });
        self.inner.spawn_accept(listener, p);
    }

    /// Faults: moves the next shard off an excluded storage server now, as the next step
    /// of data distribution after an `exclude` would (see
    /// [`crate::cluster::TestClusterBuilder::data_move_delay`]); `false` when no shard is
    /// left to move.
    pub fn move_next_shard(&self) -> bool {
        self.with(|st| st.move_next_shard())
    }

    /// How many `wrong_shard_server` answers the storage servers sent (reads and watches
    /// for keys of shards they do not hold).
    pub fn wrong_shard_replies(&self) -> u64 {
        self.with(|st| st.wrong_shard_replies())
    }

    /// Whether a role's process is stopped ([`TestCluster::sigstop`]).
    pub fn is_stopped(&self, role: Role) -> bool {
        self.with(|st| st.role_is_stopped(role))
    }

    /// Stops every process and the background thread (also done on drop).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if self.inner.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        let roles: Vec<Role> = self.with(|st| st.processes().iter().map(|p| p.0).collect());
        for r in roles {
            self.kill(r);
        }
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.shutdown();
    }
}
