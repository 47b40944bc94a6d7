//! The transaction scenario suite: the same scenarios, with the same expected results, run
//! against the in-process test cluster and — when `FDB_CLUSTER_FILE` is set — against a real
//! FoundationDB 7.3 cluster (under a fresh random key prefix that is cleared afterwards).
//!
//! Every expected value below is written out by hand from FDB's documented semantics; none is
//! computed by the code under test.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use fdb_driver_tokio::{Error, RangeOptions};
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::types::KeySelector;
use fdb_protocol::MutationType;
use fdb_protocol::{ConflictRangeType, TransactionOption};
use fdb_tests::dual::Target;

const LIMIT: Duration = Duration::from_secs(30);

fn run<F, Fut>(scenario: F)
where
    F: Fn(Target) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    fdb_tests::dual::run("rust-fdb-scenarios", LIMIT, scenario)
}

fn code(e: &Error) -> ErrorCode {
    e.code().unwrap_or_else(|| panic!("not an FDB error: {e}"))
}

async fn put(t: &Target, pairs: &[(&str, &[u8])]) {
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = pairs.iter().map(|(k, v)| (t.k(k), v.to_vec())).collect();
    t.db.run(|tx| {
        let pairs = pairs.clone();
        async move {
            for (k, v) in &pairs {
                tx.set(k, v);
            }
            Ok(())
        }
    })
    .await
    .unwrap();
}

async fn read(t: &Target, key: &str) -> Option<Bytes> {
    let tx = t.db.create_transaction();
    tx.get(t.k(key)).await.unwrap()
}

#[test]
fn set_get_clear() {
    run(|t| async move {
        put(&t, &[("a", b"1"), ("h", b"2"), ("x", b"3")]).await;
        assert_eq!(
            read(&t, "a").await.as_deref(),
            Some(&b"1"[..]),
            "{}",
            t.name
        );
        assert_eq!(read(&t, "h").await.as_deref(), Some(&b"2"[..]));
        assert_eq!(read(&t, "missing").await, None);
        let tx = t.db.create_transaction();
        tx.clear(t.k("h"));
        tx.commit().await.unwrap();
        assert_eq!(read(&t, "h").await, None);
    });
}

#[test]
fn ranges_across_shards_with_limits_and_reverse() {
    run(|t| async move {
        let keys = ["b", "g", "h", "i", "o", "p", "q", "w", "y"];
        let pairs: Vec<(&str, &[u8])> = keys.iter().map(|k| (*k, k.as_bytes())).collect();
        put(&t, &pairs).await;
        let tx = t.db.create_transaction();
        let all = tx.get_range(&t.k(""), &t.end(), 0).await.unwrap();
        let got: Vec<Bytes> = all.iter().map(|kv| kv.key.clone()).collect();
        let want: Vec<Bytes> = keys.iter().map(|k| t.kb(k)).collect();
        assert_eq!(got, want, "{}", t.name);
        // A limit stops in the middle of the second shard.
        let some = tx.get_range(&t.k("c"), &t.k("z"), 3).await.unwrap();
        let got: Vec<Bytes> = some.iter().map(|kv| kv.key.clone()).collect();
        assert_eq!(got, vec![t.kb("g"), t.kb("h"), t.kb("i")]);
        // Reverse, limited: the last three.
        let rev = tx
            .get_range_with(
                KeySelector::first_greater_or_equal(t.kb("")),
                KeySelector::first_greater_or_equal(Bytes::from(t.end())),
                RangeOptions {
                    limit: 3,
                    reverse: true,
                    ..RangeOptions::default()
                },
                false,
            )
            .await
            .unwrap();
        let got: Vec<Bytes> = rev.iter().map(|kv| kv.key.clone()).collect();
        assert_eq!(got, vec![t.kb("y"), t.kb("w"), t.kb("q")]);
        // Selectors with offsets across shard boundaries.
        let k = tx
            .get_key(KeySelector::new(t.kb("g"), false, 3), false)
            .await
            .unwrap();
        assert_eq!(k, t.kb("i"), "first_greater_or_equal(g) + 2");
        let k = tx
            .get_key(KeySelector::new(t.kb("p"), true, -2), false)
            .await
            .unwrap();
        assert_eq!(k, t.kb("i"), "last_less_or_equal(p) - 2");
        let k = tx
            .get_key(KeySelector::first_greater_than(t.kb("w")), false)
            .await
            .unwrap();
        assert_eq!(k, t.kb("y"));
        let k = tx
            .get_key(KeySelector::last_less_than(t.kb("h")), false)
            .await
            .unwrap();
        assert_eq!(k, t.kb("g"));
    });
}

