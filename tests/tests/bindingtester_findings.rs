//! What FDB's bindingtester (`tests/bindingtester/run.sh`) found wrong in this client, each
//! kept as a test of our own, on the in-process test cluster and (with `FDB_CLUSTER_FILE`) a
//! real fdbserver 7.3 with `tenant_mode=optional_experimental`.
//!
//! * `api`, seeds 1-3 (tenants enabled): `GET_ESTIMATED_RANGE_SIZE` and
//!   `GET_RANGE_SPLIT_POINTS` on a transaction of a tenant that does not exist answered
//!   where libfdb_c fails them with `tenant_not_found` (2131): in a tenant both wait for the
//!   transaction's start (its tenant id and read version) and then measure the tenant's keys,
//!   asking the storage servers with the tenant's `TenantInfo`.
//! * `TENANT_SET_ACTIVE` / `TENANT_GET_ID` need `fdb_tenant_get_id`: the outcome of the lookup
//!   made when the handle was opened, kept for the handle's life.
//! * `api`, 10,000 operations, seed 4005: `ON_ERROR` of `cluster_version_changed`, which the
//!   reference refused only because libfdb_c bypassed its multi-version client (see
//!   `on_error_of_cluster_version_changed_starts_a_new_transaction`).

use std::time::Duration;

use fdb_driver_tokio::tenant_management as tm;
use fdb_driver_tokio::{Error, ErrorCode};
use fdb_tests::dual::{self, Target};

fn code<T: std::fmt::Debug>(r: Result<T, Error>) -> Option<ErrorCode> {
    r.err().and_then(|e| e.code())
}

const PAIRS: usize = 40;
const VALUE_LEN: usize = 1000;

#[test]
fn metrics_and_ids_in_tenants() {
    dual::run(
        "bindingtester-findings",
        Duration::from_secs(120),
        |t: Target| async move { scenario(&t).await },
    );
}

