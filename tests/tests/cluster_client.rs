//! The real client (tokio driver) against the in-process test cluster: the retry loop under
//! contention, reads across shards and servers, versionstamps, watches, and faults that the
//! retry loop has to absorb.

use std::time::Duration;

use bytes::Bytes;
use fdb_driver_tokio::Database;
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::types::KeySelector;
use fdb_protocol::MutationType;
use fdb_tests::cluster::{RequestKind, TestCluster};

const LIMIT: Duration = Duration::from_secs(20);

fn db(c: &TestCluster, seed: u64) -> Database {
    Database::from_cluster_file(ClusterFile::parse(&c.cluster_file_string()).unwrap(), seed)
        .expect("the driver starts")
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f).await.expect("timed out")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_under_contention_count_exactly() {
    let c = TestCluster::start();
    let mut tasks = Vec::new();
    for w in 0..4u64 {
        let db = db(&c, w);
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                db.run(|tx| async move {
                    let v = tx.get(b"counter").await?;
                    let n = v.map_or(0, |v| u64::from_le_bytes(v[..8].try_into().unwrap()));
                    tx.set(b"counter", (n + 1).to_le_bytes());
                    Ok(())
                })
                .await
                .unwrap();
            }
        }));
    }
    for t in tasks {
        within(t).await.unwrap();
    }
    assert_eq!(c.get(b"counter").unwrap(), 100u64.to_le_bytes());
}

#[tokio::test]
async fn reads_cross_shards_and_servers() {
    let c = TestCluster::start();
    let db = db(&c, 1);
    let keys: Vec<Vec<u8>> = (b'a'..=b'z').map(|k| vec![k, b'1']).collect();
    within(db.run(|tx| {
        let keys = keys.clone();
        async move {
            for k in &keys {
                tx.set(k, k);
            }
            Ok(())
        }
    }))
    .await
    .unwrap();
    let tx = db.create_transaction();
    let rows = within(tx.get_range(b"a", b"{", 0)).await.unwrap();
    let got: Vec<Vec<u8>> = rows.iter().map(|kv| kv.key.to_vec()).collect();
    assert_eq!(got, keys);
    let k = within(tx.get_key(
        KeySelector::first_greater_than(Bytes::from_static(b"g1")),
        false,
    ))
    .await
    .unwrap();
    assert_eq!(&k[..], b"h1");
    let k = within(tx.get_key(KeySelector::new(Bytes::from_static(b"a"), false, 20), false))
        .await
        .unwrap();
    assert_eq!(&k[..], b"t1");
    let k = within(tx.get_key(
        KeySelector::last_less_than(Bytes::from_static(b"p1")),
        false,
    ))
    .await
    .unwrap();
    assert_eq!(&k[..], b"o1");
    assert!(c.requests(RequestKind::GetKeyValues) + c.requests(RequestKind::GetKey) >= 4);
}

#[tokio::test]
async fn versionstamps_and_atomic_ops() {
    let c = TestCluster::start();
    let db = db(&c, 2);
    let tx = db.create_transaction();
    let mut param = b"stamp/".to_vec();
    param.extend_from_slice(&[0; 10]);
    param.extend_from_slice(&6u32.to_le_bytes());
    tx.atomic_op(&param, b"v", MutationType::SetVersionstampedKey);
    tx.atomic_op(b"sum", 5u64.to_le_bytes(), MutationType::Add);
    let version = within(tx.commit()).await.unwrap();
    let stamp = within(tx.versionstamp()).await.unwrap().unwrap();
    // The one key the cluster stored under `stamp/` carries the commit version the client
    // was told (the cluster places stamps with its own code), and the client's stamp names it.
    let stored: Vec<Vec<u8>> = c
        .snapshot()
        .into_keys()
        .filter(|k| k.starts_with(b"stamp/"))
        .collect();
    assert_eq!(stored.len(), 1, "{stored:x?}");
    assert_eq!(
        i64::from_be_bytes(stored[0][6..14].try_into().unwrap()),
        version
    );
    assert_eq!(&stored[0][6..], &stamp[..]);
    assert_eq!(c.get(&stored[0]).as_deref(), Some(&b"v"[..]));
    assert_eq!(c.get(b"sum").unwrap(), 5u64.to_le_bytes());
}

#[tokio::test]
async fn a_watch_fires() {
    let c = TestCluster::start();
    let db = db(&c, 3);
    c.set(b"w", b"1");
    let tx = db.create_transaction();
    let watch = tx.watch(b"w");
    within(tx.commit()).await.unwrap();
    within(async {
        while c.pending_watches() == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    let changed = c.set(b"w", b"2");
    let fired = within(watch).await.unwrap();
    assert!(fired >= changed, "{fired} < {changed}");
}

#[tokio::test]
async fn the_retry_loop_absorbs_faults() {
    let c = TestCluster::start();
    let db = db(&c, 4);
    c.set(b"k", b"v");
    within(db.run(|tx| async move { tx.get(b"k").await }))
        .await
        .unwrap();
    // Errors a storage server may answer; a shard moved away under the client's cache.
    c.fail_next(RequestKind::GetValue, 2, ErrorCode::WRONG_SHARD_SERVER);
    c.fail_next(RequestKind::GetKeyValues, 1, ErrorCode::FUTURE_VERSION);
    c.fail_next(RequestKind::Commit, 1, ErrorCode::NOT_COMMITTED);
    c.move_shard(b"k", (c.servers_of(b"k")[0] + 1) % 3);
    let lookups = c.requests(RequestKind::GetKeyServerLocations);
    let mut attempts = 0;
    let v = within(db.run(|tx| {
        attempts += 1;
        async move {
            let v = tx.get(b"k").await?;
            let _ = tx.get_range(b"h", b"p", 0).await?;
            tx.set(b"k2", b"x");
            Ok(v)
        }
    }))
    .await
    .unwrap();
    assert_eq!(v.as_deref(), Some(&b"v"[..]));
    assert_eq!(c.get(b"k2").as_deref(), Some(&b"x"[..]));
    // Every injection hit: the wrong shard servers were absorbed by fresh lookups inside the
    // read, future_version and not_committed by the retry loop (two more attempts).
    assert_eq!(c.injections_left(None), 0);
    assert_eq!(attempts, 3);
    assert!(c.requests(RequestKind::GetKeyServerLocations) >= lookups + 2);
}

#[tokio::test]
async fn restarted_proxies_are_followed() {
    let c = TestCluster::start();
    let db = db(&c, 5);
    within(db.run(|tx| async move { tx.get(b"k").await }))
        .await
        .unwrap();
    // A dropped connection and restarted proxies.
    let polls = c.requests(RequestKind::OpenDatabase);
    c.drop_connections();
    c.restart(fdb_tests::cluster::Role::Proxies);
    within(db.run(|tx| async move {
        tx.set(b"k3", b"y");
        Ok(())
    }))
    .await
    .unwrap();
    assert_eq!(c.get(b"k3").as_deref(), Some(&b"y"[..]));
    assert!(
        c.requests(RequestKind::OpenDatabase) > polls,
        "the new proxies came from the coordinator"
    );
}
