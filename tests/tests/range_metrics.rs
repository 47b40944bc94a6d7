//! `get_estimated_range_size_bytes` and `get_range_split_points` on the test cluster and —
//! when `FDB_CLUSTER_FILE` is set — on a real FoundationDB 7.3 cluster (under a fresh random
//! key prefix that is cleared afterwards).
//!
//! The test cluster's byte sample is exact (every pair at `key + value` bytes), so there the
//! expected numbers and split points are written out from the data and the shard map. A real
//! storage server samples a pair of `size = key + value` bytes with probability
//! `p = size / ((key + 100) * 250)` and counts a sampled pair as `size / p` bytes
//! (`isKeyValueInSample`, `BYTE_SAMPLING_FACTOR` 250, `BYTE_SAMPLING_OVERHEAD` 100): with the
//! data here (300 pairs of about 10,040 bytes, p ≈ 0.29) a whole-range estimate rests on about
//! 85 sampled pairs (standard deviation about 9%), so the real cluster is held to bands that
//! are several standard deviations wide, and a single pair is estimated at either 0 or
//! exactly `(key + 100) * 250`.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use fdb_driver_tokio::{Database, Error};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::TransactionOption;
use fdb_tests::cluster::{key_after, RequestKind, TestCluster, DEFAULT_SPLIT_POINTS};
use fdb_tests::dual::Target;

const LIMIT: Duration = Duration::from_secs(60);
/// Pairs written by [`fill`], and their value size.
const PAIRS: usize = 300;
const VALUE_LEN: usize = 10_000;
const CHUNK: i64 = 100_000;

fn run<F, Fut>(scenario: F)
where
    F: Fn(Target) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    fdb_tests::dual::run("rust-fdb-metrics", LIMIT, scenario)
}

fn code(e: &Error) -> ErrorCode {
    e.code().unwrap_or_else(|| panic!("not an FDB error: {e}"))
}

/// The `i`-th key of [`fill`]: `a0000` ... `z0299`, spread evenly over `a`..`z`, so on the
/// test cluster they cross the shards at `h`, `p` and `w` (three storage servers).
fn name(i: usize) -> String {
    format!("{}{:04}", (b'a' + (i * 26 / PAIRS) as u8) as char, i)
}

/// Writes [`PAIRS`] pairs of [`VALUE_LEN`] bytes, 50 per transaction; returns the keys.
async fn fill(t: &Target) -> Vec<Vec<u8>> {
    let keys: Vec<Vec<u8>> = (0..PAIRS).map(|i| t.k(&name(i))).collect();
    for batch in keys.chunks(50) {
        let batch = batch.to_vec();
        t.db.run(|tx| {
            let batch = batch.clone();
            async move {
                let v = vec![b'v'; VALUE_LEN];
                for k in &batch {
                    tx.set(k, &v);
                }
                Ok(())
            }
        })
        .await
        .unwrap();
    }
    keys
}

fn pair_size(key: &[u8]) -> i64 {
    (key.len() + VALUE_LEN) as i64
}

/// The exact bytes of the keys in `[begin, end)`.
fn true_size(keys: &[Vec<u8>], begin: &[u8], end: &[u8]) -> i64 {
    keys.iter()
        .filter(|k| &k[..] >= begin && &k[..] < end)
        .map(|k| pair_size(k))
        .sum()
}

async fn estimate(t: &Target, begin: &[u8], end: &[u8]) -> i64 {
    t.db.create_transaction()
        .get_estimated_range_size_bytes(begin, end)
        .await
        .unwrap_or_else(|e| panic!("{}: estimate: {e}", t.name))
}

