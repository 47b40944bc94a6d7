//! The main job: connect and read versions, with either driver.
//!
//! Uses the cluster in `FDB_CLUSTER_FILE` when set; otherwise starts the in-process mini
//! cluster on loopback. Transactions (gets, sets, commits) arrive with the transaction issue;
//! today the client bootstraps from the coordinators and obtains read versions.

use std::time::{Duration, Instant};

use fdb_protocol::cluster_file::ClusterFile;
use fdb_tests::testkit::MiniCluster;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_mini, cluster) = match std::env::var("FDB_CLUSTER_FILE") {
        Ok(path) if !path.is_empty() => {
            let text = std::fs::read_to_string(&path)?;
            println!("using the cluster in {path}");
            (None, ClusterFile::parse(&text)?)
        }
        _ => {
            let mini = MiniCluster::start();
            println!(
                "FDB_CLUSTER_FILE not set: started the in-process mini cluster at {}",
                mini.addr()
            );
            let cf = ClusterFile::parse(&mini.cluster_string())?;
            (Some(mini), cf)
        }
    };
    println!("cluster file: {cluster}");

    let db = fdb_driver_tokio::Database::from_cluster_file(cluster.clone(), 0x5eed);
    let t = Instant::now();
    let v = tokio::time::timeout(Duration::from_secs(30), db.read_version()).await??;
    println!(
        "tokio driver: first read version {v} after {:?} (bootstrap included)",
        t.elapsed()
    );

    let t = Instant::now();
    let mut last = v;
    for _ in 0..100 {
        let v = db.read_version().await?;
        assert!(v >= last, "read versions never go back");
        last = v;
    }
    println!(
        "tokio driver: 100 sequential read versions in {:?}, last {last}",
        t.elapsed()
    );

    let t = Instant::now();
    let tasks: Vec<_> = (0..1000)
        .map(|_| {
            let db = db.clone();
            tokio::spawn(async move { db.read_version().await })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    println!(
        "tokio driver: 1000 concurrent read versions (batched) in {:?}",
        t.elapsed()
    );

    let mut mio_db = fdb_driver_mio::Database::from_cluster_file(cluster, 0x5eee)?;
    let v = mio_db.read_version()?;
    println!("mio driver: read version {v}");
    Ok(())
}
