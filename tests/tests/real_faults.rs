//! Real faults on a real FoundationDB 7.3.77 cluster (issue 11, section 2): a 5-process
//! `double` cluster of its own on loopback (`cluster.sh`), a bank workload through both
//! drivers (8 concurrent transfers in one tokio `Database`, two threads each with its own
//! mio `Database`), and one fault per phase: SIGKILL a storage-only process (set to the
//! `storage` class at the start), SIGSTOP it, SIGKILL a process holding storage and a log,
//! SIGKILL the master's process, SIGKILL the master's then the new GRV proxy's process, SIGSTOP
//! a commit proxy's process past failure detection, SIGKILL every process, exclude the
//! storage process and include it again, move the coordinators.
//!
//! After each phase the bank is judged against the records (`fdb_tests::bank`): every
//! transfer ended, the sum holds, nothing told committed is lost, nothing told failed was
//! applied, no transfer was applied twice, a read version comes within a minute of the heal,
//! and — libfdb_c's result on the same faults — no transfer failed to the application at all.
//! Every phase runs even when an earlier one failed; the test fails at the end with the list.
//!
//! Runs when `cluster.sh` is found (`$FDB_SHARED_DIR`, else `../shared/fdb` beside the
//! project); skipped with a notice otherwise. `FDB_FAULTS=storage_kill,coordinators` runs a
//! subset; `RUST_LOG=fdb_protocol=debug` (targets syntax) also prints the clients' log; run
//! with `--nocapture` to see the report of a passing run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_tests::bank::{code_name, random_seed, Bank, BankState, Outcome, Rng, Tally, TxRecord};
use fdb_tests::real::{ClusterScript, RealCluster, ReferenceCommit, Signal, Status};

const PROCESSES: usize = 5;
const TOKIO_WORKERS: usize = 8;
const MIO_THREADS: usize = 2;
const ACCOUNTS: usize = 20;
const INITIAL_BALANCE: i64 = 1000;
const TX_TIMEOUT: Duration = Duration::from_secs(20);
/// How far past its timeout a transfer may end before it counts as running past it.
const TIMEOUT_GRACE: Duration = Duration::from_secs(10);
/// The workload runs this long before each fault, and this long after the heal.
const WARM: Duration = Duration::from_secs(3);
const AFTER: Duration = Duration::from_secs(3);
/// A read version must come within this after the heal.
const READ_VERSION_LIMIT: Duration = Duration::from_secs(60);
/// How long the cluster may take to be available again with every process back.
const SETTLE_LIMIT: Duration = Duration::from_secs(90);
/// How long the harness waits for a full recovery between phases (a recovery stays at
/// `all_logs_recruited` until the old generation's logs are done with, which takes a while).
const RECOVERED_LIMIT: Duration = Duration::from_secs(10);

/// Roles whose loss makes a recovery; avoided when a phase wants to hit only one role.
const RECOVERY_ROLES: &[&str] = &[
    "master",
    "cluster_controller",
    "commit_proxy",
    "grv_proxy",
    "resolver",
    "log",
];

// ---------------------------------------------------------------------------------------
// What the clients logged: every event at INFO and above, counted per driver and message.

mod client_log {
    use std::collections::BTreeMap;
    use std::fmt::Write;
    use std::sync::Mutex;
    use std::time::Instant;

    use tracing::field::{Field, Visit};
    use tracing::{Event, Level, Subscriber};
    use tracing_subscriber::layer::{Context, SubscriberExt};
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{filter, Layer};

    /// What was logged under one (driver, level, message).
    #[derive(Clone, Debug)]
    pub struct Seen {
        pub count: usize,
        pub first: Instant,
        pub last: Instant,
        /// The other fields of the last one.
        pub fields: String,
    }

    pub type Counts = BTreeMap<(String, String, String), Seen>;

    static COUNTS: Mutex<Counts> = Mutex::new(BTreeMap::new());

    struct Counter;