/// A real storage server updates its byte sample as the mutations reach it, a little after
/// the commit: ask until the estimate of `[begin, end)` is at least `floor` (10 s at most).
async fn settled_estimate(t: &Target, begin: &[u8], end: &[u8], floor: i64) -> i64 {
    let mut est = estimate(t, begin, end).await;
    for _ in 0..100 {
        if est >= floor {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        est = estimate(t, begin, end).await;
    }
    est
}

/// The exact byte sample's split points (FDB's `getSplitPoints` walk): within each shard's
/// part of `[begin, end)`, a pair that would take the chunk past `CHUNK` starts the next one.
/// With equal pairs of `s` bytes that is every `CHUNK / s`-th key of the part.
fn expected_split_points(keys: &[Vec<u8>], begin: &[u8], end: &[u8]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<Vec<u8>> = vec![begin.to_vec()];
    cuts.extend(
        DEFAULT_SPLIT_POINTS
            .iter()
            .filter(|b| **b > begin && **b < end)
            .map(|b| b.to_vec()),
    );
    cuts.push(end.to_vec());
    let mut out = vec![begin.to_vec()];
    for (j, part) in cuts.windows(2).enumerate() {
        if j > 0 {
            out.push(part[0].clone());
        }
        let in_part: Vec<&Vec<u8>> = keys
            .iter()
            .filter(|k| **k >= part[0] && **k < part[1])
            .collect();
        if let Some(first) = in_part.first() {
            let per_chunk = (CHUNK / pair_size(first)) as usize;
            out.extend(
                in_part
                    .iter()
                    .skip(per_chunk)
                    .step_by(per_chunk)
                    .map(|k| k.to_vec()),
            );
        }
    }
    out.push(end.to_vec());
    out
}

#[test]
fn estimate_is_close_to_the_stored_bytes() {
    run(|t| async move {
        let keys = fill(&t).await;
        let (begin, end) = (t.k("a"), t.k("{"));
        let all = true_size(&keys, &begin, &end);
        assert!(all > 3_000_000);
        let est = settled_estimate(&t, &begin, &end, all / 2).await;
        if t.exact {
            assert_eq!(est, all, "{}", t.name);
        } else {
            assert!(
                est >= all / 2 && est <= all * 2,
                "{}: {est} for {all}",
                t.name
            );
        }

        // Part of the range: letters h..o (a shard of its own on the test cluster).
        let (b, e) = (t.k("h"), t.k("p"));
        let part = true_size(&keys, &b, &e);
        let est = estimate(&t, &b, &e).await;
        if t.exact {
            assert_eq!(est, part, "{}", t.name);
        } else {
            assert!(
                est * 10 >= part * 3 && est <= part * 3,
                "{}: {est} for {part}",
                t.name
            );
        }

        // Across every shard, from before the first key to after the last.
        let est = estimate(&t, &t.k(""), &t.end()).await;
        if t.exact {
            assert_eq!(est, all, "{}", t.name);
        } else {
            assert!(est >= all / 2 && est <= all * 2, "{}: {est}", t.name);
        }

        // One pair: below the sample's granularity on a real cluster.
        let k = &keys[PAIRS / 2];
        let est = estimate(&t, k, &key_after(k)).await;
        if t.exact {
            assert_eq!(est, pair_size(k), "{}", t.name);
        } else {
            let weight = (k.len() as i64 + 100) * 250;
            assert!(
                est == 0 || (est - weight).abs() <= 1,
                "{}: {est}, not 0 or {weight}",
                t.name
            );
        }

        // Nothing stored there.
        assert_eq!(estimate(&t, &t.k("zz"), &t.end()).await, 0, "{}", t.name);
    });
}

#[test]
fn split_points_cut_chunks_of_the_asked_size() {
    run(|t| async move {
        let keys = fill(&t).await;
        let (begin, end) = (t.k("a"), t.k("{"));
        let all = true_size(&keys, &begin, &end);
        // Wait for a real cluster's sample to hold the data.
        settled_estimate(&t, &begin, &end, all / 2).await;
        let tx = t.db.create_transaction();
        let points: Vec<Vec<u8>> = tx
            .get_range_split_points(&begin, &end, CHUNK)
            .await
            .unwrap_or_else(|e| panic!("{}: split points: {e}", t.name))
            .iter()
            .map(|k| k.to_vec())
            .collect();
        assert_eq!(points.first(), Some(&begin), "{}", t.name);
        assert_eq!(points.last(), Some(&end), "{}", t.name);
        assert!(
            points.windows(2).all(|w| w[0] <= w[1]),
            "{}: not sorted",
            t.name
        );
        if t.exact {
            assert_eq!(
                points,
                expected_split_points(&keys, &begin, &end),
                "{}",
                t.name
            );
            // Every chunk holds at most CHUNK bytes.
            for w in points.windows(2) {
                assert!(true_size(&keys, &w[0], &w[1]) <= CHUNK, "{}", t.name);
            }
        } else {
            // A real server's chunk holds `CHUNK / ((key + 100) * 250)` sampled pairs (2
            // here) and the unsampled ones between them, about 1 / p ≈ 3.5 per sampled pair:
            // chunks of about 0.7 CHUNK on average; one past 5 CHUNK (50 pairs) has a
            // probability of about 1e-6. Chunks ending at a shard boundary may be small.
            let chunks = (points.len() - 1) as i64;
            let expected = all / CHUNK;
            assert!(
                chunks * 10 >= expected * 3 && chunks <= expected * 3 + 2,
                "{}: {chunks} chunks for {expected}",
                t.name
            );
            for w in points.windows(2) {
                let size = true_size(&keys, &w[0], &w[1]);
                assert!(size <= 5 * CHUNK, "{}: a chunk of {size}", t.name);
            }
        }
    });
}

/// A chunk larger than the range: its ends and the shard boundaries between them
/// (`getRangeSplitPoints` adds every shard's begin), here `h` on the test cluster. A real
/// cluster may split a shard meanwhile: its shard map is read before and after.
#[test]
fn split_points_of_a_small_range_are_its_ends_and_the_shard_boundaries() {
    run(|t| async move {
        put_one(&t, "g5").await;
        let (b, e) = (t.k("g"), t.k("i"));
        let tx = t.db.create_transaction();
        let mut tries = 0;
        let (points, want) = loop {
            let inside = boundaries_inside(&t, &b, &e).await;
            let points = tx
                .get_range_split_points(&b, &e, 1 << 40)
                .await
                .unwrap_or_else(|e| panic!("{}: split points: {e}", t.name));
            tries += 1;
            if inside == boundaries_inside(&t, &b, &e).await || tries == 5 {
                let mut want = vec![Bytes::from(b.clone())];
                want.extend(inside);
                want.push(Bytes::from(e.clone()));
                break (points, want);
            }
        };
        if t.exact {
            assert_eq!(want.len(), 3, "the test cluster has a boundary at h");
        }
        assert_eq!(points, want, "{}", t.name);
    });
}

async fn put_one(t: &Target, key: &str) {
    t.put(&t.k(key), b"v").await;
}

/// The shard boundaries strictly between `begin` and `end`: the test cluster's split
/// points, or what a real cluster's shard map (`\xff/keyServers/`, where the location
/// replies come from) holds.
async fn boundaries_inside(t: &Target, begin: &[u8], end: &[u8]) -> Vec<Bytes> {
    if t.exact {
        return DEFAULT_SPLIT_POINTS
            .iter()
            .filter(|p| **p > begin && **p < end)
            .map(|p| Bytes::copy_from_slice(p))
            .collect();
    }
    const KEY_SERVERS: &[u8] = b"\xff/keyServers/";
    let tx = t.db.create_transaction();
    tx.set_option(TransactionOption::ReadSystemKeys).unwrap();
    let rows = tx
        .get_range(
            &[KEY_SERVERS, begin].concat(),
            &[KEY_SERVERS, end].concat(),
            0,
        )
        .await
        .unwrap_or_else(|e| panic!("{}: the shard map: {e}", t.name));
    rows.iter()
        .map(|kv| kv.key.slice(KEY_SERVERS.len()..))
        .filter(|k| &k[..] > begin)
        .collect()
}

#[test]
fn refused_ranges() {
    run(|t| async move {
        let tx = t.db.create_transaction();
        let (a, b) = (t.k("a"), t.k("b"));
        let e = tx.get_estimated_range_size_bytes(&b, &a).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::INVERTED_RANGE, "{}", t.name);
        // libfdb_c fails its `ASSERT(!keys.empty())` in `getKeyRangeLocations`.
        let e = tx.get_estimated_range_size_bytes(&a, &a).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::INTERNAL_ERROR, "{}", t.name);
        let e = tx.get_range_split_points(&a, &a, CHUNK).await.unwrap_err();
        assert_eq!(code(&e), ErrorCode::INTERNAL_ERROR, "{}", t.name);
        let e = tx
            .get_range_split_points(&a, b"\xff\x00", CHUNK)
            .await
            .unwrap_err();
        assert_eq!(code(&e), ErrorCode::KEY_OUTSIDE_LEGAL_RANGE, "{}", t.name);
    });
}

