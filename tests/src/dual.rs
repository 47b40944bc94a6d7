//! Running one scenario on two targets: the in-process test cluster, and — when
//! `FDB_CLUSTER_FILE` is set — a real FoundationDB 7.3 cluster, under a fresh random key
//! prefix that is cleared afterwards, also when the scenario fails ([`ClearOnDrop`]). The
//! same assertions must hold on both.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use fdb_driver_tokio::Database;
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::TransactionOption;

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
    /// The connection string of the cluster, to open more databases on it.
    pub cluster: ClusterFile,
}

impl Target {
    /// `key` under this target's prefix.
    pub fn k(&self, key: &str) -> Vec<u8> {
        let mut v = self.prefix.clone();
        v.extend_from_slice(key.as_bytes());
        v
    }
    /// Writes `key = value` in a transaction of its own (through the retry loop).
    pub async fn put(&self, key: &[u8], value: &[u8]) {
        self.db
            .run(|tx| async move {
                tx.set(key, value);
                Ok(())
            })
            .await
            .expect("one write commits");
    }
    /// Another database on the same cluster, with state of its own (its locations, the read
    /// versions it has been served).
    pub fn another_database(&self, seed: u64) -> Database {
        Database::from_cluster_file(self.cluster.clone(), seed).expect("the driver starts")
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

/// How long [`ClearOnDrop`] tries (retries included) before it gives up with a message.
pub const CLEAN_UP_LIMIT: Duration = Duration::from_secs(30);

/// Clears a key range of a real cluster when dropped — also while a failed test unwinds —
/// so no run leaves its keys behind. It uses a blocking client of its own (mio), as it may
/// run while an async runtime is tearing down.
pub struct ClearOnDrop {
    cluster: ClusterFile,
    begin: Vec<u8>,
    end: Vec<u8>,
}

impl ClearOnDrop {
    /// Clears `[begin, end)` of `cluster` when dropped.
    pub fn new(cluster: ClusterFile, begin: Vec<u8>, end: Vec<u8>) -> ClearOnDrop {
        ClearOnDrop {
            cluster,
            begin,
            end,
        }
    }

    /// Clears every key that starts with `prefix` (which must not be empty or all `0xff`).
    pub fn prefix(cluster: ClusterFile, prefix: &[u8]) -> ClearOnDrop {
        let mut end = prefix.to_vec();
        while end.last() == Some(&0xff) {
            end.pop();
        }
        *end.last_mut().expect("a prefix with a byte below 0xff") += 1;
        ClearOnDrop::new(cluster, prefix.to_vec(), end)
    }
}

impl Drop for ClearOnDrop {
    fn drop(&mut self) {
        let db = match fdb_driver_mio::Database::from_cluster_file(self.cluster.clone(), 0) {
            Ok(db) => db,
            Err(e) => return eprintln!("clean-up: cannot open the cluster: {e}"),
        };
        // Bounded: a cluster that stopped answering fails the clean-up, it does not hang it.
        if let Err(e) =
            db.set_transaction_defaults(vec![TransactionOption::Timeout(CLEAN_UP_LIMIT)])
        {
            return eprintln!("clean-up: the timeout option was refused: {e}");
        }
        let (b, e) = (&self.begin, &self.end);
        if let Err(err) = db.run(|tx| {
            tx.clear_range(b, e);
            Ok(())
        }) {
            eprintln!("clean-up of {b:?}..{e:?} failed: {err}");
        }
    }
}

/// The real cluster named by `FDB_CLUSTER_FILE`, if any.
pub fn real_cluster_file() -> Option<(std::path::PathBuf, ClusterFile)> {
    let path = std::env::var("FDB_CLUSTER_FILE")
        .ok()
        .filter(|p| !p.is_empty())?;
    let text = std::fs::read(&path).expect("FDB_CLUSTER_FILE is readable");
    let cf = ClusterFile::parse_file_bytes(&text).expect("FDB_CLUSTER_FILE parses");
    Some((path.into(), cf))
}

/// A fresh random key prefix under `tag` (`tag/<16 hex digits>/`).
pub fn random_prefix(tag: &str) -> Vec<u8> {
    format!("{tag}/{:016x}/", rand_u64()).into_bytes()
}

/// Runs `scenario` on the test cluster, then on the real cluster when `FDB_CLUSTER_FILE` names
/// one (printing a notice otherwise), each within `limit`. `tag` names the key prefix used on
/// the real cluster; the prefix is cleared afterwards, whether the scenario passed or not, by a
/// clean-up bounded in time ([`ClearOnDrop`]).
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
            db: Database::from_cluster_file(cf.clone(), 7).expect("the driver starts"),
            prefix: Vec::new(),
            exact: true,
            cluster: cf,
        };
        tokio::time::timeout(limit, scenario(t))
            .await
            .expect("scenario timed out on the test cluster");
    });
    let Some((path, cf)) = real_cluster_file() else {
        eprintln!("FDB_CLUSTER_FILE not set: scenario ran on the test cluster only");
        return;
    };
    let prefix = random_prefix(tag);
    let _clean = ClearOnDrop::prefix(cf.clone(), &prefix);
    rt.block_on(async {
        let db = Database::open(Some(&path)).expect("open the real cluster");
        let t = Target {
            name: "real cluster",
            db,
            prefix,
            exact: false,
            cluster: cf,
        };
        tokio::time::timeout(limit, scenario(t))
            .await
            .expect("scenario timed out on the real cluster");
    });
}

fn rand_u64() -> u64 {
    crate::bank::random_seed()
}
