//! What a transaction does between `on_error` and the end of its backoff, as libfdb_c 7.3.77
//! does it. NativeAPI's `Transaction::onError` resets the native transaction (read version,
//! mutations) and only then sleeps (`reset(); return delay(backoff)`); RYW's `onError` waits
//! for that delay and runs `resetRyow` after it, which drops the writes, cache, conflict
//! ranges and options and fails what is still pending with `transaction_cancelled`
//! (`oldReset.sendError`). So during the backoff a read already in flight finishes normally,
//! the transaction still reads its own writes, a write made then is lost, and a second
//! `on_error` is cancelled by the first one's reset and leaves the transaction cancelled.
//! Checked on the test cluster, and on a real cluster side by side with the Python binding
//! (the core's own tests, `protocol/src/transaction/tests/backoff.rs`, check the same on a
//! simulated clock). The backoffs here are libfdb_c's: 10 ms (`FUTURE_VERSION_RETRY_DELAY`
//! for transaction_too_old, up to `DEFAULT_BACKOFF` for not_committed), so the reads meant
//! to finish during one are warm (read version and location known: one local round trip).

use std::time::Duration;

use fdb_driver_tokio::{Database, Error, MutationType};
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
    let Some((db, prefix, _clean)) =
        libfdb_c_agrees("rust-on-error", "on_error_backoff", PYTHON, LIBFDB_C)
    else {
        return;
    };
    assert_eq!(within(scenario(&db, &prefix)).await, LIBFDB_C);
}

/// Uses of a transaction while `on_error` sleeps or while its commit is in flight, as
/// libfdb_c makes them: a write goes into RYW's write map at once (`onMainThreadVoid`), so
/// one made during the sleep with no call after it is dropped by the reset that ends the
/// sleep; after a failed commit RYW's `commitStarted` stays set until that reset, so a read
/// or write during the sleep is a use during the commit, whose `resetPromise` error ends
/// `on_error` at once; a read or write during a commit in flight fails the commit at once
/// with `used_during_commit` (whether the commit request had gone out already is a race in
/// both clients: what it stored is not compared), a read version does not. A write is made "during the sleep" when `on_error` has not finished
/// once a call of another transaction made after it has reached the network thread (the
/// loop); tries where the 10 ms sleep ended first are run again.
const PYTHON_USES: &str = r#"
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
def stored(k):
    v = db[p + k]
    return 'none' if v is None else bytes(v).decode()
def loop_trip():
    db.create_transaction().get_approximate_size().wait()
def failed_commit():
    tr = db.create_transaction()
    tr.get(p + b'a').wait()
    db[p + b'a'] = b'1'
    tr.set(p + b'b', b'1')
    return tr, show(tr.commit())
one = b'\x01' + b'\x00' * 7
db[p + b'a'] = b'1'
for attempt in range(50):
    tr = db.create_transaction()
    tr.get(p + b'j').wait()
    e = tr.on_error(fdb.FDBError(1007))
    tr.set(p + b'l', b'x')
    tr.clear(p + b'a')
    tr.add(p + b'n', one)
    loop_trip()
    if e.is_ready():
        continue
    print('lost', show(e), show(tr.get(p + b'l')), show(tr.get(p + b'a')), show(tr.get(p + b'n')),
          show(tr.commit()), stored(b'l'), stored(b'a'), stored(b'n'))
    break
tr, c = failed_commit()
e = tr.on_error(fdb.FDBError(1007))
u = show(tr.get(p + b'a'))
loop_trip()
print('failed_commit_get', c, u, e.is_ready(), show(e), show(tr.get(p + b'a')))
tr.reset()
print('reset', show(tr.get(p + b'a')))
for attempt in range(50):
    tr, c = failed_commit()
    e = tr.on_error(fdb.FDBError(1007))
    tr.set(p + b'b', b'2')
    loop_trip()
    if e.is_ready() and show(e) == 'ok':
        continue
    print('failed_commit_set', c, show(e), show(tr.get(p + b'a')))
    break
