//! The typed client API as an application uses it (tokio driver): range streams fetched
//! lazily, the snapshot view, `transact` with application errors, options refused rather
//! than ignored, the special-key helpers, and cancellation on drop leaving nothing behind in
//! the core. Each scenario runs on the test cluster, and on a real cluster when
//! `FDB_CLUSTER_FILE` is set.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fdb_driver_tokio::driver::Census;
use fdb_driver_tokio::{
    DatabaseOption, Error, ErrorCode, KeySelector, MaybeCommitted, MutationType, Prefix,
    RangeOption, StreamingMode, TransactError, TransactOption, TransactionOption,
};
use fdb_tests::dual::Target;

const LIMIT: Duration = Duration::from_secs(90);

fn run<F, Fut>(scenario: F)
where
    F: Fn(Target) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    fdb_tests::dual::run("rust-fdb-api", LIMIT, scenario);
}

fn code(e: &Error) -> ErrorCode {
    e.code().unwrap_or_else(|| panic!("not an FDB error: {e}"))
}

/// The core's census once the loop has handled everything sent before.
async fn census(t: &Target) -> (Census, usize) {
    t.db.census().await.expect("the loop runs")
}

async fn fill(t: &Target, n: usize) {
    t.db.run(|tx| {
        let keys: Vec<Vec<u8>> = (0..n).map(|i| t.k(&format!("r/{i:04}"))).collect();
        async move {
            for k in &keys {
                tx.set(k, [7u8; 100]);
            }
            Ok(())
        }
    })
    .await
    .unwrap();
}

#[test]
fn range_streams_fetch_batch_by_batch() {
    run(|t| async move {
        fill(&t, 300).await;
        let tx = t.db.create_transaction();
        let range = RangeOption::from(Prefix(t.k("r/")));
        let mut batches = tx.get_ranges(range.clone(), false);
        let first = batches.next().await.expect("a batch").unwrap();
        assert!(
            first.more(),
            "the iterator mode starts small: {}",
            first.len()
        );
        assert!(first.len() < 300, "{}", first.len());
        // Nothing is fetched ahead: the next batch is asked for only when taken.
        let (c, waiting) = census(&t).await;
        assert_eq!((c.requests, waiting), (0, 0), "{c:?} on {}", t.name);
        let mut rows = first.rows.clone();
        let mut sizes = vec![first.len()];
        while let Some(b) = batches.next().await {
            let b = b.unwrap();
            sizes.push(b.len());
            rows.extend(b.rows);
        }
        assert!(sizes.len() > 1, "{sizes:?}");
        let want: Vec<Vec<u8>> = (0..300).map(|i| t.k(&format!("r/{i:04}"))).collect();
        let got: Vec<Vec<u8>> = rows.iter().map(|kv| kv.key().to_vec()).collect();
        assert_eq!(got, want, "{}", t.name);
        // The row stream and the collected form read the same.
        let mut kvs = tx.get_ranges_keyvalues(range.clone(), true);
        let mut n = 0;
        while let Some(kv) = kvs.next().await {
            assert_eq!(kv.unwrap().key(), &want[n][..]);
            n += 1;
        }
        assert_eq!(n, 300);
        // A limit cuts the read where the bindings cut it, also in reverse.
        let last: RangeOption = RangeOption {
            limit: Some(250),
            mode: StreamingMode::Small,
            ..range.clone()
        }
        .rev();
        let rows = tx.get_range_all(last, false).await.unwrap();
        assert_eq!(rows.len(), 250);
        assert_eq!(rows[0].key(), &want[299][..]);
        assert_eq!(rows[249].key(), &want[50][..]);
        // Rust range syntax: `a..=b` includes `b`.
        let r = RangeOption::from(t.k("r/0010")..=t.k("r/0012"));
        let rows = tx.snapshot().get_range_all(r).await.unwrap();
        assert_eq!(rows.len(), 3);
    });
}

