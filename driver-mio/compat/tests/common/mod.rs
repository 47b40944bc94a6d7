//! What the one-test-per-file compat tests share: fdb-compat's network around a test body.

use std::thread;

use fdb_compat::api::FdbApiBuilder;
use fdb_compat::Database;
use fdb_tests::cluster::TestCluster;

/// Runs `body` with a database of `cluster`, on fdb-compat's network started before it and
/// stopped after it, as foundationdb-rs's `boot` does: once per process, so one test a file.
pub fn with_network(cluster: &TestCluster, tag: &str, body: impl FnOnce(&Database)) {
    let dir = std::env::temp_dir().join(format!("fdb-compat-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = cluster.write_cluster_file(&dir);
    let (runner, wait) = FdbApiBuilder::default().build().unwrap().build().unwrap();
    // SAFETY: nothing unsafe.
    let network = thread::spawn(move || unsafe { runner.run() });
    let stop = wait.wait();
    let db = Database::new(Some(path.to_str().unwrap())).unwrap();
    body(&db);
    stop.stop().unwrap();
    network.join().unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
