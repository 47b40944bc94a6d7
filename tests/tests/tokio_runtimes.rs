//! Where the tokio driver's loop runs (`fdb_driver_tokio::LoopPlacement`), on the test
//! cluster: a database opened outside any runtime works from `futures::executor::block_on`;
//! one opened in a current-thread runtime outlives it; a `static` database serves several
//! `#[tokio::test]`s, each on its own runtime; one opened in a multi-thread runtime stops with
//! it (`Shutdown`, whose message says what to do) unless placed on its own thread.

use std::sync::OnceLock;
use std::time::Duration;

use fdb_driver_tokio::{with_loop_placement, Database, Error, LoopPlacement};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_tests::cluster::TestCluster;

const LIMIT: Duration = Duration::from_secs(20);

fn cluster() -> &'static TestCluster {
    static CLUSTER: OnceLock<TestCluster> = OnceLock::new();
    CLUSTER.get_or_init(TestCluster::start)
}

fn open() -> Result<Database, Error> {
    let cf = ClusterFile::parse(&cluster().cluster_file_string()).expect("a cluster file");
    Database::from_cluster_file(cf, 5)
}

/// Increments `key` in the retry loop and reads it back in another transaction.
async fn bump(db: &Database, key: &'static [u8]) -> u8 {
    db.run(|tx| async move {
        let n = tx.get(key).await?.map_or(0, |v| v[0]);
        tx.set(key, [n + 1]);
        Ok(())
    })
    .await
    .expect("the increment commits");
    let v = db.create_transaction().get(key).await.expect("the read");
    v.expect("the key was written")[0]
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

#[test]
fn opened_outside_a_runtime_works_from_block_on() {
    let db = open().expect("opens without a runtime");
    assert_eq!(block_on(bump(&db, b"outside")), 1);
    assert_eq!(block_on(bump(&db, b"outside")), 2);
    assert_eq!(cluster().get(b"outside"), Some(vec![2]));
    // The same handle from a tokio runtime too.
    let rt = tokio::runtime::Runtime::new().unwrap();
    assert_eq!(rt.block_on(bump(&db, b"outside")), 3);
}

#[test]
fn opened_in_a_current_thread_runtime_outlives_it() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let db = rt.block_on(async {
        let db = open().expect("opens");
        assert_eq!(bump(&db, b"current").await, 1);
        db
    });
    drop(rt);
    assert_eq!(block_on(bump(&db, b"current")), 2);
    let rt = tokio::runtime::Runtime::new().unwrap();
    assert_eq!(rt.block_on(bump(&db, b"current")), 3);
}

#[test]
fn opened_in_a_multi_thread_runtime_stops_with_it_unless_on_its_own_thread() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (in_runtime, own) = rt.block_on(async {
        let in_runtime = open().expect("opens");
        let own = with_loop_placement(LoopPlacement::OwnThread, open).expect("opens");
        assert_eq!(bump(&in_runtime, b"multi").await, 1);
        assert_eq!(bump(&own, b"multi").await, 2);
        (in_runtime, own)
    });
    drop(rt);
    // The in-runtime loop ended with its runtime: every call says so, and what to do.
    let e = block_on(in_runtime.read_version()).unwrap_err();
    assert!(matches!(e, Error::Shutdown), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("runtime it ran on ended") && text.contains("LoopPlacement::OwnThread"),
        "{text}"
    );
    assert_eq!(block_on(bump(&own, b"multi")), 3);
}

#[test]
fn current_runtime_placement_needs_a_runtime() {
    let e = with_loop_placement(LoopPlacement::CurrentRuntime, open).err();
    assert!(matches!(e, Some(Error::Io(_))), "{e:?}");
    // The placement applies inside the closure only.
    let db = open().expect("Auto again outside the closure");
    assert!(block_on(db.read_version()).is_ok());
}

/// One database for the tests below, opened by whichever runs first, in that test's runtime.
fn shared() -> &'static Database {
    static DB: OnceLock<Database> = OnceLock::new();
    DB.get_or_init(|| open().expect("opens"))
}

/// Each `#[tokio::test]` has a runtime of its own that ends with the test; the shared
/// database must keep working in the others (they run on several threads, in any order).
async fn shared_database_serves(key: &'static [u8]) {
    for want in 1..=5 {
        let got = tokio::time::timeout(LIMIT, bump(shared(), key))
            .await
            .expect("in time");
        assert_eq!(got, want);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn static_database_test_a() {
    shared_database_serves(b"static/a").await;
}

#[tokio::test]
async fn static_database_test_b() {
    shared_database_serves(b"static/b").await;
}

#[tokio::test]
async fn static_database_test_c() {
    shared_database_serves(b"static/c").await;
}

/// The same database after a runtime that used it has ended, whichever test opened it.
#[test]
fn static_database_after_a_runtime_ended() {
    for _ in 0..2 {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async { shared().read_version().await.expect("the loop runs") });
    }
    assert!(block_on(shared().read_version()).is_ok());
}
