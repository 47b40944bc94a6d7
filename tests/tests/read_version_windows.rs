//! What the cluster answers for a read version set by hand (`set_read_version`): too old,
//! inside the MVCC window, or in the future, for reads and for commits, compared between
//! the test cluster and a real fdbserver 7.3.77 (`dual::run`).
//!
//! fdbserver's windows are counted in versions, not in time: a storage server refuses a read
//! below `version - MAX_READ_TRANSACTION_LIFE_VERSIONS` (5,000,000) or at a version `<= 0`
//! (`waitForVersion`), and waits `FUTURE_VERSION_DELAY` (1 s) for a version it does not
//! have yet before `future_version`; the resolver refuses a commit with read conflict ranges
//! whose read snapshot is below `commit version - MAX_WRITE_TRANSACTION_LIFE_VERSIONS`
//! (5,000,000; `ConflictBatch::addTransaction`). A write-only transaction is made
//! self-conflicting by the client (NativeAPI's `makeSelfConflicting`), so it is refused too,
//! unless `causal_write_risky` is set. A fresh database's versions are already above
//! 100,000,000 (its first recovery jumps `MAX_VERSIONS_IN_FLIGHT`), so read version 1 is
//! far outside every window from the start.
//!
//! The test cluster used to start its versions at 1,000,000, so for its first four seconds
//! read version 1 was inside its window: reads and commits there succeeded where fdbserver
//! answers `transaction_too_old`.
//!
//! libfdb_c adds a rule of its own, which this client follows: it refuses, without asking a
//! storage server, a read (get, range read, key selector) below the smallest read version its
//! `Database` got from a GRV proxy, and every such read before its first one (NativeAPI's
//! `validateVersion` against `minAcceptableReadVersion`, on for every database
//! `fdb_create_database` opens); commits are not checked. The reads at 1 and two windows back
//! are refused either way; those a fifth of the window back are taken above the database's
//! first read version, where the storage servers answer them.

use std::time::Duration;

use fdb_driver_tokio::Database;

use fdb_driver_tokio::{ConflictRangeType, Error, KeySelector, TransactionOption};
use fdb_protocol::error::ErrorCode;
use fdb_tests::dual::{self, Target};

const LIMIT: Duration = Duration::from_secs(60);

/// The MVCC windows (`MAX_READ_TRANSACTION_LIFE_VERSIONS`, `MAX_WRITE_TRANSACTION_LIFE_VERSIONS`).
const WINDOW: i64 = 5_000_000;

fn outcome<T>(r: Result<T, Error>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => match e.code() {
            Some(c) => format!("error:{}", c.0),
            None => format!("not an FDB error: {e}"),
        },
    }
}

fn err(c: ErrorCode) -> String {
    format!("error:{}", c.0)
}

async fn grv(t: &Target) -> i64 {
    t.db.create_transaction().get_read_version().await.unwrap()
}

