//! The process-wide network state ("the network" of `crate::api`: its phase and the open
//! databases' loops) and the loop threads: each database's mio loop turned by a thread of
//! its own; and the network options.
//!
//! The mio driver's loop is "run by whichever thread waits on it". Here no application
//! thread ever waits on it (foundationdb-rs's futures run on any executor), so a dedicated
//! thread turns it: it blocks in the loop's poll until a socket, a timer or a new request
//! wakes it (sending a request wakes a blocked poll; see `MioDriver::send`), and an
//! application future is woken by the request's completion as on any runtime. The thread
//! ends when its database's last handle drops or the network stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use fdb_api::{network_env, TlsConfig};
use fdb_driver_mio::{AsyncDatabase, MioDriver};
use fdb_protocol::error::ErrorCode;
use fdb_protocol::knobs::{KnobError, Knobs};

use crate::error::{FdbError, FdbResult};
use crate::options::NetworkOption;

/// Where the process's network is in its one life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No `NetworkBuilder::build` yet.
    Unset,
    /// Set up: databases may be opened; their loops turn.
    Setup,
    /// `NetworkRunner::run` is blocked.
    Running,
    /// Stopped for good.
    Stopped,
}

pub(crate) struct Network {
    pub(crate) phase: Mutex<Phase>,
    pub(crate) changed: Condvar,
    /// The loop threads of the open databases (ended and joined when the network stops).
    pub(crate) loops: Mutex<Vec<LoopHandle>>,
}

pub(crate) static NETWORK: Network = Network {
    phase: Mutex::new(Phase::Unset),
    changed: Condvar::new(),
    loops: Mutex::new(Vec::new()),
};

pub(crate) fn phase() -> Phase {
    *NETWORK.phase.lock().unwrap_or_else(|e| e.into_inner())
}

/// Set once the network stopped: every future's poll looks at it, a lock each time would
/// cost more than the rest of the poll.
static STOPPED: AtomicBool = AtomicBool::new(false);

pub(crate) fn stopped() -> bool {
    STOPPED.load(Ordering::Acquire)
}

