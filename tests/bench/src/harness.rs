//! Closed-loop runners. Every run: each worker does its share of the warmup, all meet at a
//! barrier, the counters (wall clock, process CPU, allocations) are read, the workers take
//! measured transactions from a shared ticket counter until `measured` are done and the
//! window has lasted `min_window`, meet again, and the counters are read a second time.
//! Latency is recorded per worker (nanoseconds, in a pre-sized HDR histogram, so recording
//! never allocates) and merged afterwards. On the in-process cluster the cluster's request
//! counters are read too, outside the other counters' window (first at the start, last at the
//! end), so the pipe round trip costs nothing measured.

use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::alloc::{self, AllocCounts};
use crate::cpu::{process_usage, Usage};
use crate::server::RequestProbe;
use crate::server_cpu::{ServerCpu, ServerSpent, ThreadTimes};
use crate::wire::{WireMark, WirePerTxn, WireProbe, WireSpent};

/// Highest latency the histograms hold (longer ones saturate): 60 s.
const MAX_NS: u64 = 60_000_000_000;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, 3).expect("valid histogram bounds")
}

/// What one run (or several pooled runs) measured.
#[derive(Clone, Debug)]
pub struct RunStats {
    /// Per-transaction latency in nanoseconds.
    pub hist: Histogram<u64>,
    pub wall: Duration,
    pub cpu: Duration,
    /// The kernel's part of `cpu`.
    pub kernel: Duration,
    /// The client's voluntary context switches.
    pub switches: u64,
    pub alloc: AllocCounts,
    pub txns: u64,
    /// Requests the cluster served in the window, by kind (in-process cluster only).
    pub requests: Option<BTreeMap<String, u64>>,
    /// The cluster's own CPU time in the window, where its processes can be read.
    pub server: Option<ServerSpent>,
    /// What crossed the wire to and from the cluster in the window.
    pub wire: Option<WireSpent>,
}

/// What is read around every measured window besides the client's own counters.
#[derive(Default)]
pub struct Probes {
    /// The in-process cluster's request counters.
    pub requests: Option<Arc<RequestProbe>>,
    /// The cluster processes' CPU time.
    pub server: Option<ServerCpu>,
    /// The traffic to and from the cluster, and the syscalls that moved it.
    pub wire: Option<WireProbe>,
}

impl RunStats {
    pub fn empty() -> RunStats {
        RunStats {
            hist: new_histogram(),
            wall: Duration::ZERO,
            cpu: Duration::ZERO,
            kernel: Duration::ZERO,
            switches: 0,
            alloc: AllocCounts::default(),
            txns: 0,
            requests: None,
            server: None,
            wire: None,
        }
    }

    /// Requests per transaction, by kind.
    pub fn requests_per_txn(&self) -> Option<BTreeMap<String, f64>> {
        let n = self.txns.max(1) as f64;
        self.requests
            .as_ref()
            .map(|r| r.iter().map(|(k, &v)| (k.clone(), v as f64 / n)).collect())
    }

    /// Pools another run of the same arm and cell into this one.
    pub fn merge(&mut self, o: &RunStats) {
        self.hist.add(&o.hist).expect("same histogram bounds");
        self.wall += o.wall;
        self.cpu += o.cpu;
        self.kernel += o.kernel;
        self.switches += o.switches;
        self.alloc.allocs += o.alloc.allocs;
        self.alloc.bytes += o.alloc.bytes;
        self.txns += o.txns;
        if let Some(theirs) = o.server {
            self.server
                .get_or_insert_with(ServerSpent::default)
                .add(theirs);
        }
        if let Some(theirs) = &o.wire {
            match &mut self.wire {
                Some(mine) => mine.add(theirs),
                None => self.wire = Some(*theirs),
            }
        }
        if let Some(theirs) = &o.requests {
            let mine = self.requests.get_or_insert_with(BTreeMap::new);
            for (k, v) in theirs {
                *mine.entry(k.clone()).or_default() += v;
            }
        }
    }

