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

use fdb_protocol::error::ErrorCode;
use fdb_protocol::framing::ProtocolVersion;
use fdb_protocol::messages::commit::{mutation_type as mt, MutationRef};
use fdb_protocol::messages::coordination::ClientDBInfo;
use fdb_protocol::messages::storage::StorageServerInterface;
use fdb_protocol::messages::types::Version;
use fdb_protocol::Instant;

use bytes::Bytes;

use super::server::{
    Conn, Injected, Io, Recovery, ReleaseOrder, RequestKind, Role, ShardInfo, State,
};
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

    // --- addresses -----------------------------------------------------------------------------

    /// The cluster file contents: `description:id@coordinator[,coordinator...]`.
    /// After [`TestCluster::change_coordinators`], the new one.
    pub fn cluster_file_string(&self) -> String {
        self.with(|st| st.cluster_file_string())
    }

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

    /// How many storage servers there are.
    pub fn storage_server_count(&self) -> usize {
        self.with(|st| st.storage_server_count())
    }

    /// The current `ClientDBInfo` (what a coordinator would answer).
    pub fn client_db_info(&self) -> ClientDBInfo {
        self.with(|st| st.client_db_info())
    }

    /// The current interface of storage server `i`.
    pub fn storage_interface(&self, i: usize) -> StorageServerInterface {
        self.with(|st| st.ss_interface(i))
    }

    /// The shard map.
    pub fn shards(&self) -> Vec<ShardInfo> {
        self.with(|st| st.shards())
    }

    /// The storage servers holding `key`.
    pub fn servers_of(&self, key: &[u8]) -> Vec<usize> {
        self.with(|st| st.servers_of(key))
    }

    // --- data ------------------------------------------------------------------------------------

    /// The newest committed version.
    pub fn version(&self) -> Version {
        self.with(|st| st.newest_version())
    }

    /// Every key and value as of the newest version, read directly (no client involved).
    pub fn snapshot(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        self.with(|st| st.snapshot())
    }

    /// The newest value of one key, read directly.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.with(|st| st.get(key))
    }

    /// Commits `mutations` directly (no conflict check; watches fire) and returns the version.
    pub fn apply(&self, mutations: &[MutationRef]) -> Version {
        self.with(|st| st.apply_direct(mutations))
    }

    /// Sets one key directly (see [`TestCluster::apply`]).
    pub fn set(&self, key: &[u8], value: &[u8]) -> Version {
        self.apply(&[MutationRef::new(
            mt::SET_VALUE,
            Bytes::copy_from_slice(key),
            Bytes::copy_from_slice(value),
        )])
    }

    // --- counters ------------------------------------------------------------------------------

    /// How many requests of `kind` arrived (and were routed to a live role) so far.
    pub fn requests(&self, kind: RequestKind) -> u64 {
        self.with(|st| st.requests(kind))
    }

    /// All request counters.
    pub fn request_counts(&self) -> BTreeMap<RequestKind, u64> {
        self.with(|st| st.request_counts())
    }

    /// How many requests of `kind` arrived at the processes that held `role` (a recovery
    /// may have moved the proxies: every process they were in counts).
    pub fn requests_to(&self, role: Role, kind: RequestKind) -> u64 {
        self.with(|st| st.requests_to(role, kind))
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

    /// Connections accepted so far, by every process (a client that reconnects adds to it).
    pub fn connections_accepted(&self) -> u64 {
        self.with(|st| st.connections_accepted())
    }

    /// Watches currently held by storage servers.
    pub fn pending_watches(&self) -> usize {
        self.with(|st| st.pending_watches())
    }

    /// Open connections (all processes).
    pub fn connection_count(&self) -> usize {
        self.with(|st| st.connection_count())
    }

    // --- faults ----------------------------------------------------------------------------------

    /// Faults: closes every open connection of every process (they keep accepting new ones).
    pub fn drop_connections(&self) {
        self.with(|st| st.drop_connections_of(None))
    }

    /// Faults: closes the open connections of one role's process.
    pub fn drop_connections_of(&self, role: Role) {
        self.with(|st| st.drop_role_connections(role))
    }

    /// Faults: delays every reply to requests of `kind` (`None`: of every kind without a delay
    /// of its own) by `delay`. `Duration::ZERO` removes the delay.
    pub fn set_reply_delay(&self, kind: Option<RequestKind>, delay: Duration) {
        self.with(|st| st.set_reply_delay(kind, delay))
    }

    /// Faults: from now on, replies to requests of `kind` (`None`: all) are held back until
    /// [`TestCluster::release_replies`]; use it to reorder replies.
    pub fn hold_replies(&self, kind: Option<RequestKind>) {
        self.with(|st| st.hold_replies(kind))
    }

    /// Faults: stops holding replies and sends the held ones in `order` (those of a stopped
    /// process when it continues). Returns how many.
    pub fn release_replies(&self, order: ReleaseOrder) -> usize {
        self.with(|st| st.release_replies(order))
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

    /// Faults: every process hung (see [`TestCluster::set_silent`]), or all resumed.
    pub fn set_all_silent(&self, silent: bool) {
        self.with(|st| st.set_all_silent(silent))
    }

    /// Faults: the next `count` requests of `kind` get `what` instead of being served.
    pub fn inject(&self, kind: RequestKind, count: u32, what: Injected) {
        self.with(|st| st.inject(kind, count, what))
    }

    /// Faults: the next `count` requests of `kind` fail with `error` (e.g.
    /// `ErrorCode::WRONG_SHARD_SERVER`, `FUTURE_VERSION`, `PROCESS_BEHIND`,
    /// `ALL_ALTERNATIVES_FAILED`).
    pub fn fail_next(&self, kind: RequestKind, count: u32, error: ErrorCode) {
        self.inject(kind, count, Injected::Error(error));
    }

    /// Faults: the next `count` commits answer `commit_unknown_result`, with the commit applied
    /// (if it resolves) or not.
    pub fn commit_unknown_result_next(&self, count: u32, applied: bool) {
        self.inject(
            RequestKind::Commit,
            count,
            Injected::CommitUnknownResult { applied },
        );
    }

    /// Faults: removes every delay, hold (sending what was held, in order), injection and
    /// silence, and continues stopped processes. Killed roles stay killed.
    pub fn clear_faults(&self) {
        self.with(|st| st.clear_faults())
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

    /// Faults: the role ends while its process stays up, as roles end in an FDB recovery (a
    /// master or a transaction-system process failed) or when a storage server is removed.
    /// Like fdbserver, everything it still owes — held, delayed and parked replies, reads
    /// waiting for a version, watches — is answered with `broken_promise`; it comes back at
    /// once with new tokens (its old ones get `ENDPOINT_NOT_FOUND`), and new proxies publish a
    /// new `ClientDBInfo`. Connections stay open. Commits whose replies were held had been
    /// applied; parked ones ([`Injected::NoReply`]) had not.
    pub fn end_role(&self, role: Role) {
        self.with(|st| st.end_role(role))
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

    /// Faults: whether a role's process is up.
    pub fn is_alive(&self, role: Role) -> bool {
        self.with(|st| st.is_alive(role))
    }

    /// Faults: moves the shard holding `key` to storage server `to` (alone). Its old servers
    /// answer `wrong_shard_server` for it from now on; their watches on it fail the same way.
    pub fn move_shard(&self, key: &[u8], to: usize) {
        self.with(|st| st.move_shard(key, to))
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

    /// Faults: jumps the version forward by `versions` (as a recovery does), so that reads
    /// and commits at older read versions become `transaction_too_old` at once.
    pub fn advance_version(&self, versions: i64) {
        self.with(|st| st.advance_version(versions))
    }

    /// Faults: a recovery of the transaction system in fdbserver 7.3.77's shape
    /// ([`Recovery::default`]); see [`TestCluster::recover_with`].
    pub fn recover(&self) {
        self.recover_with(&Recovery::default());
    }

    /// Faults: a recovery, as a failed master, proxy or log makes one. The proxies end (what
    /// they owed is answered with `broken_promise`; commits stalled behind a stopped log
    /// survive or not, as `shape` says) and come back with new tokens — in a new process on
    /// loopback if theirs is stopped or dead. The `ClientDBInfo` first lists no proxies at
    /// all, then, `shape.without_proxies` later, the new ones, then is published again
    /// `shape.republish` times with the same proxies. The version jumps by
    /// `shape.version_jump` and the resolver starts empty: reads and commits at read
    /// versions from before the recovery are `transaction_too_old`. Logs on stopped
    /// processes are replaced. Storage servers keep their data, tokens and shards.
    pub fn recover_with(&self, shape: &Recovery) {
        self.with(|st| st.recover_with(shape))
    }

    /// How many recoveries the cluster went through (asked for, or after failure
    /// detection, or caused by a coordinator change).
    pub fn recoveries(&self) -> u64 {
        self.with(|st| st.recoveries())
    }

    /// Faults: `SIGSTOP` of a role's process. It keeps its sockets open (new connections
    /// are still accepted by the kernel) and reads nothing, answers nothing — pings
    /// included — and its timers stand still; replies it owed go out late when it is
    /// continued ([`TestCluster::sigcont`]), and what clients sent meanwhile is served
    /// then. If it holds the proxies or a log (see
    /// [`super::TestClusterBuilder::logs_on_storage`]), every commit and read version
    /// stalls, and after the builder's failure-detection delay the cluster recovers without
    /// it ([`TestCluster::recover_with`] in the builder's shape; the proxies move to a new
    /// process). Unlike [`TestCluster::set_silent`], nothing is lost.
    pub fn sigstop(&self, role: Role) {
        self.with(|st| st.sigstop(role))
    }

    /// Faults: `SIGCONT` of every stopped process that held `role` (also one whose proxies
    /// a recovery moved elsewhere). It sends the replies it owed, late, and reads what
    /// waited in its sockets. A storage server then catches up for the builder's catch-up
    /// time, answering reads at versions past the one it stopped at only after that
    /// (`future_version` if they wait longer than the future-version delay). A log that no
    /// recovery replaced meanwhile lets the stalled commits and read versions through.
    pub fn sigcont(&self, role: Role) {
        self.with(|st| st.sigcont(role))
    }

    /// Whether a role's process is stopped ([`TestCluster::sigstop`]).
    pub fn is_stopped(&self, role: Role) -> bool {
        self.with(|st| st.role_is_stopped(role))
    }

    /// Faults: `fdbcli coordinators`: the coordinators become those of `keep` (indexes of
    /// [`Role::Coordinator`]) plus `add` new ones (new processes on loopback, numbered
    /// after the existing ones), under a connection string with the same description and a
    /// new random id. Every old coordinator forwards the old connection string's clients
    /// to the new one (`ClientDBInfo.forward`, a forwarding `LeaderInfo`; held long polls
    /// are answered with it at once) — chains of changes forward step by step — and the
    /// change makes a recovery in the builder's shape. Returns the new connection string.
    pub fn change_coordinators(&self, keep: &[usize], add: usize) -> String {
        self.with(|st| st.change_coordinators(keep, add))
    }

    /// Faults: the protocol version announced in the ConnectPacket of new connections.
    pub fn set_protocol_version(&self, v: ProtocolVersion) {
        self.with(|st| st.set_protocol_version(v))
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
