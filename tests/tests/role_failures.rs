//! What the client does when a role ends under it, as roles end in an FDB recovery: the
//! process stays up, what the role owed is answered with `broken_promise`, and the role comes
//! back with new tokens ([`TestCluster::end_role`]). libfdb_c's load balancer turns that into a
//! retry on another endpoint (read versions, location lookups, storage reads) or, for a commit,
//! into `commit_unknown_result` after a dummy transaction — never into a `broken_promise` for
//! the application. Also the location lookups' overload backoff, range reads in `WantAll`, and
//! watches the storage server gives up on.

use std::time::Duration;

use bytes::Bytes;
use fdb_driver_tokio::Database;
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::types::KeySelector;
use fdb_protocol::{RangeOptions, StreamingMode};
use fdb_tests::cluster::{Injected, RequestKind, Role, TestCluster};

const LIMIT: Duration = Duration::from_secs(20);

fn db(c: &TestCluster) -> Database {
    Database::from_cluster_file(ClusterFile::parse(&c.cluster_file_string()).unwrap(), 23)
        .expect("the driver starts")
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f).await.expect("timed out")
}

async fn set(db: &Database, k: &'static [u8], v: &'static [u8]) {
    db.run(|tx| async move {
        tx.set(k, v);
        Ok(())
    })
    .await
    .unwrap();
}