/// Each kind of request, in a fresh transaction at read version `rv`: a get, a range read,
/// a key selector, a commit with a read conflict range, a write-only commit, and a
/// write-only commit with `causal_write_risky`.
async fn answers(t: &Target, rv: i64) -> [(&'static str, String); 6] {
    let k = t.k("k");
    let tx = t.db.create_transaction();
    tx.set_read_version(rv);
    let get = outcome(tx.get(&k).await);
    let tx = t.db.create_transaction();
    tx.set_read_version(rv);
    let range = outcome(tx.get_range(t.k(""), t.end(), 0).await);
    let tx = t.db.create_transaction();
    tx.set_read_version(rv);
    let key = outcome(
        tx.get_key(KeySelector::first_greater_or_equal(&k), false)
            .await,
    );
    let tx = t.db.create_transaction();
    tx.set_read_version(rv);
    tx.add_conflict_range(t.k("r"), t.k("r\x00"), ConflictRangeType::Read)
        .unwrap();
    tx.set(t.k("w1"), b"1");
    let commit_read = outcome(tx.commit().await);
    let tx = t.db.create_transaction();
    tx.set_read_version(rv);
    tx.set(t.k("w2"), b"1");
    let commit_blind = outcome(tx.commit().await);
    let tx = t.db.create_transaction();
    tx.set_option(TransactionOption::CausalWriteRisky).unwrap();
    tx.set_read_version(rv);
    tx.set(t.k("w3"), b"1");
    let commit_risky = outcome(tx.commit().await);
    [
        ("get", get),
        ("get_range", range),
        ("get_key", key),
        ("commit with a read conflict range", commit_read),
        ("write-only commit", commit_blind),
        ("write-only commit, causal_write_risky", commit_risky),
    ]
}

fn check(t: &Target, case: &str, got: [(&'static str, String); 6], want: [&str; 6]) {
    for ((what, got), want) in got.iter().zip(want) {
        assert_eq!(got, want, "{}: {what} at {case}", t.name);
    }
}

#[test]
fn read_versions_outside_the_windows() {
    dual::run("read-version-windows", LIMIT, |t: Target| async move {
        let too_old = err(ErrorCode::TRANSACTION_TOO_OLD);
        let future = err(ErrorCode::FUTURE_VERSION);
        let tx = t.db.create_transaction();
        // The database's first read version: the floor under its reads at a set version.
        let floor = tx.get_read_version().await.unwrap();
        tx.set(t.k("k"), b"v");
        let written = tx.commit().await.unwrap();
        // Inside the window a read sees the database as of its version.
        for (rv, want) in [(written, Some(&b"v"[..])), (written - 1, None)] {
            let tx = t.db.create_transaction();
            tx.set_read_version(rv);
            assert_eq!(
                tx.get(t.k("k")).await.unwrap().as_deref(),
                want,
                "{}",
                t.name
            );
        }

        // Already past a recovery's jump, on a fresh test cluster too.
        let g = grv(&t).await;
        assert!(g > 100_000_000, "{}: first read version {g}", t.name);

        // Version 1: older than every window.
        let got = answers(&t, 1).await;
        check(
            &t,
            "version 1",
            got,
            [&too_old, &too_old, &too_old, &too_old, &too_old, "ok"],
        );

        // Twice the window behind the newest version: the storage servers refuse reads.
        let g = grv(&t).await;
        let got = answers(&t, g - 2 * WINDOW).await;
        check(
            &t,
            "two windows back",
            got,
            [&too_old, &too_old, &too_old, &too_old, &too_old, "ok"],
        );

        // 5.5 s of versions behind: a commit's version is above `g`, so the resolver's window
        // (counted from the commit version) no longer covers the snapshot.
        for what in ["read conflict", "write-only"] {
            let g = grv(&t).await;
            let tx = t.db.create_transaction();
            tx.set_read_version(g - WINDOW - WINDOW / 10);
            if what == "read conflict" {
                tx.add_conflict_range(t.k("r"), t.k("r\x00"), ConflictRangeType::Read)
                    .unwrap();
            }
            tx.set(t.k("w"), b"1");
            assert_eq!(
                outcome(tx.commit().await),
                too_old,
                "{}: {what} commit 5.5 s of versions behind",
                t.name
            );
        }

        // Well inside the window, and above the floor: everything works. (Versions advance
        // about 1,000,000 a second, so the wait is a second at most.)
        let mut g = grv(&t).await;
        while g - WINDOW / 5 < floor {
            tokio::time::sleep(Duration::from_millis(100)).await;
            g = grv(&t).await;
        }
        let got = answers(&t, g - WINDOW / 5).await;
        check(
            &t,
            "a fifth of the window back",
            got,
            ["ok", "ok", "ok", "ok", "ok", "ok"],
        );

        // Ten seconds of versions ahead: reads wait for the version, then `future_version`;
        // commits do not wait for it and get a commit version below their read version.
        let g = grv(&t).await;
        let ahead = g + 2 * WINDOW;
        let got = answers(&t, ahead).await;
        check(
            &t,
            "two windows ahead",
            got,
            [&future, &future, &future, "ok", "ok", "ok"],
        );
        let tx = t.db.create_transaction();
        tx.set_read_version(ahead);
        tx.add_conflict_range(t.k("r"), t.k("r\x00"), ConflictRangeType::Read)
            .unwrap();
        tx.set(t.k("f"), b"1");
        let cv = tx.commit().await.unwrap();
        assert!(
            g < cv && cv < ahead,
            "{}: commit version {cv} at read version {ahead} (newest was {g})",
            t.name
        );
        let tx = t.db.create_transaction();
        assert_eq!(tx.get(t.k("f")).await.unwrap().as_deref(), Some(&b"1"[..]));
    });
}

/// A get, a range read and a key selector at read version `rv` in `db`, each in a fresh
/// transaction.
async fn reads(t: &Target, db: &Database, rv: i64) -> [String; 3] {
    let k = t.k("k");
    let tx = db.create_transaction();
    tx.set_read_version(rv);
    let get = outcome(tx.get(&k).await);
    let tx = db.create_transaction();
    tx.set_read_version(rv);
    let range = outcome(tx.get_range(t.k(""), t.end(), 0).await);
    let tx = db.create_transaction();
    tx.set_read_version(rv);
    let key = outcome(
        tx.get_key(KeySelector::first_greater_or_equal(&k), false)
            .await,
    );
    [get, range, key]
}

/// The client's floor (see the module docs), as libfdb_c 7.3.77 behaves through the Python
/// binding: a fresh database refuses reads at a version another database was served, until
/// its own first read version; then it refuses reads below that one only.
#[test]
fn reads_below_the_databases_smallest_read_version_are_refused() {
    dual::run("read-version-floor", LIMIT, |t: Target| async move {
        let too_old = err(ErrorCode::TRANSACTION_TOO_OLD);
        let refused = [too_old.clone(), too_old.clone(), too_old.clone()];
        let served = ["ok".to_string(), "ok".into(), "ok".into()];
        let other = t.another_database(8);
        let tx = other.create_transaction();
        let theirs = tx.get_read_version().await.unwrap();
        // A fresh database has no floor yet: a read at any set version is refused.
        let db = t.another_database(9);
        expect_reads(&t, &db, theirs, &refused, "before the first").await;
        // A commit elsewhere moves the versions past `theirs`; then this database's first.
        let tx = other.create_transaction();
        tx.set(t.k("moved"), b"1");
        let written = tx.commit().await.unwrap();
        let tx = db.create_transaction();
        let first = tx.get_read_version().await.unwrap();
        assert!(theirs < written && written <= first, "{}", t.name);
        expect_reads(&t, &db, first, &served, "at the first").await;
        expect_reads(&t, &db, first - 1, &refused, "one below").await;
        expect_reads(&t, &db, theirs, &refused, "another's").await;
        // The other database, whose floor is `theirs`, is served there.
        expect_reads(&t, &other, theirs, &served, "its own").await;
        // Later read versions do not raise the floor.
        let later = grv_of(&db).await;
        assert!(later >= first);
        expect_reads(&t, &db, first, &served, "after another").await;
        // Commits are not checked: one at `theirs` with a read conflict range is committed.
        let tx = db.create_transaction();
        tx.set_read_version(theirs);
        tx.add_conflict_range(t.k("r"), t.k("r\x00"), ConflictRangeType::Read)
            .unwrap();
        tx.set(t.k("w"), b"1");
        assert_eq!(outcome(tx.commit().await), "ok", "{}: commit", t.name);
    });
}

/// [`reads`] at `rv` in `db` answer `want`.
async fn expect_reads(t: &Target, db: &Database, rv: i64, want: &[String; 3], case: &str) {
    assert_eq!(&reads(t, db, rv).await, want, "{}: {case}", t.name);
}

async fn grv_of(db: &Database) -> i64 {
    db.create_transaction().get_read_version().await.unwrap()
}

/// The floor scenario above through the Python binding (libfdb_c 7.3.77), its read version
/// "theirs" from another process; it writes nothing (the commit that moves the versions is a
/// clear of a key under a fresh prefix).
const PY_FLOOR: &str = r#"
import sys, subprocess
import fdb
fdb.api_version(730)
path, key = sys.argv[1], bytes.fromhex(sys.argv[2])
def other(script):
    return subprocess.check_output([sys.executable, "-c",
        "import sys, fdb\nfdb.api_version(730)\nd = fdb.open(sys.argv[1])\nt = d.create_transaction()\n" + script,
        path, key.hex()]).decode().strip()
theirs = int(other("print(t.get_read_version().wait())"))
def out(f):
    try:
        f()
        return "ok"
    except fdb.FDBError as e:
        return "error:%d" % e.code
def reads(db, v):
    ops = [lambda t: t.get(key).wait(),
           lambda t: list(t.get_range(key, key + b"\xff")),
           lambda t: t.get_key(fdb.KeySelector.first_greater_or_equal(key)).wait()]
    r = []
    for op in ops:
        t = db.create_transaction()
        t.set_read_version(v)
        r.append(out(lambda: op(t)))
    return " ".join(r)
db = fdb.open(path)
print("before-the-first", reads(db, theirs))
other("t.clear(bytes.fromhex(sys.argv[2])); t.commit().wait()")
t0 = db.create_transaction()
first = t0.get_read_version().wait()
print("at-the-first", reads(db, first))
print("one-below", reads(db, first - 1))
print("another's", reads(db, theirs))
t1 = db.create_transaction()
t1.get_read_version().wait()
print("after-another", reads(db, first))
"#;

/// libfdb_c answers the floor scenario as this client does on both clusters.
#[test]
fn libfdb_c_has_the_same_floor() {
    let Some((path, _)) = dual::real_cluster_file() else {
        println!(
            "read-version-floor: FDB_CLUSTER_FILE not set; the libfdb_c comparison is skipped"
        );
        return;
    };
    let key: String = dual::random_prefix("read-version-floor")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let args = [path.into_os_string(), key.into()];
    let Some(out) = fdb_tests::python::libfdb_c_answers("read-version-floor", PY_FLOOR, args)
    else {
        return;
    };
    let refused = "error:1007 error:1007 error:1007";
    let served = "ok ok ok";
    let want = format!(
        "before-the-first {refused}\nat-the-first {served}\none-below {refused}\n\
         another's {refused}\nafter-another {served}\n"
    );
    assert_eq!(out, want);
}