#[test]
fn read_your_writes_merges_ranges() {
    run(|t| async move {
        put(
            &t,
            &[
                ("a", b"1"),
                ("b", b"2"),
                ("c", b"3"),
                ("d", b"4"),
                ("i", b"9"),
            ],
        )
        .await;
        let tx = t.db.create_transaction();
        tx.set(t.k("b"), b"two");
        tx.clear(t.k("c"));
        tx.set(t.k("bb"), b"new");
        tx.clear_range(t.k("d"), t.k("h"));
        tx.set(t.k("e"), b"five");
        tx.atomic_op(t.k("i"), [1], MutationType::Add);
        assert_eq!(
            tx.get(t.k("b")).await.unwrap().as_deref(),
            Some(&b"two"[..])
        );
        assert_eq!(tx.get(t.k("c")).await.unwrap(), None);
        assert_eq!(
            tx.get(t.k("i")).await.unwrap().as_deref(),
            Some(&b":"[..]),
            "'9' + 1"
        );
        let rows = tx.get_range(&t.k("a"), &t.end(), 0).await.unwrap();
        let got: Vec<(Bytes, Bytes)> = rows.into_iter().map(|kv| (kv.key, kv.value)).collect();
        let want = vec![
            (t.kb("a"), Bytes::from_static(b"1")),
            (t.kb("b"), Bytes::from_static(b"two")),
            (t.kb("bb"), Bytes::from_static(b"new")),
            (t.kb("e"), Bytes::from_static(b"five")),
            (t.kb("i"), Bytes::from_static(b":")),
        ];
        assert_eq!(got, want, "{}", t.name);
        // Limited reverse read over interleaved writes.
        let rev = tx
            .get_range_with(
                KeySelector::first_greater_or_equal(t.kb("a")),
                KeySelector::first_greater_or_equal(t.kb("f")),
                RangeOptions {
                    limit: 2,
                    reverse: true,
                    ..RangeOptions::default()
                },
                false,
            )
            .await
            .unwrap();
        let got: Vec<Bytes> = rev.into_iter().map(|kv| kv.key).collect();
        assert_eq!(got, vec![t.kb("e"), t.kb("bb")]);
        tx.commit().await.unwrap();
        assert_eq!(read(&t, "d").await, None);
        assert_eq!(read(&t, "e").await.as_deref(), Some(&b"five"[..]));
    });
}

/// (name, op, existing value or None, operand, expected result or None = absent)
type AtomicCase = (
    &'static str,
    MutationType,
    Option<&'static [u8]>,
    &'static [u8],
    Option<&'static [u8]>,
);

