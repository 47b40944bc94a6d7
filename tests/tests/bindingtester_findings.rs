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
