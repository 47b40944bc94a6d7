//! The network's one life in a process, as foundationdb-rs has it over libfdb_c, and the
//! API on a test cluster from threads with no runtime of their own. One test: the network
//! is set up once per process.

use std::sync::Arc;
use std::thread;

use fdb_compat::api::FdbApiBuilder;
use fdb_compat::options::{MutationType, TransactionOption};
use fdb_compat::{Database, FdbBindingError, FdbError, KeySelector, RangeOption};
use futures::executor::block_on;
use futures::TryStreamExt;

/// What foundationdb-rs's types promise executors: handles shared across threads, futures
/// movable between them.
#[allow(dead_code)]
fn send_sync() {
    fn is<T: Send + Sync>() {}
    fn unpin<T: Send + Sync + Unpin>(_: &T) {}
    is::<Database>();
    is::<fdb_compat::Transaction>();
    is::<fdb_compat::RetryableTransaction>();
    is::<fdb_compat::future::FdbFuture<Option<fdb_compat::future::FdbSlice>>>();
    let db = Database::new(None).unwrap();
    let tx = db.create_trx().unwrap();
    unpin(&tx.get(b"k", false));
    unpin(&tx.get_ranges(RangeOption::from((&b"a"[..], &b"b"[..])), false));
    unpin(&tx.watch(b"k"));
    unpin(&tx.commit());
}

fn code<T>(r: Result<T, FdbError>) -> i32 {
    r.err().map_or(0, |e| e.code())
}

