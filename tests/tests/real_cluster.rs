//! Against a real FDB 7.3 cluster, when `FDB_CLUSTER_FILE` names one; skipped (with a notice)
//! otherwise.

use std::time::Duration;

use fdb_protocol::cluster_file::ClusterFile;

fn cluster() -> Option<ClusterFile> {
    match fdb_tests::dual::real_cluster_file() {
        Some((_, cf)) => Some(cf),
        None => {
            println!("real_cluster: FDB_CLUSTER_FILE is not set; skipping the real-cluster test");
            None
        }
    }
}

#[test]
fn read_version_with_each_driver() {
    let Some(cf) = cluster() else { return };
    let mio = fdb_driver_mio::Database::from_cluster_file(cf.clone(), 1).unwrap();
    let a = mio
        .read_version_with(Default::default(), Duration::from_secs(30))
        .unwrap();
    assert!(a > 0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let b = rt.block_on(async {
        let db = fdb_driver_tokio::Database::from_cluster_file(cf, 2).expect("the driver starts");
        tokio::time::timeout(Duration::from_secs(30), db.read_version())
            .await
            .unwrap()
            .unwrap()
    });
    assert!(b >= a, "read versions do not go back: {b} < {a}");
}

/// A write, a read back, a conflict and a clear through each driver, under a fresh prefix.
#[test]
fn transactions_with_each_driver() {
    let Some(cf) = cluster() else { return };
    // A prefix no other run shares, cleared at the end whether the test passed or not.
    let prefix = fdb_tests::dual::random_prefix("rust-fdb-real");
    let _clean = fdb_tests::dual::ClearOnDrop::prefix(cf.clone(), &prefix);
    let key = |s: &str| {
        let mut k = prefix.clone();
        k.extend_from_slice(s.as_bytes());
        k
    };
    let mut end = prefix.clone();
    *end.last_mut().unwrap() += 1;

    let mio = fdb_driver_mio::Database::from_cluster_file(cf.clone(), 3).unwrap();
    let v = mio
        .run(|tx| {
            tx.set(key("mio"), b"1");
            tx.atomic_op(key("n"), [1], fdb_protocol::MutationType::Add);
            Ok(())
        })
        .and_then(|_| mio.run(|tx| tx.get(key("mio"))))
        .unwrap();
    assert_eq!(v.as_deref(), Some(&b"1"[..]));

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = fdb_driver_tokio::Database::from_cluster_file(cf, 4).expect("the driver starts");
        let run = async {
            db.run(|tx| {
                let k = key("tokio");
                let n = key("n");
                async move {
                    tx.set(&k, b"2");
                    tx.atomic_op(&n, [1], fdb_protocol::MutationType::Add);
                    Ok(())
                }
            })
            .await
            .unwrap();
            let tx = db.create_transaction();
            let rows = tx.get_range(&prefix, &end, 0).await.unwrap();
            let keys: Vec<_> = rows.iter().map(|kv| kv.key.to_vec()).collect();
            assert_eq!(keys, vec![key("mio"), key("n"), key("tokio")]);
            assert_eq!(rows[1].value.as_ref(), &[2], "two atomic adds");
            // A read-then-write conflict.
            let a = db.create_transaction();
            a.get(key("mio")).await.unwrap();
            let b = db.create_transaction();
            b.set(key("mio"), b"b");
            b.commit().await.unwrap();
            a.set(key("mio"), b"a");
            let e = a.commit().await.unwrap_err();
            assert_eq!(
                e.code(),
                Some(fdb_protocol::error::ErrorCode::NOT_COMMITTED)
            );
            // A clear of the whole prefix leaves nothing.
            let (p, e) = (prefix.clone(), end.clone());
            db.run(|tx| {
                let (p, e) = (p.clone(), e.clone());
                async move {
                    tx.clear_range(&p, &e);
                    Ok(())
                }
            })
            .await
            .unwrap();
            let rows = db
                .create_transaction()
                .get_range(&prefix, &end, 0)
                .await
                .unwrap();
            assert!(rows.is_empty(), "{rows:?}");
        };
        tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .expect("the real cluster answers within a minute");
    });
}