    pub fn summary(&self) -> Summary {
        let n = self.txns.max(1) as f64;
        let us = |ns: f64| ns / 1000.0;
        Summary {
            txns: self.txns,
            mean_us: us(self.hist.mean()),
            p50_us: us(self.hist.value_at_quantile(0.50) as f64),
            p99_us: us(self.hist.value_at_quantile(0.99) as f64),
            max_us: us(self.hist.max() as f64),
            tps: if self.wall.is_zero() {
                0.0
            } else {
                self.txns as f64 / self.wall.as_secs_f64()
            },
            cpu_us_per_txn: self.cpu.as_secs_f64() * 1e6 / n,
            kernel_us_per_txn: self.kernel.as_secs_f64() * 1e6 / n,
            switches_per_txn: self.switches as f64 / n,
            allocs_per_txn: self.alloc.allocs as f64 / n,
            bytes_per_txn: self.alloc.bytes as f64 / n,
            server_cpu_us_per_txn: self.server.map(|sv| sv.total_ns as f64 / 1000.0 / n),
            server_busiest_us_per_txn: self.server.map(|sv| sv.busiest_ns as f64 / 1000.0 / n),
            server_turns_per_txn: self.server.map(|sv| sv.busiest_runs as f64 / n),
            server_busy: self.server.and_then(|sv| {
                (!self.wall.is_zero()).then(|| sv.busiest_ns as f64 / 1e9 / self.wall.as_secs_f64())
            }),
            wire: self.wire.map(|w| w.per_txn(self.txns)),
        }
    }
}

/// The per-run numbers reported.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub txns: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub tps: f64,
    pub cpu_us_per_txn: f64,
    /// The kernel's part of `cpu_us_per_txn` (system time).
    pub kernel_us_per_txn: f64,
    /// The client's voluntary context switches per transaction (a thread blocked).
    pub switches_per_txn: f64,
    pub allocs_per_txn: f64,
    pub bytes_per_txn: f64,
    /// The cluster processes' CPU per transaction, all threads.
    pub server_cpu_us_per_txn: Option<f64>,
    /// The busiest cluster thread's CPU per transaction: the serial part of the server's work.
    pub server_busiest_us_per_txn: Option<f64>,
    /// The busiest cluster thread's share of the window's wall time (1.0 = always on a core).
    pub server_busy: Option<f64>,
    /// Times the busiest cluster thread was put on a CPU, per transaction: about its run
    /// loop's turns, fewer when requests arrive together.
    pub server_turns_per_txn: Option<f64>,
    /// Traffic and syscalls per transaction.
    pub wire: Option<WirePerTxn>,
}

impl Summary {
    /// The metric's value; `None` where it was not measured (the server's CPU of a cluster
    /// whose processes can't be read).
    pub fn metric(&self, m: Metric) -> Option<f64> {
        match m {
            Metric::Mean => Some(self.mean_us),
            Metric::P99 => Some(self.p99_us),
            Metric::Cpu => Some(self.cpu_us_per_txn),
            Metric::ServerCpu => self.server_cpu_us_per_txn,
            Metric::Allocs => Some(self.allocs_per_txn),
        }
    }
}

/// The metrics compared between arms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Mean,
    P99,
    Cpu,
    /// The cluster's CPU per transaction: what this client costs everyone else.
    ServerCpu,
    Allocs,
}

impl Metric {
    /// Compared in ratio tables and the plot (lower is better for all of them).
    pub const COMPARED: [Metric; 5] = [
        Metric::Mean,
        Metric::P99,
        Metric::Cpu,
        Metric::ServerCpu,
        Metric::Allocs,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Metric::Mean => "mean",
            Metric::P99 => "p99",
            Metric::Cpu => "cpu",
            Metric::ServerCpu => "server cpu",
            Metric::Allocs => "allocs",
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Metric::Mean => "mean latency",
            Metric::P99 => "p99 latency",
            Metric::Cpu => "CPU per transaction",
            Metric::ServerCpu => "server CPU per transaction",
            Metric::Allocs => "allocations per transaction",
        }
    }
    /// The performance target against libfdb_c at this many workers (the ratio's whole
    /// interval must be at most this): latency never above libfdb_c's and ≤ 0.6× with one
    /// worker, half its client CPU, no more of the cluster's CPU, no more allocations.
    pub fn target(self, workers: usize) -> Option<f64> {
        match self {
            Metric::Mean | Metric::P99 if workers <= 1 => Some(0.6),
            Metric::Mean | Metric::P99 => Some(1.0),
            Metric::Cpu => Some(0.5),
            Metric::ServerCpu | Metric::Allocs => Some(1.0),
        }
    }
}

/// How many transactions a run does.
#[derive(Clone, Copy, Debug)]
pub struct Counts {
    pub workers: usize,
    /// Warmup transactions in total, split over the workers (at least one each).
    pub warmup: u64,
    /// Measured transactions in total, at least.
    pub measured: u64,
    /// The shortest measured window: a run that finishes its `measured` transactions sooner
    /// goes on until this much time has passed. A fast cell (a read version in 30 µs) is
    /// over in a few milliseconds, and one burst of the server's own work (a shard split,
    /// the memory engine's log) then decides a whole run.
    pub min_window: Duration,
}