#[test]
fn snapshot_reads_add_no_read_conflicts() {
    run(|t| async move {
        for snapshot in [true, false] {
            let a = t.db.create_transaction();
            if snapshot {
                a.snapshot().get(t.k("s")).await.unwrap();
                let sel = KeySelector::first_greater_or_equal(t.k("s"));
                a.snapshot().get_key(sel).await.unwrap();
            } else {
                a.get(t.k("s")).await.unwrap();
            }
            let b = t.db.create_transaction();
            b.set(t.k("s"), b"b");
            b.commit().await.unwrap();
            a.set(t.k("other"), b"a");
            let r = a.commit().await;
            if snapshot {
                r.unwrap();
            } else {
                assert_eq!(code(&r.unwrap_err()), ErrorCode::NOT_COMMITTED);
            }
        }
        // Snapshot reads still see the transaction's own writes.
        let tx = t.db.create_transaction();
        tx.set(t.k("mine"), b"x");
        let v = tx.snapshot().get(t.k("mine")).await.unwrap();
        assert_eq!(v.as_deref(), Some(&b"x"[..]));
    });
}

/// An application error type holding FDB's errors beside its own.
#[derive(Debug)]
enum AppError {
    Fdb(Error),
    Refused(&'static str),
}

impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        AppError::Fdb(e)
    }
}

impl TransactError for AppError {
    fn try_into_fdb_error(self) -> Result<Error, Self> {
        match self {
            AppError::Fdb(e) => Ok(e),
            other => Err(other),
        }
    }
}

#[test]
fn transact_retries_fdb_errors_and_keeps_application_errors() {
    run(|t| async move {
        // The application's own error: returned as it is, after one attempt.
        let attempts = Arc::new(AtomicU32::new(0));
        let r: Result<(), AppError> =
            t.db.transact(TransactOption::default(), |tx, _| {
                let (n, k) = (attempts.clone(), t.k("app"));
                async move {
                    n.fetch_add(1, Ordering::SeqCst);
                    tx.set(k, b"never");
                    Err(AppError::Refused("no"))
                }
            })
            .await;
        assert!(matches!(r, Err(AppError::Refused("no"))), "{r:?}");
        assert_eq!(attempts.load(Ordering::SeqCst), 1);
        let tx = t.db.create_transaction();
        assert_eq!(tx.get(t.k("app")).await.unwrap(), None);

        // A retryable FDB error from inside the closure: retried through on_error.
        let attempts = Arc::new(AtomicU32::new(0));
        let v =
            t.db.transact(TransactOption::default(), |tx, _| {
                let (n, k) = (attempts.clone(), t.k("fdb"));
                async move {
                    if n.fetch_add(1, Ordering::SeqCst) == 0 {
                        return Err(AppError::Fdb(ErrorCode::NOT_COMMITTED.into()));
                    }
                    tx.atomic_op(k, 1u64.to_le_bytes(), MutationType::Add);
                    Ok::<_, AppError>(42)
                }
            })
            .await
            .unwrap();
        assert_eq!((v, attempts.load(Ordering::SeqCst)), (42, 2));

        // The retry limit bounds the loop.
        let attempts = Arc::new(AtomicU32::new(0));
        let options = TransactOption {
            retry_limit: Some(2),
            ..TransactOption::default()
        };
        let r: Result<(), Error> =
            t.db.transact(options, |_, _| {
                let n = attempts.clone();
                async move {
                    n.fetch_add(1, Ordering::SeqCst);
                    Err(ErrorCode::NOT_COMMITTED.into())
                }
            })
            .await;
        assert_eq!(code(&r.unwrap_err()), ErrorCode::NOT_COMMITTED);
        assert_eq!(attempts.load(Ordering::SeqCst), 3);

        // An attempt that may have committed ends a non-idempotent loop; an idempotent one
        // runs again, told so.
        let unknown = || -> Error { ErrorCode::COMMIT_UNKNOWN_RESULT.into() };
        let r: Result<(), Error> =
            t.db.transact(
                TransactOption::default(),
                |_, _| async move { Err(unknown()) },
            )
            .await;
        assert_eq!(code(&r.unwrap_err()), ErrorCode::COMMIT_UNKNOWN_RESULT);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        t.db.transact(TransactOption::idempotent(), |_, maybe: MaybeCommitted| {
            let seen = seen.clone();
            async move {
                let mut s = seen.lock().unwrap();
                s.push(maybe.0);
                if s.len() == 1 {
                    return Err(unknown());
                }
                Ok(())
            }
        })
        .await
        .unwrap();
        assert_eq!(*seen.lock().unwrap(), vec![false, true]);
    });
}

