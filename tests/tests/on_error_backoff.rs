//! What a transaction does between `on_error` and the end of its backoff, as libfdb_c 7.3.77
//! does it. NativeAPI's `Transaction::onError` resets the native transaction (read version,
//! mutations) and only then sleeps (`reset(); return delay(backoff)`); RYW's `onError` waits
//! for that delay and runs `resetRyow` after it, which drops the writes, cache, conflict
//! ranges and options and fails what is still pending with `transaction_cancelled`
//! (`oldReset.sendError`). So during the backoff a read already in flight finishes normally,
//! the transaction still reads its own writes, a write made then is lost, and a second
//! `on_error` is cancelled by the first one's reset and leaves the transaction cancelled.
//! Checked on the test cluster, and on a real cluster side by side with the Python binding
//! (the core's own tests, `protocol/src/transaction/backoff_tests.rs`, check the same on a
//! simulated clock). The backoffs here are libfdb_c's: 10 ms (`FUTURE_VERSION_RETRY_DELAY`
//! for transaction_too_old, up to `DEFAULT_BACKOFF` for not_committed), so the reads meant
//! to finish during one are warm (read version and location known: one local round trip).

use std::time::Duration;

use fdb_driver_tokio::{Database, Error};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_tests::cluster::{ReleaseOrder, RequestKind, TestCluster};

const LIMIT: Duration = Duration::from_secs(20);

fn db(c: &TestCluster) -> Database {
    Database::from_cluster_file(ClusterFile::parse(&c.cluster_file_string()).unwrap(), 31)
        .expect("the driver starts")
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f).await.expect("timed out")
}

