//! A long run of one client, to see what no short test shows: CPU spent while idle, memory
//! that grows, calls that stop finishing. Uses the cluster in `FDB_CLUSTER_FILE` when set
//! (start, kill, restart or upgrade its processes meanwhile to add faults); otherwise the
//! in-process test cluster, whose own CPU and memory are then counted with the client's.
//!
//! Sixteen workers run small transactions (reads, writes, 50-row range reads, atomic adds,
//! clears) under `soak/`, four more wait on watches that a fifth sets every 7 s, in turns of
//! `SOAK_BUSY` seconds of work and `SOAK_IDLE` seconds with only the watches outstanding,
//! for `SOAK_SECS` in all. Every 20 s it prints the transactions done, the client's CPU and
//! resident memory (Linux), what the core holds (its census) and the errors seen; at the end, the CPU per
//! idle second.
//!
//! `SOAK_DRIVER=mio` runs the workers as threads on the blocking mio driver, one shared
//! `Database`; the default is tasks on the tokio driver (two worker threads).
//!
//! ```text
//! SOAK_SECS=1200 SOAK_BUSY=60 SOAK_IDLE=200 cargo run --release -p fdb-tests --example soak
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::{Census, MutationType};
use fdb_tests::cluster::TestCluster;

const WORKERS: u64 = 16;
const WATCHERS: u64 = 4;
const KEYS: u64 = 200_000;
const REPORT_EVERY: Duration = Duration::from_secs(20);

