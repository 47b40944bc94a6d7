//! The deterministic simulation (`fdb_tests::sim`): the application's code through the
//! normal `Database` / `Transaction` API, this client's core and the test cluster's core on
//! one thread, one virtual clock and one simulated network, all from one seed.
//!
//! A failing seed replays with `SIM_SEED=<seed> cargo test -p fdb-tests --test sim --
//! bank_replay --nocapture`.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::framing::ProtocolVersion;
use fdb_tests::bank::{Bank, Rng, TxRecord, Verdict};
use fdb_tests::cluster::{RequestKind, Role, TestClusterBuilder};
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
    format!(
        "replay: SIM_SEED={seed} cargo test -p fdb-tests --test sim -- bank_replay --nocapture \
         (with SIM_LOG=1: every event)"
    )
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
        faults.pauses += run.faults.pauses;
        faults.moves += run.faults.moves;
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

// ---------------------------------------------------------------------------------------------
// The driver conformance scenarios (`driver_conformance.rs`), on the simulation driver, with
// the faults made by the simulated cluster at virtual times.

async fn set(db: &sim::Database, key: &'static [u8], value: &'static [u8]) {
    db.run(move |tx| async move {
        tx.set(key, value);
        Ok(())
    })
    .await
    .unwrap()
}

async fn get(db: &sim::Database, key: &'static [u8]) -> Option<Vec<u8>> {
    db.run(move |tx| async move { tx.get(key).await })
        .await
        .unwrap()
        .map(|v| v.to_vec())
}

#[test]
fn conformance_versions_advance() {
    sim::run(1, |db| async move {
        let a = db.read_version().await.unwrap();
        sim::sleep(Duration::from_millis(20)).await;
        let b = db.read_version().await.unwrap();
        assert!(b > a);
    })
}

#[test]
fn conformance_dropped_connections() {
    sim::run(2, |db| async move {
        let c = sim::cluster();
        db.read_version().await.unwrap();
        let accepted = c.connections_accepted();
        let grvs = c.requests(RequestKind::GetReadVersion);
        c.drop_connections();
        db.read_version().await.unwrap();
        // The read version came over a new connection, from the proxy itself.
        assert!(c.connections_accepted() > accepted);
        assert!(c.requests(RequestKind::GetReadVersion) > grvs);
    })
}

#[test]
fn conformance_coordinator_down() {
    for seed in 0..4 {
        sim::run(seed, |_| async move {
            let real = sim::cluster().cluster_file_string();
            let (desc, addrs) = real.split_once('@').unwrap();
            let cf = ClusterFile::parse(&format!("{desc}@10.9.9.9:4500,{addrs}")).unwrap();
            sim::open_with(&cf).read_version().await.unwrap();
        })
    }
}

#[test]
fn conformance_protocol_mismatch() {
    sim::run(3, |db| async move {
        let c = sim::cluster();
        // 7.2: a protocol this client does not speak (its first connection hears it).
        c.set_protocol_version(ProtocolVersion(0x1FDB_00B0_7200_0000));
        let err = db.read_version().await.unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::INCOMPATIBLE_CLIENT));
        c.set_protocol_version(ProtocolVersion::V7_3.with_object_serializer_flag());
        c.drop_connections();
        let start = sim::now();
        loop {
            match db.read_version().await {
                Ok(_) => break,
                Err(e) => assert_eq!(e.code(), Some(ErrorCode::INCOMPATIBLE_CLIENT)),
            }
            assert!(
                sim::now() - start < Duration::from_secs(30),
                "still refused"
            );
            sim::sleep(Duration::from_millis(50)).await;
        }
    })
}

#[test]
fn conformance_proxies_restarted() {
    sim::run(5, |db| async move {
        let c = sim::cluster();
        set(&db, b"a", b"1").await;
        c.restart(Role::Proxies);
        set(&db, b"b", b"2").await;
        assert_eq!(get(&db, b"a").await.as_deref(), Some(&b"1"[..]));
        assert_eq!(c.get(b"b").as_deref(), Some(&b"2"[..]));
    })
}

#[test]
fn conformance_proxies_killed_then_restarted() {
    sim::run(6, |db| async move {
        set(&db, b"a", b"1").await;
        sim::cluster().kill(Role::Proxies);
        sim::spawn(async {
            sim::sleep(Duration::from_millis(400)).await;
            sim::cluster().restart(Role::Proxies);
        });
        set(&db, b"b", b"2").await;
        assert_eq!(get(&db, b"b").await.as_deref(), Some(&b"2"[..]));
    })
}

#[test]
fn conformance_storage_restarted() {
    sim::run(7, |db| async move {
        let c = sim::cluster();
        let keys: [&'static [u8]; 5] = [b"B", b"b", b"i", b"q", b"x"];
        for k in keys {
            set(&db, k, k).await;
        }
        for k in keys {
            assert_eq!(get(&db, k).await.as_deref(), Some(k));
        }
        for i in 0..c.storage_server_count() {
            c.restart(Role::Storage(i));
        }
        let located = c.requests(RequestKind::GetKeyServerLocations);
        for k in keys {
            assert_eq!(get(&db, k).await.as_deref(), Some(k));
        }
        assert!(
            c.requests(RequestKind::GetKeyServerLocations) > located,
            "the stale interfaces were relocated"
        );
    })
}

/// Coordinators change under the client (new processes, a forward, a recovery): it follows.
#[test]
fn coordinators_change_in_simulation() {
    sim::run(8, |db| async move {
        let c = sim::cluster();
        set(&db, b"a", b"1").await;
        let recoveries = c.recoveries();
        let new = c.change_coordinators(&[], 1);
        set(&db, b"b", b"2").await;
        assert_eq!(get(&db, b"a").await.as_deref(), Some(&b"1"[..]));
        assert!(c.recoveries() > recoveries);
        assert_eq!(db.cluster().await.unwrap().to_string(), new);
    })
}

/// The fuzz target `sim_session`'s body on pseudo-random inputs for a second: every read
/// agrees with the model, the cluster ends holding it. Prints the runs per second.
#[test]
fn fuzz_session_smoke() {
    let start = Instant::now();
    let mut rng = Rng::new(0x5e55);
    let mut runs = 0u64;
    while start.elapsed() < Duration::from_secs(1) || runs < 50 {
        let len = 9 + rng.below(60) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        sim::fuzzing::session(&data);
        runs += 1;
    }
    eprintln!(
        "sim sessions: {runs} in {:?} ({:.0} per second)",
        start.elapsed(),
        runs as f64 / start.elapsed().as_secs_f64()
    );
}

/// The API's own randomness (the directory layer's prefix allocator) comes from the seed:
/// the same seed allocates the same prefixes.
#[test]
fn directory_prefixes_replay() {
    let prefixes = |seed| {
        sim::run(seed, |db| async move {
            let dl = fdb_api::directory::DirectoryLayer::default();
            let mut keys = Vec::new();
            for name in ["a", "b", "c"] {
                let tx = db.create_transaction();
                let d = dl.create_or_open(&tx, &[name], None, None).await.unwrap();
                tx.commit().await.unwrap();
                keys.push(d.key().unwrap().to_vec());
            }
            keys
        })
    };
    assert_eq!(prefixes(21), prefixes(21));
}