    #[derive(Default)]
    struct Fields {
        message: String,
        rest: String,
    }

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                self.message = format!("{value:?}");
            } else {
                let _ = write!(self.rest, "{}={value:?} ", field.name());
            }
        }
    }

    impl<S: Subscriber> Layer<S> for Counter {
        fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
            let mut f = Fields::default();
            event.record(&mut f);
            let driver = match std::thread::current().name() {
                Some(n) if n.starts_with("mio-") => n.to_string(),
                _ => "tokio".to_string(),
            };
            let key = (driver, event.metadata().level().to_string(), f.message);
            let now = Instant::now();
            let mut c = COUNTS.lock().unwrap_or_else(|e| e.into_inner());
            let e = c.entry(key).or_insert(Seen {
                count: 0,
                first: now,
                last: now,
                fields: String::new(),
            });
            e.count += 1;
            e.last = now;
            e.fields = f.rest;
        }
    }

    /// Installs the counter (INFO and above) and, when `RUST_LOG` holds a targets filter
    /// (`fdb_protocol=debug,info`), a formatter printing the clients' events to the test's
    /// output.
    pub fn install() {
        let fmt = std::env::var("RUST_LOG").ok().and_then(|s| {
            let targets: filter::Targets = s.parse().ok()?;
            Some(
                tracing_subscriber::fmt::layer()
                    .with_test_writer()
                    .with_thread_names(true)
                    .with_filter(targets),
            )
        });
        let _ = tracing_subscriber::registry()
            .with(Counter.with_filter(filter::LevelFilter::from_level(Level::INFO)))
            .with(fmt)
            .try_init();
    }

    /// Everything logged since the last call (or since the start).
    pub fn take() -> Counts {
        std::mem::take(&mut *COUNTS.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// How many events `driver` logged with `message` in `counts`.
    pub fn count(counts: &Counts, driver: &str, message: &str) -> usize {
        counts
            .iter()
            .filter(|((d, _, m), _)| d == driver && m == message)
            .map(|(_, s)| s.count)
            .sum()
    }
}

// ---------------------------------------------------------------------------------------
// The workload: both drivers transferring until told to stop.

/// A mio client: its thread name (also its tracing name), its cluster file, its database.
struct MioClient {
    name: String,
    cluster_file: PathBuf,
    db: Option<fdb_driver_mio::Database>,
}

/// The workload of one phase, running, with fdbcli committing beside it for reference.
struct Running {
    stop: Arc<AtomicBool>,
    records: Arc<Mutex<Vec<TxRecord>>>,
    tokio: Vec<tokio::task::JoinHandle<()>>,
    mio: Vec<thread::JoinHandle<fdb_driver_mio::Database>>,
    reference: thread::JoinHandle<Vec<ReferenceCommit>>,
}

struct Harness {
    cluster: RealCluster,
    rt: tokio::runtime::Runtime,
    bank: Bank,
    tokio_db: fdb_driver_tokio::Database,
    tokio_cluster_file: PathBuf,
    mio: Vec<MioClient>,
    seed: u64,
}

impl Harness {
    fn start_workload(&mut self) -> Running {
        let stop = Arc::new(AtomicBool::new(false));
        let records = Arc::new(Mutex::new(Vec::new()));
        self.seed = self.seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let tokio = (0..TOKIO_WORKERS)
            .map(|i| {
                let (db, bank) = (self.tokio_db.clone(), self.bank.clone());
                let (stop, records) = (stop.clone(), records.clone());
                let mut rng = Rng::new(self.seed ^ ((i as u64 + 1) << 32));
                self.rt.spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let t = bank.random_transfer(&mut rng);
                        let r = bank.transfer_tokio(&db, t, "tokio").await;
                        records.lock().unwrap().push(r);
                    }
                })
            })
            .collect();
        let mio = self
            .mio
            .iter_mut()
            .enumerate()
            .map(|(i, c)| {
                let mut db =
                    c.db.take()
                        .expect("the mio database is home between phases");
                let (stop, records, bank) = (stop.clone(), records.clone(), self.bank.clone());
                let name = c.name.clone();
                let mut rng = Rng::new(self.seed ^ ((100 + i as u64) << 32));
                thread::Builder::new()
                    .name(c.name.clone())
                    .spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            let t = bank.random_transfer(&mut rng);
                            let r = bank.transfer_mio(&mut db, t, &name);
                            records.lock().unwrap().push(r);
                        }
                        db
                    })
                    .expect("spawn a mio worker")
            })
            .collect();
        let cli = self.cluster.cli();
        let s = stop.clone();
        let reference = thread::spawn(move || cli.reference_commits("real_faults/fdbcli", &s));
        Running {
            stop,
            records,
            tokio,
            mio,
            reference,
        }
    }

    /// Stops the workload: its records, and fdbcli's commits.
    fn stop_workload(&mut self, run: Running) -> (Vec<TxRecord>, Vec<ReferenceCommit>) {
        run.stop.store(true, Ordering::Relaxed);
        for h in run.tokio {
            let _ = self.rt.block_on(h);
        }
        for (c, h) in self.mio.iter_mut().zip(run.mio) {
            c.db = Some(h.join().expect("a mio worker panicked"));
        }
        let reference = run.reference.join().expect("the fdbcli thread panicked");
        (std::mem::take(&mut *run.records.lock().unwrap()), reference)
    }
}

// ---------------------------------------------------------------------------------------
// Phases.

/// What a phase's fault script noted: when the fault hit, when it was healed, what it did,
/// and what went wrong with the injection itself.
struct PhaseLog {
    fault_at: Option<Instant>,
    healed_at: Option<Instant>,
    notes: Vec<String>,
    violations: Vec<String>,
    /// The tokio driver's read-version probe started at the heal.
    probe: Option<tokio::task::JoinHandle<Result<Duration, String>>>,
}

impl PhaseLog {
    fn note(&mut self, s: impl Into<String>) {
        let s = s.into();
        println!("    {s}");
        self.notes.push(s);
    }
    fn violation(&mut self, s: impl Into<String>) {
        let s = s.into();
        println!("    VIOLATION: {s}");
        self.violations.push(s);
    }
    fn fault(&mut self) {
        self.fault_at = Some(Instant::now());
    }
    /// Marks the heal and starts timing a fresh read version through the tokio driver.
    fn healed(&mut self, h: &Harness) {
        self.healed_at = Some(Instant::now());
        let db = h.tokio_db.clone();
        self.probe = Some(h.rt.spawn(probe_read_version(db)));
    }
}