#[test]
fn options_are_implemented_or_refused_never_ignored() {
    run(|t| async move {
        let tx = t.db.create_transaction();
        let e = tx
            .set_option(TransactionOption::CheckWritesEnable)
            .unwrap_err();
        assert_eq!(code(&e), ErrorCode::UNSUPPORTED_OPERATION);
        let e =
            t.db.set_transaction_defaults(vec![TransactionOption::CheckWritesEnable])
                .unwrap_err();
        assert_eq!(code(&e), ErrorCode::UNSUPPORTED_OPERATION);
        // A refused option left nothing behind: the transaction works.
        tx.set_option(TransactionOption::PriorityBatch).unwrap();
        tx.get(t.k("o")).await.unwrap();
        // `use_grv_cache` is accepted and fails what follows with `invalid_option`, until a
        // reset, as libfdb_c 7.3.77 does without external clients (no shared state).
        let tx = t.db.create_transaction();
        tx.set_option(TransactionOption::UseGrvCache).unwrap();
        let e = tx.get(t.k("o")).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::INVALID_OPTION);
        let e = tx.get_read_version().await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::INVALID_OPTION);
        let e = tx.commit().await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::INVALID_OPTION);
        tx.reset();
        tx.get_read_version().await.unwrap();

        for (opt, want) in [
            (
                DatabaseOption::UseConfigDatabase,
                ErrorCode::UNSUPPORTED_OPERATION,
            ),
            (
                DatabaseOption::MaxWatches(2_000_000),
                ErrorCode::INVALID_OPTION_VALUE,
            ),
            (
                DatabaseOption::TransactionSizeLimit(10),
                ErrorCode::INVALID_OPTION_VALUE,
            ),
        ] {
            let e = t.db.set_option(opt.clone()).unwrap_err();
            assert_eq!(code(&e), want, "{opt:?}");
        }
        // read_lock_aware alone makes the transaction read-only (libfdb_c: 2023 on a commit
        // with writes, a read-only commit succeeds).
        let tx = t.db.create_transaction();
        tx.set_option(TransactionOption::ReadLockAware).unwrap();
        tx.get(t.k("o")).await.unwrap();
        tx.commit().await.unwrap();
        let tx = t.db.create_transaction();
        tx.set_option(TransactionOption::ReadLockAware).unwrap();
        tx.set(t.k("o"), b"w");
        let e = tx.commit().await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::TRANSACTION_READ_ONLY);

        // A database default reaches new transactions: no retries at all.
        t.db.set_option(DatabaseOption::TransactionRetryLimit(Some(0)))
            .unwrap();
        let tx = t.db.create_transaction();
        let e = tx.on_error(ErrorCode::NOT_COMMITTED).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::NOT_COMMITTED);
        t.db.set_option(DatabaseOption::TransactionRetryLimit(None))
            .unwrap();
        let tx = t.db.create_transaction();
        tx.on_error(ErrorCode::NOT_COMMITTED).await.unwrap();
        // The watch limit counts from the database option.
        t.db.set_option(DatabaseOption::MaxWatches(1)).unwrap();
        let tx = t.db.create_transaction();
        let _w1 = tx.watch(t.k("w1"));
        let e = tx.watch(t.k("w2")).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::TOO_MANY_WATCHES);
        t.db.set_option(DatabaseOption::MaxWatches(10_000)).unwrap();
    });
}

#[test]
fn dropped_futures_streams_and_transactions_leave_nothing_behind() {
    run(|t| async move {
        fill(&t, 50).await;
        let tx = t.db.create_transaction();
        // A read dropped after its first poll: the request is cancelled in the core.
        let _ = tokio::time::timeout(Duration::ZERO, tx.get(t.k("r/0001"))).await;
        let (c, waiting) = census(&t).await;
        assert_eq!((c.requests, waiting), (0, 0), "{c:?}");
        // A stream dropped mid-read, with its next batch in flight.
        let mut s = tx.get_ranges(Prefix(t.k("r/")), false);
        s.next().await.expect("a batch").unwrap();
        let _ = tokio::time::timeout(Duration::ZERO, s.next()).await;
        drop(s);
        // A watch set and dropped.
        let w = tx.watch(t.k("r/0002"));
        tx.commit().await.unwrap();
        drop(w);
        let (c, waiting) = census(&t).await;
        assert_eq!((c.requests, c.watches, waiting), (0, 0, 0), "{c:?}");
        assert_eq!(c.transactions, 1);
        drop(tx);
        let (c, waiting) = census(&t).await;
        assert!(c.is_empty() && waiting == 0, "{c:?} {waiting}");

        // cancel: calls fail with transaction_cancelled until reset.
        let tx = t.db.create_transaction();
        tx.set(t.k("c"), b"1");
        tx.cancel();
        let e = tx.get(t.k("c")).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::TRANSACTION_CANCELLED);
        let e = tx.commit().await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::TRANSACTION_CANCELLED);
        // on_error does not retry a cancelled transaction (libfdb_c: 1025 again).
        let e = tx.on_error(code(&e)).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::TRANSACTION_CANCELLED);
        tx.reset();
        assert_eq!(tx.get(t.k("c")).await.unwrap(), None);
    });
}

