//! The campaign: set-up, counterbalanced blocks of runs, and the analysis.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fdb_protocol::cluster_file::ClusterFile;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::arms::{self, Arm, Ctx};
use crate::cli::Config;
use crate::harness::{Counts, Metric, Probes, RunStats, Summary};
use crate::server::Servers;
use crate::server_cpu::{ServerCpu, ServerSpent};
use crate::stats::{bootstrap, Estimate};
use crate::wire::WireProbe;
use crate::workload::{KeySet, Workload};

/// The longest wait for the server to go quiet between runs.
const SETTLE_MAX: Duration = Duration::from_secs(5);

/// How long the unrecorded run at the start of each workload lasts, at least.
const WORKLOAD_WARMUP: Duration = Duration::from_secs(1);

/// Waits for the server to go quiet (where its processes can be read) and returns what it
/// spent meanwhile.
fn settle(ctx: &Ctx) -> ServerSpent {
    ctx.probes
        .server
        .as_ref()
        .map_or_else(ServerSpent::default, |s| s.settle(SETTLE_MAX))
}

/// A workload × worker-level cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cell {
    pub workload: Workload,
    pub workers: usize,
}

/// One run as it happened.
pub struct RunRecord {
    pub block: usize,
    /// 0 for the first (A B …) half of the block, 1 for the mirrored half.
    pub pass: usize,
    pub arm: String,
    pub cell: Cell,
    pub result: Result<RunStats, String>,
}

/// An arm's numbers in one cell: pooled over all blocks, and per block.
pub struct CellArm {
    pub cell: Cell,
    pub arm: String,
    pub pooled: Option<Summary>,
    /// Both runs of a block pooled; `None` where a run failed.
    pub blocks: Vec<Option<Summary>>,
    pub failures: Vec<String>,
    /// Requests the cluster served per measured transaction, by kind (in-process cluster).
    pub requests_per_txn: Option<BTreeMap<String, f64>>,
}

/// A paired comparison of two arms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comparison {
    pub ours: String,
    pub baseline: String,
}

impl Comparison {
    pub fn label(&self) -> String {
        format!("{} / {}", self.ours, self.baseline)
    }
    /// Whether the performance targets apply (they are stated against libfdb_c).
    pub fn has_targets(&self) -> bool {
        self.baseline == arms::LIBFDB_C && self.ours != arms::FLOOR
    }
}

pub struct Ratio {
    pub comparison: usize,
    pub cell: Cell,
    pub metric: Metric,
    pub per_block: Vec<f64>,
    pub estimate: Option<Estimate>,
}

pub struct Skip {
    pub arm: String,
    pub workload: Workload,
    pub reason: String,
}

pub struct Results {
    pub config: Config,
    /// "in-process test cluster (child process)" or the cluster file path.
    pub target: String,
    pub cluster: String,
    pub cores: usize,
    /// How many cluster processes' CPU time was read (0: none could be).
    pub server_processes: usize,
    pub started_unix: u64,
    pub elapsed: Duration,
    pub skipped: Vec<Skip>,
    pub runs: Vec<RunRecord>,
    pub cells: Vec<CellArm>,
    pub comparisons: Vec<Comparison>,
    pub ratios: Vec<Ratio>,
}

/// Which paired ratios to report, given the arms present.
pub fn comparisons(arms: &[String]) -> Vec<Comparison> {
    let has = |a: &str| arms.iter().any(|x| x == a);
    let mut v = Vec::new();
    let mut push = |ours: &str, baseline: &str| {
        if has(ours) && has(baseline) {
            v.push(Comparison {
                ours: ours.into(),
                baseline: baseline.into(),
            });
        }
    };
    if has(arms::LIBFDB_C) {
        push(arms::RUST_TOKIO, arms::LIBFDB_C);
        push(arms::RUST_MIO, arms::LIBFDB_C);
        push(arms::LIBFDB_C, arms::FLOOR);
    } else {
        push(arms::RUST_TOKIO, arms::FLOOR);
        push(arms::RUST_MIO, arms::FLOOR);
    }
    push(arms::RUST_TOKIO, arms::RUST_MIO);
    v
}

