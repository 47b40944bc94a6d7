//! FDB 7.4's replica consistency check (`enable_replica_consistency_check` with
//! `consistency_check_required_replicas`): a read a replica answered is asked again of the
//! shard's other replicas, and a disagreement fails it with `storage_replica_comparison_error`.
//! On the test cluster, whose storage servers can be told to lie.

use std::time::Duration;

use fdb_driver_tokio::{Database, Error, KeySelector, TransactionOption};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_tests::cluster::{RequestKind, Role, TestCluster};

const LIMIT: Duration = Duration::from_secs(30);

/// Three storage servers, each shard on all three.
fn cluster() -> TestCluster {
    TestCluster::builder()
        .storage_servers(3)
        .replication(3)
        .start()
}

fn db(c: &TestCluster) -> Database {
    Database::from_cluster_file(ClusterFile::parse(&c.cluster_file_string()).unwrap(), 7)
        .expect("the driver starts")
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f).await.expect("timed out")
}

async fn fill(db: &Database) {
    within(db.run(|tx| async move {
        tx.set(b"hello", b"world");
        for k in [&b"r1"[..], b"r2", b"r3"] {
            tx.set(k, b"v");
        }
        Ok(())
    }))
    .await
    .unwrap();
}

/// A transaction with the check on, asking `required` other replicas (and reading its
/// writes unless `native`: then a key read is a `GetKeyRequest` of its own, not a range read
/// of RYW's).
fn checked_with(db: &Database, required: i64, native: bool) -> fdb_driver_tokio::Transaction {
    let tx = db.create_transaction();
    if native {
        tx.set_option(TransactionOption::ReadYourWritesDisable)
            .unwrap();
    }
    tx.set_option(TransactionOption::EnableReplicaConsistencyCheck)
        .unwrap();
    tx.set_option(TransactionOption::ConsistencyCheckRequiredReplicas(
        required,
    ))
    .unwrap();
    tx
}

fn checked(db: &Database, required: i64) -> fdb_driver_tokio::Transaction {
    checked_with(db, required, false)
}

fn code(e: Error) -> ErrorCode {
    e.code()
        .unwrap_or_else(|| panic!("not an FDB error: {e:?}"))
}

/// A key read, a point read and a range read, each answered as written.
async fn reads(tx: &fdb_driver_tokio::Transaction) -> Result<(), Error> {
    let key = tx
        .get_key(KeySelector::first_greater_than(b"r1"), false)
        .await?;
    assert_eq!(&key[..], b"r2");
    assert_eq!(tx.get(b"hello").await?.as_deref(), Some(&b"world"[..]));
    assert_eq!(tx.get_range(b"r", b"s", 0).await?.len(), 3);
    Ok(())
}

const KINDS: [RequestKind; 3] = [
    RequestKind::GetValue,
    RequestKind::GetKeyValues,
    RequestKind::GetKey,
];

/// The requests of each kind the storage servers took for [`reads`] in `tx`.
async fn requests_for(c: &TestCluster, tx: fdb_driver_tokio::Transaction) -> [u64; 3] {
    c.reset_counters();
    within(reads(&tx)).await.unwrap();
    KINDS.map(|k| c.requests(k))
}

#[tokio::test]
async fn every_replica_is_asked_and_agrees() {
    let c = cluster();
    let db = db(&c);
    fill(&db).await;
    for native in [false, true] {
        // Without the check each request goes to one replica.
        let plain = db.create_transaction();
        if native {
            plain
                .set_option(TransactionOption::ReadYourWritesDisable)
                .unwrap();
        }
        let one = requests_for(&c, plain).await;
        assert!(one[0] == 1 && one[1] > 0, "{one:?}");
        assert_eq!(one[2] > 0, native, "{one:?}");
        // Every other replica (-1), the reachable ones (-2), or a count of them.
        for (required, asked) in [(-1, 3), (-2, 3), (1, 2), (2, 3), (5, 3)] {
            let n = requests_for(&c, checked_with(&db, required, native)).await;
            assert_eq!(
                n,
                one.map(|k| k * asked),
                "required {required}, native {native}"
            );
        }
    }
    // As in libfdb_c, one option without the other checks nothing.
    let enabled_only = db.create_transaction();
    enabled_only
        .set_option(TransactionOption::EnableReplicaConsistencyCheck)
        .unwrap();
    let count_only = db.create_transaction();
    count_only
        .set_option(TransactionOption::ConsistencyCheckRequiredReplicas(-1))
        .unwrap();
    let one = requests_for(&c, db.create_transaction()).await;
    for tx in [enabled_only, count_only] {
        assert_eq!(requests_for(&c, tx).await, one);
    }
}

