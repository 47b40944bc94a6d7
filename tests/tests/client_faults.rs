//! What the client does by itself when the cluster misbehaves: location-cache invalidation,
//! replica failover, and the retry loop converging under injected errors. Test cluster only
//! (a real cluster cannot be told to fail).

use std::time::Duration;

use fdb_driver_tokio::{Database, DatabaseOption};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_tests::cluster::{RequestKind, Role, TestCluster};

const LIMIT: Duration = Duration::from_secs(20);

fn db(c: &TestCluster) -> Database {
    Database::from_cluster_file(ClusterFile::parse(&c.cluster_file_string()).unwrap(), 11)
        .expect("the driver starts")
}

fn shard_of(c: &TestCluster, key: &[u8]) -> fdb_tests::cluster::ShardInfo {
    c.shards()
        .into_iter()
        .find(|s| s.begin.as_slice() <= key && key < s.end.as_slice())
        .expect("every key has a shard")
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

#[tokio::test]
async fn wrong_shard_server_is_retried_transparently_after_a_fresh_lookup() {
    let c = TestCluster::start();
    let db = db(&c);
    within(set(&db, b"hello", b"world")).await;
    let lookups = c.requests(RequestKind::GetKeyServerLocations);
    c.fail_next(RequestKind::GetValue, 2, ErrorCode::WRONG_SHARD_SERVER);
    let tx = db.create_transaction();
    let v = within(tx.get(b"hello")).await.unwrap();
    assert_eq!(v.as_deref(), Some(&b"world"[..]));
    assert!(
        c.requests(RequestKind::GetKeyServerLocations) >= lookups + 2,
        "each wrong_shard_server invalidates the cached location"
    );
}

#[tokio::test]
async fn cached_locations_are_reused() {
    let c = TestCluster::start();
    let db = db(&c);
    within(set(&db, b"hello", b"world")).await;
    let tx = db.create_transaction();
    within(tx.get(b"hello")).await.unwrap();
    let lookups = c.requests(RequestKind::GetKeyServerLocations);
    for _ in 0..5 {
        let tx = db.create_transaction();
        within(tx.get(b"hello")).await.unwrap();
    }
    assert_eq!(c.requests(RequestKind::GetKeyServerLocations), lookups);
}

#[tokio::test]
async fn a_moved_shard_is_found_again() {
    let c = TestCluster::start();
    let db = db(&c);
    within(set(&db, b"hello", b"world")).await;
    let tx = db.create_transaction();
    within(tx.get(b"hello")).await.unwrap();
    let shard = shard_of(&c, b"hello");
    let to = (0..c.storage_server_count())
        .find(|i| !shard.servers.contains(i))
        .unwrap();
    c.move_shard(b"hello", to);
    let tx = db.create_transaction();
    let v = within(tx.get(b"hello")).await.unwrap();
    assert_eq!(v.as_deref(), Some(&b"world"[..]));
    let rows = within(tx.get_range(b"a", b"z", 0)).await.unwrap();
    assert_eq!(rows.len(), 1);
}

#[tokio::test]
async fn reads_fail_over_to_another_replica() {
    let c = TestCluster::builder()
        .storage_servers(3)
        .replication(2)
        .start();
    let db = db(&c);
    within(set(&db, b"hello", b"world")).await;
    let shard = shard_of(&c, b"hello");
    assert_eq!(shard.servers.len(), 2);
    c.kill(Role::Storage(shard.servers[0]));
    for _ in 0..4 {
        let tx = db.create_transaction();
        let v = within(tx.get(b"hello")).await.unwrap();
        assert_eq!(v.as_deref(), Some(&b"world"[..]));
    }
}

/// Reads served per storage server, in order.
fn reads_per_server(c: &TestCluster) -> Vec<u64> {
    (0..c.storage_server_count())
        .map(|i| c.requests_to(Role::Storage(i), RequestKind::GetValue))
        .collect()
}

#[tokio::test]
async fn datacenter_id_keeps_reads_in_the_clients_datacenter_while_a_replica_there_is_up() {
    let c = TestCluster::builder()
        .storage_servers(3)
        .replication(3)
        .storage_dc_ids(["dc0", "dc1", "dc2"])
        .start();
    let reads = |db: Database| async move {
        for _ in 0..20 {
            let tx = db.create_transaction();
            let v = within(tx.get(b"hello")).await.unwrap();
            assert_eq!(v.as_deref(), Some(&b"world"[..]));
        }
    };
    // Without the option every replica is as far as the others: the load balancer measures
    // each of them.
    let plain = db(&c);
    within(set(&plain, b"hello", b"world")).await;
    c.reset_counters();
    reads(plain).await;
    let spread = reads_per_server(&c);
    assert!(spread.iter().filter(|&&n| n > 0).count() > 1, "{spread:?}");

    // In dc1, only the dc1 replica is asked (the machine id changes nothing, as in libfdb_c
    // with 7.3's knobs).
    let local = db(&c);
    local
        .set_option(DatabaseOption::MachineId("m1".into()))
        .unwrap();
    local
        .set_option(DatabaseOption::DatacenterId("dc1".into()))
        .unwrap();
    c.reset_counters();
    reads(local.clone()).await;
    assert_eq!(reads_per_server(&c), vec![0, 20, 0]);

    // With the dc1 replica gone, the others serve.
    c.kill(Role::Storage(1));
    c.reset_counters();
    reads(local.clone()).await;
    let failover = reads_per_server(&c);
    assert_eq!(failover[1], 0, "{failover:?}");
    assert!(failover[0] + failover[2] >= 20, "{failover:?}");

    // A datacenter no server is in: all replicas are distant again.
    let elsewhere = db(&c);
    elsewhere
        .set_option(DatabaseOption::DatacenterId("dc9".into()))
        .unwrap();
    reads(elsewhere).await;
}

#[tokio::test]
async fn a_restarted_replica_with_new_tokens_is_found_again() {
    let c = TestCluster::builder()
        .storage_servers(3)
        .replication(2)
        .start();
    let db = db(&c);
    within(set(&db, b"hello", b"world")).await;
    let shard = shard_of(&c, b"hello");
    c.kill(Role::Storage(shard.servers[0]));
    let tx = db.create_transaction();
    within(tx.get(b"hello")).await.unwrap();
    // It comes back with new endpoint tokens; the other one goes away. Requests to the old
    // tokens get ENDPOINT_NOT_FOUND: the client must fail over and look the shard up again.
    c.restart(Role::Storage(shard.servers[0]));
    c.kill(Role::Storage(shard.servers[1]));
    let tx = db.create_transaction();
    let v = within(tx.get(b"hello")).await.unwrap();
    assert_eq!(v.as_deref(), Some(&b"world"[..]));
}

#[tokio::test]
async fn a_read_waits_for_its_only_replica_to_come_back() {
    let c = TestCluster::start();
    let db = db(&c);
    within(set(&db, b"hello", b"world")).await;
    let shard = shard_of(&c, b"hello");
    let ss = shard.servers[0];
    c.kill(Role::Storage(ss));
    let tx = db.create_transaction();
    let read = tokio::spawn(async move { tx.get(b"hello").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!read.is_finished(), "no replica: the read keeps trying");
    c.restart(Role::Storage(ss));
    let v = within(read).await.unwrap().unwrap();
    assert_eq!(v.as_deref(), Some(&b"world"[..]));
}

#[tokio::test]
async fn the_retry_loop_converges_under_injected_not_committed() {
    let c = TestCluster::start();
    let db = db(&c);
    c.fail_next(RequestKind::Commit, 3, ErrorCode::NOT_COMMITTED);
    let mut attempts = 0;
    within(db.run(|tx| {
        attempts += 1;
        async move {
            let n = tx.get(b"n").await?.map_or(0, |v| v[0]);
            tx.set(b"n", [n + 1]);
            Ok(())
        }
    }))
    .await
    .unwrap();
    assert_eq!(attempts, 4, "three injected conflicts, then success");
    assert_eq!(c.get(b"n"), Some(vec![1]));
    // Errors on_error must not retry end the loop with that error.
    c.fail_next(RequestKind::Commit, 1, ErrorCode::KEY_OUTSIDE_LEGAL_RANGE);
    let e = within(db.run(|tx| async move {
        tx.set(b"m", b"1");
        Ok(())
    }))
    .await
    .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE));
}