impl Counts {
    pub fn warmup_each(&self) -> u64 {
        self.warmup.div_ceil(self.workers.max(1) as u64).max(1)
    }
}

/// Shared state of one run.
struct Shared {
    tickets: AtomicU64,
    /// When the measured window may close: set as it opens.
    until: std::sync::OnceLock<Instant>,
    abort: AtomicBool,
    error: Mutex<Option<String>>,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            tickets: AtomicU64::new(0),
            until: std::sync::OnceLock::new(),
            abort: AtomicBool::new(false),
            error: Mutex::new(None),
        }
    }
    fn fail(&self, e: String) {
        self.abort.store(true, Ordering::SeqCst);
        let mut g = self.error.lock().unwrap();
        if g.is_none() {
            *g = Some(e);
        }
    }
    /// Opens the measured window (after the start marks were read).
    fn open(&self, min_window: Duration) {
        let _ = self.until.set(Instant::now() + min_window);
    }
    /// Whether a worker takes one more measured transaction: while the count is not done,
    /// then while the window is younger than its minimum (the clock is read only then).
    fn next(&self, measured: u64) -> bool {
        !self.abort.load(Ordering::Relaxed)
            && (self.tickets.fetch_add(1, Ordering::Relaxed) < measured
                || self.until.get().is_some_and(|&t| Instant::now() < t))
    }
    fn result(&self) -> Result<(), String> {
        match self.error.lock().unwrap().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

pub(crate) struct Mark {
    at: Instant,
    usage: Usage,
    alloc: AllocCounts,
    requests: Option<BTreeMap<String, u64>>,
    server: Option<ThreadTimes>,
    wire: Option<WireMark>,
}

impl Mark {
    fn counters() -> Mark {
        // Allocation counters first: reading the others does not allocate.
        let alloc = alloc::snapshot();
        Mark {
            at: Instant::now(),
            usage: process_usage(),
            alloc,
            requests: None,
            server: None,
            wire: None,
        }
    }
    /// The start of a window: the cluster's counters, then ours.
    pub(crate) fn start(probes: &Probes) -> Mark {
        let requests = probes.requests.as_deref().and_then(RequestProbe::read);
        let server = probes.server.as_ref().map(ServerCpu::read);
        let wire = probes.wire.as_ref().map(WireProbe::start);
        Mark {
            requests,
            server,
            wire,
            ..Mark::counters()
        }
    }
    /// The end of a window: ours, then the cluster's. The wire counters are closed against
    /// `start`'s (taking them out of it).
    pub(crate) fn end(probes: &Probes, start: &mut Mark) -> (Mark, Option<WireSpent>) {
        let mut m = Mark::counters();
        m.server = probes.server.as_ref().map(ServerCpu::read);
        let wire = match (probes.wire.as_ref(), start.wire.take()) {
            (Some(p), Some(w)) => Some(p.end(w)),
            _ => None,
        };
        m.requests = probes.requests.as_deref().and_then(RequestProbe::read);
        (m, wire)
    }
}

fn requests_between(
    start: Option<BTreeMap<String, u64>>,
    end: Option<BTreeMap<String, u64>>,
) -> Option<BTreeMap<String, u64>> {
    let (start, end) = (start?, end?);
    Some(
        end.into_iter()
            .map(|(k, v)| {
                let before = start.get(&k).copied().unwrap_or(0);
                (k, v.saturating_sub(before))
            })
            .filter(|(_, v)| *v > 0)
            .collect(),
    )
}

pub(crate) fn finish(
    start: Mark,
    (end, wire): (Mark, Option<WireSpent>),
    hists: Vec<Histogram<u64>>,
) -> RunStats {
    let mut hist = new_histogram();
    for h in &hists {
        hist.add(h).expect("same histogram bounds");
    }
    RunStats {
        txns: hist.len(),
        hist,
        wall: end.at - start.at,
        cpu: end.usage.cpu.saturating_sub(start.usage.cpu),
        kernel: end.usage.kernel.saturating_sub(start.usage.kernel),
        switches: end.usage.switches.saturating_sub(start.usage.switches),
        alloc: end.alloc - start.alloc,
        requests: requests_between(start.requests, end.requests),
        server: match (&start.server, &end.server) {
            (Some(a), Some(b)) => Some(ServerSpent::between(a, b)),
            _ => None,
        },
        wire,
    }
}

/// One worker thread per worker. `make` builds a worker's transaction closure on its own
/// thread (so the closure need not be `Send`); its cost is outside the measured window.
pub fn run_threads<W, F>(counts: Counts, probes: &Probes, make: F) -> Result<RunStats, String>
where
    F: Fn(usize) -> Result<W, String> + Sync,
    W: FnMut() -> Result<(), String>,
{
    let shared = Shared::new();
    let barrier = Barrier::new(counts.workers + 1);
    let warmup_each = counts.warmup_each();
    let (start, end, hists) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..counts.workers)
            .map(|i| {
                let (shared, barrier, make) = (&shared, &barrier, &make);
                std::thread::Builder::new()
                    .name(format!("bench-worker-{i}"))
                    .spawn_scoped(s, move || {
                        let mut hist = new_histogram();
                        let mut worker = match make(i) {
                            Ok(w) => Some(w),
                            Err(e) => {
                                shared.fail(e);
                                None
                            }
                        };
                        if let Some(w) = worker.as_mut() {
                            for _ in 0..warmup_each {
                                if shared.abort.load(Ordering::Relaxed) {
                                    break;
                                }
                                if let Err(e) = w() {
                                    shared.fail(format!("warmup: {e}"));
                                }
                            }
                        }
                        barrier.wait();
                        barrier.wait();
                        if let Some(w) = worker.as_mut() {
                            while shared.next(counts.measured) {
                                let t = Instant::now();
                                let r = w();
                                hist.saturating_record(t.elapsed().as_nanos() as u64);
                                if let Err(e) = r {
                                    shared.fail(e);
                                }
                            }
                        }
                        barrier.wait();
                        drop(worker);
                        hist
                    })
                    .expect("spawn worker thread")
            })
            .collect();
        barrier.wait();
        let mut start = Mark::start(probes);
        shared.open(counts.min_window);
        barrier.wait();
        barrier.wait();
        let end = Mark::end(probes, &mut start);
        let hists: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("worker thread panicked"))
            .collect();
        (start, end, hists)
    });
    shared.result()?;
    Ok(finish(start, end, hists))
}

