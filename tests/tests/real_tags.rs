//! Transaction tags against a real FDB 7.3 cluster, when `FDB_CLUSTER_FILE` names one;
//! skipped (with a notice) otherwise.
//!
//! fdbserver accepts a tagged transaction's requests (the GRV tag counts, the read requests'
//! sampled `tags`, the commit's `tagSet`), and a manual tag throttle is refused by this client
//! as libfdb_c refuses it, remembered the same way after the cluster lifts it.
//!
//! A 7.3 cluster throttles tags on its GRV proxies by default (`GLOBAL_TAG_THROTTLING`), where
//! manual throttles are refused (`too_many_tag_throttles`: only the old ratekeeper throttler
//! writes their limit) and clients are never told of a throttle. The throttle test starts its
//! own one-process cluster with `global_tag_throttling=false`, where the GRV replies carry
//! `tagThrottleInfo` and clients keep it.

use std::time::{Duration, Instant};

use fdb_driver_mio::{Database, Error, KeySelector, RangeOptions, TransactionOption as O};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_tests::real::{ClusterScript, RealCluster};

fn cluster() -> Option<ClusterFile> {
    match fdb_tests::dual::real_cluster_file() {
        Some((_, cf)) => Some(cf),
        None => {
            println!("real_tags: FDB_CLUSTER_FILE is not set; skipping the real-cluster test");
            None
        }
    }
}

#[test]
fn a_tagged_transactions_reads_and_commit_are_accepted() {
    let Some(cf) = cluster() else { return };
    let prefix = fdb_tests::dual::random_prefix("rust-fdb-tags");
    let _clean = fdb_tests::dual::ClearOnDrop::prefix(cf.clone(), &prefix);
    let key = |i: usize| [&prefix[..], format!("{i:04}").as_bytes()].concat();
    let db = Database::from_cluster_file(cf, 41).unwrap();
    let tagged = |tx: &fdb_driver_mio::Transaction| -> Result<(), Error> {
        tx.set_option(O::Tag(b"rust-plain".to_vec()))?;
        tx.set_option(O::AutoThrottleTag(b"rust-auto".to_vec()))
    };
    db.run(|tx| {
        tagged(tx)?;
        for i in 0..100 {
            tx.set(key(i), b"v");
        }
        Ok(())
    })
    .unwrap();
    // About 1% of reads carry the read tags (`READ_TAG_SAMPLE_RATE`). Each round is a new
    // transaction, so that its reads reach the storage server rather than its own cache:
    // of some 3000 reads, at least 2000 reach it, and some of those carry tags with all but
    // negligible odds (0.99^2000 < 1e-8).
    for round in 0..10 {
        let tx = db.create_transaction();
        tagged(&tx).unwrap();
        for i in 0..100 {
            assert_eq!(tx.snapshot_get(key(i)).unwrap().as_deref(), Some(&b"v"[..]));
            let sel = KeySelector::first_greater_than(key(i));
            let next = tx.get_key(sel, true).unwrap();
            assert!(next.as_ref() > &key(i)[..], "round {round}: {next:?}");
            let (b, e) = (
                KeySelector::first_greater_or_equal(key(i)),
                KeySelector::first_greater_or_equal(key(i + 2)),
            );
            let rows = tx
                .get_range_with(b, e, RangeOptions::default(), true)
                .unwrap();
            assert_eq!(rows.len(), if i < 99 { 2 } else { 1 });
        }
    }
    let tx = db.create_transaction();
    tagged(&tx).unwrap();
    assert_eq!(tx.get(key(7)).unwrap().as_deref(), Some(&b"v"[..]));
    tx.set(key(1000), b"w");
    // A watch of a tagged transaction: its request may carry the read tags too.
    let w = tx.watch(key(7));
    tx.commit().unwrap();
    let back = db.run(|tx| tx.get(key(1000))).unwrap();
    assert_eq!(back.as_deref(), Some(&b"w"[..]));
    db.run(|tx| {
        tx.set(key(7), b"changed");
        Ok(())
    })
    .unwrap();
    db.wait_watch(w, Duration::from_secs(30))
        .expect("the watch fires");
}

/// What a transaction with tag `tag` (and an optional priority) gets for its read version:
/// `ok` or the error's code, as the Python script prints them.
fn attempt(db: &Database, tag: &str, priority: Option<O>) -> String {
    let tx = db.create_transaction();
    tx.set_option(O::Tag(tag.as_bytes().to_vec())).unwrap();
    if let Some(p) = priority {
        tx.set_option(p).unwrap();
    }
    match tx.get_read_version() {
        Ok(_) => "ok".into(),
        Err(e) => e
            .code()
            .map_or_else(|| format!("{e:?}"), |c| c.code().to_string()),
    }
}

