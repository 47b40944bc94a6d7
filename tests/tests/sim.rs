//! The deterministic simulation (`fdb_tests::sim`): the application's code through the
//! normal `Database` / `Transaction` API, this client's core and the test cluster's core on
//! one thread, one virtual clock and one simulated network, all from one seed.
//!
//! A failing seed replays with `SIM_SEED=<seed> cargo test -p fdb-tests --test sim --
//! bank_replay --nocapture`.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use fdb_tests::bank::{Bank, Rng, TxRecord, Verdict};
use fdb_tests::cluster::TestClusterBuilder;
use fdb_tests::sim::{self, FaultCounts, Faults, Sim};

/// What one bank run left: the trace hash, the verdict, transfers committed, virtual time.
struct BankRun {
    hash: u64,
    verdict: Verdict,
    committed: usize,
    transfers: usize,
    virtual_time: Duration,
    steps: u64,
    faults: FaultCounts,
}

/// The bank workload on a world of `seed` with `faults`: `workers` concurrent workers (on
/// two databases), each making `per_worker` transfers, then the bank read back and judged.
fn bank_run(seed: u64, faults: Faults, workers: usize, per_worker: usize) -> BankRun {
    let mut world = Sim::with(seed, TestClusterBuilder::default(), faults);
    let bank = Bank::new(b"bank/", 6, 1000, Duration::from_secs(5));
    let records: Rc<RefCell<Vec<TxRecord>>> = Rc::default();
    let recs = records.clone();
    let b = bank.clone();
    let state = world.run(move |db| async move {
        init_bank(&db, &b).await;
        let other = sim::open();
        let mut rng = Rng::new(seed);
        let jobs: Vec<_> = (0..workers)
            .map(|w| {
                let db = if w % 2 == 0 {
                    db.clone()
                } else {
                    other.clone()
                };
                let transfers: Vec<_> = (0..per_worker)
                    .map(|_| b.random_transfer(&mut rng))
                    .collect();
                let (b, recs) = (b.clone(), recs.clone());
                let mut think = Rng::new(seed ^ w as u64);
                async move {
                    for t in transfers {
                        // Think time, so the run spans the faults.
                        sim::sleep(Duration::from_millis(think.below(40))).await;
                        let r = b.transfer(&db, t, "sim").await;
                        sim::note(format!("{:?}", r.outcome).as_bytes());
                        recs.borrow_mut().push(r);
                    }
                }
            })
            .collect();
        futures::future::join_all(jobs).await;
        // Faults may still be on: read until a read gets through.
        loop {
            match b.read_once(&db).await {
                Ok(state) => return state,
                Err(_) => sim::sleep(Duration::from_millis(100)).await,
            }
        }
    });
    let records = records.borrow();
    let verdict = state.judge(&bank, &records, Duration::from_secs(3600));
    BankRun {
        hash: world.trace_hash(),
        verdict,
        committed: records.iter().filter(|r| r.committed()).count(),
        transfers: records.len(),
        virtual_time: world.now(),
        steps: world.steps(),
        faults: world.fault_counts(),
    }
}

/// `init` through the retry loop, again until it goes through (faults may be on).
async fn init_bank(db: &sim::Database, bank: &Bank) {
    while bank.init(db).await.is_err() {
        sim::sleep(Duration::from_millis(100)).await;
    }
}

fn replay_hint(seed: u64) -> String {
    format!("replay: SIM_SEED={seed} cargo test -p fdb-tests --test sim -- bank_replay --nocapture")
}

fn check(seed: u64, run: &BankRun) {
    assert!(
        run.verdict.violations.is_empty(),
        "seed {seed} ({:?}): {:?}\n{}",
        Faults::swarm(seed),
        run.verdict.violations,
        replay_hint(seed)
    );
}