for use in ('get', 'set', 'read_version'):
    tr = db.create_transaction()
    k = b'c-' + use.encode()
    tr.set(p + k, b'1')
    c = tr.commit()
    if use == 'get':
        u = show(tr.get(p + b'a'))
    elif use == 'set':
        tr.set(p + k + b'-2', b'1')
        u = '-'
    else:
        u = 'version' if tr.get_read_version().wait() > 0 else 'none'
    c = show(c)
    # A commit failed by the use may still have been sent (and applied): only a successful
    # one says what is stored.
    s = stored(k) if c == 'ok' else '-'
    print('in_commit_' + use, u, c, s, stored(k + b'-2'), show(tr.on_error(fdb.FDBError(2017))))
"#;

/// What libfdb_c 7.3.77 printed for [`PYTHON_USES`] on a real single-process cluster.
const LIBFDB_C_USES: &str = "lost ok value:none value:1 value:none ok none 1 none
failed_commit_get error:1020 error:2017 True error:2017 error:2017
reset value:1
failed_commit_set error:1020 error:2017 error:2017
in_commit_get error:2017 error:2017 - none error:2017
in_commit_set - error:2017 - none error:2017
in_commit_read_version version ok 1 none error:2017
";

/// What `f` finished with, if it has: polled once without waiting.
fn poll_once<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::Pin::new(f).poll(&mut cx) {
        std::task::Poll::Ready(r) => Some(r),
        std::task::Poll::Pending => None,
    }
}

/// [`PYTHON_USES`] through this client, printing the same lines.
async fn uses(db: &Database, p: &[u8]) -> String {
    let k = |s: &str| [p, s.as_bytes()].concat();
    let stored = |key: Vec<u8>| async move {
        let v = db.create_transaction().get(key).await.unwrap();
        v.map_or("none".into(), |v| String::from_utf8_lossy(&v).into_owned())
    };
    // A call of another transaction: once it is answered, what this task asked before it
    // has reached the loop.
    let loop_trip = || async {
        db.create_transaction()
            .get_approximate_size()
            .await
            .unwrap()
    };
    let one = [1u8, 0, 0, 0, 0, 0, 0, 0];
    let mut out = String::new();
    let tx = db.create_transaction();
    tx.set(k("a"), b"1");
    tx.commit().await.unwrap();

    for _ in 0..50 {
        let tx = db.create_transaction();
        tx.get(k("j")).await.unwrap();
        let mut e = tx.on_error(ErrorCode::TRANSACTION_TOO_OLD);
        tx.set(k("l"), b"x");
        tx.clear(k("a"));
        tx.atomic_op(k("n"), one, MutationType::Add);
        loop_trip().await;
        if poll_once(&mut e).is_some() {
            continue;
        }
        let e = show_unit(e.await);
        let (l, a, n) = (tx.get(k("l")), tx.get(k("a")), tx.get(k("n")));
        let (l, a, n) = (show(l.await), show(a.await), show(n.await));
        let c = show_unit(tx.commit().await.map(|_| ()));
        let (sl, sa, sn) = (
            stored(k("l")).await,
            stored(k("a")).await,
            stored(k("n")).await,
        );
        out += &format!("lost {e} {l} {a} {n} {c} {sl} {sa} {sn}\n");
        break;
    }

    let failed_commit = || async {
        let tx = db.create_transaction();
        tx.get(k("a")).await.unwrap();
        let w = db.create_transaction();
        w.set(k("a"), b"1");
        w.commit().await.unwrap();
        tx.set(k("b"), b"1");
        let c = show_unit(tx.commit().await.map(|_| ()));
        (tx, c)
    };
    let (tx, c) = failed_commit().await;
    let mut e = tx.on_error(ErrorCode::TRANSACTION_TOO_OLD);
    let u = show(tx.get(k("a")).await);
    loop_trip().await;
    let (r, e) = match poll_once(&mut e) {
        Some(r) => ("True", show_unit(r)),
        None => ("False", show_unit(e.await)),
    };
    let after = show(tx.get(k("a")).await);
    out += &format!("failed_commit_get {c} {u} {r} {e} {after}\n");
    tx.reset();
    out += &format!("reset {}\n", show(tx.get(k("a")).await));
    for _ in 0..50 {
        let (tx, c) = failed_commit().await;
        let mut e = tx.on_error(ErrorCode::TRANSACTION_TOO_OLD);
        tx.set(k("b"), b"2");
        loop_trip().await;
        let e = match poll_once(&mut e) {
            Some(Ok(())) => continue,
            Some(r) => show_unit(r),
            None => show_unit(e.await),
        };
        out += &format!("failed_commit_set {c} {e} {}\n", show(tx.get(k("a")).await));
        break;
    }

    for use_ in ["get", "set", "read_version"] {
        let tx = db.create_transaction();
        let key = format!("c-{use_}");
        tx.set(k(&key), b"1");
        let c = tx.commit();
        let u = match use_ {
            "get" => show(tx.get(k("a")).await),
            "set" => {
                tx.set(k(&format!("{key}-2")), b"1");
                "-".into()
            }
            _ => match tx.get_read_version().await {
                Ok(v) if v > 0 => "version".into(),
                _ => "none".into(),
            },
        };
        let c = show_unit(c.await.map(|_| ()));
        let s1 = if c == "ok" {
            stored(k(&key)).await
        } else {
            "-".into()
        };
        let s2 = stored(k(&format!("{key}-2"))).await;
        let e = show_unit(tx.on_error(ErrorCode::USED_DURING_COMMIT).await);
        out += &format!("in_commit_{use_} {u} {c} {s1} {s2} {e}\n");
    }
    out
}