/// Test cluster only: storage servers answering `wrong_shard_server` (injected, or because
/// the shard moved after the client cached its location), and errors the client must not
/// retry.
#[test]
fn wrong_shard_server_relocates_and_other_errors_fail() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cluster = TestCluster::start();
        let cf = ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
        let t = Target {
            name: "test cluster",
            db: Database::from_cluster_file(cf.clone(), 11).expect("the driver starts"),
            prefix: Vec::new(),
            exact: true,
            cluster: cf,
        };
        let keys = fill(&t).await;
        let (begin, end) = (t.k("a"), t.k("{"));
        let all = true_size(&keys, &begin, &end);
        let expected = expected_split_points(&keys, &begin, &end);
        // `[a, {)` lies in the shards a, h, p and w.
        cluster.reset_counters();
        assert_eq!(estimate(&t, &begin, &end).await, all);
        assert_eq!(cluster.requests(RequestKind::WaitMetrics), 4);

        // One shard's server says wrong_shard_server: that part alone is asked again.
        cluster.reset_counters();
        cluster.fail_next(RequestKind::WaitMetrics, 1, ErrorCode::WRONG_SHARD_SERVER);
        assert_eq!(estimate(&t, &begin, &end).await, all);
        assert_eq!(cluster.requests(RequestKind::WaitMetrics), 5);
        assert_eq!(cluster.requests(RequestKind::GetKeyServerLocations), 1);

        // Split points start over entirely.
        cluster.reset_counters();
        cluster.fail_next(
            RequestKind::GetRangeSplitPoints,
            1,
            ErrorCode::WRONG_SHARD_SERVER,
        );
        let tx = t.db.create_transaction();
        let points = tx
            .get_range_split_points(&begin, &end, CHUNK)
            .await
            .unwrap();
        assert_eq!(
            points,
            expected
                .iter()
                .cloned()
                .map(Bytes::from)
                .collect::<Vec<_>>()
        );
        assert_eq!(cluster.requests(RequestKind::GetRangeSplitPoints), 8);

        // The shard at h moves: its old server answers wrong_shard_server, and the client
        // finds the new one.
        let before = cluster.servers_of(b"h");
        let to = (before[0] + 1) % cluster.storage_server_count();
        cluster.move_shard(b"h", to);
        assert_eq!(estimate(&t, &begin, &end).await, all);
        let points = tx
            .get_range_split_points(&begin, &end, CHUNK)
            .await
            .unwrap();
        assert_eq!(
            points,
            expected
                .iter()
                .cloned()
                .map(Bytes::from)
                .collect::<Vec<_>>()
        );

        // Other errors are the caller's.
        cluster.fail_next(RequestKind::WaitMetrics, 1, ErrorCode::OPERATION_FAILED);
        let e =
            t.db.create_transaction()
                .get_estimated_range_size_bytes(&begin, &end)
                .await
                .unwrap_err();
        assert_eq!(code(&e), ErrorCode::OPERATION_FAILED);
        cluster.fail_next(
            RequestKind::GetRangeSplitPoints,
            1,
            ErrorCode::FUTURE_VERSION,
        );
        let e =
            t.db.create_transaction()
                .get_range_split_points(&begin, &end, CHUNK)
                .await
                .unwrap_err();
        assert_eq!(code(&e), ErrorCode::FUTURE_VERSION);
        // The estimate retries future_version.
        cluster.fail_next(RequestKind::WaitMetrics, 2, ErrorCode::FUTURE_VERSION);
        assert_eq!(estimate(&t, &begin, &end).await, all);
    });
}

/// The blocking mio driver gives the same answers.
#[test]
fn mio_driver() {
    let cluster = TestCluster::start();
    let cf = ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
    let db = fdb_driver_mio::Database::from_cluster_file(cf, 5).unwrap();
    let keys: Vec<Vec<u8>> = (0..PAIRS).map(|i| name(i).into_bytes()).collect();
    for batch in keys.chunks(50) {
        db.run(|tx| {
            for k in batch {
                tx.set(k, [b'v'; VALUE_LEN]);
            }
            Ok(())
        })
        .unwrap();
    }
    let (begin, end) = (b"a".to_vec(), b"{".to_vec());
    let tx = db.create_transaction();
    assert_eq!(
        tx.get_estimated_range_size_bytes(&begin, &end).unwrap(),
        true_size(&keys, &begin, &end)
    );
    let points: Vec<Vec<u8>> = tx
        .get_range_split_points(&begin, &end, CHUNK)
        .unwrap()
        .iter()
        .map(|k| k.to_vec())
        .collect();
    assert_eq!(points, expected_split_points(&keys, &begin, &end));
    let e = tx.get_estimated_range_size_bytes(&end, &begin).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::INVERTED_RANGE));
}