#[test]
fn atomic_ops_give_fdb_results() {
    run(|t| async move {
        let cases: Vec<AtomicCase> = vec![
            (
                "add",
                MutationType::Add,
                Some(&[0xff, 0x00]),
                &[0x01, 0x00],
                Some(&[0x00, 0x01]),
            ),
            (
                "add_missing",
                MutationType::Add,
                None,
                &[0x05],
                Some(&[0x05]),
            ),
            (
                "add_short",
                MutationType::Add,
                Some(&[0x01]),
                &[0x02, 0x00, 0x00],
                Some(&[0x03, 0x00, 0x00]),
            ),
            (
                "and",
                MutationType::BitAnd,
                Some(&[0x0f, 0xf0]),
                &[0xff, 0x0f],
                Some(&[0x0f, 0x00]),
            ),
            (
                "and_missing",
                MutationType::BitAnd,
                None,
                &[0xab],
                Some(&[0xab]),
            ),
            (
                "or",
                MutationType::BitOr,
                Some(&[0x01]),
                &[0x10, 0x20],
                Some(&[0x11, 0x20]),
            ),
            (
                "xor",
                MutationType::BitXor,
                Some(&[0xff, 0xff]),
                &[0x0f],
                Some(&[0xf0]),
            ),
            (
                "max",
                MutationType::Max,
                Some(&[0x00, 0x01]),
                &[0xff, 0x00],
                Some(&[0x00, 0x01]),
            ),
            (
                "min",
                MutationType::Min,
                Some(&[0x00, 0x01]),
                &[0xff, 0x00],
                Some(&[0xff, 0x00]),
            ),
            (
                "min_missing",
                MutationType::Min,
                None,
                &[0x07],
                Some(&[0x07]),
            ),
            (
                "byte_max",
                MutationType::ByteMax,
                Some(b"b"),
                b"ab",
                Some(b"b"),
            ),
            (
                "byte_min",
                MutationType::ByteMin,
                Some(b"b"),
                b"ab",
                Some(b"ab"),
            ),
            (
                "append",
                MutationType::AppendIfFits,
                Some(b"ab"),
                b"cd",
                Some(b"abcd"),
            ),
            (
                "cac_equal",
                MutationType::CompareAndClear,
                Some(b"v"),
                b"v",
                None,
            ),
            (
                "cac_differ",
                MutationType::CompareAndClear,
                Some(b"v"),
                b"w",
                Some(b"v"),
            ),
        ];
        let existing: Vec<(&str, &[u8])> = cases
            .iter()
            .filter_map(|(n, _, e, _, _)| e.map(|e| (*n, e)))
            .collect();
        put(&t, &existing).await;
        let tx = t.db.create_transaction();
        for (n, op, _, operand, _) in &cases {
            tx.atomic_op(t.k(n), operand, *op);
        }
        tx.commit().await.unwrap();
        for (n, _, _, _, want) in &cases {
            assert_eq!(read(&t, n).await.as_deref(), *want, "{} on {}", n, t.name);
        }
    });
}

#[test]
fn versionstamps_order_commits() {
    run(|t| async move {
        let (mut stamps, mut versions) = (Vec::new(), Vec::new());
        for i in 0..3u8 {
            let tx = t.db.create_transaction();
            let mut key = t.k("vs/");
            let pos = key.len() as u32;
            key.extend_from_slice(&[0u8; 10]);
            key.extend_from_slice(&pos.to_le_bytes());
            tx.atomic_op(&key, [i], MutationType::SetVersionstampedKey);
            let mut val = b"stamp:".to_vec();
            val.extend_from_slice(&[0u8; 10]);
            val.extend_from_slice(&6u32.to_le_bytes());
            tx.atomic_op(
                t.k(&format!("vsv{i}")),
                &val,
                MutationType::SetVersionstampedValue,
            );
            versions.push(tx.commit().await.unwrap());
            stamps.push(tx.versionstamp().await.unwrap().unwrap());
        }
        assert!(stamps.windows(2).all(|w| w[0] < w[1]), "stamps grow");
        let tx = t.db.create_transaction();
        let mut end = t.k("vs/");
        end.push(0xff);
        let rows = tx.get_range(&t.k("vs/"), &end, 0).await.unwrap();
        assert_eq!(rows.len(), 3);
        for (i, kv) in rows.iter().enumerate() {
            // The server placed the stamp: 8 bytes of the commit version the client was
            // told, big-endian, then the batch index; the offset is gone.
            let stored = &kv.key[t.k("vs/").len()..];
            assert_eq!(stored.len(), 10, "{}: {stored:x?}", t.name);
            let at = i64::from_be_bytes(stored[..8].try_into().unwrap());
            assert_eq!(at, versions[i], "{}: stamped at another version", t.name);
            // What the client reports is what the server stored.
            assert_eq!(stored, &stamps[i][..], "{}", t.name);
            assert_eq!(kv.value.as_ref(), &[i as u8]);
            let v = tx.get(t.k(&format!("vsv{i}"))).await.unwrap().unwrap();
            assert_eq!(&v[..6], b"stamp:");
            assert_eq!(
                &v[6..],
                stored,
                "{}: the value's stamp is the key's",
                t.name
            );
        }
    });
}