#[test]
fn a_transaction_runs_in_simulation() {
    let got = sim::run(1, |db| async move {
        db.run(|tx| async move {
            tx.set(b"hello", b"world");
            Ok(())
        })
        .await
        .unwrap();
        db.run(|tx| async move { tx.get(b"hello").await })
            .await
            .unwrap()
    });
    assert_eq!(got.as_deref(), Some(&b"world"[..]));
}

#[test]
fn virtual_time_passes_without_waiting() {
    let wall = Instant::now();
    let (before, after) = sim::run(2, |db| async move {
        let v1 = db.read_version().await.unwrap();
        sim::sleep(Duration::from_secs(20)).await;
        let v2 = db.read_version().await.unwrap();
        (v1, v2)
    });
    // Versions follow the (virtual) clock at about 1,000,000 a second.
    assert!(after - before >= 20_000_000, "{before} → {after}");
    assert!(wall.elapsed() < Duration::from_secs(10));
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    let faults = |seed| Faults {
        reset_every: Some(Duration::from_millis(300)),
        ..Faults::swarm(seed)
    };
    let a = bank_run(11, faults(11), 4, 10);
    let b = bank_run(11, faults(11), 4, 10);
    let c = bank_run(12, faults(12), 4, 10);
    check(11, &a);
    check(12, &c);
    assert_eq!(a.hash, b.hash, "seed 11 twice");
    assert_eq!(a.committed, b.committed);
    assert_eq!(a.virtual_time, b.virtual_time);
    assert_ne!(a.hash, c.hash, "seeds 11 and 12");
}

/// The bounded swarm: bank runs over many seeds, each with the faults its seed picks,
/// for a few seconds.
#[test]
fn bank_swarm() {
    let budget = Duration::from_secs(
        std::env::var("SIM_SWARM_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(4),
    );
    let start = Instant::now();
    let first: u64 = std::env::var("SIM_FIRST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let mut seed = first;
    let (mut runs, mut committed, mut transfers) = (0, 0, 0);
    let mut faults = FaultCounts::default();
    let mut virtual_time = Duration::ZERO;
    while start.elapsed() < budget || runs < 3 {
        let run = bank_run(seed, Faults::swarm(seed), 4, 8);
        check(seed, &run);
        runs += 1;
        committed += run.committed;
        transfers += run.transfers;
        faults.resets += run.faults.resets;
        faults.kills += run.faults.kills;
        faults.restarts += run.faults.restarts;
        virtual_time += run.virtual_time;
        seed += 1;
    }
    eprintln!(
        "bank swarm: {runs} seeds ({first}..{seed}) in {:?} ({virtual_time:?} simulated), \
         {committed}/{transfers} transfers committed, {faults:?}",
        start.elapsed()
    );
    assert!(committed > 0);
    assert!(
        faults.resets > 0 && faults.kills > 0,
        "the swarm made faults: {faults:?}"
    );
}

/// Replays one seed (`SIM_SEED`), printing what happened.
#[test]
fn bank_replay() {
    let Some(seed) = std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) else {
        return;
    };
    let run = bank_run(seed, Faults::swarm(seed), 4, 8);
    eprintln!(
        "seed {seed}: {:?}\ntrace {:016x}, {} steps, {:?} virtual, {:?}, {}/{} committed, violations {:?}",
        Faults::swarm(seed),
        run.hash,
        run.steps,
        run.virtual_time,
        run.faults,
        run.committed,
        run.transfers,
        run.verdict.violations
    );
    check(seed, &run);
}

/// Runs per second of a small session (one database, a write and a read, no faults): the
/// number the fuzz target on the simulated world is measured by.
#[test]
fn small_sessions_per_second() {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < Duration::from_secs(1) {
        let v = sim::run(n, |db| async move {
            db.run(|tx| async move {
                tx.set(b"k", b"v");
                Ok(())
            })
            .await
            .unwrap();
            db.run(|tx| async move { tx.get(b"k").await })
                .await
                .unwrap()
        });
        assert!(v.is_some());
        n += 1;
    }
    eprintln!("small sessions: {n} per second");
}