/// Waits until the cluster has seen `n` requests of `kind`.
async fn seen(c: &TestCluster, kind: RequestKind, n: u64) {
    within(async {
        while c.requests(kind) < n {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
}

#[tokio::test]
async fn a_read_still_pending_when_the_backoff_ends_is_cancelled() {
    let c = TestCluster::start();
    let db = db(&c);
    c.set(b"k", b"1");
    let tx = db.create_transaction();
    assert_eq!(within(tx.get(b"j")).await.unwrap(), None);
    let gets = c.requests(RequestKind::GetValue);
    c.hold_replies(Some(RequestKind::GetValue));
    let read = tx.get(b"k");
    seen(&c, RequestKind::GetValue, gets + 1).await;
    within(tx.on_error(ErrorCode::NOT_COMMITTED)).await.unwrap();
    assert_eq!(
        code(within(read).await),
        ErrorCode::TRANSACTION_CANCELLED,
        "resetRyow fails what is still pending"
    );
    // The answer that comes after is dropped; the transaction runs again.
    c.release_replies(ReleaseOrder::InOrder);
    assert_eq!(
        within(tx.get(b"k")).await.unwrap().as_deref(),
        Some(&b"1"[..])
    );
}

fn code<T: std::fmt::Debug>(r: Result<T, Error>) -> ErrorCode {
    let e = r.expect_err("an FDB error");
    e.code().unwrap_or_else(|| panic!("not an FDB error: {e}"))
}

fn show(r: Result<Option<bytes::Bytes>, Error>) -> String {
    match r {
        Ok(Some(v)) => format!("value:{}", String::from_utf8_lossy(&v)),
        Ok(None) => "value:none".into(),
        Err(e) => format!("error:{}", e.code().map_or(-1, |c| c.0 as i64)),
    }
}

fn show_unit(r: Result<(), Error>) -> String {
    match r {
        Ok(()) => "ok".into(),
        Err(e) => format!("error:{}", e.code().map_or(-1, |c| c.0 as i64)),
    }
}

/// The libfdb_c side of [`scenario`], line for line.
const PYTHON: &str = r#"
import fdb, sys
fdb.api_version(730)
db = fdb.open(sys.argv[1])
p = bytes.fromhex(sys.argv[2])
def show(f):
    try:
        v = f.wait()
    except fdb.FDBError as e:
        return 'error:%d' % e.code
    if v is None:
        return 'ok'
    return 'value:' + (bytes(v).decode() if v.present() else 'none')
db[p + b'a'] = b'1'
tr = db.create_transaction()
tr.get(p + b'j').wait()
f = tr.get(p + b'a')
e = tr.on_error(fdb.FDBError(1007))
print('in_flight', show(f), show(e))
tr = db.create_transaction()
tr.set(p + b'w', b'x')
e = tr.on_error(fdb.FDBError(1007))
during = show(tr.get(p + b'w'))
tr.set(p + b'd', b'y')
during_d = show(tr.get(p + b'd'))
print('own_writes', during, during_d, show(e), show(tr.get(p + b'w')), show(tr.get(p + b'd')))
tr = db.create_transaction()
e1 = tr.on_error(fdb.FDBError(1020))
e2 = tr.on_error(fdb.FDBError(1007))
print('twice', show(e1), show(e2), show(tr.get(p + b'a')))
tr.reset()
print('reset', show(tr.get(p + b'a')))
tr0 = db.create_transaction()
v = tr0.get_read_version().wait()
tr = db.create_transaction()
tr.set_read_version(v + 500000000)
f = tr.get(p + b'a')
e = tr.on_error(fdb.FDBError(1020))
print('late_read', show(e), show(f))
"#;

/// What libfdb_c 7.3.77 printed for [`PYTHON`] on a real single-process cluster.
const LIBFDB_C: &str = "in_flight value:1 ok
own_writes value:x value:y ok value:none value:none
twice ok error:1025 error:1025
reset value:1
late_read ok error:1025
";

/// [`PYTHON`] through this client, printing the same lines.
async fn scenario(db: &Database, p: &[u8]) -> String {
    let k = |s: &str| [p, s.as_bytes()].concat();
    let mut out = String::new();
    let tx = db.create_transaction();
    tx.set(k("a"), b"1");
    tx.commit().await.unwrap();

    // A read in flight when on_error starts its backoff finishes normally.
    let tx = db.create_transaction();
    tx.get(k("j")).await.unwrap();
    let f = tx.get(k("a"));
    let e = tx.on_error(ErrorCode::TRANSACTION_TOO_OLD);
    let f = show(f.await);
    out += &format!("in_flight {f} {}\n", show_unit(e.await));

    // During the backoff the transaction reads its own writes; a write made then is lost.
    let tx = db.create_transaction();
    tx.set(k("w"), b"x");
    let e = tx.on_error(ErrorCode::TRANSACTION_TOO_OLD);
    let during = show(tx.get(k("w")).await);
    tx.set(k("d"), b"y");
    // (The read also hands the buffered set to the core: one made with no call after it
    // would reach the core only after the backoff, where libfdb_c applies it at once.)
    let during_d = show(tx.get(k("d")).await);
    let e = show_unit(e.await);
    let (w, d) = (show(tx.get(k("w")).await), show(tx.get(k("d")).await));
    out += &format!("own_writes {during} {during_d} {e} {w} {d}\n");

    // A second on_error during the backoff: the first one's reset cancels it, and the
    // transaction stays cancelled until reset.
    let tx = db.create_transaction();
    let e1 = tx.on_error(ErrorCode::NOT_COMMITTED);
    let e2 = tx.on_error(ErrorCode::TRANSACTION_TOO_OLD);
    let (e1, e2) = (show_unit(e1.await), show_unit(e2.await));
    out += &format!("twice {e1} {e2} {}\n", show(tx.get(k("a")).await));
    tx.reset();
    out += &format!("reset {}\n", show(tx.get(k("a")).await));

    // A read the storage server keeps waiting (a read version far ahead) outlives a short
    // backoff and is cancelled by the reset.
    let v = db.create_transaction().get_read_version().await.unwrap();
    let tx = db.create_transaction();
    tx.set_read_version(v + 500_000_000);
    let f = tx.get(k("a"));
    let e = show_unit(tx.on_error(ErrorCode::NOT_COMMITTED).await);
    out += &format!("late_read {e} {}\n", show(f.await));
    out
}

#[tokio::test]
async fn the_backoff_behaves_as_libfdb_c_on_the_test_cluster() {
    let c = TestCluster::start();
    let db = db(&c);
    assert_eq!(within(scenario(&db, b"")).await, LIBFDB_C);
}

#[tokio::test]
async fn the_backoff_behaves_as_libfdb_c_on_a_real_cluster() {
    let Some((path, cf)) = fdb_tests::dual::real_cluster_file() else {
        return eprintln!("FDB_CLUSTER_FILE not set: skipped");
    };
    let prefix = fdb_tests::dual::random_prefix("rust-on-error");
    let _clean = fdb_tests::dual::ClearOnDrop::prefix(cf, &prefix);
    let hex: String = prefix.iter().map(|b| format!("{b:02x}")).collect();
    let Some(theirs) = fdb_tests::python::libfdb_c_answers(
        "on_error_backoff",
        PYTHON,
        [path.clone().into_os_string(), hex.into()],
    ) else {
        return;
    };
    assert_eq!(theirs, LIBFDB_C, "libfdb_c changed its mind");
    let db = Database::open(Some(&path)).expect("open the real cluster");
    assert_eq!(within(scenario(&db, &prefix)).await, theirs);
}
