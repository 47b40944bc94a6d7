//! The deterministic simulation (`fdb_tests::sim`): the application's code through the
//! normal `Database` / `Transaction` API, this client's core and the test cluster's core on
//! one thread, one virtual clock and one simulated network, all from one seed.
//!
//! A failing seed replays with `SIM_SEED=<seed> cargo test -p fdb-tests --test sim --
//! swarm_replay --nocapture`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::framing::ProtocolVersion;
use fdb_tests::bank::Rng;
use fdb_tests::cluster::{RequestKind, Role};
use fdb_tests::sim::workloads::{self, Report, Workload};
use fdb_tests::sim::{self, FaultCounts, Faults};

fn check(r: &Report) {
    assert!(
        r.violations.is_empty(),
        "seed {} ({}, {:?}): {:#?}\nreplay: {}",
        r.seed,
        r.workload.name(),
        Faults::swarm(r.seed),
        r.violations,
        workloads::replay_command(r.seed, r.workload)
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
    let a = workloads::run(Workload::Bank, 11, faults(11), 1);
    let b = workloads::run(Workload::Bank, 11, faults(11), 1);
    let c = workloads::run(Workload::Bank, 12, faults(12), 1);
    check(&a);
    check(&c);
    assert_eq!(a.hash, b.hash, "seed 11 twice");
    assert_eq!(a.done, b.done);
    assert_eq!(a.virtual_time, b.virtual_time);
    assert_ne!(a.hash, c.hash, "seeds 11 and 12");
}

/// Every workload replays: the same seed, the same trace.
#[test]
fn every_workload_replays() {
    for w in Workload::ALL {
        let seed = 40 + w as u64;
        let a = workloads::run(w, seed, Faults::swarm(seed), 1);
        let b = workloads::run(w, seed, Faults::swarm(seed), 1);
        check(&a);
        assert_eq!(a.hash, b.hash, "{w:?} seed {seed} twice");
        assert!(a.done > 0, "{w:?}: {a:?}");
    }
}

/// The swarm: the workloads in turn over many seeds, each with the faults its seed picks,
/// for `SIM_SWARM_SECS` (4 by default; `.ci/run` gives it 90) from `SIM_FIRST_SEED`. With
/// `SIM_LONG=1` it runs until stopped, four times the work per seed, and reports every minute
/// (a machine left to run); a failing seed stops it. Every failure prints its replay.
#[test]
fn swarm() {
    let env = |k: &str| std::env::var(k).ok().and_then(|s| s.parse::<u64>().ok());
    let long = env("SIM_LONG").is_some_and(|v| v != 0);
    let budget = Duration::from_secs(env("SIM_SWARM_SECS").unwrap_or(4));
    let scale = if long { 4 } else { 1 };
    let first = env("SIM_FIRST_SEED").unwrap_or(1000);
    let start = Instant::now();
    let mut report_at = Duration::from_secs(60);
    let mut seed = first;
    let mut per: BTreeMap<Workload, (u64, usize, usize)> = BTreeMap::new();
    let mut faults = FaultCounts::default();
    let mut virtual_time = Duration::ZERO;
    let mut runs = 0u64;
    while (long || start.elapsed() < budget) || runs < 8 {
        let w = Workload::of_seed(seed);
        let r = std::panic::catch_unwind(|| workloads::run(w, seed, Faults::swarm(seed), scale))
            .unwrap_or_else(|e| {
                panic!(
                    "seed {seed} ({}) did not finish: {}\nreplay: {}",
                    w.name(),
                    panic_text(&e),
                    workloads::replay_command(seed, w)
                )
            });
        check(&r);
        runs += 1;
        let e = per.entry(w).or_default();
        e.0 += 1;
        e.1 += r.done;
        e.2 += r.tried;
        faults = faults.plus(&r.faults);
        virtual_time += r.virtual_time;
        seed += 1;
        if long && start.elapsed() >= report_at {
            report_at += Duration::from_secs(60);
            eprintln!(
                "swarm: {runs} seeds ({first}..{seed}) in {:?}, {faults:?}",
                start.elapsed()
            );
        }
    }
    eprintln!(
        "swarm: {runs} seeds ({first}..{seed}) in {:?} ({virtual_time:?} simulated), no \
         violations; per workload (seeds, done/tried): {per:?}; {faults:?}",
        start.elapsed()
    );
    assert!(
        per.values().all(|p| p.1 > 0),
        "every workload did something: {per:?}"
    );
    assert!(
        faults.resets > 0 && faults.kills > 0,
        "the swarm made faults: {faults:?}"
    );
    assert!(
        faults.clock_jumps > 0 && faults.coordinator_changes > 0,
        "the swarm jumped clocks and changed coordinators: {faults:?}"
    );
}

/// Clients' clocks jumping, back as well as forward: the programs of `ryw` still read and
/// commit as a serializable history, and the run finishes (a clock stepping back must not
/// stall a client's timers).
#[test]
fn client_clocks_jump() {
    for seed in 0..8 {
        let faults = Faults {
            clock_jump_every: Some(Duration::from_millis(20)),
            max_clock_jump: Duration::from_secs(3),
            until: Duration::from_secs(2),
            ..Faults::default()
        };
        let r = workloads::run(Workload::Ryw, seed, faults.clone(), 1);
        check(&r);
        assert!(r.faults.clock_jumps > 0, "{r:?}");
        assert_eq!(r.done, r.tried, "{r:?}");
        if seed == 0 {
            let again = workloads::run(Workload::Ryw, seed, faults, 1);
            assert_eq!(r.hash, again.hash, "the jumps replay");
        }
    }
}

/// Coordinators changed again and again while transfers run: every transfer the bank was
/// told of is there once, the sum holds, and the client follows the forwards to the
/// newest set.
#[test]
fn coordinators_change_by_the_schedule() {
    for seed in 0..4 {
        let faults = Faults {
            coordinator_change_every: Some(Duration::from_millis(20)),
            until: Duration::from_secs(2),
            ..Faults::default()
        };
        let r = workloads::run(Workload::Bank, seed, faults.clone(), 1);
        check(&r);
        assert!(r.faults.coordinator_changes >= 3, "{r:?}");
        assert!(r.done > 0, "{r:?}");
        if seed == 0 {
            let again = workloads::run(Workload::Bank, seed, faults, 1);
            assert_eq!(r.hash, again.hash, "the changes replay");
        }
    }
}

fn panic_text(e: &Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Replays one seed (`SIM_SEED`; its workload, or `SIM_WORKLOAD`), printing what happened
/// (`SIM_LOG=1`: every event of the world; `SIM_LOG=2`: the client's debug log too).
#[test]
fn swarm_replay() {
    let Some(seed) = std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) else {
        return;
    };
    let w = std::env::var("SIM_WORKLOAD")
        .ok()
        .map(|n| Workload::parse(&n).expect("bank, queue, ryw or watches"))
        .unwrap_or(Workload::of_seed(seed));
    // SIM_LOG=2: the client's own debug log too.
    if std::env::var("SIM_LOG").is_ok_and(|v| v == "2") {
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(std::io::stderr)
            .without_time()
            .init();
    }
    let r = workloads::run(w, seed, Faults::swarm(seed), 1);
    eprintln!(
        "seed {seed} ({}): {:?}\ntrace {:016x}, {} steps, {:?} virtual, {:?}, {}/{} done, \
         violations {:#?}",
        w.name(),
        Faults::swarm(seed),
        r.hash,
        r.steps,
        r.virtual_time,
        r.faults,
        r.done,
        r.tried,
        r.violations
    );
    check(&r);
}

/// Runs per second of a small session (one database, a write and a read, no faults): the
/// number the fuzz target on the simulated world is measured by. A measurement, not a test
/// (`cargo test --release -p fdb-tests --test sim -- --ignored small_sessions --nocapture`).
#[test]
#[ignore]
fn small_sessions_per_second() {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < Duration::from_secs(3) {
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
    eprintln!(
        "small sessions: {:.0} per second",
        n as f64 / start.elapsed().as_secs_f64()
    );
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

/// A watch set before its connection is reset, or its key's shard moves, still fires when
/// the key changes.
#[test]
fn watches_survive_resets_and_moves() {
    for (seed, fault) in [(30, 0), (31, 1), (32, 2), (33, 3)] {
        sim::run(seed, move |db| async move {
            set(&db, b"w", b"0").await;
            let tx = db.create_transaction();
            let w = tx.watch(b"w");
            tx.commit().await.unwrap();
            sim::sleep(Duration::from_millis(20)).await;
            let c = sim::cluster();
            match fault {
                0 => c.drop_connections(),
                3 => c.recover(),
                1 => {
                    let to = (c.servers_of(b"w")[0] + 1) % c.storage_server_count();
                    c.move_shard(b"w", to);
                }
                _ => {
                    c.drop_connections();
                    c.move_shard(b"w", 0);
                }
            }
            sim::sleep(Duration::from_millis(20)).await;
            set(&db, b"w", b"1").await;
            w.await.unwrap_or_else(|e| panic!("fault {fault}: {e}"));
        })
    }
}

/// A watch whose value read is lost with its connection reads again and fires (the swarm
/// found it waiting for a reply that could never come: seeds 1059, 1387, 1571).
#[test]
fn a_watch_whose_read_is_lost_reads_again() {
    sim::run(34, |db| async move {
        set(&db, b"w", b"0").await;
        let c = sim::cluster();
        let reads = c.requests(RequestKind::GetValue);
        c.hold_replies(Some(RequestKind::GetValue));
        let tx = db.create_transaction();
        let w = tx.watch(b"w");
        sim::spawn(async move {
            tx.commit().await.unwrap();
        });
        while c.requests(RequestKind::GetValue) == reads {
            sim::sleep(Duration::from_millis(1)).await;
        }
        // The watch's read is at the storage server; its reply is lost with the connection.
        c.drop_connections();
        c.clear_faults();
        sim::sleep(Duration::from_millis(20)).await;
        set(&db, b"w", b"1").await;
        w.await.unwrap();
    })
}

/// A watch that waits longer than the connection monitor's idle time, with nothing else
/// sent to its storage server, still fires, and the client does not spin meanwhile (the
/// swarm found the monitor asking to be woken at a time already past: seed 629486673).
#[test]
fn a_watch_outlives_the_idle_time_of_its_connection() {
    sim::run(35, |db| async move {
        set(&db, b"w", b"0").await;
        let tx = db.create_transaction();
        let w = tx.watch(b"w");
        tx.commit().await.unwrap();
        sim::sleep(Duration::from_secs(200)).await;
        set(&db, b"w", b"1").await;
        w.await.unwrap();
    })
}

/// An idle client stays idle: over twenty minutes with nothing to do but a watch (past the
/// connections' idle time, the cluster-info long poll's renewal and the watch's own timeout),
/// the world's steps grow at the connection monitors' pace (a ping a second on each open
/// connection, three steps each), not at a timer's that fires without doing anything.
#[test]
fn an_idle_client_wakes_only_at_the_monitors_pace() {
    let steps = |idle: u64| {
        let mut s = sim::Sim::new(36);
        s.limit = Duration::from_secs(idle + 60);
        s.run(move |db| async move {
            set(&db, b"w", b"0").await;
            let tx = db.create_transaction();
            let w = tx.watch(b"w");
            tx.commit().await.unwrap();
            sim::sleep(Duration::from_secs(idle)).await;
            set(&db, b"w", b"1").await;
            w.await.unwrap();
        });
        s.steps()
    };
    let (short, long) = (steps(10), steps(1210));
    let per_second = (long - short) as f64 / 1200.0;
    // The client holds at most four connections here (coordinator, commit and read-version
    // proxies, storage): twelve steps a second at most, and fewer once idle ones close.
    assert!(
        per_second <= 12.0,
        "{per_second:.1} steps a second while idle"
    );
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

/// The planted-bug report (`--features planted-bugs` only): for each bug of `sim::plant` and
/// each workload, how many seeds (with `Faults::swarm`) it takes until a run breaks an
/// invariant, from five starting seeds (at most 500 seeds each). `cargo test -p fdb-tests
/// --features planted-bugs --test sim -- planted --nocapture`; the numbers are in
/// tests/src/sim/README.md. Every bug must be found by some workload.
#[cfg(feature = "planted-bugs")]
#[test]
fn planted_bugs_are_found() {
    use fdb_tests::sim::plant::{self, Plant};
    let first_break = |w: Workload, from: u64| {
        (from..from + 500).find_map(|seed| {
            let r = std::panic::catch_unwind(|| workloads::run(w, seed, Faults::swarm(seed), 1));
            let why = match r {
                Ok(r) => r.violations.first().cloned()?,
                Err(e) => format!("did not finish: {}", panic_text(&e)),
            };
            Some((seed - from + 1, why))
        })
    };
    eprintln!("| planted bug | bank | queue | ryw | watches |\n|---|---|---|---|---|");
    for p in Plant::ALL {
        plant::set(Some(p));
        let mut row = format!("| {p:?} |");
        let mut found = false;
        for w in Workload::ALL {
            let mut counts = Vec::new();
            for from in [1, 10_001, 20_001, 30_001, 40_001] {
                match first_break(w, from) {
                    Some((n, why)) => {
                        if counts.is_empty() {
                            eprintln!("{p:?}, {}: seed {} broke: {why}", w.name(), from + n - 1);
                        }
                        counts.push(n.to_string());
                    }
                    None => counts.push(">500".into()),
                }
            }
            found |= counts.iter().any(|c| !c.starts_with('>'));
            row += &format!(" {} |", counts.join(", "));
        }
        plant::set(None);
        eprintln!("{row}");
        assert!(found, "{p:?} was not found");
    }
}

/// The example in the top-level README, as written there.
#[test]
fn counter_round_trip() {
    let n = fdb_tests::sim::run(42, |db| async move {
        db.run(|tx| async move {
            tx.set(b"counter", b"1");
            Ok(())
        })
        .await
        .unwrap();
        db.run(|tx| async move { tx.get(b"counter").await })
            .await
            .unwrap()
    });
    assert_eq!(n.as_deref(), Some(&b"1"[..]));
}

/// FDB 7.4's replica consistency check under the swarm's faults (kills, pauses, resets,
/// shard moves, clock drift), every shard on three replicas: transfers between accounts, and
/// checked reads of every account (best effort, and one other replica with a check that
/// fails only when too few answered). The replicas hold the same data, so no check
/// disagrees, the accounts always sum to the same total, and every run finishes.
#[test]
fn checked_reads_under_faults() {
    use fdb_api::TransactionOption;
    const ACCOUNTS: u8 = 6;
    let account = |i: u8| vec![b'a', i];
    for seed in 0..24u64 {
        let cluster = fdb_tests::cluster::TestCluster::builder()
            .storage_servers(4)
            .replication(3);
        let mut world = sim::Sim::with(seed, cluster, Faults::swarm(seed));
        world.run(move |db| async move {
            db.run(|tx| async move {
                for i in 0..ACCOUNTS {
                    tx.set(account(i), [100]);
                }
                Ok(())
            })
            .await
            .unwrap();
            let mut rng = Rng::new(seed);
            for round in 0..12u64 {
                let (from, to) = (rng.below(6) as u8, rng.below(6) as u8);
                let required = if round % 2 == 0 { -2 } else { 1 };
                let r = db
                    .run(|tx| async move {
                        tx.set_option(TransactionOption::EnableReplicaConsistencyCheck)?;
                        tx.set_option(TransactionOption::ConsistencyCheckRequiredReplicas(
                            required,
                        ))?;
                        let mut total = 0u32;
                        for i in 0..ACCOUNTS {
                            let v = tx.get(account(i)).await?.expect("every account is set");
                            total += u32::from(v[0]);
                        }
                        assert_eq!(total, 100 * u32::from(ACCOUNTS), "seed {seed}");
                        let rows = tx.get_range(b"a", b"b", 0).await?;
                        let sum: u32 = rows.iter().map(|kv| u32::from(kv.value[0])).sum();
                        assert_eq!(sum, total, "seed {seed}");
                        let f = tx.get(account(from)).await?.unwrap()[0];
                        if from != to && f > 0 {
                            let t = tx.get(account(to)).await?.unwrap()[0];
                            tx.set(account(from), [f - 1]);
                            tx.set(account(to), [t + 1]);
                        }
                        Ok(())
                    })
                    .await;
                match r {
                    Ok(()) => {}
                    // Too few replicas answered a count of one (one killed or paused).
                    Err(e) if e.code() == Some(ErrorCode::UNREACHABLE_STORAGE_REPLICA) => {}
                    // What the swarm's faults may leave a commit as.
                    Err(e) if e.code() == Some(ErrorCode::COMMIT_UNKNOWN_RESULT) => {}
                    Err(e) => panic!("seed {seed}, round {round}: {e}"),
                }
            }
        });
    }
}