pub(crate) fn set_phase(p: Phase) {
    *NETWORK.phase.lock().unwrap_or_else(|e| e.into_inner()) = p;
    if p == Phase::Stopped {
        STOPPED.store(true, Ordering::Release);
    }
    NETWORK.changed.notify_all();
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A database's loop thread, as the network registry holds it.
pub(crate) struct LoopHandle {
    id: u64,
    stop: Arc<AtomicBool>,
    driver: MioDriver,
    thread: Option<JoinHandle<()>>,
}

impl LoopHandle {
    fn end(mut self) {
        self.stop.store(true, Ordering::Release);
        self.driver.notify();
        if let Some(t) = self.thread.take() {
            if t.thread().id() != thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

/// The database's side: ends the thread when the database's last handle drops.
pub(crate) struct LoopThread {
    id: u64,
    thread: ThreadId,
    /// The thread's kernel id and its CPU time at the last busyness reading.
    cpu: Arc<OnceLock<u32>>,
    last: Mutex<Option<(Instant, u64)>>,
}

impl LoopThread {
    /// Starts a loop thread for `driver`: refused before the network is set up
    /// (`network_not_setup`, as libfdb_c) and after it stopped.
    pub(crate) fn start(driver: &MioDriver) -> FdbResult<LoopThread> {
        let mut loops = NETWORK.loops.lock().unwrap_or_else(|e| e.into_inner());
        match phase() {
            Phase::Setup | Phase::Running => {}
            Phase::Unset => return Err(FdbError::of(ErrorCode::NETWORK_NOT_SETUP)),
            Phase::Stopped => return Err(FdbError::of(ErrorCode::OPERATION_CANCELLED)),
        }
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let stop = Arc::new(AtomicBool::new(false));
        let cpu = Arc::new(OnceLock::new());
        // The thread's kernel id, known before the database is handed out: a busyness
        // reading right after opening must not find it missing.
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let thread = {
            let (stop, driver) = (stop.clone(), driver.clone());
            thread::Builder::new()
                .name(format!("fdb-compat-loop-{id}"))
                .spawn(move || {
                    // The core's and the driver's events run here: with trace files on,
                    // they go to the file too.
                    let _trace = crate::trace::enabled().then(crate::trace::install_on_this_thread);
                    let _ = tid_tx.send(own_kernel_tid());
                    drop(tid_tx);
                    while !stop.load(Ordering::Acquire) {
                        if let Err(e) = driver.turn(None) {
                            // The poll itself failed (out of file descriptors, say): retry
                            // soon rather than spin.
                            eprintln!("fdb-compat: event loop: {e}");
                            thread::sleep(Duration::from_millis(10));
                        }
                    }
                })
                .map_err(|_| FdbError::of(ErrorCode::INTERNAL_ERROR))?
        };
        if let Ok(Some(tid)) = tid_rx.recv() {
            let _ = cpu.set(tid);
        }
        let thread_id = thread.thread().id();
        loops.push(LoopHandle {
            id,
            stop,
            driver: driver.clone(),
            thread: Some(thread),
        });
        Ok(LoopThread {
            id,
            thread: thread_id,
            cpu,
            last: Mutex::new(None),
        })
    }

    /// The share of wall time the loop thread spent on the CPU since the last reading (since
    /// it started, the first time): libfdb_c's "main thread busyness", measured on the
    /// thread that does this client's network work. Linux only (`/proc`); elsewhere
    /// `unsupported_operation`.
    pub(crate) fn busyness(&self) -> FdbResult<f64> {
        let unsupported = || FdbError::of(ErrorCode::UNSUPPORTED_OPERATION);
        let tid = *self.cpu.get().ok_or_else(unsupported)?;
        let ticks = thread_cpu_ticks(tid).ok_or_else(unsupported)?;
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let (since, before) = last.unwrap_or((now - Duration::from_millis(1), 0));
        *last = Some((now, ticks));
        let wall = now.duration_since(since).as_secs_f64();
        // The kernel counts in USER_HZ ticks, 100 a second on Linux.
        let cpu = ticks.saturating_sub(before) as f64 / 100.0;
        Ok(if wall > 0.0 {
            (cpu / wall).min(1.0)
        } else {
            0.0
        })
    }
}

impl Drop for LoopThread {
    fn drop(&mut self) {
        let mut loops = NETWORK.loops.lock().unwrap_or_else(|e| e.into_inner());
        let Some(at) = loops.iter().position(|l| l.id == self.id) else {
            return;
        };
        let handle = loops.swap_remove(at);
        drop(loops);
        debug_assert_eq!(
            handle.thread.as_ref().map(|t| t.thread().id()),
            Some(self.thread)
        );
        handle.end();
    }
}

/// Ends and joins every loop thread (the network stopped).
pub(crate) fn end_all_loops() {
    let loops = std::mem::take(&mut *NETWORK.loops.lock().unwrap_or_else(|e| e.into_inner()));
    for l in loops {
        l.end();
    }
}

fn own_kernel_tid() -> Option<u32> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// utime + stime of a thread of this process, in ticks.
fn thread_cpu_ticks(tid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The TLS settings given as network options, for the databases opened afterwards.
static TLS: Mutex<Option<TlsConfig>> = Mutex::new(None);

pub(crate) fn tls_config() -> Option<TlsConfig> {
    TLS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The knobs set so far: the databases opened afterwards take them.
static KNOBS: Mutex<Option<Knobs>> = Mutex::new(None);

pub(crate) fn knobs() -> Knobs {
    KNOBS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .unwrap_or_default()
}

/// The `knob` option, `name=value`, as libfdb_c takes it: without an `=` it is refused;
/// otherwise it succeeds whatever the knob, and one not taken is said on standard error
/// (libfdb_c's own words for a name or value it does not recognise).
fn knob(option: &str) -> FdbResult<()> {
    let mut knobs = KNOBS.lock().unwrap_or_else(|e| e.into_inner());
    let mut set = knobs.unwrap_or_default();
    let Some(result) = set.set_option(option) else {
        return Err(FdbError::of(ErrorCode::INVALID_OPTION_VALUE));
    };
    let name = option.split('=').next().unwrap_or_default();
    match result {
        Ok(()) => {
            crate::trace::set_min_severity(set.min_trace_severity);
            *knobs = Some(set);
        }
        Err(KnobError::Unrecognized | KnobError::BadValue) => {
            eprintln!("FoundationDB client ignoring unrecognized knob option '{name}'");
        }
        Err(KnobError::NotHonoured) => {
            eprintln!(
                "fdb-compat ignoring knob option '{name}': it tunes a part of libfdb_c this \
                 client does not have"
            );
        }
    }
    Ok(())
}

/// A network option: the trace ones set up trace files (`crate::trace`), the TLS ones
/// configure the databases opened afterwards, a few are true as they stand (what they turn
/// off does not exist here), the rest are `unsupported_operation`, never ignored. Each one
/// taken is recorded in the trace file, as libfdb_c records it.
pub(crate) fn network_option(option: &NetworkOption) -> FdbResult<()> {
    let set = crate::trace::set_option(option).unwrap_or_else(|| other_option(option));
    if set.is_ok() {
        crate::trace::option_set(option);
    }
    set
}

fn other_option(option: &NetworkOption) -> FdbResult<()> {
    use NetworkOption as N;
    let tls = |f: &dyn Fn(TlsConfig) -> TlsConfig| {
        let mut t = TLS.lock().unwrap_or_else(|e| e.into_inner());
        *t = Some(f(t.take().unwrap_or_default()));
        Ok(())
    };
    match option {
        N::TLSCertPath(p) => tls(&|t| t.certificate_file(p)),
        N::TLSCertBytes(b) => tls(&|t| t.certificate_pem(b.clone())),
        N::TLSKeyPath(p) => tls(&|t| t.key_file(p)),
        N::TLSKeyBytes(b) => tls(&|t| t.key_pem(b.clone())),
        N::TLSCaPath(p) => tls(&|t| t.ca_file(p)),
        N::TLSCaBytes(b) => tls(&|t| t.ca_pem(b.clone())),
        N::TLSPassword(p) => tls(&|t| t.password(p)),
        N::TLSDisablePlaintextConnection => tls(&|t| t.disable_plaintext_connection(true)),
        N::TLSVerifyPeers(v) => {
            let rules = String::from_utf8(v.clone())
                .map_err(|_| FdbError::of(ErrorCode::INVALID_OPTION_VALUE))?;
            tls(&|t| t.verify_peers(rules.clone()))
        }
        // No external client libraries and no client statistics here: turning them off
        // holds already. Nor is there a bypass to disable: this client always answers as
        // libfdb_c's multi-version client does (it follows an upgrade, and `on_error`
        // retries cluster_version_changed).
        N::DisableMultiVersionClientApi
        | N::DisableClientStatisticsLogging
        | N::DisableClientBypass => Ok(()),
        // External clients are libfdb_c's C libraries for clusters of other versions; this
        // client loads none: it speaks 7.3 and 7.4 itself and follows an upgrade between
        // them (any other version is refused with incompatible_client, see the README).
        N::ExternalClientDirectory(_) | N::ExternalClientLibrary(_) => Ok(()),
        // What libfdb_c does with external clients, none of which exist here: their
        // callbacks' threads, their failures to load, their library copies and where those
        // go. And failing when no client matches the cluster's version is what this client
        // always does (incompatible_client).
        N::CallbacksOnExternalThreads
        | N::IgnoreExternalClientFailures
        | N::RetainClientLibraryCopies
        | N::ClientTmpDir(_)
        | N::FailIncompatibleClient => Ok(()),
        // One thread per client version is this client as it is; more would serve a cluster
        // from external clients only. libfdb_c takes 1 to 1024.
        N::ClientThreadsPerVersion(n) => match n {
            1 => Ok(()),
            2..=1024 => Err(FdbError::of(ErrorCode::UNSUPPORTED_OPERATION)),
            _ => Err(FdbError::of(ErrorCode::INVALID_OPTION_VALUE)),
        },
        // Deprecated, and nothing in libfdb_c 7.3 either.
        N::LocalAddress(_) | N::ClusterFile(_) | N::TLSPlugin(_) => Ok(()),
        N::Knob(k) => knob(k),
        // The span tracer libfdb_c runs: none here, so only "none" holds.
        N::DistributedClientTracer(t) => match t.as_str() {
            "none" | "disabled" => Ok(()),
            "logfile" | "file" | "log_file" | "network_lossy" => {
                Err(FdbError::of(ErrorCode::UNSUPPORTED_OPERATION))
            }
            _ => Err(FdbError::of(ErrorCode::INVALID_OPTION_VALUE)),
        },
        _ => Err(FdbError::of(ErrorCode::UNSUPPORTED_OPERATION)),
    }
}

/// Set once the environment's network options are in (libfdb_c's `envOptionsLoaded`).
static ENV_LOADED: AtomicBool = AtomicBool::new(false);

/// libfdb_c's network options from the environment: each `FDB_NETWORK_OPTION_<NAME>`
/// variable naming a network option sets it, once, before the first option the program sets
/// (so the program's own win) or at set-up, in the options' code order. A value holds
/// several parameters separated by `:`, each set in turn (`\` escapes `\` and `:`). A
/// variable whose option or value this client cannot take fails what triggered the reading
/// with `environment_variable_network_option_failed` (2022), and the next trigger reads the
/// environment again, as in libfdb_c; a variable naming no network option is not read.
pub(crate) fn load_env_options() -> FdbResult<()> {
    if ENV_LOADED.load(Ordering::Acquire) {
        return Ok(());
    }
    let failed = || FdbError::of(ErrorCode::ENVIRONMENT_VARIABLE_NETWORK_OPTION_FAILED);
    let mut options = Vec::new();
    for (name, value) in std::env::vars_os() {
        let Some(name) = name
            .to_str()
            .and_then(|n| n.strip_prefix(network_env::PREFIX))
        else {
            continue;
        };
        // Only a variable naming an option is read, so only then may its value be bad.
        if NetworkOption::from_env(name, "").is_none() {
            continue;
        }
        let value = value.into_string().map_err(|_| failed())?;
        for v in network_env::values(&value).ok_or_else(failed)? {
            options.push(
                NetworkOption::from_env(name, &v)
                    .flatten()
                    .ok_or_else(failed)?,
            );
        }
    }
    options.sort_by_key(NetworkOption::code);
    for option in &options {
        network_option(option).map_err(|_| failed())?;
    }
    ENV_LOADED.store(true, Ordering::Release);
    Ok(())
}

/// What a `Database` and its transactions share: the database and its loop thread (ended
/// when the last of them drops; the database is dropped first).
pub(crate) struct DbHandle {
    pub(crate) db: AsyncDatabase,
    pub(crate) loop_thread: LoopThread,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_taken_as_libfdb_c_takes_them() {
        let code = |o: NetworkOption| other_option(&o).err().map(|e| e.code());
        // Taken and kept for the databases opened afterwards.
        assert_eq!(
            code(NetworkOption::Knob(
                "location_cache_eviction_size=1234".into()
            )),
            None
        );
        assert_eq!(knobs().location_cache_eviction_size, 1234);
        // Not a knob, a bad value, a knob of a part this client lacks: said on standard
        // error, and nothing changes.
        for k in [
            "no_such_knob=1",
            "location_cache_eviction_size=x",
            "max_trace_lines=5",
        ] {
            assert_eq!(code(NetworkOption::Knob(k.into())), None, "{k}");
        }
        assert_eq!(knobs().location_cache_eviction_size, 1234);
    }

    /// Refusals change nothing, so they are checked here rather than through a builder,
    /// which each refusal consumes.
    #[test]
    fn values_and_options_refused() {
        let code = |o: NetworkOption| other_option(&o).err().map(|e| e.code());
        assert_eq!(code(NetworkOption::ClientThreadsPerVersion(2)), Some(2108));
        assert_eq!(code(NetworkOption::ClientThreadsPerVersion(0)), Some(2006));
        assert_eq!(
            code(NetworkOption::ClientThreadsPerVersion(1025)),
            Some(2006)
        );
        assert_eq!(
            code(NetworkOption::DistributedClientTracer("log_file".into())),
            Some(2108)
        );
        assert_eq!(
            code(NetworkOption::DistributedClientTracer("morse".into())),
            Some(2006)
        );
        assert_eq!(code(NetworkOption::DisableLocalClient), Some(2108));
        assert_eq!(code(NetworkOption::Knob("a=b".into())), None);
        assert_eq!(
            code(NetworkOption::Knob("no_equals_sign".into())),
            Some(2006)
        );
        assert_eq!(
            code(NetworkOption::FutureVersionClientLibrary("x".into())),
            Some(2108)
        );
    }
}