/// A worker of an async arm: one transaction per call.
pub trait AsyncWorker: Send + 'static {
    fn txn(&mut self) -> impl Future<Output = Result<(), String>> + Send;
}

/// One task per worker on the given runtime. The workers are built by the caller (inside
/// the runtime, outside the measured window).
pub fn run_tokio<W: AsyncWorker>(
    rt: &tokio::runtime::Runtime,
    counts: Counts,
    probes: &Probes,
    workers: Vec<W>,
) -> Result<RunStats, String> {
    let shared = Arc::new(Shared::new());
    let barrier = Arc::new(tokio::sync::Barrier::new(workers.len() + 1));
    let warmup_each = counts.warmup_each();
    let measured = counts.measured;
    let (start, end, hists) = rt.block_on(async {
        let tasks: Vec<_> = workers
            .into_iter()
            .map(|mut w| {
                let (shared, barrier) = (shared.clone(), barrier.clone());
                let mut hist = new_histogram();
                tokio::spawn(async move {
                    for _ in 0..warmup_each {
                        if shared.abort.load(Ordering::Relaxed) {
                            break;
                        }
                        if let Err(e) = w.txn().await {
                            shared.fail(format!("warmup: {e}"));
                        }
                    }
                    barrier.wait().await;
                    barrier.wait().await;
                    while shared.next(measured) {
                        let t = Instant::now();
                        let r = w.txn().await;
                        hist.saturating_record(t.elapsed().as_nanos() as u64);
                        if let Err(e) = r {
                            shared.fail(e);
                        }
                    }
                    barrier.wait().await;
                    drop(w);
                    hist
                })
            })
            .collect();
        barrier.wait().await;
        let mut start = Mark::start(probes);
        shared.open(counts.min_window);
        barrier.wait().await;
        barrier.wait().await;
        let end = Mark::end(probes, &mut start);
        let mut hists = Vec::new();
        for t in tasks {
            hists.push(t.await.map_err(|e| format!("worker task failed: {e}"))?);
        }
        Ok::<_, String>((start, end, hists))
    })?;
    shared.result()?;
    Ok(finish(start, end, hists))
}

/// A worker of a single-threaded arm: one transaction per call; its future need not be
/// `Send`.
pub trait LocalWorker: 'static {
    fn txn(&mut self) -> impl Future<Output = Result<(), String>>;
}