#[test]
fn special_key_helpers() {
    run(|t| async move {
        let status = t.db.status_json().await.unwrap();
        let doc: serde_json::Value = serde_json::from_str(&status).expect("status is JSON");
        assert!(doc.get("cluster").is_some(), "{status}");

        let a = t.db.create_transaction();
        a.set_option(TransactionOption::ReportConflictingKeys)
            .unwrap();
        a.get(t.k("ck")).await.unwrap();
        a.get(t.k("untouched")).await.unwrap();
        let b = t.db.create_transaction();
        b.set(t.k("ck"), b"b");
        b.commit().await.unwrap();
        a.set(t.k("x"), b"a");
        assert_eq!(
            code(&a.commit().await.unwrap_err()),
            ErrorCode::NOT_COMMITTED
        );
        let ranges = a.conflicting_keys().await.unwrap();
        let mut end = t.k("ck");
        end.push(0);
        assert_eq!(ranges.len(), 1, "{ranges:?}");
        assert_eq!(
            (&ranges[0].begin[..], &ranges[0].end[..]),
            (&t.k("ck")[..], &end[..])
        );

        // The approximate size grows with what the commit would carry.
        let tx = t.db.create_transaction();
        let empty = tx.get_approximate_size().await.unwrap();
        tx.set(t.k("big"), vec![0u8; 1000]);
        let one = tx.get_approximate_size().await.unwrap();
        assert!(one >= empty + 1000, "{empty} -> {one}");
    });
}

/// The blocking driver's form of the same calls.
fn mio_surface(db: &fdb_driver_mio::Database, prefix: &[u8]) {
    let k = |s: &str| [prefix, s.as_bytes()].concat();
    db.run(|tx| {
        for i in 0..120u32 {
            tx.set(k(&format!("m/{i:03}")), [i as u8; 100]);
        }
        tx.atomic_op(k("n"), 5u64.to_le_bytes(), MutationType::Add);
        Ok(())
    })
    .unwrap();
    let tx = db.create_transaction();
    // Batches as an iterator, fetched as it goes; stopping early leaves nothing in flight.
    let mut it = tx.get_ranges(Prefix(k("m/")), false);
    let first = it.next().expect("a batch").unwrap();
    assert!(first.more() && first.len() < 120, "{}", first.len());
    drop(it);
    let (c, waiting) = db.census().unwrap();
    assert_eq!((c.requests, waiting), (0, 0), "{c:?}");
    let keys: Vec<Vec<u8>> = tx
        .get_ranges_keyvalues(Prefix(k("m/")), true)
        .map(|kv| kv.unwrap().key().to_vec())
        .collect();
    let want: Vec<Vec<u8>> = (0..120).map(|i| k(&format!("m/{i:03}"))).collect();
    assert_eq!(keys, want);
    assert_eq!(
        tx.snapshot().get_range_all(Prefix(k("m/"))).unwrap().len(),
        120
    );
    let n = tx.snapshot().get(k("n")).unwrap().unwrap();
    assert_eq!(n[..], 5u64.to_le_bytes());
    // transact: the application's error ends the loop untouched.
    let mut attempts = 0;
    let r: Result<(), AppError> = db.transact(TransactOption::default(), |tx, _| {
        attempts += 1;
        if attempts == 1 {
            return Err(AppError::Fdb(ErrorCode::NOT_COMMITTED.into()));
        }
        tx.set(k("t"), b"1");
        Err(AppError::Refused("second"))
    });
    assert!(matches!(r, Err(AppError::Refused("second"))), "{r:?}");
    assert_eq!(attempts, 2);
    let e = tx
        .set_option(TransactionOption::CheckWritesEnable)
        .unwrap_err();
    assert_eq!(code(&e), ErrorCode::UNSUPPORTED_OPERATION);
    let e = db
        .set_option(DatabaseOption::UseConfigDatabase)
        .unwrap_err();
    assert_eq!(code(&e), ErrorCode::UNSUPPORTED_OPERATION);
    drop(tx);
    let (c, waiting) = db.census().unwrap();
    assert!(c.is_empty() && waiting == 0, "{c:?} {waiting}");
}

