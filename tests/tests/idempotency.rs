//! Idempotency ids (`idempotency_id`, `automatic_idempotency`, the database's
//! `transaction_automatic_idempotency`): the row the commit proxy writes under
//! `\xff\x02/idmp/`, its expiry once an automatic id's commit is known, the `invalid_option` of a
//! bad id, and — on the test cluster, which can lose a commit's reply — the unknown outcome
//! settled by reading the rows back: success with the versionstamp when the commit landed,
//! `transaction_too_old` when it did not, `commit_unknown_result_fatal` when the rows may be
//! purged.
//!
//! The row checks run on the test cluster and, when `FDB_CLUSTER_FILE` is set, on the real
//! cluster (fdbserver 7.3.77 wrote the layout these tests read; see `find_id_in_row`).

use std::time::{Duration, Instant};

use bytes::Bytes;
use fdb_driver_tokio::{Database, DatabaseOption, TransactionOption};
use fdb_protocol::error::ErrorCode;
use fdb_protocol::idempotency::{find_id_in_row, EXPIRED_VERSION_KEY, ID_ROWS_PREFIX};
use fdb_tests::cluster::{RequestKind, TestCluster};
use fdb_tests::dual::{self, Target};

const LIMIT: Duration = Duration::from_secs(60);

/// The id rows from `from` on, read with system-key access.
async fn id_rows(db: &Database, from: i64) -> Vec<(Bytes, Bytes)> {
    let begin = fdb_protocol::idempotency::id_row_key(from, 0);
    let end = [ID_ROWS_PREFIX, b"\xff"].concat();
    db.run(|tx| {
        let (begin, end) = (begin.clone(), end.clone());
        async move {
            tx.set_option(TransactionOption::ReadSystemKeys)?;
            let rows = tx.get_range_all((begin, end), false).await?;
            Ok(rows
                .into_iter()
                .map(|kv| (kv.key, kv.value))
                .collect::<Vec<_>>())
        }
    })
    .await
    .expect("the rows read")
}

async fn read_version(db: &Database) -> i64 {
    db.create_transaction().get_read_version().await.unwrap()
}

/// Commits a write of `key` with an explicit id; returns the committed version and the
/// versionstamp.
async fn commit_with_id(t: &Target, key: &str, id: &[u8]) -> (i64, [u8; 10]) {
    let tx = t.db.create_transaction();
    tx.set_option(TransactionOption::IdempotencyId(id.to_vec()))
        .unwrap();
    tx.set(t.k(key), b"v");
    let stamp = tx.get_versionstamp();
    let v = tx.commit().await.expect("the commit");
    (v, stamp.await.unwrap())
}

#[test]
fn an_explicit_id_is_stored_in_the_row_of_its_commit_version_and_batch() {
    dual::run("idempotency-row", LIMIT, |t| async move {
        let from = read_version(&t.db).await;
        let id = b"explicit-id-0123456789".to_vec();
        let (v, stamp) = commit_with_id(&t, "a", &id).await;
        let rows = id_rows(&t.db, from).await;
        let found: Vec<_> = rows
            .iter()
            .filter_map(|(k, val)| find_id_in_row(k, val, &id))
            .collect();
        // The row names the commit's version and batch index: its versionstamp.
        let batch = u16::from_be_bytes([stamp[8], stamp[9]]);
        assert_eq!(found, vec![(v, batch)], "{}: {rows:?}", t.name);
        let (k, val) = rows
            .iter()
            .find(|(k, val)| find_id_in_row(k, val, &id).is_some())
            .unwrap();
        assert_eq!(
            &k[ID_ROWS_PREFIX.len()..][..8],
            &v.to_be_bytes(),
            "{}",
            t.name
        );
        // The value starts with the protocol version of the commit proxy that wrote it (the
        // cluster's: 7.3 or 7.4, as `IncludeVersion` writes it) and a time in seconds, near
        // now.
        let pv = u64::from_le_bytes(val[..8].try_into().unwrap());
        assert!(
            fdb_protocol::version::Protocol::SUPPORTED
                .iter()
                .any(|p| p.version().0 == pv),
            "{}: {pv:x}",
            t.name
        );
        let secs = i64::from_le_bytes(val[8..16].try_into().unwrap());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!((secs - now).abs() < 600, "{}: {secs} vs {now}", t.name);
        // A manual id stays (nothing expires it but the cluster's own clean-up, hours later);
        // a read-only transaction with an id writes nothing.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let tx = t.db.create_transaction();
        tx.set_option(TransactionOption::IdempotencyId(
            b"read-only-id-0123456".to_vec(),
        ))
        .unwrap();
        tx.get(t.k("a")).await.unwrap();
        tx.commit().await.unwrap();
        let rows = id_rows(&t.db, from).await;
        assert!(rows
            .iter()
            .any(|(k, val)| find_id_in_row(k, val, &id).is_some()));
        assert!(!rows
            .iter()
            .any(|(k, val)| find_id_in_row(k, val, b"read-only-id-0123456").is_some()));
    });
}

