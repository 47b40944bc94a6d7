//! Data distribution moving shards one at a time, as fdbserver's does after an `exclude`:
//! while it runs some shards answer from their new servers and the others still from the
//! old ones, and a client whose location cache predates a move gets `wrong_shard_server`
//! for that shard only. Range reads spanning many shards (forward and reverse, in small
//! batches, so a read is cut by moves between its batches), point reads and writes across
//! all the shards must come out exactly right: no row lost, none twice, none out of order.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fdb_driver_tokio::{Database, Transaction};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::{KeySelector, RangeCursor, RangeOptions, StreamingMode, TransactionOption};
use fdb_tests::cluster::{Role, TestCluster, TestClusterBuilder};

const LIMIT: Duration = Duration::from_secs(30);
const ROWS: usize = 240;
/// Rows per shard: 20 shards over the rows, dealt round robin to the servers.
const PER_SHARD: usize = 12;

fn row(i: usize) -> Vec<u8> {
    format!("row/{i:03}").into_bytes()
}

fn cluster(b: TestClusterBuilder) -> TestCluster {
    b.storage_servers(3)
        .replication(1)
        .split_points((1..ROWS / PER_SHARD).map(|s| row(s * PER_SHARD)))
        .start()
}

fn db(c: &TestCluster) -> Database {
    Database::from_cluster_file(ClusterFile::parse(&c.cluster_file_string()).unwrap(), 5)
        .expect("the driver starts")
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f).await.expect("timed out")
}

/// `exclude`: the commit `fdbcli exclude` makes.
async fn exclude(db: &Database, addr: std::net::SocketAddr) {
    let key = [&b"\xff/conf/excluded/"[..], addr.to_string().as_bytes()].concat();
    within(db.run(|tx| {
        let key = key.clone();
        async move {
            tx.set_option(TransactionOption::AccessSystemKeys)?;
            tx.set(&key, b"");
            Ok(())
        }
    }))
    .await
    .unwrap();
}

type Rows = BTreeMap<Vec<u8>, Vec<u8>>;

/// Every row under `row/`, batch by batch in `Small` batches (about ten rows each), calling
/// `between` after each batch with the batch's number.
async fn read_rows(
    tx: &Transaction,
    reverse: bool,
    mut between: impl FnMut(usize),
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let opts = RangeOptions {
        mode: StreamingMode::Small,
        reverse,
        ..RangeOptions::default()
    };
    let mut cursor = RangeCursor::new(
        KeySelector::first_greater_or_equal(&b"row/"[..]),
        KeySelector::first_greater_or_equal(&b"row0"[..]),
        opts,
    );
    let mut n = 0;
    while let Some((b, e, o)) = cursor.next_request() {
        let batch = within(tx.get_range_batch(b, e, o, false)).await.unwrap();
        cursor.feed(batch);
        between(n);
        n += 1;
    }
    cursor
        .into_rows()
        .into_iter()
        .map(|kv| (kv.key.to_vec(), kv.value.to_vec()))
        .collect()
}

/// `rows` is exactly `model`, in key order (reversed for a reverse read).
fn check(rows: &[(Vec<u8>, Vec<u8>)], model: &Rows, reverse: bool, what: &str) {
    let mut want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    if reverse {
        want.reverse();
    }
    if rows != want.as_slice() {
        let got: Vec<String> = rows
            .iter()
            .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
            .collect();
        panic!(
            "{what}: {} rows, wanted {}: {got:?}",
            rows.len(),
            want.len()
        );
    }
}