#[tokio::test]
async fn the_retry_loop_absorbs_future_version_process_behind_and_too_old() {
    let c = TestCluster::start();
    let db = db(&c);
    within(set(&db, b"k", b"v")).await;
    for (kind, code) in [
        (RequestKind::GetValue, ErrorCode::FUTURE_VERSION),
        (RequestKind::GetValue, ErrorCode::PROCESS_BEHIND),
        (RequestKind::GetValue, ErrorCode::TRANSACTION_TOO_OLD),
        (
            RequestKind::GetReadVersion,
            ErrorCode::GRV_PROXY_MEMORY_LIMIT_EXCEEDED,
        ),
        (
            RequestKind::Commit,
            ErrorCode::COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED,
        ),
        (RequestKind::Commit, ErrorCode::DATABASE_LOCKED),
    ] {
        c.fail_next(kind, 1, code);
        let mut errors = 0;
        within(db.run(|tx| {
            errors += 1;
            async move {
                let v = tx.get(b"k").await?;
                assert_eq!(v.as_deref(), Some(&b"v"[..]));
                tx.set(b"k2", b"x");
                Ok(())
            }
        }))
        .await
        .unwrap_or_else(|e| panic!("{code:?}: {e}"));
        assert_eq!(errors, 2, "{code:?} is retried once");
    }
}

