//! foundationdb-rs 0.11's 7.4 options for the replica consistency check
//! (`TransactionOption::EnableReplicaConsistencyCheck`, `ConsistencyCheckRequiredReplicas`)
//! work through fdb-compat as through libfdb_c 7.4: on a test cluster whose every shard has
//! three replicas, one of them lying about its values, a checked read fails with
//! `storage_replica_comparison_error` (1236). One test: the network is set up once per
//! process.

mod common;

use fdb_compat::options::TransactionOption;
use fdb_compat::Database;
use futures::executor::block_on;

#[test]
fn a_checked_read_sees_a_lying_replica() {
    let cluster = fdb_tests::cluster::TestCluster::builder()
        .storage_servers(3)
        .replication(3)
        .start();
    common::with_network(&cluster, "replicas", |db| checked_read(&cluster, db));
}

/// A value read under the check, with every replica true and then with one lying.
fn checked_read(cluster: &fdb_tests::cluster::TestCluster, db: &Database) {
    let tx = db.create_trx().unwrap();
    tx.set(b"k", b"v");
    block_on(tx.commit()).unwrap();
    let checked = || {
        let tx = db.create_trx().unwrap();
        tx.set_option(TransactionOption::EnableReplicaConsistencyCheck)
            .unwrap();
        tx.set_option(TransactionOption::ConsistencyCheckRequiredReplicas(-1))
            .unwrap();
        tx
    };
    // The replicas agree: the value, read from all three.
    let v = block_on(checked().get(b"k", false)).unwrap();
    assert_eq!(v.as_deref(), Some(&b"v"[..]));
    cluster.set_lying(2, true);
    let e = block_on(checked().get(b"k", false)).unwrap_err();
    assert_eq!(e.code(), 1236);
    assert_eq!(e.message(), "Storage replicas not consistent");
}