async fn scenario(t: &Target) {
    let db = &t.db;
    let on = t.name;
    let name = t.k("metrics-tenant");

    // A handle opened before its tenant exists keeps the failed lookup.
    let early = db.open_tenant(&name);
    assert_eq!(
        code(early.get_id().await),
        Some(ErrorCode::TENANT_NOT_FOUND),
        "{on}"
    );
    let tx = early.create_transaction();
    assert_eq!(
        code(tx.get_estimated_range_size_bytes(b"a", b"b").await),
        Some(ErrorCode::TENANT_NOT_FOUND),
        "{on}: the estimate in a missing tenant"
    );
    let tx = early.create_transaction();
    assert_eq!(
        code(tx.get_range_split_points(b"a", b"b", 1000).await),
        Some(ErrorCode::TENANT_NOT_FOUND),
        "{on}: split points in a missing tenant"
    );

    tm::create_tenant(db, &name).await.expect("create");
    assert_eq!(
        code(early.get_id().await),
        Some(ErrorCode::TENANT_NOT_FOUND),
        "{on}: the early handle's lookup is kept"
    );
    let tenant = db.open_tenant(&name);
    let id = tenant.get_id().await.expect("the tenant's id");
    assert!(id > 0, "{on}: id {id}");
    let listed = tm::list_tenants(db, &name, [name.clone(), vec![0]].concat(), 10)
        .await
        .expect("list");
    assert_eq!(listed.len(), 1, "{on}");
    assert_eq!(
        listed[0].entry.id, id,
        "{on}: get_id agrees with the tenant map"
    );

    // Data in the tenant, and the same keys outside it (which the tenant must not count).
    let keys: Vec<Vec<u8>> = (0..PAIRS)
        .map(|i| format!("k{i:03}").into_bytes())
        .collect();
    let value = vec![b'v'; VALUE_LEN];
    {
        let (keys, value) = (keys.clone(), value.clone());
        tenant
            .run(|tx| {
                let (keys, value) = (keys.clone(), value.clone());
                async move {
                    for k in &keys {
                        tx.set(k, &value);
                    }
                    Ok(())
                }
            })
            .await
            .expect("write in the tenant");
    }
    let tx = tenant.create_transaction();
    let bytes = tx
        .get_estimated_range_size_bytes(b"", b"\xff")
        .await
        .expect("the estimate in the tenant");
    // Stored under the tenant's 8-byte prefix, which the byte sample counts.
    let written: i64 = keys.iter().map(|k| (8 + k.len() + VALUE_LEN) as i64).sum();
    if t.exact {
        // The test cluster's byte sample is exact, and counts the tenant's pairs alone.
        assert_eq!(bytes, written, "{on}");
    } else {
        assert!(bytes >= 0, "{on}: {bytes}");
    }
    let tx = tenant.create_transaction();
    let points = tx
        .get_range_split_points(b"k", b"l", 10_000)
        .await
        .expect("split points in the tenant");
    // The tenant's keys, not the prefixed ones: they start and end at the range asked for.
    assert_eq!(
        points.first().map(|p| &p[..]),
        Some(&b"k"[..]),
        "{on}: {points:?}"
    );
    assert_eq!(
        points.last().map(|p| &p[..]),
        Some(&b"l"[..]),
        "{on}: {points:?}"
    );
    assert!(points.windows(2).all(|w| w[0] < w[1]), "{on}: {points:?}");
    if t.exact {
        // About 40,000 bytes in chunks of 10,000: points inside the range, on the keys.
        assert!(points.len() >= 4, "{on}: {points:?}");
        assert!(
            points[1..points.len() - 1]
                .iter()
                .all(|p| keys.iter().any(|k| k == p)),
            "{on}: {points:?}"
        );
    }

    // Deleted (after emptying it): the kept id still answers, the storage servers refuse.
    tenant
        .run(|tx| async move {
            tx.clear_range(b"", b"\xff");
            Ok(())
        })
        .await
        .expect("empty the tenant");
    tm::delete_tenant(db, &name).await.expect("delete");
    assert_eq!(tenant.get_id().await.ok(), Some(id), "{on}: the id is kept");
    let tx = tenant.create_transaction();
    assert_eq!(
        code(tx.get_estimated_range_size_bytes(b"", b"\xff").await),
        Some(ErrorCode::TENANT_NOT_FOUND),
        "{on}: the estimate in a deleted tenant"
    );
    let tx = tenant.create_transaction();
    assert_eq!(
        code(tx.get_range_split_points(b"k", b"l", 10_000).await),
        Some(ErrorCode::TENANT_NOT_FOUND),
        "{on}: split points in a deleted tenant"
    );
}

/// `api`, seed 14: `ON_ERROR` of `broken_promise` (1100) gave 1100 where libfdb_c gives
/// `transaction_cancelled` (1025): RYW's `onError` turns a refused `broken_promise` into
/// it. Other refused errors come back as they are; either way the transaction is then
/// cancelled until reset.
#[test]
fn on_error_of_broken_promise_is_transaction_cancelled() {
    dual::run(
        "bindingtester-on-error",
        Duration::from_secs(60),
        |t: Target| async move {
            let on = t.name;
            let tx = t.db.create_transaction();
            assert_eq!(
                code(tx.on_error(ErrorCode::BROKEN_PROMISE).await),
                Some(ErrorCode::TRANSACTION_CANCELLED),
                "{on}"
            );
            assert_eq!(
                code(tx.get(t.k("x")).await),
                Some(ErrorCode::TRANSACTION_CANCELLED),
                "{on}: cancelled after the refusal"
            );
            tx.reset();
            tx.get(t.k("x")).await.expect("usable again after reset");
            let tx = t.db.create_transaction();
            assert_eq!(
                code(tx.on_error(ErrorCode::INVERTED_RANGE).await),
                Some(ErrorCode::INVERTED_RANGE),
                "{on}: other refused errors come back unchanged"
            );
        },
    );
}