#[test]
fn an_automatic_id_is_expired_once_its_commit_is_known() {
    dual::run("idempotency-automatic", LIMIT, |t| async move {
        let from = read_version(&t.db).await;
        let tx = t.db.create_transaction();
        tx.set_option(TransactionOption::AutomaticIdempotency)
            .unwrap();
        tx.set(t.k("b"), b"v");
        let v = tx.commit().await.unwrap();
        // At the commit's own version the row holds one id, 16 random bytes.
        let tx = t.db.create_transaction();
        tx.set_read_version(v);
        tx.set_option(TransactionOption::ReadSystemKeys).unwrap();
        let key = fdb_protocol::idempotency::id_row_key(v, 0);
        let row = tx
            .get(&key)
            .await
            .unwrap()
            .expect("the row at the commit version");
        // (Another test's idempotent commit may share the batch, and the row.)
        assert!(row.len() >= 34 && row[16] == 16, "{}: {row:?}", t.name);
        let (at, _) = find_id_in_row(&key, &row, &row[17..33]).expect("the id");
        assert_eq!(at, v, "{}", t.name);
        // The proxy clears the row with its next batch: within its batch interval on
        // fdbserver (seen: under half a second).
        let start = Instant::now();
        loop {
            let rows = id_rows(&t.db, from).await;
            let at_v: Vec<_> = rows
                .iter()
                .filter(|(k, _)| k[ID_ROWS_PREFIX.len()..][..8] == v.to_be_bytes())
                .collect();
            if at_v.is_empty() {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{}: the row of {v} stays: {at_v:?}",
                t.name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // The database option makes every transaction automatic, each attempt with an id of
        // its own.
        let db = t.another_database(3);
        db.set_option(DatabaseOption::TransactionAutomaticIdempotency)
            .unwrap();
        let mut attempts = 0;
        db.run(|tx| {
            attempts += 1;
            let k = t.k("c");
            let first = attempts == 1;
            async move {
                tx.set(k, b"v");
                if first {
                    return Err(ErrorCode::NOT_COMMITTED.into());
                }
                Ok(())
            }
        })
        .await
        .unwrap();
        assert_eq!(attempts, 2);
    });
}

#[test]
fn an_id_of_a_bad_length_fails_the_commit_with_invalid_option() {
    dual::run("idempotency-bad-length", LIMIT, |t| async move {
        for len in [0usize, 1, 15, 256, 300] {
            let tx = t.db.create_transaction();
            // Accepted when set (libfdb_c defers the error), refused when used.
            tx.set_option(TransactionOption::IdempotencyId(vec![b'x'; len]))
                .unwrap();
            tx.set(t.k("d"), b"v");
            let e = tx.commit().await.unwrap_err();
            assert_eq!(
                e.code(),
                Some(ErrorCode::INVALID_OPTION),
                "{}: {len}",
                t.name
            );
        }
        for len in [16usize, 255] {
            let id = vec![b'y' - (len % 2) as u8; len];
            commit_with_id(&t, "d", &id).await;
        }
    });
}

fn db(c: &TestCluster) -> Database {
    let cf = fdb_protocol::cluster_file::ClusterFile::parse(&c.cluster_file_string()).unwrap();
    Database::from_cluster_file(cf, 11).expect("the driver starts")
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f).await.expect("timed out")
}

#[tokio::test]
async fn an_unknown_outcome_is_settled_by_the_rows_of_committed_ids() {
    let c = TestCluster::start();
    let db = db(&c);
    for automatic in [false, true] {
        // Applied: the commit landed, the reply was lost. The client commits its dummy on
        // `\xff/SC/` + id, reads the rows and reports success, with the versionstamp of the
        // row and no committed version (libfdb_c leaves it unset on this path).
        c.reset_counters();
        c.commit_unknown_result_next(1, true);
        let tx = db.create_transaction();
        if automatic {
            tx.set_option(TransactionOption::AutomaticIdempotency)
                .unwrap();
        } else {
            tx.set_option(TransactionOption::IdempotencyId(
                b"unknown-but-applied-id".to_vec(),
            ))
            .unwrap();
        }
        tx.set(b"k", b"applied");
        let stamp = tx.get_versionstamp();
        let v = within(tx.commit()).await.expect("settled as committed");
        assert_eq!(v, -1);
        let stamp = within(stamp).await.expect("the versionstamp");
        let found = tx.get_committed_version().await.unwrap();
        assert_eq!(found, -1);
        assert_eq!(
            c.requests(RequestKind::Commit),
            2,
            "the commit and the dummy"
        );
        // No expiry is sent on this path: the row stays.
        let rows = id_rows(&db, 0).await;
        let at = rows
            .iter()
            .find(|(k, _)| k[ID_ROWS_PREFIX.len()..][..8] == stamp[..8])
            .expect("the commit's row");
        assert!(!at.1.is_empty());
        let got = within(db.create_transaction().get(b"k")).await.unwrap();
        assert_eq!(got.as_deref(), Some(&b"applied"[..]));
    }

    // Not applied: the rows do not name it, so it did not commit and cannot any more.
    c.commit_unknown_result_next(1, false);
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::IdempotencyId(
        b"unknown-not-applied-id".to_vec(),
    ))
    .unwrap();
    tx.set(b"k", b"lost");
    let e = within(tx.commit()).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TRANSACTION_TOO_OLD));
    let got = within(db.create_transaction().get(b"k")).await.unwrap();
    assert_eq!(got.as_deref(), Some(&b"applied"[..]));

    // The cluster says ids up to a later version may be gone: the outcome cannot be known.
    let rv = read_version(&db).await;
    let expired = fdb_protocol::messages::commit::IdempotencyIdsExpiredVersion {
        expired: rv + 1_000_000_000,
        expired_time: 0,
    };
    let value = fdb_protocol::serializer::encode_with(
        &expired,
        <fdb_protocol::messages::commit::IdempotencyIdsExpiredVersion as fdb_protocol::serializer::Message>::FILE_IDENTIFIER,
    );
    within(db.run(|tx| {
        let value = value.clone();
        async move {
            tx.set_option(TransactionOption::AccessSystemKeys)?;
            tx.set(EXPIRED_VERSION_KEY, value);
            Ok(())
        }
    }))
    .await
    .unwrap();
    c.commit_unknown_result_next(1, true);
    let tx = db.create_transaction();
    tx.set_option(TransactionOption::AutomaticIdempotency)
        .unwrap();
    tx.set(b"k", b"maybe");
    let e = within(tx.commit()).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::COMMIT_UNKNOWN_RESULT_FATAL));
    assert!(!e.is_retryable());
}

#[tokio::test]
async fn an_id_conflicts_with_itself_so_the_dummy_commit_can_fence_it() {
    // With `causal_write_risky` libfdb_c makes no self-conflicting key, and after
    // `commit_unknown_result` reports it at once; with an id, the id's `\xff/SC/` key is one,
    // and the dummy commit runs.
    let c = TestCluster::start();
    let db = db(&c);
    for with_id in [false, true] {
        c.reset_counters();
        c.commit_unknown_result_next(1, false);
        let tx = db.create_transaction();
        tx.set_option(TransactionOption::CausalWriteRisky).unwrap();
        if with_id {
            tx.set_option(TransactionOption::IdempotencyId(
                b"causal-write-risky-id".to_vec(),
            ))
            .unwrap();
        }
        tx.set(b"w", b"1");
        let e = within(tx.commit()).await.unwrap_err();
        let (want, commits) = if with_id {
            (ErrorCode::TRANSACTION_TOO_OLD, 2)
        } else {
            (ErrorCode::COMMIT_UNKNOWN_RESULT, 1)
        };
        assert_eq!(e.code(), Some(want), "with id: {with_id}");
        assert_eq!(
            c.requests(RequestKind::Commit),
            commits,
            "with id: {with_id}"
        );
    }
}
