//! Against a real FDB 7.3 cluster, when `FDB_CLUSTER_FILE` names one; skipped (with a notice)
//! otherwise.

use std::time::Duration;

use fdb_protocol::cluster_file::ClusterFile;

fn cluster() -> Option<ClusterFile> {
    match std::env::var("FDB_CLUSTER_FILE") {
        Ok(p) if !p.is_empty() => {
            let text = std::fs::read_to_string(&p).expect("FDB_CLUSTER_FILE is readable");
            Some(ClusterFile::parse(&text).expect("FDB_CLUSTER_FILE parses"))
        }
        _ => {
            println!("real_cluster: FDB_CLUSTER_FILE is not set; skipping the real-cluster test");
            None
        }
    }
}

#[test]
fn read_version_with_each_driver() {
    let Some(cf) = cluster() else { return };
    let mut mio = fdb_driver_mio::Database::from_cluster_file(cf.clone(), 1).unwrap();
    let a = mio
        .read_version_with(Default::default(), Duration::from_secs(30))
        .unwrap();
    assert!(a > 0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let b = rt.block_on(async {
        let db = fdb_driver_tokio::Database::from_cluster_file(cf, 2);
        tokio::time::timeout(Duration::from_secs(30), db.read_version())
            .await
            .unwrap()
            .unwrap()
    });
    assert!(b >= a, "read versions do not go back: {b} < {a}");
}