fn env_secs(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn key(i: u64) -> Vec<u8> {
    format!("soak/{i:08}").into_bytes()
}

fn watched(i: u64) -> Vec<u8> {
    format!("soak-watch/{i}").into_bytes()
}

/// A watched key's next value: never one an earlier run left there, which would not fire
/// the watch (a watch fires on a change of value).
fn stamp(n: u64) -> Vec<u8> {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    format!("{n}/{}", since.map_or(0, |d| d.as_nanos())).into_bytes()
}

/// One transaction's work, drawn from `r`.
#[derive(Clone, Copy)]
enum Work {
    Get(u64),
    Set(u64),
    Range(u64),
    Add,
    Copy(u64),
    Clear(u64),
}

impl Work {
    fn draw(r: u64) -> Work {
        let k = r % KEYS;
        match (r >> 32) % 10 {
            0..=3 => Work::Get(k),
            4 | 5 => Work::Set(k),
            6 => Work::Range(k),
            7 => Work::Add,
            8 => Work::Copy(k),
            _ => Work::Clear(k),
        }
    }

    fn value(k: u64) -> Vec<u8> {
        vec![b'v'; 100 + (k % 400) as usize]
    }
}

/// A xorshift generator: each worker's own sequence of work.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// What the workers share with the reporter.
#[derive(Default)]
struct Counters {
    busy: AtomicBool,
    done: AtomicU64,
    fired: AtomicU64,
    errors: Mutex<BTreeMap<String, u64>>,
}

impl Counters {
    fn error(&self, what: impl std::fmt::Display) {
        *self
            .errors
            .lock()
            .unwrap()
            .entry(what.to_string())
            .or_default() += 1;
    }
}

/// The process's resident memory (KiB) and CPU time, user and system (seconds), from /proc.
fn usage() -> Option<(u64, f64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((rss, ticks as f64 / 100.0))
}

/// Alternates busy and idle turns, prints a line every 20 s, and returns the CPU seconds
/// spent per idle second (the first 20 s of each idle turn left out: work still finishing).
fn report(counters: &Counters, census: impl Fn() -> Option<Census>) -> Option<f64> {
    let (busy, idle, total) = (
        Duration::from_secs(env_secs("SOAK_BUSY", 60)),
        Duration::from_secs(env_secs("SOAK_IDLE", 200)),
        Duration::from_secs(env_secs("SOAK_SECS", 600)),
    );
    let start = Instant::now();
    counters.busy.store(true, Ordering::Relaxed);
    let mut turn_ends = start + busy;
    let (mut last_done, mut last_cpu) = (0, usage().map_or(0.0, |u| u.1));
    let (mut idle_cpu, mut idle_secs, mut idle_for) = (0.0, 0.0, Duration::ZERO);
    while start.elapsed() < total {
        std::thread::sleep(REPORT_EVERY);
        let was_busy = counters.busy.load(Ordering::Relaxed);
        let (rss, cpu) = usage().unwrap_or((0, 0.0));
        if !was_busy {
            idle_for += REPORT_EVERY;
            if idle_for > REPORT_EVERY {
                idle_cpu += cpu - last_cpu;
                idle_secs += REPORT_EVERY.as_secs_f64();
            }
        }
        let done = counters.done.load(Ordering::Relaxed);
        println!(
            "{:>5.0}s {} transactions +{:<6} cpu +{:5.2}s rss {:>6} KiB watches fired {:<4} held {} errors {:?}",
            start.elapsed().as_secs_f64(),
            if was_busy { "busy" } else { "idle" },
            done - last_done,
            cpu - last_cpu,
            rss,
            counters.fired.load(Ordering::Relaxed),
            census().map_or("?".into(), |c| format!(
                "{} transactions, {} requests, {} watches",
                c.transactions, c.requests, c.watches
            )),
            counters.errors.lock().unwrap(),
        );
        (last_done, last_cpu) = (done, cpu);
        if Instant::now() >= turn_ends {
            counters.busy.store(!was_busy, Ordering::Relaxed);
            idle_for = Duration::ZERO;
            turn_ends = Instant::now() + if was_busy { idle } else { busy };
        }
    }
    (idle_secs > 0.0).then(|| idle_cpu / idle_secs)
}

mod on_tokio {
    use super::*;
    use fdb_driver_tokio::{Database, Error};

    async fn one(db: &Database, work: Work) -> Result<(), Error> {
        db.run(|tx| async move {
            match work {
                Work::Get(k) => drop(tx.get(key(k)).await?),
                Work::Set(k) => tx.set(key(k), Work::value(k)),
                Work::Range(k) => drop(tx.get_range(key(k), key(k + 50), 50).await?),
                Work::Add => tx.atomic_op(b"soak-counter", 1i64.to_le_bytes(), MutationType::Add),
                Work::Copy(k) => {
                    let v = tx.get(key(k)).await?;
                    tx.set(key(k + 1), v.unwrap_or_default());
                }
                Work::Clear(k) => tx.clear_range(key(k), key(k + 3)),
            }
            Ok(())
        })
        .await
    }

    pub(super) fn run(cf: ClusterFile, counters: Arc<Counters>) -> Option<f64> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let db = rt
            .block_on(async { Database::from_cluster_file(cf, 7) })
            .expect("open");
        for w in 0..WORKERS {
            let (db, counters) = (db.clone(), counters.clone());
            rt.spawn(async move {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((w + 1) * 7919));
                loop {
                    if !counters.busy.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                    let limit = Duration::from_secs(60);
                    match tokio::time::timeout(limit, one(&db, Work::draw(rng.next()))).await {
                        Ok(Ok(())) => drop(counters.done.fetch_add(1, Ordering::Relaxed)),
                        Ok(Err(e)) => counters.error(e),
                        Err(_) => counters.error("no answer in 60 s"),
                    }
                }
            });
        }
        for w in 0..WATCHERS {
            let (db, counters) = (db.clone(), counters.clone());
            rt.spawn(async move {
                loop {
                    let tx = db.create_transaction();
                    let watch = tx.watch(watched(w));
                    let fired = match tx.commit().await {
                        Ok(_) => watch.await.map(drop),
                        Err(e) => Err(e),
                    };
                    match fired {
                        Ok(()) => drop(counters.fired.fetch_add(1, Ordering::Relaxed)),
                        Err(e) => {
                            counters.error(format_args!("watch: {e}"));
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }
            });
        }
        {
            let (db, counters) = (db.clone(), counters.clone());
            rt.spawn(async move {
                for n in 0u64.. {
                    tokio::time::sleep(Duration::from_secs(7)).await;
                    if counters.busy.load(Ordering::Relaxed) {
                        let r = db.run(|tx| async move {
                            tx.set(watched(n % WATCHERS), stamp(n));
                            Ok(())
                        });
                        if let Err(e) = r.await {
                            counters.error(format_args!("watched set: {e}"));
                        }
                    }
                }
            });
        }
        let census = || {
            let limit = Duration::from_secs(10);
            let c = rt.block_on(async { tokio::time::timeout(limit, db.census()).await });
            Some(c.ok()?.ok()?.0)
        };
        report(&counters, census)
    }
}

mod on_mio {
    use super::*;
    use fdb_driver_mio::{Database, Error};

    fn one(db: &Database, work: Work) -> Result<(), Error> {
        db.run(|tx| {
            match work {
                Work::Get(k) => drop(tx.get(key(k))?),
                Work::Set(k) => tx.set(key(k), Work::value(k)),
                Work::Range(k) => drop(tx.get_range(key(k), key(k + 50), 50)?),
                Work::Add => tx.atomic_op(b"soak-counter", 1i64.to_le_bytes(), MutationType::Add),
                Work::Copy(k) => {
                    let v = tx.get(key(k))?;
                    tx.set(key(k + 1), v.unwrap_or_default());
                }
                Work::Clear(k) => tx.clear_range(key(k), key(k + 3)),
            }
            Ok(())
        })
    }

    pub(super) fn run(cf: ClusterFile, counters: Arc<Counters>) -> Option<f64> {
        let db = Database::from_cluster_file(cf, 7).expect("open");
        for w in 0..WORKERS {
            let (db, counters) = (db.clone(), counters.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((w + 1) * 7919));
                loop {
                    if !counters.busy.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(200));
                        continue;
                    }
                    match one(&db, Work::draw(rng.next())) {
                        Ok(()) => drop(counters.done.fetch_add(1, Ordering::Relaxed)),
                        Err(e) => counters.error(e),
                    }
                }
            });
        }
        for w in 0..WATCHERS {
            let (db, counters) = (db.clone(), counters.clone());
            std::thread::spawn(move || loop {
                let tx = db.create_transaction();
                let watch = tx.watch(watched(w));
                let fired = match tx.commit() {
                    Ok(_) => db.wait_watch(watch, Duration::from_secs(3600)).map(drop),
                    Err(e) => Err(e),
                };
                match fired {
                    Ok(()) => drop(counters.fired.fetch_add(1, Ordering::Relaxed)),
                    Err(e) => {
                        counters.error(format_args!("watch: {e}"));
                        std::thread::sleep(Duration::from_secs(1));
                    }
                }
            });
        }
        {
            let (db, counters) = (db.clone(), counters.clone());
            std::thread::spawn(move || {
                for n in 0u64.. {
                    std::thread::sleep(Duration::from_secs(7));
                    if counters.busy.load(Ordering::Relaxed) {
                        let r = db.run(|tx| {
                            tx.set(watched(n % WATCHERS), stamp(n));
                            Ok(())
                        });
                        if let Err(e) = r {
                            counters.error(format_args!("watched set: {e}"));
                        }
                    }
                }
            });
        }
        report(&counters, || db.census().ok().map(|c| c.0))
    }
}

fn main() {
    let (_cluster, cf) = match std::env::var("FDB_CLUSTER_FILE") {
        Ok(path) if !path.is_empty() => {
            let text = std::fs::read_to_string(&path).expect("the cluster file reads");
            (
                None,
                ClusterFile::parse(&text).expect("the cluster file parses"),
            )
        }
        _ => {
            let c = TestCluster::start();
            let cf = ClusterFile::parse(&c.cluster_file_string()).expect("its file parses");
            (Some(c), cf)
        }
    };
    let driver = std::env::var("SOAK_DRIVER").unwrap_or_else(|_| "tokio".into());
    println!("soak on {cf} with the {driver} driver");
    let counters = Arc::new(Counters::default());
    let idle_cpu = match driver.as_str() {
        "mio" => on_mio::run(cf, counters),
        _ => on_tokio::run(cf, counters),
    };
    match idle_cpu {
        Some(s) => println!("idle: {:.2} ms of CPU a second", s * 1000.0),
        None => println!("idle: no idle turn long enough to measure"),
    }
    // The workers are still running: leave without waiting for them.
    std::process::exit(0);
}