/// Time until a new transaction gets a read version (each try bounded, retried through
/// `on_error`), at most [`READ_VERSION_LIMIT`].
async fn probe_read_version(db: fdb_driver_tokio::Database) -> Result<Duration, String> {
    let start = Instant::now();
    let mut last = String::from("no try finished");
    while start.elapsed() < READ_VERSION_LIMIT {
        let tx = db.create_transaction();
        match tokio::time::timeout(Duration::from_secs(10), tx.get_read_version()).await {
            Ok(Ok(_)) => return Ok(start.elapsed()),
            Ok(Err(e)) => {
                last = e.to_string();
                if let Some(c) = e.code() {
                    let _ = tx.on_error(c).await;
                }
            }
            Err(_) => last = "no read version within 10 s".into(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "no read version within {READ_VERSION_LIMIT:?}: {last}"
    ))
}

fn status(h: &Harness, log: &mut PhaseLog) -> Option<Status> {
    match h.cluster.status() {
        Ok(s) => Some(s),
        Err(e) => {
            log.violation(format!("status json failed: {e}"));
            None
        }
    }
}

/// The process with `role` holding the fewest of `avoid` (then the lowest port).
fn pick(st: &Status, role: &str, avoid: &[&str]) -> Option<(u16, Vec<String>)> {
    st.processes()
        .into_iter()
        .filter(|p| p.has(role) && !p.excluded)
        .min_by_key(|p| (avoid.iter().filter(|a| p.has(a)).count(), p.port))
        .map(|p| (p.port, p.roles))
}

fn roles_of(st: &Status, port: u16) -> Vec<String> {
    st.processes()
        .into_iter()
        .find(|p| p.port == port)
        .map(|p| p.roles)
        .unwrap_or_default()
}

fn eventually(limit: Duration, f: impl FnMut() -> bool) -> bool {
    fdb_tests::testkit::eventually_every(limit, Duration::from_millis(100), f)
}

fn kill(h: &Harness, log: &mut PhaseLog, port: u16) {
    if let Err(e) = h.cluster.signal(port, Signal::Kill) {
        log.violation(format!("SIGKILL {port}: {e}"));
    }
    if !eventually(Duration::from_secs(10), || !h.cluster.is_alive(port)) {
        log.violation(format!("process {port} still alive after SIGKILL"));
    }
}

fn restart(h: &Harness, log: &mut PhaseLog, port: u16) {
    if let Err(e) = h.cluster.restart(port) {
        log.violation(e);
    }
}

/// Waits until the cluster is available, recovered and every process reports.
/// Waits until the cluster is available with every process back (what the clients need;
/// the last steps of a recovery, and data re-replication, come later — between phases,
/// without the workload, see [`recover`]).
fn settle(h: &Harness, log: &mut PhaseLog) -> Option<Status> {
    let start = Instant::now();
    let ports = h.cluster.ports();
    let back = |s: &Status| {
        s.available()
            && ports
                .iter()
                .all(|p| s.processes().iter().any(|x| x.port == *p))
    };
    match h.cluster.wait_status(SETTLE_LIMIT, back) {
        Ok(s) => {
            log.note(format!(
                "cluster available with every process after {:.1?} (recovery: {})",
                start.elapsed(),
                s.recovery_state()
            ));
            Some(s)
        }
        Err(e) => {
            log.violation(format!("cluster did not come back: {e}"));
            None
        }
    }
}

/// Between phases, without load: waits for the full recovery (at most [`RECOVERED_LIMIT`]),
/// so the next fault hits a settled cluster where it can.
fn recover(h: &Harness) {
    let start = Instant::now();
    let ports = h.cluster.ports();
    match h
        .cluster
        .wait_status(RECOVERED_LIMIT, |s| s.is_settled(&ports))
    {
        Ok(_) => println!(
            "    fully recovered {:.1?} after the phase",
            start.elapsed()
        ),
        Err(e) => println!(
            "    not fully recovered {:.1?} after the phase: {e}",
            start.elapsed()
        ),
    }
}

fn storage_kill(h: &Harness, log: &mut PhaseLog) {
    let Some(st) = status(h, log) else { return };
    let mut avoid = RECOVERY_ROLES.to_vec();
    avoid.push("coordinator");
    let Some((port, roles)) = pick(&st, "storage", &avoid) else {
        return log.violation("no storage process");
    };
    let generation = st.generation();
    log.note(format!("SIGKILL storage process {port} (roles {roles:?})"));
    log.fault();
    kill(h, log, port);
    thread::sleep(Duration::from_secs(10));
    log.note(format!("restart {port}"));
    restart(h, log, port);
    log.healed(h);
    if let Some(s) = settle(h, log) {
        log.note(format!("generation {generation:?} -> {:?}", s.generation()));
    }
}

fn sigstop_storage(h: &Harness, log: &mut PhaseLog) {
    let Some(st) = status(h, log) else { return };
    let mut avoid = RECOVERY_ROLES.to_vec();
    avoid.push("coordinator");
    let Some((port, roles)) = pick(&st, "storage", &avoid) else {
        return log.violation("no storage process");
    };
    log.note(format!(
        "SIGSTOP storage process {port} (roles {roles:?}) for 10 s: its reads must move to the other replica"
    ));
    log.fault();
    stop_for(h, log, port, Duration::from_secs(10));
    log.healed(h);
    settle(h, log);
}

/// SIGSTOP `port`, check it stopped, SIGCONT it `pause` later.
fn stop_for(h: &Harness, log: &mut PhaseLog, port: u16, pause: Duration) {
    if let Err(e) = h.cluster.signal(port, Signal::Stop) {
        log.violation(e);
    }
    if !eventually(Duration::from_secs(5), || {
        h.cluster.state(port) == Some('T')
    }) {
        log.violation(format!(
            "process {port} is not stopped (state {:?})",
            h.cluster.state(port)
        ));
    }
    thread::sleep(pause);
    log.note(format!("SIGCONT {port}"));
    if let Err(e) = h.cluster.signal(port, Signal::Cont) {
        log.violation(e);
    }
}

fn storage_and_log_kill(h: &Harness, log: &mut PhaseLog) {
    let Some(st) = status(h, log) else { return };
    let avoid = ["master", "cluster_controller", "coordinator", "grv_proxy"];
    let Some((port, roles)) = st
        .processes()
        .into_iter()
        .filter(|p| p.has("storage") && p.has("log") && !p.excluded)
        .min_by_key(|p| (avoid.iter().filter(|a| p.has(a)).count(), p.port))
        .map(|p| (p.port, p.roles))
    else {
        return log.violation("no process holds both storage and a log");
    };
    let generation = st.generation();
    log.note(format!(
        "SIGKILL storage+log process {port} (roles {roles:?})"
    ));
    log.fault();
    kill(h, log, port);
    thread::sleep(Duration::from_secs(10));
    log.note(format!("restart {port}"));
    restart(h, log, port);
    log.healed(h);
    if let Some(s) = settle(h, log) {
        expect_recovered(log, generation, &s);
    }
}

fn master_kill(h: &Harness, log: &mut PhaseLog) {
    let Some(st) = status(h, log) else { return };
    let Some((port, roles)) = pick(&st, "master", &[]) else {
        return log.violation("no master in status");
    };
    let generation = st.generation();
    log.note(format!(
        "SIGKILL the master's process {port} (roles {roles:?})"
    ));
    log.fault();
    kill(h, log, port);
    thread::sleep(Duration::from_secs(12));
    log.note(format!("restart {port}"));
    restart(h, log, port);
    log.healed(h);
    if let Some(s) = settle(h, log) {
        expect_recovered(log, generation, &s);
    }
}

/// The fault caused a recovery: the generation grew.
fn expect_recovered(log: &mut PhaseLog, before: Option<u64>, after: &Status) {
    match (before, after.generation()) {
        (Some(b), Some(a)) if a > b => log.note(format!("recovered: generation {b} -> {a}")),
        (b, a) => log.violation(format!(
            "the fault made no recovery (generation {b:?} -> {a:?})"
        )),
    }
}

fn master_then_grv_kill(h: &Harness, log: &mut PhaseLog) {
    let Some(st) = status(h, log) else { return };
    let Some((master, roles)) = pick(&st, "master", &[]) else {
        return log.violation("no master in status");
    };
    let generation = st.generation();
    log.note(format!(
        "SIGKILL the master's process {master} (roles {roles:?})"
    ));
    log.fault();
    kill(h, log, master);
    // The GRV proxy of the recovered generation, on a live process.
    let grv = h.cluster.wait_status(Duration::from_secs(20), |s| {
        s.generation() > generation && s.holders("grv_proxy").iter().any(|p| *p != master)
    });
    let grv = match grv {
        Ok(s) => s
            .holders("grv_proxy")
            .into_iter()
            .find(|p| *p != master)
            .map(|p| (p, roles_of(&s, p))),
        Err(e) => {
            log.violation(format!("no new GRV proxy after the master kill: {e}"));
            None
        }
    };
    if let Some((port, roles)) = &grv {
        log.note(format!(
            "SIGKILL the new GRV proxy's process {port} (roles {roles:?})"
        ));
        kill(h, log, *port);
    }
    thread::sleep(Duration::from_secs(10));
    log.note(format!("restart {master}"));
    restart(h, log, master);
    if let Some((port, _)) = grv {
        log.note(format!("restart {port}"));
        restart(h, log, port);
    }
    log.healed(h);
    if let Some(s) = settle(h, log) {
        expect_recovered(log, generation, &s);
    }
}

fn sigstop_proxy(h: &Harness, log: &mut PhaseLog) {
    let Some(st) = status(h, log) else { return };
    let avoid = [
        "master",
        "cluster_controller",
        "coordinator",
        "grv_proxy",
        "log",
    ];
    let Some((port, roles)) = pick(&st, "commit_proxy", &avoid) else {
        return log.violation("no commit proxy in status");
    };
    let generation = st.generation();
    log.note(format!(
        "SIGSTOP the commit proxy's process {port} (roles {roles:?}) for 22 s"
    ));
    log.fault();
    stop_for(h, log, port, Duration::from_secs(22));
    log.healed(h);
    if let Some(s) = settle(h, log) {
        expect_recovered(log, generation, &s);
    }
}

fn kill_all(h: &Harness, log: &mut PhaseLog) {
    let ports = h.cluster.ports();
    log.note(format!("SIGKILL all of {ports:?}"));
    log.fault();
    for &p in &ports {
        if let Err(e) = h.cluster.signal(p, Signal::Kill) {
            log.violation(format!("SIGKILL {p}: {e}"));
        }
    }
    for &p in &ports {
        if !eventually(Duration::from_secs(10), || !h.cluster.is_alive(p)) {
            log.violation(format!("process {p} still alive after SIGKILL"));
        }
    }
    thread::sleep(Duration::from_secs(5));
    log.note("restart all");
    for &p in &ports {
        restart(h, log, p);
    }
    log.healed(h);
    settle(h, log);
}

/// The coordinators of a connection string (or cluster file text), sorted, as `ip:port`.
fn coordinators_of(text: &str) -> Option<(String, Vec<String>)> {
    let cf = ClusterFile::parse_file_bytes(text.as_bytes()).ok()?;
    let s = cf.to_string();
    let (_, addrs) = s.split_once('@')?;
    let mut v: Vec<String> = addrs.split(',').map(String::from).collect();
    v.sort();
    Some((s, v))
}

fn read_coordinators(path: &Path) -> Option<(String, Vec<String>)> {
    coordinators_of(&std::fs::read_to_string(path).ok()?)
}

fn change_coordinators(h: &Harness, log: &mut PhaseLog) {
    let Some(st) = status(h, log) else { return };
    let old = st.coordinators();
    let others: Vec<u16> = h
        .cluster
        .ports()
        .into_iter()
        .filter(|p| !old.contains(p))
        .collect();
    // As many new processes as there are (two of five), plus one of the old coordinators.
    let mut new: Vec<u16> = others.iter().copied().take(3).collect();
    new.extend(old.iter().copied().take(3 - new.len()));
    let mut want: Vec<String> = new.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    want.sort();
    log.note(format!("coordinators {old:?} -> {new:?}"));
    log.fault();
    match h.cluster.change_coordinators(&new) {
        Ok(out) => log.note(format!("fdbcli: {}", out.trim().replace('\n', " | "))),
        Err(e) => return log.violation(e),
    }
    // The servers' file first (fdbserver rewrites it), then every client's.
    let server_file = h.cluster.cluster_file();
    let mut server = None;
    if !eventually(Duration::from_secs(30), || {
        server = read_coordinators(&server_file).filter(|(_, c)| *c == want);
        server.is_some()
    }) {
        return log.violation(format!(
            "the servers' cluster file does not name {want:?}: {:?}",
            read_coordinators(&server_file)
        ));
    }
    let (server_string, _) = server.expect("checked");
    log.note(format!("servers' connection string: {server_string}"));
    log.healed(h);
    let mut files: Vec<(String, PathBuf)> = vec![("tokio".into(), h.tokio_cluster_file.clone())];
    files.extend(
        h.mio
            .iter()
            .map(|c| (c.name.clone(), c.cluster_file.clone())),
    );
    let start = log.fault_at.expect("marked");
    for (who, path) in files {
        let mut seen = None;
        if eventually(Duration::from_secs(60), || {
            seen = read_coordinators(&path);
            seen.as_ref().is_some_and(|(s, _)| *s == server_string)
        }) {
            log.note(format!(
                "{who} rewrote its cluster file within {:.1?} of the change",
                start.elapsed()
            ));
        } else {
            log.violation(format!(
                "{who}'s cluster file {} was not rewritten to {server_string}: {seen:?}",
                path.display()
            ));
        }
    }
    settle(h, log);
}

fn exclude_storage(h: &Harness, log: &mut PhaseLog) {
    let Some(st) = status(h, log) else { return };
    let mut avoid = RECOVERY_ROLES.to_vec();
    avoid.push("coordinator");
    let Some((port, roles)) = pick(&st, "storage", &avoid) else {
        return log.violation("no storage process");
    };
    log.note(format!(
        "exclude {port} (roles {roles:?}), waiting for its data to move"
    ));
    log.fault();
    let start = Instant::now();
    match h.cluster.exclude(port, Duration::from_secs(90)) {
        Ok(_) => log.note(format!(
            "excluded: data moved away in {:.1?}",
            start.elapsed()
        )),
        Err(e) => log.violation(e),
    }
    match h.cluster.status() {
        Ok(s) if s.processes().iter().any(|p| p.port == port && p.excluded) => {}
        Ok(s) => log.violation(format!(
            "status does not show {port} excluded: {}",
            s.summary()
        )),
        Err(e) => log.violation(e),
    }
    log.note(format!("include {port}"));
    if let Err(e) = h.cluster.include(port) {
        log.violation(e);
    }
    log.healed(h);
    settle(h, log);
}

type Fault = fn(&Harness, &mut PhaseLog);

/// In this order: `exclude` wants its storage process not to be a coordinator, which
/// `coordinators` may make it.
const PHASES: &[(&str, Fault)] = &[
    ("storage_kill", storage_kill),
    ("sigstop_storage", sigstop_storage),
    ("storage_and_log_kill", storage_and_log_kill),
    ("master_kill", master_kill),
    ("master_then_grv_kill", master_then_grv_kill),
    ("sigstop_proxy", sigstop_proxy),
    ("kill_all", kill_all),
    ("exclude", exclude_storage),
    ("coordinators", change_coordinators),
];

// ---------------------------------------------------------------------------------------
// The report.

fn print_tallies(tallies: &BTreeMap<String, Tally>) {
    for (driver, t) in tallies {
        println!(
            "    {driver:6} transfers {:5}  committed {:5} (by id after unknown result {})  failed {}  hung {} (applied {})  attempts {}  longest {:.1?}  first success after fault {}",
            t.transfers,
            t.committed,
            t.committed_by_id,
            t.failed,
            t.hung,
            t.hung_applied,
            t.attempts,
            t.longest,
            t.first_success_after_fault
                .map_or("none".into(), |d| format!("{d:.1?}")),
        );
        for ((c, s), n) in &t.retried {
            println!("           retried  {n:5} x {} at {s:?}", code_name(*c));
        }
        for ((c, s), (n, applied)) in &t.to_app {
            println!(
                "           TO APP   {n:5} x {} at {s:?} (of those actually committed: {applied})",
                code_name(*c)
            );
        }
    }
}

/// What the clients logged, with the first and last time since the fault.
fn print_client_log(counts: &client_log::Counts, fault: Option<Instant>) {
    let since = |t: Instant| match fault {
        Some(f) if t >= f => format!("+{:.1?}", t - f),
        Some(f) => format!("-{:.1?}", f - t),
        None => "?".into(),
    };
    for ((driver, level, message), seen) in counts {
        println!(
            "    log {driver:6} {level:5} {:5} x {message} ({} .. {} after the fault)  [last: {}]",
            seen.count,
            since(seen.first),
            since(seen.last),
            seen.fields.trim()
        );
    }
}

/// The failures that reached the application, in time order (at most `max`).
fn print_failures(
    records: &[TxRecord],
    state: Option<&BankState>,
    fault: Option<Instant>,
    max: usize,
) {
    let mut failed: Vec<&TxRecord> = records.iter().filter(|r| !r.committed()).collect();
    failed.sort_by_key(|r| r.ended);
    for r in failed.iter().take(max) {
        let at = |t: Instant| match fault {
            Some(f) if t >= f => format!("+{:.1?}", t - f),
            Some(f) => format!("-{:.1?}", f - t),
            None => "?".into(),
        };
        let applied = state.is_some_and(|s| s.ids.contains_key(&r.transfer.id));
        let what = match &r.outcome {
            Outcome::Failed {
                error,
                stage,
                ambiguous,
                ..
            } => format!(
                "{error} at {stage:?}{}",
                if *ambiguous { " (outcome open)" } else { "" }
            ),
            other => format!("{other:?}"),
        };
        println!(
            "    failed {:6} began {} ended {} after {} attempts (retried {:?}): {what}; applied: {applied}",
            r.driver,
            at(r.started),
            at(r.ended),
            r.attempts,
            r.retried.iter().map(|(c, s)| format!("{}@{s:?}", c.0)).collect::<Vec<_>>(),
        );
    }
    if failed.len() > max {
        println!("    ... and {} more", failed.len() - max);
    }
}

/// The longest stretch between two of the sorted `ends` (from `origin` on): its start since
/// `origin`, and its length.
fn longest_gap(ends: &[Instant], origin: Instant) -> Option<(Duration, Duration)> {
    std::iter::once(origin)
        .chain(ends.iter().copied())
        .collect::<Vec<_>>()
        .windows(2)
        .map(|w| (w[0] - origin, w[1] - w[0]))
        .max_by_key(|(_, gap)| *gap)
}

/// How much of `r`'s life fell into one stretch without a commit among the sorted `ends`
/// (the longest such overlap; a stretch still open at the end runs to `r`'s end).
fn outage_during(ends: &[Instant], origin: Instant, r: &TxRecord) -> Duration {
    let mut bounds: Vec<Instant> = std::iter::once(origin)
        .chain(ends.iter().copied())
        .collect();
    bounds.push(r.ended.max(*bounds.last().expect("non-empty")));
    bounds
        .windows(2)
        .map(|w| {
            let (a, b) = (w[0].max(r.started), w[1].min(r.ended));
            b.saturating_duration_since(a)
        })
        .max()
        .unwrap_or_default()
}

/// One phase: workload, fault, workload, judgement. Returns its violations.
/// Returns its violations and how many transfers told failed were applied.
fn run_phase(
    h: &mut Harness,
    name: &str,
    fault: Fault,
    all: &mut Vec<TxRecord>,
) -> (Vec<String>, usize) {
    println!("\n=== phase {name}");
    let mut log = PhaseLog {
        fault_at: None,
        healed_at: None,
        notes: Vec::new(),
        violations: Vec::new(),
        probe: None,
    };
    client_log::take();
    let started = Instant::now();
    let running = h.start_workload();
    thread::sleep(WARM);
    fault(h, &mut log);
    thread::sleep(AFTER);
    let (records, reference) = h.stop_workload(running);
    println!("    workload stopped after {:.1?}", started.elapsed());
    if let Some(p) = log.probe.take() {
        match h.rt.block_on(p) {
            Ok(Ok(d)) => log.note(format!("tokio: read version {d:.1?} after the heal")),
            Ok(Err(e)) => log.violation(format!("tokio: {e}")),
            Err(e) => log.violation(format!("tokio probe: {e}")),
        }
    }
    for c in &mut h.mio {
        let db = c.db.as_mut().expect("home");
        let t = Instant::now();
        match db.read_version_with(Default::default(), READ_VERSION_LIMIT) {
            Ok(_) => log.note(format!("{}: read version in {:.1?}", c.name, t.elapsed())),
            Err(e) => log.violation(format!("{}: no read version: {e}", c.name)),
        }
    }
    let state =
        h.rt.block_on(h.bank.read_state(&h.tokio_db, Duration::from_secs(60)));
    let mut told_failed_applied = 0;
    let tallies = Tally::by_driver(&records, state.as_ref().ok(), log.fault_at);
    print_tallies(&tallies);
    print_failures(&records, state.as_ref().ok(), log.fault_at, 12);
    let ends = |it: &mut dyn Iterator<Item = Instant>| {
        let mut v: Vec<Instant> = it.collect();
        v.sort();
        v
    };
    let ours = ends(&mut records.iter().filter(|r| r.committed()).map(|r| r.ended));
    let theirs = ends(&mut reference.iter().filter(|c| c.committed).map(|c| c.ended));
    if let Some((at, gap)) = longest_gap(&ours, started) {
        println!("    longest time without a commit: {gap:.1?}, from +{at:.1?}");
    }
    match longest_gap(&theirs, started) {
        Some((at, gap)) => println!(
            "    fdbcli (FDB's own client): {} of {} commits, longest time without one {gap:.1?}, from +{at:.1?}",
            theirs.len(),
            reference.len()
        ),
        None => println!(
            "    fdbcli (FDB's own client): {} of {} commits",
            theirs.len(),
            reference.len()
        ),
    }
    // A transfer that timed out while FDB's own client could not commit either, for most of
    // the timeout, met a cluster that was down: no client could have done better.
    let excused: Vec<&TxRecord> = records
        .iter()
        .filter(|r| {
            matches!(&r.outcome, Outcome::Failed { code: Some(c), .. } if *c == ErrorCode::TRANSACTION_TIMED_OUT)
                && outage_during(&theirs, started, r) >= TX_TIMEOUT * 3 / 4
        })
        .collect();
    for r in &excused {
        log.note(format!(
            "excused: a {} transfer timed out after {:.1?}, while fdbcli could not commit for {:.1?} of it",
            r.driver,
            r.duration(),
            outage_during(&theirs, started, r)
        ));
    }
    match &state {
        Ok(s) => {
            let v = s.judge(&h.bank, &records, TIMEOUT_GRACE);
            println!(
                "    bank: sum {} ({} id keys); failed but applied {}, told failed but applied {}",
                s.sum(),
                s.ids.len(),
                v.failed_but_applied,
                v.definitely_failed_but_applied
            );
            told_failed_applied = v.definitely_failed_but_applied;
            for e in v.violations {
                log.violation(e);
            }
        }
        Err(e) => log.violation(format!("cannot read the bank: {e}")),
    }
    let failed: usize = tallies.values().map(|t| t.failed + t.hung).sum::<usize>() - excused.len();
    if failed > 0 {
        log.violation(format!(
            "{failed} transfers failed to the application (libfdb_c: none)"
        ));
    }
    for (driver, t) in &tallies {
        if t.committed == 0 {
            log.violation(format!("{driver}: no transfer committed in the phase"));
        }
    }
    if let Some(healed) = log.healed_at {
        for driver in tallies.keys() {
            if !records
                .iter()
                .any(|r| r.driver == *driver && r.committed() && r.ended > healed)
            {
                log.violation(format!("{driver}: no commit after the heal"));
            }
        }
    }
    let logged = client_log::take();
    print_client_log(&logged, log.fault_at);
    for who in std::iter::once("tokio".to_string()).chain(h.mio.iter().map(|c| c.name.clone())) {
        let n = client_log::count(&logged, &who, "cluster info");
        if n == 0 && !["storage_kill", "sigstop_storage", "exclude"].contains(&name) {
            log.violation(format!(
                "{who}: never logged a new ClientDBInfo after a recovery"
            ));
        }
    }
    all.extend(records);
    recover(h);
    (log.violations, told_failed_applied)
}

// ---------------------------------------------------------------------------------------

/// Gives one process that is not a coordinator the `storage` class and waits until it holds
/// nothing else, so the storage phases hit a storage server and only that (with every role
/// left to the cluster's choice, each of five processes carries a log, a proxy or more).
fn dedicate_storage_process(cluster: &RealCluster) {
    let Ok(st) = cluster.status() else { return };
    let coords = st.coordinators();
    let Some(port) = cluster.ports().into_iter().find(|p| !coords.contains(p)) else {
        return;
    };
    let start = Instant::now();
    if let Err(e) = cluster.set_class(port, "storage") {
        println!("real_faults: setclass failed ({e}); phases pick the least busy storage process");
        return;
    }
    match cluster.wait_status(SETTLE_LIMIT, |s| {
        s.processes()
            .iter()
            .any(|p| p.port == port && p.roles == ["storage"])
            && s.is_settled(&cluster.ports())
    }) {
        Ok(_) => println!(
            "real_faults: process {port} holds only storage after {:.1?}",
            start.elapsed()
        ),
        Err(e) => println!("real_faults: process {port} still holds other roles: {e}"),
    }
}

fn open_clients(cluster: &RealCluster) -> (fdb_driver_tokio::Database, PathBuf, Vec<MioClient>) {
    // Each client gets its own copy of the cluster file, to see that it rewrites it.
    let copy = |name: &str| {
        let path = cluster.dir().join(format!("client-{name}.cluster"));
        std::fs::copy(cluster.cluster_file(), &path).expect("copy the cluster file");
        path
    };
    let tokio_file = copy("tokio");
    let tokio_db = fdb_driver_tokio::Database::open_file_with_seed(&tokio_file, random_seed())
        .expect("open the tokio client");
    let mio = (1..=MIO_THREADS)
        .map(|i| {
            let name = format!("mio-{i}");
            let cluster_file = copy(&name);
            let db = fdb_driver_mio::Database::open_file_with_seed(&cluster_file, random_seed())
                .expect("open a mio client");
            MioClient {
                name,
                cluster_file,
                db: Some(db),
            }
        })
        .collect();
    (tokio_db, tokio_file, mio)
}

#[test]
fn faults_on_a_real_cluster() {
    let script = match ClusterScript::find() {
        Ok(Some(s)) => s,
        Ok(None) => {
            println!(
                "real_faults: no cluster.sh (FDB_SHARED_DIR unset, no ../shared/fdb beside the project); skipping"
            );
            return;
        }
        Err(e) => panic!("real_faults: {e}"),
    };
    let only: Option<Vec<String>> = std::env::var("FDB_FAULTS")
        .ok()
        .filter(|s| !s.is_empty())
        .map(|s| s.split(',').map(|p| p.trim().to_string()).collect());
    if let Some(only) = &only {
        for p in only {
            assert!(
                PHASES.iter().any(|(n, _)| n == p),
                "FDB_FAULTS names an unknown phase {p:?}"
            );
        }
    }
    client_log::install();
    let t0 = Instant::now();
    let cluster = match RealCluster::start(&script, PROCESSES, "memory") {
        Ok(c) => c,
        Err(e) => panic!(
            "real_faults: cluster.sh at {} did not start a cluster{}: {e}",
            script.path.display(),
            if script.required {
                " (FDB_SHARED_DIR is set)"
            } else {
                ""
            }
        ),
    };
    println!(
        "real_faults: {PROCESSES}-process cluster in {} ({:.1?})",
        cluster.dir().display(),
        t0.elapsed()
    );
    dedicate_storage_process(&cluster);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let (tokio_db, tokio_cluster_file, mio) = {
        let _guard = rt.enter();
        open_clients(&cluster)
    };
    let bank = Bank::new(b"real_faults/bank/", ACCOUNTS, INITIAL_BALANCE, TX_TIMEOUT);
    let mut h = Harness {
        cluster,
        rt,
        bank,
        tokio_db,
        tokio_cluster_file,
        mio,
        seed: random_seed(),
    };
    h.rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), h.bank.init(&h.tokio_db)).await
    })
    .expect("the bank opens within a minute")
    .expect("open the bank");

    let mut all = Vec::new();
    let mut failures: Vec<(String, Vec<String>)> = Vec::new();
    let mut told_failed_applied = 0;
    for (name, fault) in PHASES {
        if only.as_ref().is_some_and(|o| !o.iter().any(|p| p == name)) {
            continue;
        }
        let (v, applied) = run_phase(&mut h, name, *fault, &mut all);
        told_failed_applied += applied;
        if !v.is_empty() {
            failures.push((name.to_string(), v));
        }
    }
    // Late commits of earlier phases would show now.
    match h
        .rt
        .block_on(h.bank.read_state(&h.tokio_db, Duration::from_secs(60)))
    {
        Ok(s) => {
            let v: BankState = s;
            let verdict = v.judge(&h.bank, &all, TIMEOUT_GRACE);
            println!(
                "\n=== all phases: {} transfers, {} id keys, sum {}; told failed but applied {}",
                all.len(),
                v.ids.len(),
                v.sum(),
                verdict.definitely_failed_but_applied
            );
            // Per-transfer findings were reported by their phase; what is new now is a
            // commit that landed after its phase was judged, or a broken invariant.
            let mut late: Vec<String> = verdict
                .violations
                .into_iter()
                .filter(|l| !l.contains("told failed were applied"))
                .collect();
            if verdict.definitely_failed_but_applied > told_failed_applied {
                late.push(format!(
                    "{} transfers told failed were applied after their phase was judged",
                    verdict.definitely_failed_but_applied - told_failed_applied
                ));
            }
            if !late.is_empty() {
                failures.push(("all phases".into(), late));
            }
        }
        Err(e) => failures.push(("all phases".into(), vec![e])),
    }
    let _ = h.rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), h.bank.clear(&h.tokio_db)).await
    });
    println!("real_faults: done in {:.1?}", t0.elapsed());
    if !failures.is_empty() {
        let mut msg = String::from("fault phases failed:\n");
        for (phase, v) in &failures {
            for line in v {
                msg.push_str(&format!("  {phase}: {line}\n"));
            }
        }
        panic!("{msg}");
    }
}