#[test]
fn conflicting_transactions() {
    run(|t| async move {
        put(&t, &[("c", b"0")]).await;
        // A reads, B writes and commits, A writes: A fails with not_committed.
        let a = t.db.create_transaction();
        assert_eq!(a.get(t.k("c")).await.unwrap().as_deref(), Some(&b"0"[..]));
        let b = t.db.create_transaction();
        b.set(t.k("c"), b"B");
        b.commit().await.unwrap();
        a.set(t.k("c"), b"A");
        assert_eq!(
            code(&a.commit().await.unwrap_err()),
            ErrorCode::NOT_COMMITTED,
            "{}",
            t.name
        );
        // A snapshot read does not conflict.
        let s = t.db.create_transaction();
        s.snapshot_get(t.k("c")).await.unwrap();
        let w = t.db.create_transaction();
        w.set(t.k("c"), b"W");
        w.commit().await.unwrap();
        s.set(t.k("other"), b"S");
        s.commit().await.unwrap();
        // An explicit read conflict range conflicts like a read.
        let e = t.db.create_transaction();
        e.get_read_version().await.unwrap();
        e.add_conflict_range(t.k("r"), t.k("s"), ConflictRangeType::Read)
            .unwrap();
        e.set(t.k("x"), b"E");
        let w = t.db.create_transaction();
        w.set(t.k("rr"), b"W");
        w.commit().await.unwrap();
        assert_eq!(
            code(&e.commit().await.unwrap_err()),
            ErrorCode::NOT_COMMITTED
        );
        // Reading a key this transaction wrote adds no read conflict (RYW).
        let own = t.db.create_transaction();
        own.set(t.k("own"), b"1");
        assert_eq!(
            own.get(t.k("own")).await.unwrap().as_deref(),
            Some(&b"1"[..])
        );
        let w = t.db.create_transaction();
        w.set(t.k("own"), b"2");
        w.commit().await.unwrap();
        own.commit().await.unwrap();
        assert_eq!(read(&t, "own").await.as_deref(), Some(&b"1"[..]));
    });
}