/// The arm order of one block: forward then mirrored (A B … B A), starting from the other
/// end on odd blocks, so that each arm's two runs straddle the block's midpoint.
pub fn block_order(arms: &[usize], block: usize) -> Vec<(usize, usize)> {
    let mut first: Vec<usize> = arms.to_vec();
    if block % 2 == 1 {
        first.reverse();
    }
    let mut order: Vec<(usize, usize)> = first.iter().map(|&a| (a, 0)).collect();
    order.extend(first.iter().rev().map(|&a| (a, 1)));
    order
}

fn mix(parts: &[u64]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in parts {
        h ^= p;
        h = h.wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
    }
    h
}

/// Kills the process if one run takes longer than the limit (a hung cluster must not hang
/// the benchmark forever). Holds the start of the current run in ms since `origin`, 0 idle.
struct Watchdog {
    origin: Instant,
    started_ms: Arc<AtomicU64>,
}

impl Watchdog {
    fn start(limit: Duration) -> Watchdog {
        let origin = Instant::now();
        let started_ms = Arc::new(AtomicU64::new(0));
        let s = started_ms.clone();
        std::thread::Builder::new()
            .name("bench-watchdog".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(250));
                let t = s.load(Ordering::Relaxed);
                if t != 0 && origin.elapsed().as_millis() as u64 > t + limit.as_millis() as u64 {
                    eprintln!(
                        "\nfdb-bench: a run exceeded --run-timeout ({} s); aborting",
                        limit.as_secs()
                    );
                    std::process::exit(3);
                }
            })
            .expect("spawn watchdog");
        Watchdog { origin, started_ms }
    }
    fn arm(&self) {
        self.started_ms.store(
            self.origin.elapsed().as_millis().max(1) as u64,
            Ordering::Relaxed,
        );
    }
    fn disarm(&self) {
        self.started_ms.store(0, Ordering::Relaxed);
    }
}

