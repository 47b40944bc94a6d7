//! Running one scenario on two targets: the in-process test cluster, and — when
//! `FDB_CLUSTER_FILE` is set — a real FoundationDB 7.3 cluster, under a fresh random key
//! prefix that is cleared afterwards. The same assertions must hold on both.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use fdb_driver_tokio::Database;
use fdb_protocol::cluster_file::ClusterFile;

use crate::cluster::TestCluster;

/// Where a scenario runs.
pub struct Target {
    /// "test cluster" or "real cluster", for messages.
    pub name: &'static str,
    pub db: Database,
    /// Every key of the scenario lives under it (empty on the test cluster, which is fresh).
    pub prefix: Vec<u8>,
    /// The test cluster (exact byte samples, faults available); `false` on a real cluster.
    pub exact: bool,
}

impl Target {
    /// `key` under this target's prefix.
    pub fn k(&self, key: &str) -> Vec<u8> {
        let mut v = self.prefix.clone();
        v.extend_from_slice(key.as_bytes());
        v
    }
    /// [`Target::k`] as `Bytes`.
    pub fn kb(&self, key: &str) -> Bytes {
        Bytes::from(self.k(key))
    }
    /// The end of this target's key space.
    pub fn end(&self) -> Vec<u8> {
        if self.prefix.is_empty() {
            b"\xff".to_vec()
        } else {
            let mut e = self.prefix.clone();
            *e.last_mut().expect("non-empty") += 1;
            e
        }
    }
}

/// Runs `scenario` on the test cluster, then on the real cluster when `FDB_CLUSTER_FILE` names
/// one (printing a notice otherwise), each within `limit`. `tag` names the key prefix used on
/// the real cluster.
///
/// The scenario runs on a thread of its own, and the test fails if that thread has not ended
/// `2 × limit + 60 s` after it started: a scenario that blocks its runtime (where the runtime's
/// own timeout cannot fire) fails with a message instead of hanging the whole test run.
pub fn run<F, Fut>(tag: &str, limit: Duration, scenario: F)
where
    F: Fn(Target) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let (done, ended) = std::sync::mpsc::channel();
    let name = tag.to_owned();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_here(&name, limit, scenario)
        }));
        let _ = done.send(r);
    });
    match ended.recv_timeout(limit * 2 + Duration::from_secs(60)) {
        Ok(Ok(())) => {}
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("scenario {tag} did not end: its thread is blocked"),
    }
}

fn run_here<F, Fut>(tag: &str, limit: Duration, scenario: F)
where
    F: Fn(Target) -> Fut,
    Fut: Future<Output = ()>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let cluster = TestCluster::start();
        let cf = ClusterFile::parse(&cluster.cluster_file_string()).expect("cluster file");
        let t = Target {
            name: "test cluster",
            db: Database::from_cluster_file(cf, 7).expect("the driver starts"),
            prefix: Vec::new(),
            exact: true,
        };
        tokio::time::timeout(limit, scenario(t))
            .await
            .expect("scenario timed out on the test cluster");
        match std::env::var("FDB_CLUSTER_FILE") {
            Ok(path) if !path.is_empty() => {
                let db = Database::open(Some(std::path::Path::new(&path)))
                    .expect("open the real cluster");
                let prefix = format!("{tag}/{:016x}/", rand_u64()).into_bytes();
                let t = Target {
                    name: "real cluster",
                    db: db.clone(),
                    prefix: prefix.clone(),
                    exact: false,
                };
                let end = t.end();
                tokio::time::timeout(limit, scenario(t))
                    .await
                    .expect("scenario timed out on the real cluster");
                db.set_transaction_defaults(Vec::new());
                let clean = db.run(|tx| {
                    let (p, e) = (prefix.clone(), end.clone());
                    async move {
                        tx.clear_range(&p, &e);
                        Ok(())
                    }
                });
                tokio::time::timeout(limit, clean)
                    .await
                    .expect("clean-up timed out on the real cluster")
                    .expect("clean up");
            }
            _ => eprintln!("FDB_CLUSTER_FILE not set: scenario ran on the test cluster only"),
        }
    });
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    h.finish()
}