#[test]
fn concurrent_readers_exactly_one_commits() {
    run(|t| async move {
        put(&t, &[("n", b"initial")]).await;
        let txs: Vec<_> = (0..5).map(|_| t.db.create_transaction()).collect();
        for tx in &txs {
            assert_eq!(
                tx.get(t.k("n")).await.unwrap().as_deref(),
                Some(&b"initial"[..])
            );
        }
        let mut ok = 0;
        let mut conflicts = 0;
        for (i, tx) in txs.iter().enumerate() {
            tx.set(t.k("n"), format!("tx{i}").as_bytes());
            match tx.commit().await {
                Ok(_) => ok += 1,
                Err(e) if code(&e) == ErrorCode::NOT_COMMITTED => conflicts += 1,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!((ok, conflicts), (1, 4), "{}", t.name);
        assert_eq!(
            read(&t, "n").await.as_deref(),
            Some(&b"tx0"[..]),
            "{}: the first committer wins",
            t.name
        );
    });
}

#[test]
fn retry_loop_counts_exactly_under_contention() {
    run(|t| async move {
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let db = t.db.clone();
            let key = t.k("counter");
            tasks.push(tokio::spawn(async move {
                for _ in 0..10 {
                    db.run(|tx| {
                        let key = key.clone();
                        async move {
                            let v = tx.get(&key).await?;
                            let n = v.map_or(0, |v| u64::from_le_bytes(v[..8].try_into().unwrap()));
                            tx.set(&key, (n + 1).to_le_bytes());
                            Ok(())
                        }
                    })
                    .await
                    .unwrap();
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let v = read(&t, "counter").await.unwrap();
        assert_eq!(
            u64::from_le_bytes(v[..8].try_into().unwrap()),
            40,
            "{}",
            t.name
        );
    });
}

#[test]
fn watch_fires_on_change_and_cancels() {
    run(|t| async move {
        put(&t, &[("w", b"before")]).await;
        let tx = t.db.create_transaction();
        let watch = tx.watch(t.k("w"));
        tx.commit().await.unwrap();
        let dropped = {
            let tx = t.db.create_transaction();
            let w = tx.watch(t.k("w2"));
            tx.commit().await.unwrap();
            w
        };
        drop(dropped); // cancelled: must not disturb anything
        tokio::time::sleep(Duration::from_millis(50)).await;
        let writer = t.db.create_transaction();
        writer.set(t.k("w"), b"after");
        let v = writer.commit().await.unwrap();
        let fired = tokio::time::timeout(Duration::from_secs(10), watch)
            .await
            .expect("the watch fires")
            .unwrap();
        // The storage server answers at its version when it noticed: the change's or a
        // later one. Once the watch has fired the committed version has caught up with it
        // (libfdb_c's `waitForCommittedVersion`): a new read version is no older, and sees
        // the change.
        assert!(
            fired >= v,
            "{}: the watch fired at {fired}, before the change at {v}",
            t.name
        );
        let after = t.db.create_transaction();
        assert!(
            after.get_read_version().await.unwrap() >= fired,
            "{}",
            t.name
        );
        assert_eq!(
            after.get(t.k("w")).await.unwrap().as_deref(),
            Some(&b"after"[..])
        );
        // A watch of a transaction that is dropped before commit fails.
        let tx = t.db.create_transaction();
        let w = tx.watch(t.k("w"));
        tx.reset();
        let e = tokio::time::timeout(Duration::from_secs(10), w)
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(code(&e), ErrorCode::TRANSACTION_CANCELLED);
    });
}

#[test]
fn size_and_key_errors() {
    run(|t| async move {
        let tx = t.db.create_transaction();
        tx.set(vec![b'k'; 10_001], b"v");
        assert_eq!(
            code(&tx.commit().await.unwrap_err()),
            ErrorCode::KEY_TOO_LARGE,
            "{}",
            t.name
        );
        let tx = t.db.create_transaction();
        tx.set(t.k("big"), vec![0u8; 100_001]);
        assert_eq!(
            code(&tx.get(t.k("x")).await.unwrap_err()),
            ErrorCode::VALUE_TOO_LARGE
        );
        let tx = t.db.create_transaction();
        tx.set(b"\xff/system", b"v");
        assert_eq!(
            code(&tx.commit().await.unwrap_err()),
            ErrorCode::KEY_OUTSIDE_LEGAL_RANGE
        );
        let tx = t.db.create_transaction();
        tx.set_option(TransactionOption::SizeLimit(1000)).unwrap();
        for i in 0..20 {
            tx.set(t.k(&format!("sz{i}")), [0u8; 100]);
        }
        assert_eq!(
            code(&tx.commit().await.unwrap_err()),
            ErrorCode::TRANSACTION_TOO_LARGE
        );
        let tx = t.db.create_transaction();
        assert_eq!(
            code(&tx.get(b"\xff/x").await.unwrap_err()),
            ErrorCode::KEY_OUTSIDE_LEGAL_RANGE
        );
        // on_error refuses what it must not retry, and that cancels the transaction until
        // it is reset (RYW `onError`; libfdb_c 7.3.77 answers transaction_cancelled).
        let tx = t.db.create_transaction();
        assert_eq!(
            code(&tx.on_error(ErrorCode::KEY_TOO_LARGE).await.unwrap_err()),
            ErrorCode::KEY_TOO_LARGE
        );
        assert_eq!(
            code(&tx.on_error(ErrorCode::NOT_COMMITTED).await.unwrap_err()),
            ErrorCode::TRANSACTION_CANCELLED
        );
        tx.reset();
        tx.on_error(ErrorCode::NOT_COMMITTED).await.unwrap();
    });
}

#[test]
fn timeout_and_retry_limit_options() {
    run(|t| async move {
        let tx = t.db.create_transaction();
        tx.set_option(TransactionOption::RetryLimit(Some(2)))
            .unwrap();
        tx.on_error(ErrorCode::NOT_COMMITTED).await.unwrap();
        tx.on_error(ErrorCode::NOT_COMMITTED).await.unwrap();
        let e = tx.on_error(ErrorCode::NOT_COMMITTED).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::NOT_COMMITTED, "{}", t.name);
        let tx = t.db.create_transaction();
        tx.set_option(TransactionOption::Timeout(Duration::from_millis(100)))
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let e = tx.get(t.k("a")).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::TRANSACTION_TIMED_OUT);
        assert_eq!(
            code(
                &tx.on_error(ErrorCode::TRANSACTION_TIMED_OUT)
                    .await
                    .unwrap_err()
            ),
            ErrorCode::TRANSACTION_TIMED_OUT
        );
    });
}

#[test]
fn limited_ranges_spanning_many_batches() {
    run(|t| async move {
        let value = [7u8; 100];
        t.db.run(|tx| {
            let t = &t;
            async move {
                for i in 0..300 {
                    tx.set(t.k(&format!("r/{i:03}")), value);
                }
                Ok(())
            }
        })
        .await
        .unwrap();
        let tx = t.db.create_transaction();
        // The iterator mode fetches ~4 KB, then more per batch: 250 rows need several.
        let rows = tx.get_range(&t.k("r/"), &t.k("r0"), 250).await.unwrap();
        assert_eq!(rows.len(), 250, "{}", t.name);
        assert_eq!(rows[249].key, t.kb("r/249"));
        let all = tx.get_range(&t.k("r/"), &t.k("r0"), 0).await.unwrap();
        assert_eq!(all.len(), 300);
        let rev = tx
            .get_range_with(
                KeySelector::first_greater_or_equal(t.kb("r/")),
                KeySelector::first_greater_or_equal(t.kb("r0")),
                RangeOptions {
                    limit: 120,
                    reverse: true,
                    ..RangeOptions::default()
                },
                false,
            )
            .await
            .unwrap();
        assert_eq!(rev.len(), 120);
        assert_eq!(rev[0].key, t.kb("r/299"));
        assert_eq!(rev[119].key, t.kb("r/180"));
        // A small streaming mode and a byte target still return everything in batches.
        let small = tx
            .get_range_with(
                KeySelector::first_greater_or_equal(t.kb("r/")),
                KeySelector::first_greater_or_equal(t.kb("r0")),
                RangeOptions {
                    mode: fdb_protocol::StreamingMode::Small,
                    ..RangeOptions::default()
                },
                false,
            )
            .await
            .unwrap();
        assert_eq!(small.len(), 300);
    });
}

#[test]
fn status_json_special_key() {
    run(|t| async move {
        let tx = t.db.create_transaction();
        let doc = tx
            .get(b"\xff\xff/status/json")
            .await
            .unwrap()
            .expect("a document");
        let v: serde_json::Value = serde_json::from_slice(&doc).expect("valid JSON");
        let client = &v["client"];
        assert_eq!(
            client["coordinators"]["quorum_reachable"], true,
            "{}",
            t.name
        );
        assert_eq!(client["database_status"]["available"], true);
        // The cluster's protocol, whichever supported one it speaks (7.3 on the test
        // cluster; a real cluster may be 7.4), and the coordinators answer with the same.
        let cluster = &v["cluster"];
        let supported: Vec<String> = fdb_protocol::version::Protocol::SUPPORTED
            .iter()
            .map(|p| format!("{:x}", p.version().version()))
            .collect();
        let protocol = cluster["protocol_version"].as_str().unwrap();
        assert!(supported.iter().any(|s| s == protocol), "{protocol}");
        for c in client["coordinators"]["coordinators"].as_array().unwrap() {
            assert_eq!(c["reachable"], true);
            assert_eq!(c["protocol"], protocol);
        }
        assert!(cluster["connection_string"].as_str().unwrap().contains('@'));
    });
}

#[test]
fn a_committed_transaction_is_done_until_reset() {
    run(|t| async move {
        let tx = t.db.create_transaction();
        tx.set(t.k("done"), b"1");
        tx.commit().await.unwrap();
        let e = tx.get(t.k("done")).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::USED_DURING_COMMIT, "{}", t.name);
        assert_eq!(
            code(&tx.commit().await.unwrap_err()),
            ErrorCode::USED_DURING_COMMIT
        );
        tx.reset();
        assert_eq!(
            tx.get(t.k("done")).await.unwrap().as_deref(),
            Some(&b"1"[..])
        );
        // A failed commit too: on_error makes it usable again.
        let a = t.db.create_transaction();
        a.get(t.k("done")).await.unwrap();
        let b = t.db.create_transaction();
        b.set(t.k("done"), b"2");
        b.commit().await.unwrap();
        a.set(t.k("done"), b"3");
        let e = a.commit().await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::NOT_COMMITTED);
        a.on_error(code(&e)).await.unwrap();
        assert_eq!(
            a.get(t.k("done")).await.unwrap().as_deref(),
            Some(&b"2"[..])
        );
        // Used after the failed commit, it stays finished: on_error then fails with
        // used_during_commit too (RYW `checkUsedDuringCommit` sets resetPromise, which
        // `onError` rethrows; libfdb_c 7.3.77 does so), and only reset helps.
        a.set(t.k("done"), b"3");
        let b = t.db.create_transaction();
        b.set(t.k("done"), b"4");
        b.commit().await.unwrap();
        let e = a.commit().await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::NOT_COMMITTED);
        assert_eq!(
            code(&a.get(t.k("done")).await.unwrap_err()),
            ErrorCode::USED_DURING_COMMIT
        );
        assert_eq!(
            code(&a.on_error(code(&e)).await.unwrap_err()),
            ErrorCode::USED_DURING_COMMIT
        );
        a.reset();
        assert_eq!(
            a.get(t.k("done")).await.unwrap().as_deref(),
            Some(&b"4"[..])
        );
    });
}

#[test]
fn conflicting_keys_are_reported() {
    run(|t| async move {
        put(&t, &[("ck1", b"1"), ("ck2", b"2")]).await;
        let a = t.db.create_transaction();
        a.set_option(TransactionOption::ReportConflictingKeys)
            .unwrap();
        a.get(t.k("ck1")).await.unwrap();
        a.get(t.k("ck2")).await.unwrap();
        let b = t.db.create_transaction();
        b.set(t.k("ck2"), b"B");
        b.commit().await.unwrap();
        a.set(t.k("other"), b"A");
        let e = a.commit().await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::NOT_COMMITTED, "{}", t.name);
        let prefix = b"\xff\xff/transaction/conflicting_keys/";
        let rows = a
            .get_range(prefix, b"\xff\xff/transaction/conflicting_keys0", 0)
            .await
            .unwrap();
        let mut k2 = prefix.to_vec();
        k2.extend_from_slice(&t.k("ck2"));
        let mut k2_end = k2.clone();
        k2_end.push(0);
        let got: Vec<(Vec<u8>, Vec<u8>)> = rows
            .iter()
            .map(|kv| (kv.key.to_vec(), kv.value.to_vec()))
            .collect();
        assert_eq!(got, vec![(k2, b"1".to_vec()), (k2_end, b"0".to_vec())]);
        // They survive the retry and a reset (NativeAPI's `TransactionState::cloneAndReset`
        // keeps them; libfdb_c 7.3.77 reads them back after both).
        a.on_error(code(&e)).await.unwrap();
        let after_retry = a
            .get_range(prefix, b"\xff\xff/transaction/conflicting_keys0", 0)
            .await
            .unwrap();
        assert_eq!(after_retry, rows, "after on_error");
        a.reset();
        let after_reset = a
            .get_range(prefix, b"\xff\xff/transaction/conflicting_keys0", 0)
            .await
            .unwrap();
        assert_eq!(after_reset, rows, "after reset");
        // Without the option nothing is reported.
        let c = t.db.create_transaction();
        c.get(t.k("ck1")).await.unwrap();
        let d = t.db.create_transaction();
        d.set(t.k("ck1"), b"D");
        d.commit().await.unwrap();
        c.set(t.k("other"), b"C");
        assert_eq!(
            code(&c.commit().await.unwrap_err()),
            ErrorCode::NOT_COMMITTED
        );
        let rows = c
            .get_range(prefix, b"\xff\xff/transaction/conflicting_keys0", 0)
            .await
            .unwrap();
        assert!(rows.is_empty());
    });
}

#[test]
fn database_wide_transaction_defaults() {
    run(|t| async move {
        t.db.set_transaction_defaults(vec![
            TransactionOption::Timeout(Duration::from_millis(100)),
            TransactionOption::RetryLimit(Some(0)),
        ])
        .unwrap();
        let tx = t.db.create_transaction();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let e = tx.get(t.k("a")).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::TRANSACTION_TIMED_OUT, "{}", t.name);
        let tx = t.db.create_transaction();
        let e = tx.on_error(ErrorCode::NOT_COMMITTED).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::NOT_COMMITTED, "retry limit 0");
        t.db.set_transaction_defaults(Vec::new()).unwrap();
        let tx = t.db.create_transaction();
        tx.on_error(ErrorCode::NOT_COMMITTED).await.unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        tx.get(t.k("a")).await.unwrap();
    });
}