#[test]
fn network_life_and_api() {
    let cluster = fdb_tests::cluster::TestCluster::start();
    let dir = std::env::temp_dir().join(format!("fdb-compat-network-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = cluster.write_cluster_file(&dir);
    let path = path.to_str().unwrap().to_string();

    // Before the network is set up: network_not_setup, as libfdb_c.
    assert_eq!(code(Database::new(Some(&path))), 2008);

    let (runner, wait) = FdbApiBuilder::default().build().unwrap().build().unwrap();
    // Set up once: a second selection panics, as foundationdb-rs's does.
    let again = std::panic::catch_unwind(|| FdbApiBuilder::default().build().map(|_| ()));
    assert!(again.is_err());
    // SAFETY: nothing unsafe.
    let network = thread::spawn(move || unsafe { runner.run() });
    let stop = wait.wait();

    let db = Arc::new(Database::new(Some(&path)).unwrap());
    // A read version set is read back without the cluster.
    block_on(db.perform_no_op()).unwrap();
    older_api_versions_cluster(&path);
    basics(&db);
    many_threads(&db);
    retry_loop(&db);
    mapped(&db);
    busyness(&db);

    // A transaction made before the stop; its requests fail once the network is stopped.
    let tx = db.create_trx().unwrap();
    stop.stop().unwrap();
    network.join().unwrap().unwrap();
    assert_eq!(code(block_on(tx.get(b"compat/a", false))), 1101);
    assert_eq!(code(Database::new(Some(&path))), 1101);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `get_mapped_range` / `get_mapped_ranges`: the storage servers' mapped reads, with
/// libfdb_c's refusals.
fn mapped(db: &Database) {
    use fdb_compat::tuple::{pack, Subspace};
    let tx = db.create_trx().unwrap();
    tx.clear_range(b"\x02mapped\x00", b"\x02mapped\x01");
    let index = Subspace::from(("mapped", "idx"));
    for i in 0..30i64 {
        tx.set(&index.pack(&("blue", i)), b"");
        tx.set(
            &pack(&("mapped", "rec", i, "a")),
            format!("a{i}").as_bytes(),
        );
        if i % 2 == 0 {
            tx.set(&pack(&("mapped", "pt", i)), format!("p{i}").as_bytes());
        }
    }
    block_on(tx.commit()).unwrap();

    let range_mapper = pack(&("mapped", "rec", "{K[3]}", "{...}"));
    let blue = RangeOption {
        mode: fdb_compat::options::StreamingMode::WantAll,
        ..RangeOption::from(&index.subspace(&("blue",)))
    };
    let tx = db.create_trx().unwrap();
    let batch = block_on(tx.get_mapped_range(&blue, &range_mapper, 1, false)).unwrap();
    assert_eq!(batch.len(), 30);
    assert!(!batch.more());
    for (i, m) in batch.iter().enumerate() {
        assert_eq!(m.parent_key(), index.pack(&("blue", i as i64)));
        assert_eq!(m.begin_range(), pack(&("mapped", "rec", i as i64)));
        let rows = m.key_values();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].value(), format!("a{i}").as_bytes());
    }
    // A point mapper: the row of the one mapped key, if it is set.
    let point = pack(&("mapped", "pt", "{K[3]}"));
    let batch = block_on(tx.get_mapped_range(&blue, &point, 1, false)).unwrap();
    for (i, m) in batch.iter().enumerate() {
        assert_eq!(m.begin_range(), pack(&("mapped", "pt", i as i64)));
        assert_eq!(m.key_values().len(), usize::from(i % 2 == 0));
    }
    // Batch after batch (the small mode's 256-byte batches), the limit over all of them.
    let limited = RangeOption {
        limit: Some(25),
        mode: fdb_compat::options::StreamingMode::Small,
        ..blue.clone()
    };
    let batches: Vec<_> = block_on(
        tx.get_mapped_ranges(limited, &range_mapper, false)
            .try_collect(),
    )
    .unwrap();
    assert!(batches.len() > 1, "{} batches", batches.len());
    let n: usize = batches.iter().map(|b| b.len()).sum();
    assert_eq!(n, 25);
    // libfdb_c's refusals: snapshot reads, and reads over the transaction's own writes.
    assert_eq!(
        code(block_on(tx.get_mapped_range(&blue, &range_mapper, 1, true))),
        2108
    );
    tx.set(&pack(&("mapped", "rec", 3i64, "b")), b"mine");
    assert_eq!(
        code(block_on(tx.get_mapped_range(
            &blue,
            &range_mapper,
            1,
            false
        ))),
        2039
    );
}

/// Reads, writes, ranges, atomics, watches and versionstamps, each awaited on a plain
/// thread with `futures::executor::block_on` (no runtime anywhere).
fn basics(db: &Database) {
    let tx = db.create_trx().unwrap();
    tx.clear_range(b"compat/", b"compat0");
    for i in 0..10u8 {
        tx.set(&[b"compat/k".as_slice(), &[b'0' + i]].concat(), &[i]);
    }
    tx.atomic_op(b"compat/n", &5i64.to_le_bytes(), MutationType::Add);
    block_on(tx.commit()).unwrap();

    let tx = db.create_trx().unwrap();
    assert_eq!(
        &*block_on(tx.get(b"compat/k3", false)).unwrap().unwrap(),
        &[3]
    );
    assert!(block_on(tx.get(b"compat/none", true)).unwrap().is_none());
    let n = block_on(tx.get(b"compat/n", false)).unwrap().unwrap();
    assert_eq!(i64::from_le_bytes(n[..8].try_into().unwrap()), 5);
    let key = block_on(tx.get_key(&KeySelector::first_greater_than(&b"compat/k3"[..]), false));
    assert_eq!(&*key.unwrap(), b"compat/k4");

    // Batches continue where the last stopped, the limit counts across them.
    let opt = RangeOption {
        limit: Some(7),
        ..RangeOption::from((&b"compat/k"[..], &b"compat/l"[..]))
    };
    let rows: Vec<_> = block_on(tx.get_ranges_keyvalues(opt.clone(), false).try_collect()).unwrap();
    assert_eq!(rows.len(), 7);
    assert_eq!(rows[6].key(), b"compat/k6");
    let rev = block_on(tx.get_range(&opt.rev(), 1, false)).unwrap();
    assert_eq!(rev.first().unwrap().key(), b"compat/k9");

    // A watch fires when another transaction changes the key.
    let tx = db.create_trx().unwrap();
    let watch = tx.watch(b"compat/k0");
    block_on(tx.commit()).unwrap();
    let tx = db.create_trx().unwrap();
    tx.set(b"compat/k0", b"changed");
    tx.set_versionstamped_key_for_test();
    let stamp = tx.get_versionstamp();
    block_on(tx.commit()).unwrap();
    block_on(watch).unwrap();
    assert_eq!(block_on(stamp).unwrap().len(), 10);
}

trait VersionstampWrite {
    fn set_versionstamped_key_for_test(&self);
}

impl VersionstampWrite for fdb_compat::Transaction {
    fn set_versionstamped_key_for_test(&self) {
        let mut key = b"compat/vs".to_vec();
        key.extend_from_slice(&[0u8; 10]);
        key.extend_from_slice(&9u32.to_le_bytes());
        self.atomic_op(&key, b"v", MutationType::SetVersionstampedKey);
    }
}

/// Eight threads, each with its own transactions, on the one database.
fn many_threads(db: &Arc<Database>) {
    let threads: Vec<_> = (0..8u8)
        .map(|t| {
            let db = db.clone();
            thread::spawn(move || {
                for i in 0..20u8 {
                    let tx = db.create_trx().unwrap();
                    tx.set(&[b"compat/t".as_slice(), &[t, i]].concat(), &[i]);
                    block_on(tx.commit()).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let tx = db.create_trx().unwrap();
    let rows = block_on(tx.get_range(
        &RangeOption {
            mode: fdb_compat::options::StreamingMode::WantAll,
            ..RangeOption::from((&b"compat/t"[..], &b"compat/u"[..]))
        },
        1,
        false,
    ))
    .unwrap();
    assert_eq!(rows.len(), 160);
}

/// `run` retries a conflict and hands the closure whether the earlier attempt may have
/// committed; a closure that keeps its transaction is refused.
fn retry_loop(db: &Database) {
    let attempts = std::sync::atomic::AtomicU32::new(0);
    let n = block_on(db.run(|tx, _maybe_committed| {
        let attempts = &attempts;
        async move {
            let first = attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
            let v = tx.get(b"compat/counter", false).await?;
            if first {
                // Another transaction writes what this one read: its commit conflicts.
                let other = db.create_trx()?;
                other.set(b"compat/counter", &[41]);
                other.commit().await.map_err(FdbError::from)?;
            }
            let n = v.map_or(0, |v| v[0]) + 1;
            tx.set(b"compat/counter", &[n]);
            Ok(n)
        }
    }))
    .unwrap();
    assert_eq!(n, 42);
    assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 2);

    let kept = std::sync::Mutex::new(None);
    let r = block_on(db.run(|tx, _| {
        *kept.lock().unwrap() = Some(tx.clone());
        async { Ok(()) }
    }));
    assert!(matches!(
        r,
        Err(FdbBindingError::ReferenceToTransactionKept)
    ));
    drop(kept);

    let tx = db.create_trx().unwrap();
    tx.set_option(TransactionOption::Timeout(1)).unwrap();
    // An unknown raw option code is refused by the client's option table.
    assert!(tx.set_raw_option(9999, None).is_err());
}

/// The loop thread's CPU share: a fraction, and small once the loop idles.
#[cfg(target_os = "linux")]
fn busyness(db: &Database) {
    let first = block_on(db.get_main_thread_busyness()).unwrap();
    assert!((0.0..=1.0).contains(&first), "{first}");
    thread::sleep(std::time::Duration::from_millis(300));
    let idle = block_on(db.get_main_thread_busyness()).unwrap();
    assert!(idle < 0.5, "an idle loop thread was busy {idle}");
}

#[cfg(not(target_os = "linux"))]
fn busyness(db: &Database) {
    assert_eq!(code(block_on(db.get_main_thread_busyness())), 2108);
}

/// API versions 510 to 600 open a database through a `Cluster`: it keeps the path, and the
/// database opened from it is the same cluster's; a file that is not there fails only then,
/// as in libfdb_c (`no_cluster_file_found`).
fn older_api_versions_cluster(path: &str) {
    let cluster = block_on(fdb_compat::Cluster::new(Some(path))).unwrap();
    let db = block_on(cluster.create_database()).unwrap();
    block_on(db.run(|tx, _| async move {
        tx.set(b"cluster-api", b"600");
        Ok(())
    }))
    .unwrap();
    let other = Database::new(Some(path)).unwrap();
    let tx = other.create_trx().unwrap();
    let v = block_on(tx.get(b"cluster-api", false)).unwrap();
    assert_eq!(v.as_deref(), Some(&b"600"[..]));
    let missing = block_on(fdb_compat::cluster::Cluster::from_path(
        "/nonexistent/fdb.cluster",
    ));
    let missing = missing.expect("a cluster only keeps its path");
    assert_eq!(code(block_on(missing.create_database())), 1515);
}