#[tokio::test]
async fn a_replica_that_lies_fails_the_read() {
    let c = cluster();
    let db = db(&c);
    fill(&db).await;
    c.set_lying(1, true);
    // Whichever replica answers first, another disagrees with it.
    for required in [-1, -2, 2] {
        for _ in 0..3 {
            let tx = checked(&db, required);
            let e = within(tx.get(b"hello")).await.unwrap_err();
            assert_eq!(code(e), ErrorCode::STORAGE_REPLICA_COMPARISON_ERROR);
            let tx = checked(&db, required);
            let e = within(tx.get_range(b"r", b"s", 0)).await.unwrap_err();
            assert_eq!(code(e), ErrorCode::STORAGE_REPLICA_COMPARISON_ERROR);
            // A key read of RYW's reads rows, values and all: it disagrees too.
            let sel = || KeySelector::first_greater_than(b"r1");
            let tx = checked(&db, required);
            let e = within(tx.get_key(sel(), false)).await.unwrap_err();
            assert_eq!(code(e), ErrorCode::STORAGE_REPLICA_COMPARISON_ERROR);
            // NativeAPI's key read asks for the key alone, and the keys are true.
            let tx = checked_with(&db, required, true);
            let k = within(tx.get_key(sel(), false)).await.unwrap();
            assert_eq!(&k[..], b"r2", "required {required}");
        }
    }
    // The error is not one `on_error` retries.
    let tx = checked(&db, -1);
    let e = code(within(tx.get(b"hello")).await.unwrap_err());
    assert_eq!(
        within(tx.on_error(e)).await.map_err(code).unwrap_err(),
        ErrorCode::STORAGE_REPLICA_COMPARISON_ERROR
    );
    // Unchecked reads are served as before, lies and all.
    c.set_lying(1, false);
    within(reads(&checked(&db, -1))).await.unwrap();
}

#[tokio::test]
async fn a_replica_that_does_not_answer() {
    let c = cluster();
    let db = db(&c);
    fill(&db).await;
    // Learn the shard's location, then take a replica down.
    within(reads(&db.create_transaction())).await.unwrap();
    c.kill(Role::Storage(2));
    // Best effort counts only the replicas that answered; the one that could not be reached
    // counts as down for a while, as after a read of its own.
    within(reads(&checked(&db, -2))).await.unwrap();
    // Every replica required: the one known to be down fails the read at once.
    let tx = checked(&db, -1);
    let e = within(tx.get(b"hello")).await.unwrap_err();
    assert_eq!(code(e), ErrorCode::UNREACHABLE_STORAGE_REPLICA);
    // A count the replicas up can meet is met.
    within(reads(&checked(&db, 1))).await.unwrap();
}

#[tokio::test]
async fn the_count_is_checked_as_libfdb_c_checks_it() {
    let c = TestCluster::start();
    let db = db(&c);
    // Refused as libfdb_c refuses it: the option's error is the next read's.
    let tx = db.create_transaction();
    let _ = tx.set_option(TransactionOption::ConsistencyCheckRequiredReplicas(-3));
    let e = within(tx.get(b"hello")).await.unwrap_err();
    assert_eq!(code(e), ErrorCode::INVALID_OPTION_VALUE);
    // One replica per shard: nothing else to ask, the read is served.
    fill(&db).await;
    c.reset_counters();
    within(reads(&checked(&db, -1))).await.unwrap();
    assert_eq!(c.requests(RequestKind::GetValue), 1);
}

/// On a real cluster (`FDB_CLUSTER_FILE`) fdbserver's replicas agree, so every check passes
/// and the reads answer what was written; with one replica a shard (a single-process
/// cluster) there is no other to ask, and the reads are served as usual.
#[tokio::test]
async fn checked_reads_on_a_real_cluster() {
    let Some((_, cf)) = fdb_tests::dual::real_cluster_file() else {
        println!("replica_check: FDB_CLUSTER_FILE not set; the real-cluster part is skipped");
        return;
    };
    let db = Database::from_cluster_file(cf, 3).expect("the driver starts");
    let prefix = fdb_tests::dual::random_prefix("replica_check");
    let key = |s: &str| [&prefix[..], s.as_bytes()].concat();
    let (k, r1, r2, end) = (key("k"), key("r1"), key("r2"), key("s"));
    {
        let (k, r1, r2) = (k.clone(), r1.clone(), r2.clone());
        within(db.run(move |tx| {
            let (k, r1, r2) = (k.clone(), r1.clone(), r2.clone());
            async move {
                tx.set(&k, b"v");
                tx.set(&r1, b"1");
                tx.set(&r2, b"2");
                Ok(())
            }
        }))
        .await
        .unwrap();
    }
    // The counts libfdb_c 7.4.6 takes (run through its Python binding on a 3-process 7.4.6
    // cluster, double replication: each read answered as written), a count past the replicas
    // there are included; -3 it refuses.
    for required in [-1, -2, 0, 1, 2, 5] {
        for native in [false, true] {
            let tx = checked_with(&db, required, native);
            assert_eq!(
                within(tx.get(&k)).await.unwrap().as_deref(),
                Some(&b"v"[..])
            );
            let rows = within(tx.get_range(&r1, &end, 0)).await.unwrap();
            assert_eq!(rows.len(), 2, "required {required}");
            let next = within(tx.get_key(KeySelector::first_greater_than(&r1), false))
                .await
                .unwrap();
            assert_eq!(next, r2, "required {required}");
        }
    }
    let tx = db.create_transaction();
    let _ = tx.set_option(TransactionOption::ConsistencyCheckRequiredReplicas(-3));
    let e = within(tx.get(&k)).await.unwrap_err();
    assert_eq!(code(e), ErrorCode::INVALID_OPTION_VALUE);
    let (b, e) = (prefix.clone(), key("\u{7f}"));
    within(db.run(move |tx| {
        let (b, e) = (b.clone(), e.clone());
        async move {
            tx.clear_range(&b, &e);
            Ok(())
        }
    }))
    .await
    .unwrap();
}