async fn load(db: &Database) -> Rows {
    let model: Rows = (0..ROWS)
        .map(|i| (row(i), format!("v{i}-0").into_bytes()))
        .collect();
    let m = model.clone();
    within(db.run(|tx| {
        let m = m.clone();
        async move {
            for (k, v) in &m {
                tx.set(k, v);
            }
            Ok(())
        }
    }))
    .await
    .unwrap();
    model
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_reads_cut_by_shard_moves_see_every_row_once() {
    // The moves are made by hand between batches (the delay never runs out).
    let c = cluster(TestCluster::builder().data_move_delay(Duration::from_secs(3600)));
    let db = db(&c);
    let mut model = load(&db).await;
    let gone = c.servers_of(&row(0))[0];
    let on_gone = c
        .shards()
        .iter()
        .filter(|s| s.servers.contains(&gone))
        .count();
    assert!(on_gone >= 6, "{on_gone} shards on the server to exclude");
    // Every location cached before the exclude.
    let tx = db.create_transaction();
    check(
        &read_rows(&tx, false, |_| {}).await,
        &model,
        false,
        "before",
    );
    exclude(&db, c.addr(Role::Storage(gone))).await;
    let before = c.shards();
    assert!(
        before.iter().any(|s| s.servers.contains(&gone)),
        "nothing moved yet"
    );
    let refused = c.wrong_shard_replies();
    let mut moves = 0;
    for round in 1.. {
        let tx = db.create_transaction();
        // A move in the middle of each read: ahead of a forward read's cursor, behind or
        // ahead of a reverse one's, depending on the round.
        let at = round % 7;
        let mut moved = false;
        let forward = read_rows(&tx, false, |n| {
            if n == at {
                moved |= c.move_next_shard();
            }
        })
        .await;
        check(&forward, &model, false, &format!("round {round}, forward"));
        let backward = read_rows(&tx, true, |n| {
            if n == at + 5 {
                moved |= c.move_next_shard();
            }
        })
        .await;
        check(&backward, &model, true, &format!("round {round}, reverse"));
        // Point reads in every shard, at the transaction's read version.
        for i in (round % PER_SHARD..ROWS).step_by(PER_SHARD) {
            let v = within(tx.get(row(i))).await.unwrap();
            assert_eq!(v.as_deref(), model.get(&row(i)).map(|v| &v[..]), "row {i}");
        }
        // Writes across the shards, then the next round reads them.
        let written: Vec<usize> = ((round * 5) % ROWS..ROWS).step_by(17).collect();
        for &i in &written {
            tx.set(row(i), format!("v{i}-{round}"));
        }
        within(tx.commit()).await.unwrap();
        for &i in &written {
            model.insert(row(i), format!("v{i}-{round}").into_bytes());
        }
        if moved {
            moves += 1;
        } else {
            break;
        }
    }
    assert!(moves >= on_gone / 2, "{moves} rounds moved shards");
    assert!(c.shards().iter().all(|s| !s.servers.contains(&gone)));
    assert!(
        c.wrong_shard_replies() > refused,
        "the client never read a moved shard from its old server"
    );
    let tx = db.create_transaction();
    check(&read_rows(&tx, false, |_| {}).await, &model, false, "after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfers_across_shards_while_shards_move_keep_every_row() {
    // Four clients move amounts between rows of different shards, reading the whole range
    // in each transaction, while the shards move one by one under them: each move waits
    // for more reads to finish, so reads and commits are in flight across every move.
    let c = Arc::new(cluster(
        TestCluster::builder().data_move_delay(Duration::from_secs(3600)),
    ));
    let db = db(&c);
    within(db.run(|tx| async move {
        for i in 0..ROWS {
            tx.set(row(i), 100u64.to_le_bytes());
        }
        Ok(())
    }))
    .await
    .unwrap();
    let gone = c.servers_of(&row(0))[0];
    let refused = c.wrong_shard_replies();
    exclude(&db, c.addr(Role::Storage(gone))).await;
    let reads = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for w in 0..4usize {
        let (db, reads, stop) = (db.clone(), reads.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Acquire) {
                let (from, to) = ((w * 31 + n * 7) % ROWS, (w * 53 + n * 11 + 5) % ROWS);
                let reverse = n % 2 == 1;
                let rows = within(db.run(|tx| async move {
                    let rows = read_rows(&tx, reverse, |_| {}).await;
                    let get = |i: usize| {
                        let k = row(i);
                        let v = &rows.iter().find(|(rk, _)| *rk == k).expect("row").1;
                        u64::from_le_bytes(v[..].try_into().expect("8 bytes"))
                    };
                    if from != to {
                        let (a, b) = (get(from), get(to));
                        let amount = a.min(3);
                        tx.set(row(from), (a - amount).to_le_bytes());
                        tx.set(row(to), (b + amount).to_le_bytes());
                    }
                    Ok(rows)
                }))
                .await
                .unwrap();
                let mut keys: Vec<Vec<u8>> = rows.iter().map(|(k, _)| k.clone()).collect();
                if reverse {
                    keys.reverse();
                }
                let want: Vec<Vec<u8>> = (0..ROWS).map(row).collect();
                assert!(
                    keys == want,
                    "worker {w}, read {n}: rows lost, doubled or out of order"
                );
                let sum: u64 = rows
                    .iter()
                    .map(|(_, v)| u64::from_le_bytes(v[..].try_into().expect("8 bytes")))
                    .sum();
                assert_eq!(sum, 100 * ROWS as u64, "worker {w}, read {n}");
                reads.fetch_add(1, Ordering::AcqRel);
                n += 1;
            }
        }));
    }
    let mut moves = 0;
    loop {
        let seen = reads.load(Ordering::Acquire);
        within(async {
            while reads.load(Ordering::Acquire) < seen + 3 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        if !c.move_next_shard() {
            break;
        }
        moves += 1;
    }
    stop.store(true, Ordering::Release);
    for t in tasks {
        within(t).await.expect("a worker failed");
    }
    assert!(moves >= 6, "{moves} shards moved");
    assert!(c.shards().iter().all(|s| !s.servers.contains(&gone)));
    assert!(
        c.wrong_shard_replies() > refused,
        "the clients never read a moved shard from its old server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_moves_shards_one_at_a_time_in_key_order() {
    // On the cluster's own clock: whenever one looks, the shards moved off the excluded
    // server are the first ones of its shards in key order, the others still on it.
    let c = cluster(
        TestCluster::builder()
            .data_move_delay(Duration::from_millis(20))
            .data_move_step(Duration::from_millis(20)),
    );
    let db = db(&c);
    let gone = c.servers_of(&row(0))[0];
    let held: Vec<Vec<u8>> = c
        .shards()
        .into_iter()
        .filter(|s| s.servers.contains(&gone))
        .map(|s| s.begin)
        .collect();
    exclude(&db, c.addr(Role::Storage(gone))).await;
    let mut states = std::collections::BTreeSet::new();
    within(async {
        loop {
            let shards = c.shards();
            let still: Vec<bool> = held
                .iter()
                .map(|b| {
                    shards
                        .iter()
                        .any(|s| s.begin == *b && s.servers.contains(&gone))
                })
                .collect();
            let moved = still.iter().take_while(|s| !**s).count();
            assert!(
                still[moved..].iter().all(|s| *s),
                "not in key order: {still:?}"
            );
            states.insert(moved);
            if moved == held.len() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    // Each moved shard went to a server that was not excluded, alone (replication 1).
    for s in c.shards() {
        assert_eq!(s.servers.len(), 1);
        assert_ne!(s.servers[0], gone);
    }
    assert!(states.contains(&held.len()));
}