/// Every worker a task of one mio `Executor` on the calling thread, turning `driver`'s loop.
/// Warmup is one pass of the executor (every worker concurrently); the measured tasks are
/// spawned before the window opens (spawning boxes them), and the window is the second pass.
pub fn run_local<W: LocalWorker>(
    driver: &fdb_driver_mio::MioDriver,
    counts: Counts,
    probes: &Probes,
    workers: Vec<W>,
) -> Result<RunStats, String> {
    let shared = Rc::new(Shared::new());
    let mut ex = fdb_driver_mio::Executor::new(driver);
    let warmup_each = counts.warmup_each();
    let measured = counts.measured;
    let warm: Vec<_> = workers
        .into_iter()
        .map(|mut w| {
            let shared = shared.clone();
            ex.spawn(async move {
                for _ in 0..warmup_each {
                    if shared.abort.load(Ordering::Relaxed) {
                        break;
                    }
                    if let Err(e) = w.txn().await {
                        shared.fail(format!("warmup: {e}"));
                    }
                }
                w
            })
        })
        .collect();
    ex.run().map_err(|e| format!("executor: {e}"))?;
    let tasks: Vec<_> = warm
        .iter()
        .map(|h| {
            let mut w = h
                .try_take()
                .expect("the warmup pass ran every task to its end");
            let shared = shared.clone();
            let mut hist = new_histogram();
            ex.spawn(async move {
                while shared.next(measured) {
                    let t = Instant::now();
                    let r = w.txn().await;
                    hist.saturating_record(t.elapsed().as_nanos() as u64);
                    if let Err(e) = r {
                        shared.fail(e);
                    }
                }
                (w, hist)
            })
        })
        .collect();
    let mut start = Mark::start(probes);
    shared.open(counts.min_window);
    let ran = ex.run();
    let end = Mark::end(probes, &mut start);
    ran.map_err(|e| format!("executor: {e}"))?;
    let hists = tasks
        .iter()
        .map(|h| {
            h.try_take()
                .expect("the measured pass ran every task to its end")
                .1
        })
        .collect();
    shared.result()?;
    Ok(finish(start, end, hists))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_do_exactly_the_measured_count() {
        let counts = Counts {
            workers: 3,
            warmup: 5,
            measured: 40,
            min_window: Duration::ZERO,
        };
        let calls = AtomicU64::new(0);
        let stats = run_threads(counts, &Probes::default(), |_| {
            Ok(|| {
                calls.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
        })
        .unwrap();
        assert_eq!(stats.txns, 40);
        // Warmup: ceil(5 / 3) = 2 each.
        assert_eq!(calls.load(Ordering::Relaxed), 40 + 6);
    }

    #[test]
    fn a_short_run_goes_on_until_its_minimum_window() {
        let counts = Counts {
            workers: 2,
            warmup: 0,
            measured: 5,
            min_window: Duration::from_millis(20),
        };
        let stats = run_threads(counts, &Probes::default(), |_| Ok(|| Ok(()))).unwrap();
        assert!(stats.wall >= counts.min_window, "{:?}", stats.wall);
        assert!(stats.txns > 5, "{} transactions", stats.txns);
        assert_eq!(stats.txns, stats.hist.len());
    }

    #[test]
    fn thread_errors_fail_the_run() {
        let counts = Counts {
            workers: 2,
            warmup: 0,
            measured: 10,
            min_window: Duration::ZERO,
        };
        let r = run_threads(counts, &Probes::default(), |i| {
            Ok(move || if i == 1 { Err("boom".into()) } else { Ok(()) })
        });
        assert!(r.unwrap_err().contains("boom"));
        let r = run_threads(counts, &Probes::default(), |i| {
            if i == 0 {
                Err("no connection".to_string())
            } else {
                Ok(|| Ok(()))
            }
        });
        assert_eq!(r.unwrap_err(), "no connection");
    }

    struct Sleepy;
    impl AsyncWorker for Sleepy {
        async fn txn(&mut self) -> Result<(), String> {
            tokio::task::yield_now().await;
            Ok(())
        }
    }

    #[test]
    fn tokio_runs_count_and_merge() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let counts = Counts {
            workers: 4,
            warmup: 4,
            measured: 100,
            min_window: Duration::ZERO,
        };
        let a = run_tokio(
            &rt,
            counts,
            &Probes::default(),
            (0..4).map(|_| Sleepy).collect(),
        )
        .unwrap();
        assert_eq!(a.txns, 100);
        let mut b = a.clone();
        b.merge(&a);
        assert_eq!(b.txns, 200);
        assert_eq!(b.hist.len(), 200);
        let s = b.summary();
        assert!(s.p50_us <= s.p99_us && s.p99_us <= s.max_us);
    }
}