/// The scenario, run by libfdb_c through the Python binding: `argv` = cluster file, fdbcli,
/// tag. A "fresh" client is a new process (a new database and its empty throttle memory).
const LIBFDB_C_SCENARIO: &str = r#"
import fdb, subprocess, sys, time
fdb.api_version(730)
cf, cli, tag = sys.argv[1], sys.argv[2], sys.argv[3].encode()
db = fdb.open(cf)
def attempt(t, prio=None):
    tr = db.create_transaction()
    tr.options.set_tag(t)
    if prio == "imm": tr.options.set_priority_system_immediate()
    if prio == "batch": tr.options.set_priority_batch()
    try:
        tr.get_read_version().wait(); return "ok"
    except fdb.FDBError as e:
        return str(e.code)
def fresh():
    s = ("import fdb,sys; fdb.api_version(730); tr=fdb.open(sys.argv[1]).create_transaction()\n"
         "tr.options.set_tag(sys.argv[2].encode())\n"
         "try:\n tr.get_read_version().wait(); print('ok')\n"
         "except fdb.FDBError as e: print(e.code)")
    return subprocess.run([sys.executable, "-c", s, cf, tag.decode()],
                          capture_output=True, text=True).stdout.strip()
def fdbcli(cmd):
    subprocess.run([cli, "-C", cf, "--timeout", "10", "--exec", cmd], check=True, capture_output=True)
def until(want):
    start = time.time()
    while time.time() - start < 20:
        r = fresh()
        if (r == "ok") == want: return r
    return "never"
out = []
fdbcli("throttle on tag %s 0 60s" % tag.decode())
out.append(until(False))
learnt = time.time()
out += [attempt(tag), attempt(tag), attempt(tag, "batch"), attempt(tag, "imm"), attempt(b"other")]
fdbcli("throttle off tag %s" % tag.decode())
out.append(until(True))
out.append(attempt(tag) if time.time() - learnt < 4.5 else "late")
time.sleep(max(0.0, learnt + 5.5 - time.time()))
out.append(attempt(tag))
print(" ".join(out))
"#;

/// The same scenario with this client; a "fresh" client is a new `Database`.
fn our_scenario(cluster: &RealCluster, cf: &ClusterFile, tag: &str) -> String {
    let cli = cluster.cli();
    let limit = Duration::from_secs(10);
    let mut seed = 100;
    let mut fresh = || {
        seed += 1;
        let db = Database::from_cluster_file(cf.clone(), seed).unwrap();
        attempt(&db, tag, None)
    };
    let mut until = |want_ok: bool| {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            let r = fresh();
            if (r == "ok") == want_ok {
                return r;
            }
        }
        "never".to_string()
    };
    let db = Database::from_cluster_file(cf.clone(), 7).unwrap();
    let mut out = Vec::new();
    cli.exec(&format!("throttle on tag {tag} 0 60s"), limit)
        .unwrap();
    out.push(until(false));
    let learnt = Instant::now();
    out.push(attempt(&db, tag, None));
    out.push(attempt(&db, tag, None));
    out.push(attempt(&db, tag, Some(O::PriorityBatch)));
    out.push(attempt(&db, tag, Some(O::PrioritySystemImmediate)));
    out.push(attempt(&db, "other", None));
    cli.exec(&format!("throttle off tag {tag}"), limit).unwrap();
    out.push(until(true));
    out.push(if learnt.elapsed() < Duration::from_millis(4500) {
        attempt(&db, tag, None)
    } else {
        "late".into()
    });
    std::thread::sleep(
        (learnt + Duration::from_millis(5500)).saturating_duration_since(Instant::now()),
    );
    out.push(attempt(&db, tag, None));
    out.join(" ")
}

#[test]
fn a_throttled_tag_is_refused_and_remembered_as_libfdb_c_does() {
    if cluster().is_none() {
        return;
    }
    let script = match ClusterScript::find() {
        Ok(Some(s)) => s,
        Ok(None) => {
            println!("real_tags: no cluster.sh to start a cluster with knobs; skipped");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let cluster = RealCluster::start_with_knobs(&script, &["global_tag_throttling=false"])
        .expect("a cluster with the old tag throttler");
    let path = cluster.cluster_file();
    let cf = ClusterFile::parse_file_bytes(&std::fs::read(&path).unwrap()).unwrap();
    let cli_path = cluster.dir().join("bin/fdbcli");
    let theirs = fdb_tests::python::libfdb_c_answers(
        "real_tags",
        LIBFDB_C_SCENARIO,
        [
            path.as_os_str(),
            cli_path.as_os_str(),
            std::ffi::OsStr::new("py-hot"),
        ],
    );
    let ours = our_scenario(&cluster, &cf, "rust-hot");
    // Refused by the proxy's reply, then from memory without asking; batch priority too (a
    // manual throttle covers the priorities up to its own), never system immediate, never
    // another tag; still refused from memory after the cluster lifted the throttle, until
    // `TAG_THROTTLE_RECHECK_INTERVAL` (5 s) lets one ask again.
    let want = "1213 1213 1213 1213 ok ok ok 1213 ok";
    assert_eq!(ours, want, "this client");
    if let Some(theirs) = theirs {
        assert_eq!(theirs.trim(), want, "libfdb_c");
    }
}