/// `api`, seed 53: `GET_RANGE_SPLIT_POINTS` in a missing tenant, then `SET_READ_VERSION` and
/// `COMMIT`: libfdb_c's commit failed with `read_version_already_set` (2010), ours with
/// `tenant_not_found`. `startTransaction` asks for the read version before it waits for the
/// tenant, so even a transaction whose tenant lookup failed has its read version asked for;
/// setting one then is refused (deferred to the commit). Without an earlier read, the commit
/// fails on the tenant. (The Python binding over libfdb_c gave exactly these three answers.)
#[test]
fn a_failed_tenant_lookup_leaves_the_read_version_asked_for() {
    dual::run(
        "bindingtester-rv",
        Duration::from_secs(60),
        |t: Target| async move {
            let on = t.name;
            let tenant = t.db.open_tenant(t.k("no-such-tenant"));
            for first in ["get", "split points", "nothing"] {
                let tx = tenant.create_transaction();
                let r = match first {
                    "get" => code(tx.get(b"a").await),
                    "split points" => code(tx.get_range_split_points(b"a", b"b", 1000).await),
                    _ => Some(ErrorCode::TENANT_NOT_FOUND),
                };
                assert_eq!(r, Some(ErrorCode::TENANT_NOT_FOUND), "{on}: {first}");
                tx.set_read_version(1);
                tx.set(b"x", b"y");
                let want = if first == "nothing" {
                    ErrorCode::TENANT_NOT_FOUND
                } else {
                    ErrorCode::READ_VERSION_ALREADY_SET
                };
                assert_eq!(
                    code(tx.commit().await),
                    Some(want),
                    "{on}: commit after {first}"
                );
            }
        },
    );
}

/// `api` with 10,000 operations, seed 4005: `ON_ERROR` of `cluster_version_changed` (1039).
/// That error is the multi-version client's own: it reports it when the cluster's protocol
/// changes under a transaction, and its `on_error` answers it by replacing the transaction
/// with a new one at once (`MultiVersionTransaction::onError`). This client is a
/// multi-version client (it follows an upgrade and fails requests cut off by one with 1039),
/// so it answers as that one does: no backoff, no refusal for the retry limit, a timeout or
/// an earlier refusal, the retry count and the timeout's clock start again, and what was
/// pending is cancelled. libfdb_c without external clients bypasses the multi-version client
/// and refuses 1039 like any other error; with `disable_client_bypass` it answers as here,
/// and the real-cluster half compares with that.
#[test]
fn on_error_of_cluster_version_changed_starts_a_new_transaction() {
    dual::run(
        "bindingtester-1039",
        Duration::from_secs(60),
        |t: Target| async move {
            let ours = version_changed_answers(&t).await;
            let expected: Vec<&str> = [
                // retry_limit 0: 1039 is retried, the limit then holds for the new one.
                &["ok", "E1020"][..],
                // retry_limit 1: 1039 starts the count again.
                &["ok", "ok", "ok", "E1020"],
                // After a refusal (transaction cancelled), 1039 makes it usable again.
                &["E2000", "E1025", "ok", "stored"],
                // After a timeout too, and the timeout counts again from the retry.
                &["E1031", "ok", "stored"],
                // A pending watch is cancelled, the writes are gone.
                &["ok", "E1025", "stored"],
            ]
            .concat();
            assert_eq!(ours, expected, "{}", t.name);
            if !t.exact {
                let Ok(path) = std::env::var("FDB_CLUSTER_FILE") else {
                    return;
                };
                let prefix = fdb_tests::to_hex(&t.prefix);
                if let Some(out) = fdb_tests::python::libfdb_c_answers(
                    "bindingtester-1039",
                    PY_VERSION_CHANGED,
                    [path, prefix],
                ) {
                    let theirs: Vec<String> = out.lines().map(str::to_string).collect();
                    assert_eq!(ours, theirs, "libfdb_c's multi-version client");
                }
            }
        },
    );
}

