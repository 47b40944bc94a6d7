//! A live upgrade, FDB 7.3.77 → 7.4.6, under load (issue 28): a 3-process `double` cluster of
//! its own (`cluster.sh`), a bank workload through both drivers' retry loops (tokio workers
//! sharing one `Database`, mio threads each with their own), and `cluster.sh upgrade` in the
//! middle of it — every fdbserver killed at once and started again as 7.4.6 on its data, as an
//! operator upgrades.
//!
//! The clients start speaking 7.3, see their connections drop, find the coordinators speaking
//! 7.4 and switch; the retry loops carry the transfers in flight across. Asserted: no transfer
//! failed to the application, none hung, none was lost or applied twice (unique id per
//! transfer, see `fdb_tests::bank`), the sum of balances holds, both drivers committed after the
//! upgrade, and the clients now speak 7.4 (the status document's protocol). The longest
//! transfer across the upgrade is printed (`--nocapture`).
//!
//! Runs when `cluster.sh` and both versions' tarballs are found; skipped with a notice
//! otherwise. The cluster lives under the system temp dir (`TMPDIR`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use fdb_tests::bank::{code_name, random_seed, Bank, Outcome, Rng, TxRecord};
use fdb_tests::real::{ClusterScript, RealCluster};

const FROM: &str = "7.3.77";
const TO: &str = "7.4.6";
const PROCESSES: usize = 3;
const TOKIO_WORKERS: usize = 6;
const MIO_THREADS: usize = 2;
const ACCOUNTS: usize = 16;
const INITIAL_BALANCE: i64 = 1000;
/// Long enough for a transfer to outlast the upgrade (kill, restart, recovery).
const TX_TIMEOUT: Duration = Duration::from_secs(120);
const WARM: Duration = Duration::from_secs(4);
const AFTER: Duration = Duration::from_secs(5);
const UPGRADE_LIMIT: Duration = Duration::from_secs(240);

fn script() -> Option<ClusterScript> {
    let script = match ClusterScript::find() {
        Ok(Some(s)) => s,
        Ok(None) => {
            println!("real_upgrade: no cluster.sh (FDB_SHARED_DIR unset, no ../shared/fdb beside the project); skipping");
            return None;
        }
        Err(e) => panic!("real_upgrade: {e}"),
    };
    let versions = script.versions();
    for v in [FROM, TO] {
        if !versions.iter().any(|have| have == v) {
            if script.required {
                panic!("real_upgrade: cluster.sh has no {v} tarball (FDB_SHARED_DIR is set)");
            }
            println!("real_upgrade: cluster.sh has no {v} tarball (has {versions:?}); skipping");
            return None;
        }
    }
    Some(script)
}

/// The workload, running until `stop`.
struct Workload {
    stop: Arc<AtomicBool>,
    records: Arc<Mutex<Vec<TxRecord>>>,
    tokio: Vec<tokio::task::JoinHandle<()>>,
    mio: Vec<thread::JoinHandle<()>>,
}

fn start_workload(
    rt: &tokio::runtime::Runtime,
    tokio_db: &fdb_driver_tokio::Database,
    mio_dbs: Vec<fdb_driver_mio::Database>,
    bank: &Bank,
) -> Workload {
    let stop = Arc::new(AtomicBool::new(false));
    let records = Arc::new(Mutex::new(Vec::new()));
    let seed = random_seed();
    println!("real_upgrade: workload seed {seed:#x}");
    let tokio = (0..TOKIO_WORKERS)
        .map(|i| {
            let (db, bank) = (tokio_db.clone(), bank.clone());
            let (stop, records) = (stop.clone(), records.clone());
            let mut rng = Rng::new(seed ^ ((i as u64 + 1) << 32));
            rt.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let t = bank.random_transfer(&mut rng);
                    let r = bank.transfer_tokio(&db, t, "tokio").await;
                    records.lock().unwrap().push(r);
                }
            })
        })
        .collect();
    let mio = mio_dbs
        .into_iter()
        .enumerate()
        .map(|(i, mut db)| {
            let (stop, records, bank) = (stop.clone(), records.clone(), bank.clone());
            let name = format!("mio-{}", i + 1);
            let mut rng = Rng::new(seed ^ ((100 + i as u64) << 32));
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let t = bank.random_transfer(&mut rng);
                    let r = bank.transfer_mio(&mut db, t, &name);
                    records.lock().unwrap().push(r);
                }
            })
        })
        .collect();
    Workload {
        stop,
        records,
        tokio,
        mio,
    }
}

fn stop_workload(rt: &tokio::runtime::Runtime, w: Workload) -> Vec<TxRecord> {
    w.stop.store(true, Ordering::Relaxed);
    for h in w.tokio {
        let _ = rt.block_on(h);
    }
    for h in w.mio {
        h.join().expect("a mio worker panicked");
    }
    let records = std::mem::take(&mut *w.records.lock().unwrap());
    records
}