#[test]
fn the_mio_driver_has_the_same_surface() {
    let cluster = fdb_tests::cluster::TestCluster::start();
    let cf = fdb_driver_mio::ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
    let db = fdb_driver_mio::Database::from_cluster_file(cf, 3).unwrap();
    mio_surface(&db, b"");
    match std::env::var("FDB_CLUSTER_FILE") {
        Ok(path) if !path.is_empty() => {
            let db = fdb_driver_mio::Database::open(Some(std::path::Path::new(&path))).unwrap();
            let prefix = format!("rust-fdb-api-mio/{}/", std::process::id()).into_bytes();
            mio_surface(&db, &prefix);
            let mut end = prefix.clone();
            *end.last_mut().unwrap() += 1;
            db.run(|tx| {
                tx.clear_range(&prefix, &end);
                Ok(())
            })
            .unwrap();
        }
        _ => eprintln!("FDB_CLUSTER_FILE not set: ran on the test cluster only"),
    }
}

#[test]
fn the_versionstamp_future_comes_out_of_the_retry_loop() {
    run(|t| async move {
        // Asked for inside the closure, ready after the loop's commit.
        let attempts = Arc::new(AtomicU32::new(0));
        let stamp =
            t.db.transact(TransactOption::default(), |tx, _| {
                let (n, k) = (attempts.clone(), t.k("vs"));
                async move {
                    tx.set(k, b"v");
                    let f = tx.get_versionstamp();
                    if n.fetch_add(1, Ordering::SeqCst) == 0 {
                        // This attempt's future is abandoned with it.
                        return Err(Error::from(ErrorCode::NOT_COMMITTED));
                    }
                    Ok(f)
                }
            })
            .await
            .unwrap();
        let stamp = stamp.await.unwrap();
        assert_eq!(attempts.load(Ordering::SeqCst), 2);
        // The stamp's first eight bytes are the commit version, big-endian.
        let tx = t.db.create_transaction();
        tx.set(t.k("vs2"), b"v");
        let f = tx.get_versionstamp();
        let c = tx.commit_with_versionstamp().await.unwrap();
        let s = f.await.unwrap();
        assert_eq!(Some(s), c.versionstamp);
        assert_eq!(i64::from_be_bytes(s[..8].try_into().unwrap()), c.version);
        assert!(stamp < s, "{stamp:?} {s:?}");
        // A read-only commit has none (2021); an abandoned attempt's future is broken (1100),
        // as libfdb_c 7.3.77 answers both.
        let tx = t.db.create_transaction();
        let f = tx.get_versionstamp();
        tx.commit().await.unwrap();
        assert_eq!(code(&f.await.unwrap_err()), ErrorCode::NO_COMMIT_VERSION);
        let tx = t.db.create_transaction();
        let f = tx.get_versionstamp();
        tx.reset();
        assert_eq!(code(&f.await.unwrap_err()), ErrorCode::BROKEN_PROMISE);
        let tx = t.db.create_transaction();
        let f = tx.get_versionstamp();
        tx.on_error(ErrorCode::NOT_COMMITTED).await.unwrap();
        assert_eq!(code(&f.await.unwrap_err()), ErrorCode::BROKEN_PROMISE);
        // A failed commit: transaction_invalid_version (2020).
        let a = t.db.create_transaction();
        a.get(t.k("vk")).await.unwrap();
        let b = t.db.create_transaction();
        b.set(t.k("vk"), b"b");
        b.commit().await.unwrap();
        a.set(t.k("vy"), b"a");
        let f = a.get_versionstamp();
        assert_eq!(
            code(&a.commit().await.unwrap_err()),
            ErrorCode::NOT_COMMITTED
        );
        assert_eq!(
            code(&f.await.unwrap_err()),
            ErrorCode::TRANSACTION_INVALID_VERSION
        );
    });
}