#[tokio::test]
async fn commit_unknown_result_with_an_idempotent_transaction_counts_once() {
    let c = TestCluster::start();
    let db = db(&c);
    // Each transfer carries an id; the transaction records it and skips a repeat, which makes
    // it safe to retry after commit_unknown_result (FDB's documented pattern).
    for (i, applied) in [(1u8, true), (2, false), (3, true)] {
        c.commit_unknown_result_next(1, applied);
        let commits = c.requests(RequestKind::Commit);
        let (mut attempts, found) = (0, std::sync::atomic::AtomicBool::new(false));
        within(db.run(|tx| {
            attempts += 1;
            let found = &found;
            async move {
                let done_key = [b'd', i];
                if tx.get(done_key).await?.is_some() {
                    found.store(true, std::sync::atomic::Ordering::SeqCst);
                    return Ok(());
                }
                let a = tx.get(b"acct/a").await?.map_or(100, |v| v[0]);
                let b = tx.get(b"acct/b").await?.map_or(100, |v| v[0]);
                tx.set(b"acct/a", [a - 10]);
                tx.set(b"acct/b", [b + 10]);
                tx.set(done_key, b"1");
                Ok(())
            }
        }))
        .await
        .unwrap();
        // The injection fired: the first commit was unknown, and the retry found the id (its
        // read-only commit sends nothing) or wrote it again.
        assert_eq!(c.injections_left(None), 0, "transfer {i}");
        assert_eq!(attempts, 2, "transfer {i}");
        assert_eq!(found.into_inner(), applied, "transfer {i}");
        // The unknown commit, the dummy commit that settles it, and the retry's own if it
        // had to write.
        let sent = if applied { 2 } else { 3 };
        assert_eq!(
            c.requests(RequestKind::Commit),
            commits + sent,
            "transfer {i}"
        );
    }
    assert_eq!(c.get(b"acct/a"), Some(vec![70]));
    assert_eq!(c.get(b"acct/b"), Some(vec![130]));
}

