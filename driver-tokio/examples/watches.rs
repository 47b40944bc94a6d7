//! Watches: a waiter learns that a key changed without polling it. The watch is set in a
//! transaction, starts when that transaction commits, and resolves once the key's value
//! differs from the one the transaction saw; dropping it cancels it.
//!
//! Runs on the cluster in `FDB_CLUSTER_FILE`, or on the in-process test cluster when it is
//! not set: `cargo run -p fdb-driver-tokio --example watches`.

use std::time::Duration;

use fdb_driver_tokio::{Database, Error};

const KEY: &[u8] = b"example/watch/config";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_test_cluster, db) = open()?;
    set(&db, b"v1").await?;

    // Read the value and watch the key in one transaction: the watch fires on any change
    // after what this transaction read, so no update between the read and the watch is lost.
    let (seen, watch) = db
        .run(|tx| async move {
            let v = tx.get(KEY).await?;
            Ok((v, tx.watch(KEY)))
        })
        .await?;
    println!("watching {}, now {seen:?}", String::from_utf8_lossy(KEY));
    assert_eq!(seen.as_deref(), Some(&b"v1"[..]));

    // Another task changes the key a little later.
    let writer = {
        let db = db.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            set(&db, b"v2").await
        })
    };
    let version = tokio::time::timeout(Duration::from_secs(30), watch).await??;
    writer.await??;
    let now = db.create_transaction().get(KEY).await?;
    println!("the watch fired (at version {version}); the key is now {now:?}");
    assert_eq!(now.as_deref(), Some(&b"v2"[..]));

    // A watch on a key nobody changes stays pending; dropping it cancels it in the client.
    let idle = db.run(|tx| async move { Ok(tx.watch(KEY)) }).await?;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), idle)
            .await
            .is_err(),
        "nothing changed the key"
    );
    db.run(|tx| async move {
        tx.clear_range(b"example/watch/", b"example/watch0");
        Ok(())
    })
    .await?;
    Ok(())
}

async fn set(db: &Database, value: &'static [u8]) -> Result<(), Error> {
    db.run(|tx| async move {
        tx.set(KEY, value);
        Ok(())
    })
    .await
}

/// The cluster in `FDB_CLUSTER_FILE`, else the in-process test cluster (kept alive by the
/// first value).
fn open() -> Result<(Option<fdb_tests::cluster::TestCluster>, Database), Error> {
    match std::env::var_os("FDB_CLUSTER_FILE").filter(|p| !p.is_empty()) {
        Some(path) => Ok((None, Database::open(Some(path.as_ref()))?)),
        None => {
            let cluster = fdb_tests::cluster::TestCluster::start();
            let cf = fdb_driver_tokio::ClusterFile::parse(&cluster.cluster_file_string())
                .map_err(Error::ClusterFile)?;
            Ok((Some(cluster), Database::from_cluster_file(cf, 1)?))
        }
    }
}