/// The `cluster.protocol_version` of the status document, read through the tokio driver.
async fn cluster_protocol(db: &fdb_driver_tokio::Database) -> Result<String, String> {
    let tx = db.create_transaction();
    let doc = tx
        .get(b"\xff\xff/status/json")
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no status document")?;
    let v: serde_json::Value = serde_json::from_slice(&doc).map_err(|e| e.to_string())?;
    Ok(v["cluster"]["protocol_version"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

#[test]
fn a_live_upgrade_fails_no_transaction() {
    let Some(script) = script() else { return };
    let t0 = Instant::now();
    let cluster = RealCluster::start_version(&script, PROCESSES, "memory", Some(FROM))
        .unwrap_or_else(|e| panic!("real_upgrade: no {FROM} cluster: {e}"));
    println!(
        "real_upgrade: {PROCESSES}-process {FROM} cluster in {} ({:.1?})",
        cluster.dir().display(),
        t0.elapsed()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let cf = cluster.cluster_file();
    let tokio_db = {
        let _guard = rt.enter();
        fdb_driver_tokio::Database::open_file_with_seed(&cf, random_seed()).expect("tokio client")
    };
    let mio_dbs: Vec<_> = (0..MIO_THREADS)
        .map(|_| {
            fdb_driver_mio::Database::open_file_with_seed(&cf, random_seed()).expect("mio client")
        })
        .collect();
    let bank = Bank::new(b"real_upgrade/bank/", ACCOUNTS, INITIAL_BALANCE, TX_TIMEOUT);
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), bank.init(&tokio_db)).await
    })
    .expect("the bank opens within a minute")
    .expect("open the bank");
    assert_eq!(
        rt.block_on(cluster_protocol(&tokio_db)).as_deref(),
        Ok("fdb00b073000000"),
        "the cluster starts on 7.3"
    );

    let w = start_workload(&rt, &tokio_db, mio_dbs, &bank);
    thread::sleep(WARM);
    let upgrade_start = Instant::now();
    let restarted = cluster
        .upgrade(TO, UPGRADE_LIMIT)
        .unwrap_or_else(|e| panic!("real_upgrade: {e}"));
    let upgrade_end = Instant::now();
    println!(
        "real_upgrade: cluster.sh upgrade {TO} took {:.1?} (new processes that exited and were started again, as fdbmonitor does: {restarted:?})",
        upgrade_end - upgrade_start
    );
    thread::sleep(AFTER);
    let records = stop_workload(&rt, w);

    let state = rt
        .block_on(bank.read_state(&tokio_db, Duration::from_secs(60)))
        .expect("read the bank after the upgrade");
    let verdict = state.judge(&bank, &records, Duration::from_secs(10));
    let protocol = rt.block_on(cluster_protocol(&tokio_db));

    // The report.
    let failed: Vec<&TxRecord> = records.iter().filter(|r| !r.committed()).collect();
    let across: Vec<&TxRecord> = records
        .iter()
        .filter(|r| r.started < upgrade_end && r.ended > upgrade_start)
        .collect();
    let longest = across.iter().max_by_key(|r| r.duration());
    let mut retried: std::collections::BTreeMap<String, usize> = Default::default();
    for r in &records {
        for (code, _) in &r.retried {
            *retried.entry(code_name(code.0)).or_default() += 1;
        }
    }
    let after = |driver: &str| {
        records
            .iter()
            .filter(|r| r.driver.starts_with(driver) && r.committed() && r.started > upgrade_end)
            .count()
    };
    println!(
        "real_upgrade: {} transfers ({} across the upgrade, {} by id after a maybe-committed error), {} failed; sum {}; {} id keys",
        records.len(),
        across.len(),
        records
            .iter()
            .filter(|r| r.outcome == Outcome::Committed { by_id: true })
            .count(),
        failed.len(),
        state.sum(),
        state.ids.len()
    );
    println!("real_upgrade: errors retried by on_error: {retried:?}");
    if let Some(l) = longest {
        println!(
            "real_upgrade: longest transfer across the upgrade {:.3?} ({}, {} attempts, retried {:?}, started {:+.1}s from the upgrade's start)",
            l.duration(),
            l.driver,
            l.attempts,
            l.retried.iter().map(|(c, _)| c.0).collect::<Vec<_>>(),
            l.started.saturating_duration_since(upgrade_start).as_secs_f64()
                - upgrade_start.saturating_duration_since(l.started).as_secs_f64()
        );
    }
    // The transfers the upgrade itself hit: retried for a lost connection or commit, a stale
    // read version or the protocol change (not for conflicts).
    let hit = |r: &&&TxRecord| {
        r.retried
            .iter()
            .any(|(c, _)| [1007, 1021, 1039, 1037, 1038].contains(&c.0))
    };
    if let Some(l) = across.iter().filter(hit).max_by_key(|r| r.duration()) {
        println!(
            "real_upgrade: longest transfer the upgrade hit {:.3?} ({}, retried {:?}); {} were hit",
            l.duration(),
            l.driver,
            l.retried.iter().map(|(c, _)| c.0).collect::<Vec<_>>(),
            across.iter().filter(hit).count()
        );
    }
    println!(
        "real_upgrade: committed after the upgrade: tokio {}, mio {}; protocol now {protocol:?}",
        after("tokio"),
        after("mio")
    );

    // The outage the application saw: the longest time without a commit finishing.
    let mut ends: Vec<Instant> = records
        .iter()
        .filter(|r| r.committed())
        .map(|r| r.ended)
        .collect();
    ends.sort();
    if let Some((gap, at)) = ends
        .windows(2)
        .map(|w| (w[1] - w[0], w[0]))
        .max_by_key(|(g, _)| *g)
    {
        println!(
            "real_upgrade: longest time without a commit: {gap:.3?}, from {:+.1}s of the upgrade's start",
            at.saturating_duration_since(upgrade_start).as_secs_f64()
                - upgrade_start.saturating_duration_since(at).as_secs_f64()
        );
    }
    for r in &failed {
        println!("  failed: {} {:?}", r.driver, r.outcome);
    }
    assert!(
        verdict.violations.is_empty(),
        "bank violations: {:?}",
        verdict.violations
    );
    assert!(failed.is_empty(), "{} transfers failed", failed.len());
    assert!(!across.is_empty(), "some transfers ran across the upgrade");
    assert!(
        after("tokio") > 0 && after("mio") > 0,
        "both drivers committed after the upgrade"
    );
    assert_eq!(
        protocol.as_deref(),
        Ok("fdb00b074000000"),
        "the clients speak 7.4 now"
    );
}