#[tokio::test]
async fn uses_during_a_backoff_or_a_commit_behave_as_libfdb_c_on_the_test_cluster() {
    let c = TestCluster::start();
    let db = db(&c);
    assert_eq!(within(uses(&db, b"")).await, LIBFDB_C_USES);
}

#[tokio::test]
async fn uses_during_a_backoff_or_a_commit_behave_as_libfdb_c_on_a_real_cluster() {
    let Some((db, prefix, _clean)) = libfdb_c_agrees(
        "rust-on-error-uses",
        "on_error_backoff_uses",
        PYTHON_USES,
        LIBFDB_C_USES,
    ) else {
        return;
    };
    assert_eq!(within(uses(&db, &prefix)).await, LIBFDB_C_USES);
}

/// The libfdb_c half of a real-cluster comparison: `script` runs through the Python binding
/// on a fresh prefix (cleared when the guard drops) and must print `expected`. Gives the
/// database and prefix for this client's run, or `None` (with a printed notice) where there
/// is no real cluster or no Python binding.
fn libfdb_c_agrees(
    tag: &str,
    name: &str,
    script: &str,
    expected: &str,
) -> Option<(Database, Vec<u8>, fdb_tests::dual::ClearOnDrop)> {
    let Some((path, cf)) = fdb_tests::dual::real_cluster_file() else {
        eprintln!("FDB_CLUSTER_FILE not set: skipped");
        return None;
    };
    let prefix = fdb_tests::dual::random_prefix(tag);
    let clean = fdb_tests::dual::ClearOnDrop::prefix(cf, &prefix);
    let theirs = fdb_tests::python::libfdb_c_answers(
        name,
        script,
        [
            path.clone().into_os_string(),
            fdb_tests::to_hex(&prefix).into(),
        ],
    )?;
    assert_eq!(theirs, expected, "libfdb_c changed its mind");
    let db = Database::open(Some(&path)).expect("open the real cluster");
    Some((db, prefix, clean))
}