async fn version_changed_answers(t: &Target) -> Vec<String> {
    use fdb_protocol::TransactionOption as O;
    let db = &t.db;
    let (k, w) = (t.k("cvc/k"), t.k("cvc/w"));
    t.put(&k, b"stored").await;
    let done = |r: Result<(), Error>| match r {
        Ok(()) => "ok".to_string(),
        Err(e) => format!("E{}", e.code().map_or(0, |c| c.0)),
    };
    let read = |r: Result<Option<bytes::Bytes>, Error>| match r {
        Ok(Some(v)) => String::from_utf8_lossy(&v).into_owned(),
        Ok(None) => "-".to_string(),
        Err(e) => format!("E{}", e.code().map_or(0, |c| c.0)),
    };
    let changed = ErrorCode::CLUSTER_VERSION_CHANGED;
    let mut out = Vec::new();

    let tx = db.create_transaction();
    tx.set_option(O::RetryLimit(Some(0))).unwrap();
    out.push(done(tx.on_error(changed).await));
    out.push(done(tx.on_error(ErrorCode::NOT_COMMITTED).await));

    let tx = db.create_transaction();
    tx.set_option(O::RetryLimit(Some(1))).unwrap();
    out.push(done(tx.on_error(ErrorCode::NOT_COMMITTED).await));
    out.push(done(tx.on_error(changed).await));
    out.push(done(tx.on_error(ErrorCode::NOT_COMMITTED).await));
    out.push(done(tx.on_error(ErrorCode::NOT_COMMITTED).await));

    let tx = db.create_transaction();
    out.push(done(tx.on_error(ErrorCode::CLIENT_INVALID_OPERATION).await));
    out.push(read(tx.get(&k).await));
    out.push(done(tx.on_error(changed).await));
    out.push(read(tx.get(&k).await));

    // Long enough to have run out, short enough that the read after the retry (one round
    // trip) finishes well inside a new one.
    let tx = db.create_transaction();
    tx.set_option(O::Timeout(Duration::from_millis(1000)))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    out.push(read(tx.get(&k).await));
    out.push(done(tx.on_error(changed).await));
    out.push(read(tx.get(&k).await));

    let tx = db.create_transaction();
    let watch = tx.watch(&w);
    tx.set(&k, b"mine");
    out.push(done(tx.on_error(changed).await));
    out.push(done(watch.await.map(|_| ())));
    out.push(read(tx.get(&k).await));
    out
}

/// [`version_changed_answers`] through the Python binding over libfdb_c, as a multi-version
/// client (`disable_client_bypass`).
const PY_VERSION_CHANGED: &str = r#"
import sys, time, fdb
fdb.api_version(730)
fdb.options.set_disable_client_bypass()
db = fdb.open(sys.argv[1])
p = bytes.fromhex(sys.argv[2])
k, w = p + b'cvc/k', p + b'cvc/w'
@fdb.transactional
def fill(tr):
    tr[k] = b'stored'
fill(db)
def done(f):
    try:
        f.wait()
        return 'ok'
    except fdb.FDBError as e:
        return 'E%d' % e.code
def read(f):
    try:
        v = f.wait()
        return '-' if v is None or not v.present() else bytes(v).decode()
    except fdb.FDBError as e:
        return 'E%d' % e.code
out = []
tr = db.create_transaction()
tr.options.set_retry_limit(0)
out += [done(tr.on_error(1039)), done(tr.on_error(1020))]
tr = db.create_transaction()
tr.options.set_retry_limit(1)
out += [done(tr.on_error(1020)), done(tr.on_error(1039)), done(tr.on_error(1020)), done(tr.on_error(1020))]
tr = db.create_transaction()
out += [done(tr.on_error(2000)), read(tr.get(k)), done(tr.on_error(1039)), read(tr.get(k))]
tr = db.create_transaction()
tr.options.set_timeout(1000)
time.sleep(1.2)
out += [read(tr.get(k)), done(tr.on_error(1039)), read(tr.get(k))]
tr = db.create_transaction()
watch = tr.watch(w)
tr[k] = b'mine'
out += [done(tr.on_error(1039)), done(watch), read(tr.get(k))]
print('\n'.join(out))
"#;