#[tokio::test]
async fn dropped_connections_mid_workload_lose_nothing() {
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    let c = TestCluster::start();
    let db = db(&c);
    // The worker stops after items 20, 40, 60 and 80 until the test has dropped every
    // connection, so each drop lands mid-workload and must be followed by a reconnect.
    let reached = std::sync::Arc::new(AtomicU32::new(0));
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let worker = {
        let db = db.clone();
        let (reached, gate) = (reached.clone(), gate.clone());
        tokio::spawn(async move {
            for i in 0..100u32 {
                db.run(|tx| async move {
                    let key = format!("item/{i:03}");
                    if tx.get(key.as_bytes()).await?.is_some() {
                        return Ok(()); // a retry after commit_unknown_result
                    }
                    tx.set(key.as_bytes(), b"x");
                    tx.atomic_op(
                        b"count",
                        1u32.to_le_bytes(),
                        fdb_protocol::MutationType::Add,
                    );
                    Ok(())
                })
                .await
                .unwrap();
                if (i + 1) % 20 == 0 && i + 1 < 100 {
                    reached.store(i + 1, SeqCst);
                    gate.acquire().await.unwrap().forget();
                }
            }
        })
    };
    for n in [20, 40, 60, 80] {
        within(async {
            while reached.load(SeqCst) < n {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        let accepted = c.connections_accepted();
        c.drop_connections();
        gate.add_permits(1);
        // The next items need the cluster again: a new connection.
        within(async {
            while c.connections_accepted() == accepted {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        // And a drop at no chosen moment, requests possibly in flight.
        tokio::time::sleep(Duration::from_millis(1)).await;
        c.drop_connections();
    }
    within(worker).await.unwrap();
    let snap = c.snapshot();
    let items = snap.keys().filter(|k| k.starts_with(b"item/")).count();
    assert_eq!(items, 100);
    let count = u32::from_le_bytes(snap[&b"count".to_vec()][..4].try_into().unwrap());
    assert_eq!(count, 100, "every item counted exactly once");
}

#[tokio::test]
async fn commit_unknown_result_waits_for_a_dummy_commit_on_the_self_conflict_key() {
    let c = TestCluster::start();
    let db = db(&c);
    within(set(&db, b"k", b"0")).await;
    for applied in [false, true] {
        c.reset_counters();
        c.commit_unknown_result_next(1, applied);
        let tx = db.create_transaction();
        tx.set(b"k", b"1");
        let e = within(tx.commit()).await.unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::COMMIT_UNKNOWN_RESULT));
        // libfdb_c's `commitDummyTransaction`: one more commit before the error is reported.
        assert_eq!(c.requests(RequestKind::Commit), 2, "applied: {applied}");
    }
}

/// `TransactOption::retry_limit` counts retries, as libfdb_c's `retry_limit` option does:
/// `Some(5)` is six attempts, each one a commit the cluster sees; both drivers.
#[tokio::test]
async fn transact_retry_limit_allows_that_many_retries() {
    use fdb_driver_tokio::{Error, TransactOption};
    use std::time::Duration as D;
    let c = TestCluster::start();
    let db = db(&c);
    within(set(&db, b"k", b"v")).await;
    let options = |n| TransactOption {
        retry_limit: Some(n),
        max_retry_delay: Some(D::from_millis(20)),
        ..TransactOption::default()
    };
    let count = |attempts: &std::sync::atomic::AtomicU32| {
        attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    };

    // (retry_limit, commits failed, attempts, success): one more commit failing than the
    // limit allows ends the loop with its error; as many as it allows do not.
    for (limit, injected, want_attempts, want_ok) in [
        (5, 6, 6, false),
        (5, 5, 6, true),
        (0, 1, 1, false),
        (1, 1, 2, true),
    ] {
        c.fail_next(RequestKind::Commit, injected, ErrorCode::NOT_COMMITTED);
        let commits = c.requests(RequestKind::Commit);
        let attempts = std::sync::atomic::AtomicU32::new(0);
        let r: Result<(), Error> = within(db.transact(options(limit), |tx, _| {
            count(&attempts);
            async move {
                tx.set(b"r", b"1");
                Ok(())
            }
        }))
        .await;
        let attempts = attempts.into_inner();
        assert_eq!(
            attempts, want_attempts,
            "retry_limit {limit}, {injected} injected"
        );
        assert_eq!(
            c.requests(RequestKind::Commit) - commits,
            want_attempts as u64
        );
        match r {
            Ok(()) => assert!(want_ok, "retry_limit {limit}: succeeded"),
            Err(e) => {
                assert!(!want_ok, "retry_limit {limit}: {e}");
                assert_eq!(e.code(), Some(ErrorCode::NOT_COMMITTED));
            }
        }
    }

    // The blocking mio driver's loop counts the same way.
    let cf = ClusterFile::parse(&c.cluster_file_string()).unwrap();
    let mio = fdb_driver_mio::Database::from_cluster_file(cf, 12).expect("the driver starts");
    c.fail_next(RequestKind::Commit, 6, ErrorCode::NOT_COMMITTED);
    let (r, attempts) = tokio::task::spawn_blocking(move || {
        let mut attempts = 0;
        let r: Result<(), Error> = mio.transact(options(5), |tx, _| {
            attempts += 1;
            tx.set(b"r", b"2");
            Ok(())
        });
        (r, attempts)
    })
    .await
    .unwrap();
    assert_eq!(r.unwrap_err().code(), Some(ErrorCode::NOT_COMMITTED));
    assert_eq!(attempts, 6, "mio: retry_limit 5 is six attempts");
}