/// The mio driver's non-blocking form: 64 transactions as tasks of one `Executor` on one
/// thread and one loop, their outputs through the join handles, a task that spawns and
/// awaits another, and `run_until` returning while other tasks still wait.
fn mio_executor(db: &fdb_driver_mio::AsyncDatabase, prefix: &[u8]) {
    use fdb_driver_mio::Executor;
    let key = |i: u32| [prefix, format!("ex/{i:03}").as_bytes()].concat();
    let mut ex = Executor::new(db.driver());
    let handles: Vec<_> = (0..64u32)
        .map(|i| {
            let (db, k) = (db.clone(), key(i));
            ex.spawn(async move {
                let tx = db.create_transaction();
                tx.set(&k, i.to_be_bytes());
                tx.commit().await.map(|_| i)
            })
        })
        .collect();
    assert_eq!(ex.len(), 64);
    ex.run().unwrap();
    assert!(ex.is_empty());
    for (i, h) in handles.iter().enumerate() {
        assert_eq!(h.try_take().unwrap().unwrap(), i as u32);
        assert!(h.try_take().is_none(), "an output is taken once");
    }
    // A task spawning a reader and awaiting it.
    let spawner = ex.spawner();
    let (db2, k) = (db.clone(), key(7));
    let outer = ex.spawn(async move {
        let inner = spawner.spawn(async move { db2.create_transaction().get(&k).await });
        inner.await
    });
    ex.run().unwrap();
    let got = outer.try_take().unwrap().unwrap();
    assert_eq!(got.as_deref(), Some(&7u32.to_be_bytes()[..]));
    // run_until: a watch stays pending while another task reads; the watch fires once the
    // key changes, all on the same loop.
    let (db3, k) = (db.clone(), key(8));
    let watch = ex.spawn(async move {
        let tx = db3.create_transaction();
        let w = tx.watch(&k);
        tx.commit().await.unwrap();
        w.await
    });
    let db4 = db.clone();
    let v = ex
        .run_until(async move { db4.create_transaction().get_read_version().await })
        .unwrap()
        .unwrap();
    assert!(v > 0);
    assert_eq!(ex.len(), 1, "the watch is still waiting");
    let (db5, k) = (db.clone(), key(8));
    ex.run_until(async move {
        let tx = db5.create_transaction();
        tx.set(&k, b"changed");
        tx.commit().await
    })
    .unwrap()
    .unwrap();
    ex.run().unwrap();
    watch.try_take().unwrap().unwrap();
    // Nothing left behind in the core.
    let db6 = db.clone();
    let (c, waiting) = ex
        .run_until(async move { db6.census().await })
        .unwrap()
        .unwrap();
    assert!(c.is_empty() && waiting == 0, "{c:?} {waiting}");
}

#[test]
fn the_mio_executor_serves_many_transactions_on_one_thread() {
    let cluster = fdb_tests::cluster::TestCluster::start();
    let cf = fdb_driver_mio::ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
    let db = fdb_driver_mio::AsyncDatabase::from_cluster_file(cf, 5).unwrap();
    mio_executor(&db, b"");
    match std::env::var("FDB_CLUSTER_FILE") {
        Ok(path) if !path.is_empty() => {
            let db =
                fdb_driver_mio::AsyncDatabase::open(Some(std::path::Path::new(&path))).unwrap();
            let prefix = format!("rust-fdb-api-mio-ex/{}/", std::process::id()).into_bytes();
            mio_executor(&db, &prefix);
            let mut end = prefix.clone();
            *end.last_mut().unwrap() += 1;
            let mut ex = fdb_driver_mio::Executor::new(db.driver());
            let db2 = db.clone();
            ex.run_until(async move {
                let tx = db2.create_transaction();
                tx.clear_range(&prefix, &end);
                tx.commit().await
            })
            .unwrap()
            .unwrap();
        }
        _ => eprintln!("FDB_CLUSTER_FILE not set: ran on the test cluster only"),
    }
}