pub fn run(config: Config) -> Result<Results, String> {
    let started = Instant::now();
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    std::fs::create_dir_all(&config.out)
        .map_err(|e| format!("creating {}: {e}", config.out.display()))?;

    // Servers first, so a failure to start them costs nothing else.
    let servers = Servers::spawn(config.cluster_file.is_none())?;
    let (cluster, cluster_path, target, serves_data) = match &config.cluster_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            let cf =
                ClusterFile::parse(text.trim()).map_err(|e| format!("{}: {e}", path.display()))?;
            (
                cf,
                path.clone(),
                format!("cluster file {}", path.display()),
                true,
            )
        }
        None => {
            let s = servers
                .cluster
                .clone()
                .ok_or("the server process started no cluster")?;
            let cf = ClusterFile::parse(&s).map_err(|e| format!("in-process cluster {s}: {e}"))?;
            let path = config.out.join("fdb.cluster");
            std::fs::write(&path, format!("{s}\n"))
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            (
                cf,
                path,
                "in-process test cluster (hosted in a child process)".to_string(),
                servers.cluster_serves_data,
            )
        }
    };

    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.tokio_threads)
            .thread_name("bench-tokio")
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?,
    );
    let max_workers = config.workers.iter().copied().max().unwrap_or(1);
    let mut ctx = Ctx {
        cluster: cluster.clone(),
        cluster_path,
        floor: servers.floor,
        keys: KeySet::new(
            max_workers,
            config
                .workloads
                .iter()
                .map(|w| w.range_rows())
                .max()
                .unwrap_or(0),
        ),
        data_ready: false,
        data_missing: None,
        rt,
        probes: {
            let server = match &config.cluster_file {
                Some(path) => ServerCpu::for_cluster_file(path),
                None => ServerCpu::for_pid(servers.pid()),
            };
            // The floor's port is the child's, beside the in-process cluster's.
            let wire = server
                .as_ref()
                .and_then(|s| WireProbe::new(s.pids(), Some(servers.floor.port())));
            Probes {
                requests: servers.request_probe(),
                server,
                wire,
            }
        },
    };

    let mut arm_objs: Vec<Box<dyn Arm>> = Vec::new();
    for name in &config.arms {
        arm_objs.push(arms::make(name)?);
    }

    // Populate the read key spaces, outside every measured window, if anything needs them.
    let wants_data = config.workloads.iter().any(|w| w.needs_data())
        && config.arms.iter().any(|a| a != arms::FLOOR);
    if !serves_data {
        ctx.data_missing = Some("the target cluster does not store data".into());
    } else if wants_data {
        match arms::populate(&ctx) {
            Ok(()) => ctx.data_ready = true,
            Err(e) => ctx.data_missing = Some(format!("could not populate the key spaces: {e}")),
        }
    }

    let mut skipped = Vec::new();
    for arm in &arm_objs {
        for &w in &config.workloads {
            if let Some(reason) = arm.skip_reason(&ctx, w) {
                skipped.push(Skip {
                    arm: arm.name().to_string(),
                    workload: w,
                    reason,
                });
            }
        }
    }
    let is_skipped =
        |arm: &str, w: Workload| skipped.iter().any(|s| s.arm == arm && s.workload == w);

    let cells: Vec<Cell> = config
        .workloads
        .iter()
        .flat_map(|&workload| {
            config
                .workers
                .iter()
                .map(move |&workers| Cell { workload, workers })
        })
        .collect();
    let mut plan: Vec<(usize, usize, usize, Cell)> = Vec::new(); // (block, pass, arm, cell)
    for block in 0..config.blocks {
        for &cell in &cells {
            let present: Vec<usize> = (0..arm_objs.len())
                .filter(|&a| !is_skipped(arm_objs[a].name(), cell.workload))
                .collect();
            for (a, pass) in block_order(&present, block) {
                plan.push((block, pass, a, cell));
            }
        }
    }

    let pb = if config.quiet {
        ProgressBar::hidden()
    } else {
        let pb =
            ProgressBar::with_draw_target(Some(plan.len() as u64), ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs  {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        pb
    };
    // The population's writes settle before the first run.
    settle(&ctx);
    let watchdog = Watchdog::start(config.run_timeout);
    let mut runs = Vec::with_capacity(plan.len());
    let mut last_workload = None;
    for &(block, pass, a, cell) in &plan {
        let arm = &mut arm_objs[a];
        pb.set_message(format!(
            "block {}/{}  {} {} x{}",
            block + 1,
            config.blocks,
            arm.name(),
            cell.workload.name(),
            cell.workers
        ));
        let counts = Counts {
            workers: cell.workers,
            warmup: config.warmup,
            measured: config.transactions,
            min_window: config.min_run,
        };
        let seed = mix(&[
            config.seed,
            block as u64,
            pass as u64,
            a as u64,
            cell.workload.seed_id(),
            cell.workers as u64,
        ]);
        // A new workload starts with a run that is not recorded: after a write workload
        // the cluster stays slow for about a second (read versions took 2-5 ms instead of
        // 0.1-0.4 in the first grv run of every block, at under a tenth of the server's
        // CPU: its queues draining), and that second belongs to no arm.
        if last_workload.replace(cell.workload) != Some(cell.workload) {
            watchdog.arm();
            let _ = arm.run(
                &ctx,
                cell.workload,
                Counts {
                    min_window: WORKLOAD_WARMUP,
                    ..counts
                },
                seed ^ 0x5eed,
            );
            watchdog.disarm();
            settle(&ctx);
        }
        watchdog.arm();
        let mut result = arm.run(&ctx, cell.workload, counts, seed);
        watchdog.disarm();
        // The server's work after the run, until it is quiet again, is the run's (its total
        // only: the busiest thread's time and turns stay the window's, for the latency bound).
        let after = settle(&ctx);
        if let Ok(RunStats {
            server: Some(spent),
            ..
        }) = &mut result
        {
            spent.total_ns += after.total_ns;
        }
        if let Err(e) = &result {
            pb.println(format!(
                "run failed: block {block} {} {} x{}: {e}",
                arm.name(),
                cell.workload.name(),
                cell.workers
            ));
        }
        runs.push(RunRecord {
            block,
            pass,
            arm: arm.name().to_string(),
            cell,
            result,
        });
        pb.inc(1);
    }
    pb.finish_and_clear();
    drop(arm_objs);
    if ctx.data_ready {
        if let Err(e) = arms::cleanup(&ctx) {
            eprintln!("fdb-bench: {e}");
        }
    }
    drop(servers);

    let names: Vec<String> = config.arms.clone();
    let comps = comparisons(&names);
    let cell_arms = pool(&cells, &names, config.blocks, &runs);
    let ratios = ratios(&comps, &cells, &cell_arms, config.resamples, config.seed);
    Ok(Results {
        target,
        cluster: cluster.to_string(),
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        server_processes: ctx.probes.server.as_ref().map_or(0, ServerCpu::processes),
        started_unix,
        elapsed: started.elapsed(),
        skipped,
        runs,
        cells: cell_arms,
        comparisons: comps,
        ratios,
        config,
    })
}

/// Pools runs per (cell, arm): per block (its two ABBA runs) and over everything.
pub fn pool(cells: &[Cell], arms: &[String], blocks: usize, runs: &[RunRecord]) -> Vec<CellArm> {
    let mut out = Vec::new();
    for &cell in cells {
        for arm in arms {
            let mine: Vec<&RunRecord> = runs
                .iter()
                .filter(|r| r.cell == cell && &r.arm == arm)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let mut all = RunStats::empty();
            let mut failures = Vec::new();
            let mut per_block = Vec::with_capacity(blocks);
            for b in 0..blocks {
                let mut pooled = RunStats::empty();
                let mut ok = true;
                let mut any = false;
                for r in mine.iter().filter(|r| r.block == b) {
                    any = true;
                    match &r.result {
                        Ok(s) => pooled.merge(s),
                        Err(e) => {
                            ok = false;
                            failures.push(format!("block {b}: {e}"));
                        }
                    }
                }
                if ok && any && pooled.txns > 0 {
                    all.merge(&pooled);
                    per_block.push(Some(pooled.summary()));
                } else {
                    per_block.push(None);
                }
            }
            out.push(CellArm {
                cell,
                arm: arm.clone(),
                pooled: (all.txns > 0).then(|| all.summary()),
                blocks: per_block,
                failures,
                requests_per_txn: all.requests_per_txn(),
            });
        }
    }
    out
}

/// Paired per-block ratios, their geometric means and block-bootstrap intervals.
pub fn ratios(
    comps: &[Comparison],
    cells: &[Cell],
    cell_arms: &[CellArm],
    resamples: usize,
    seed: u64,
) -> Vec<Ratio> {
    let find = |cell: Cell, arm: &str| cell_arms.iter().find(|c| c.cell == cell && c.arm == arm);
    let mut out = Vec::new();
    for (ci, comp) in comps.iter().enumerate() {
        for &cell in cells {
            let (Some(a), Some(b)) = (find(cell, &comp.ours), find(cell, &comp.baseline)) else {
                continue;
            };
            for metric in Metric::COMPARED {
                let per_block: Vec<f64> = a
                    .blocks
                    .iter()
                    .zip(&b.blocks)
                    .filter_map(|(x, y)| match (x, y) {
                        (Some(x), Some(y)) => match (x.metric(metric), y.metric(metric)) {
                            (Some(x), Some(y)) if y > 0.0 => Some(x / y),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect();
                let s = mix(&[
                    seed,
                    ci as u64,
                    cell.workload.seed_id(),
                    cell.workers as u64,
                    metric as u64,
                ]);
                out.push(Ratio {
                    comparison: ci,
                    cell,
                    metric,
                    estimate: bootstrap(&per_block, resamples, s),
                    per_block,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abba_order() {
        assert_eq!(
            block_order(&[0, 1], 0),
            vec![(0, 0), (1, 0), (1, 1), (0, 1)]
        );
        assert_eq!(
            block_order(&[0, 1], 1),
            vec![(1, 0), (0, 0), (0, 1), (1, 1)]
        );
        assert_eq!(
            block_order(&[0, 1, 2], 0),
            vec![(0, 0), (1, 0), (2, 0), (2, 1), (1, 1), (0, 1)]
        );
        assert!(block_order(&[], 0).is_empty());
    }

    #[test]
    fn comparisons_pick_the_baseline() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let c = comparisons(&s(&["rust-tokio", "rust-mio", "floor"]));
        let labels: Vec<String> = c.iter().map(|c| c.label()).collect();
        assert_eq!(
            labels,
            vec![
                "rust-tokio / floor",
                "rust-mio / floor",
                "rust-tokio / rust-mio"
            ]
        );
        let c = comparisons(&s(&["rust-tokio", "libfdb_c", "floor"]));
        assert_eq!(c[0].label(), "rust-tokio / libfdb_c");
        assert!(c[0].has_targets());
        assert!(!c[1].has_targets()); // libfdb_c / floor
        assert!(comparisons(&s(&["floor"])).is_empty());
    }
}