/// Waits until the cluster has seen `n` requests of `kind` (the request is then parked or
/// held there).
async fn seen(c: &TestCluster, kind: RequestKind, n: u64) {
    within(async {
        while c.requests(kind) < n {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
}

#[tokio::test]
async fn a_commit_applied_before_its_proxy_ended_is_unknown_not_failed() {
    let c = TestCluster::start();
    let db = db(&c);
    within(set(&db, b"warm", b"up")).await;
    let commits = c.requests(RequestKind::Commit);
    c.hold_replies(Some(RequestKind::Commit));
    let tx = db.create_transaction();
    tx.set(b"k", b"applied");
    let commit = tokio::spawn(async move { tx.commit().await });
    seen(&c, RequestKind::Commit, commits + 1).await;
    // The held reply is a success; the role ends before it goes out.
    c.end_role(Role::Proxies);
    // The ended role answered the held reply; hold nothing more (the dummy commit's reply).
    assert_eq!(
        c.release_replies(fdb_tests::cluster::ReleaseOrder::InOrder),
        0
    );
    let e = within(commit).await.unwrap().unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::COMMIT_UNKNOWN_RESULT), "{e}");
    assert_eq!(c.get(b"k").as_deref(), Some(&b"applied"[..]));
    // The dummy transaction committed on the new proxies before the error was reported.
    assert!(c.requests(RequestKind::Commit) >= commits + 2);
}

#[tokio::test]
async fn a_commit_lost_with_its_proxy_is_unknown_and_an_idempotent_retry_applies_it_once() {
    let c = TestCluster::start();
    let db = db(&c);
    within(set(&db, b"n", &[0])).await;
    let commits = c.requests(RequestKind::Commit);
    c.inject(RequestKind::Commit, 1, Injected::NoReply);
    let attempts = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let errors = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let run = {
        let db = db.clone();
        let (attempts, errors) = (attempts.clone(), errors.clone());
        tokio::spawn(async move {
            let tx = db.create_transaction();
            loop {
                attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let r = async {
                    // Idempotent: an id key says whether an earlier attempt committed.
                    if tx.get(b"id/1").await?.is_some() {
                        return Ok(());
                    }
                    let n = tx.get(b"n").await?.map_or(0, |v| v[0]);
                    tx.set(b"n", [n + 1]);
                    tx.set(b"id/1", b"");
                    tx.commit().await.map(|_| ())
                }
                .await;
                match r {
                    Ok(()) => return Ok::<_, fdb_driver_tokio::Error>(()),
                    Err(e) => {
                        let code = e.code().expect("an FDB error");
                        errors.lock().unwrap().push(code);
                        tx.on_error(code).await?;
                    }
                }
            }
        })
    };
    seen(&c, RequestKind::Commit, commits + 1).await;
    c.end_role(Role::Proxies);
    within(run).await.unwrap().unwrap();
    assert_eq!(
        *errors.lock().unwrap(),
        vec![ErrorCode::COMMIT_UNKNOWN_RESULT],
        "the lost commit is reported as unknown, then retried"
    );
    assert_eq!(
        c.get(b"n").as_deref(),
        Some(&[1u8][..]),
        "applied exactly once"
    );
    assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_read_version_in_flight_during_a_recovery_is_asked_again() {
    let c = TestCluster::start();
    let db = db(&c);
    within(db.read_version()).await.unwrap();
    let grvs = c.requests(RequestKind::GetReadVersion);
    c.inject(RequestKind::GetReadVersion, 1, Injected::NoReply);
    let tx = db.create_transaction();
    let rv = tokio::spawn(async move { tx.get_read_version().await });
    seen(&c, RequestKind::GetReadVersion, grvs + 1).await;
    c.end_role(Role::Proxies);
    let v = within(rv)
        .await
        .unwrap()
        .expect("a read version from the new proxies");
    assert!(v > 0);
    assert!(c.requests(RequestKind::GetReadVersion) >= grvs + 2);
}

#[tokio::test]
async fn a_location_lookup_in_flight_during_a_recovery_is_asked_again() {
    let c = TestCluster::start();
    c.set(b"hello", b"world");
    let db = db(&c);
    within(db.read_version()).await.unwrap();
    let lookups = c.requests(RequestKind::GetKeyServerLocations);
    c.inject(RequestKind::GetKeyServerLocations, 1, Injected::NoReply);
    let tx = db.create_transaction();
    let get = tokio::spawn(async move { tx.get(b"hello").await });
    seen(&c, RequestKind::GetKeyServerLocations, lookups + 1).await;
    c.end_role(Role::Proxies);
    let v = within(get).await.unwrap().unwrap();
    assert_eq!(v.as_deref(), Some(&b"world"[..]));
    // The unanswered lookup got broken_promise and was sent again, to the new proxies.
    assert_eq!(c.injections_left(None), 0);
    assert!(c.requests(RequestKind::GetKeyServerLocations) >= lookups + 2);
}

#[tokio::test]
async fn reads_find_a_shard_again_after_all_its_storage_roles_ended() {
    let c = TestCluster::builder()
        .storage_servers(3)
        .replication(2)
        .start();
    c.set(b"hello", b"world");
    let db = db(&c);
    within(db.create_transaction().get(b"hello")).await.unwrap();
    let reads = c.requests(RequestKind::GetValue);
    c.inject(RequestKind::GetValue, 1, Injected::NoReply);
    let tx = db.create_transaction();
    let get = tokio::spawn(async move { tx.get(b"hello").await });
    seen(&c, RequestKind::GetValue, reads + 1).await;
    let lookups = c.requests(RequestKind::GetKeyServerLocations);
    // Both replicas end at once (one of them owes the parked read) and come back with new
    // tokens. Ended one after the other, the client could retry on the second replica's old
    // tokens in between and be served without a lookup.
    c.end_roles(c.servers_of(b"hello").into_iter().map(Role::Storage));
    let v = within(get).await.unwrap().unwrap();
    assert_eq!(v.as_deref(), Some(&b"world"[..]));
    assert!(
        c.requests(RequestKind::GetKeyServerLocations) > lookups,
        "the new tokens came from a fresh location lookup"
    );
}

#[tokio::test]
async fn an_overloaded_commit_proxy_slows_location_lookups_without_failing_reads() {
    let c = TestCluster::start();
    c.set(b"hello", b"world");
    let db = db(&c);
    within(db.read_version()).await.unwrap();
    let lookups = c.requests(RequestKind::GetKeyServerLocations);
    c.fail_next(
        RequestKind::GetKeyServerLocations,
        3,
        ErrorCode::COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED,
    );
    let started = std::time::Instant::now();
    let v = within(db.create_transaction().get(b"hello")).await.unwrap();
    assert_eq!(v.as_deref(), Some(&b"world"[..]));
    assert_eq!(c.requests(RequestKind::GetKeyServerLocations), lookups + 4);
    // `updateBackoff`: 10 ms, then 20 ms, then 40 ms before the lookups that follow.
    assert!(started.elapsed() >= Duration::from_millis(70));
}

#[tokio::test]
async fn a_failed_location_lookup_fails_only_the_read_that_needed_it() {
    let c = TestCluster::start();
    c.set(b"apple", b"1");
    c.set(b"zebra", b"2");
    let db = db(&c);
    within(db.read_version()).await.unwrap();
    let lookups = c.requests(RequestKind::GetKeyServerLocations);
    c.fail_next(
        RequestKind::GetKeyServerLocations,
        1,
        ErrorCode::INTERNAL_ERROR,
    );
    // Two reads of keys in different shards, so each needs its own lookup; both lookups are
    // in flight when the failed one is answered.
    c.hold_replies(Some(RequestKind::GetKeyServerLocations));
    let (a, b) = (db.create_transaction(), db.create_transaction());
    let reads = tokio::spawn(async move { tokio::join!(a.get(b"apple"), b.get(b"zebra")) });
    seen(&c, RequestKind::GetKeyServerLocations, lookups + 2).await;
    c.release_replies(fdb_tests::cluster::ReleaseOrder::InOrder);
    let (ra, rb) = within(reads).await.unwrap();
    let results = [ra, rb];
    let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(failed.len(), 1, "{results:?}");
    assert_eq!(failed[0].code(), Some(ErrorCode::INTERNAL_ERROR));
}

#[tokio::test]
async fn want_all_reads_a_large_range_in_bounded_batches() {
    let c = TestCluster::start();
    let value = vec![b'v'; 1000];
    for i in 0..300 {
        c.set(format!("big/{i:04}").as_bytes(), &value);
    }
    let db = db(&c);
    let tx = db.create_transaction();
    let (begin, end) = (
        KeySelector::first_greater_or_equal(Bytes::from_static(b"big/")),
        KeySelector::first_greater_or_equal(Bytes::from_static(b"big0")),
    );
    let opts = RangeOptions {
        mode: StreamingMode::WantAll,
        ..RangeOptions::default()
    };
    // libfdb_c fetches WANT_ALL as SERIAL: one batch stops after 80,000 bytes and says there
    // is more, so no single call holds an unbounded range in memory.
    let batch = within(tx.get_range_batch(begin.clone(), end.clone(), opts, false))
        .await
        .unwrap();
    assert!(batch.more);
    let bytes: usize = batch
        .rows
        .iter()
        .map(|kv| kv.key.len() + kv.value.len())
        .sum();
    assert!((60_000..=100_000).contains(&bytes), "{bytes} bytes");
    // The iterator still returns every row.
    let rows = within(tx.get_range_with(begin, end, opts, false))
        .await
        .unwrap();
    assert_eq!(rows.len(), 300);
}

#[tokio::test]
async fn a_watch_the_storage_server_cancels_is_polled_again() {
    let c = TestCluster::start();
    let db = db(&c);
    within(set(&db, b"w", b"before")).await;
    c.fail_next(RequestKind::WatchValue, 1, ErrorCode::WATCH_CANCELLED);
    let tx = db.create_transaction();
    let watch = tx.watch(b"w");
    within(tx.commit()).await.unwrap();
    let watches = c.requests(RequestKind::WatchValue);
    // The cancelled watch is asked for again after `WATCH_POLLING_TIME`.
    within(async {
        while c.requests(RequestKind::WatchValue) < watches + 1 || c.pending_watches() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let at = within(db.run(|tx| async move {
        tx.set(b"w", b"after");
        Ok(())
    }))
    .await;
    at.unwrap();
    let fired = within(watch).await.expect("the watch fires");
    // Once it fired, a read at a fresh version sees the change.
    let v = within(db.create_transaction().get(b"w")).await.unwrap();
    assert_eq!(v.as_deref(), Some(&b"after"[..]));
    assert!(fired > 0);
}
