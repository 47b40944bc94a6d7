//! The main job: a small application on FoundationDB through this client.
//!
//! Uses the cluster in `FDB_CLUSTER_FILE` when set; otherwise starts the in-process test
//! cluster on loopback (three storage servers, several shards). Then it runs, with the tokio
//! driver and the standard retry loop:
//!
//! * a page-view counter incremented by concurrent workers (read-modify-write, so they
//!   conflict and retry) and a second counter bumped with the atomic `add` (never conflicts);
//! * a work queue: producers enqueue jobs under versionstamped keys (ordered by commit),
//!   consumers pop the oldest job transactionally, each job is processed exactly once;
//! * a watch that wakes a waiter when a "done" flag is set;
//!
//! and the same counter through the blocking mio driver. It prints what it did and checks the
//! invariants (exact counts, every job exactly once). All keys live under `demo/`, which is
//! cleared at the start and at the end.

use std::time::{Duration, Instant};

use bytes::Bytes;
use fdb_driver_tokio::{Database, Error};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::MutationType;
use fdb_tests::cluster::TestCluster;

const WORKERS: u64 = 8;
const INCREMENTS: u64 = 25;
const JOBS: u64 = 40;

fn key(s: &str) -> Vec<u8> {
    format!("demo/{s}").into_bytes()
}

fn le(v: Option<Bytes>) -> u64 {
    v.map_or(0, |v| {
        let mut b = [0u8; 8];
        b[..v.len().min(8)].copy_from_slice(&v[..v.len().min(8)]);
        u64::from_le_bytes(b)
    })
}

async fn clear_all(db: &Database) -> Result<(), Error> {
    db.run(|tx| async move {
        tx.clear_range(b"demo/", b"demo0");
        Ok(())
    })
    .await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_cluster, cf) = match std::env::var("FDB_CLUSTER_FILE") {
        Ok(path) if !path.is_empty() => {
            println!("using the cluster in {path}");
            (None, ClusterFile::parse(&std::fs::read_to_string(&path)?)?)
        }
        _ => {
            let c = TestCluster::start();
            println!(
                "FDB_CLUSTER_FILE not set: started the in-process test cluster ({} storage servers, {} shards)",
                c.storage_server_count(),
                c.shards().len()
            );
            let cf = ClusterFile::parse(&c.cluster_file_string())?;
            (Some(c), cf)
        }
    };
    println!("cluster file: {cf}");
    let db = Database::from_cluster_file(cf.clone(), 0x5eed).expect("the driver starts");
    let t = Instant::now();
    let v = tokio::time::timeout(Duration::from_secs(30), db.read_version()).await??;
    println!("connected: read version {v} after {:?}", t.elapsed());
    clear_all(&db).await?;

    // 1. Counters.
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..WORKERS {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            let mut attempts = 0u64;
            for _ in 0..INCREMENTS {
                db.run(|tx| {
                    attempts += 1;
                    async move {
                        let n = le(tx.get(key("views")).await?);
                        tx.set(key("views"), (n + 1).to_le_bytes());
                        tx.atomic_op(key("atomic_views"), 1u64.to_le_bytes(), MutationType::Add);
                        Ok(())
                    }
                })
                .await?;
            }
            Ok::<u64, Error>(attempts)
        }));
    }
    let mut attempts = 0;
    for task in tasks {
        attempts += task.await??;
    }
    let (views, atomic) = db
        .run(|tx| async move {
            Ok((
                le(tx.get(key("views")).await?),
                le(tx.get(key("atomic_views")).await?),
            ))
        })
        .await?;
    let want = WORKERS * INCREMENTS;
    println!(
        "counters: {WORKERS} workers x {INCREMENTS} increments -> views = {views}, atomic_views = {atomic} \
         ({attempts} attempts: {} retried after conflicts) in {:?}",
        attempts - want,
        t.elapsed()
    );
    assert_eq!(
        (views, atomic),
        (want, want),
        "every increment counted exactly once"
    );

    // 2. A queue with versionstamped keys.
    let t = Instant::now();
    let mut producers = Vec::new();
    for p in 0..4u64 {
        let db = db.clone();
        producers.push(tokio::spawn(async move {
            for j in 0..JOBS / 4 {
                let job = p * 1000 + j;
                db.run(|tx| async move {
                    let mut k = key("queue/");
                    let pos = k.len() as u32;
                    k.extend_from_slice(&[0u8; 10]);
                    k.extend_from_slice(&pos.to_le_bytes());
                    tx.atomic_op(&k, job.to_le_bytes(), MutationType::SetVersionstampedKey);
                    Ok(())
                })
                .await?;
            }
            Ok::<(), Error>(())
        }));
    }
    for p in producers {
        p.await??;
    }
    let mut consumers = Vec::new();
    for _ in 0..3 {
        let db = db.clone();
        consumers.push(tokio::spawn(async move {
            let mut done = Vec::new();
            loop {
                let job = db
                    .run(|tx| async move {
                        let rows = tx.get_range(&key("queue/"), &key("queue0"), 1).await?;
                        let Some(kv) = rows.into_iter().next() else {
                            return Ok(None);
                        };
                        tx.clear(&kv.key);
                        tx.atomic_op(key("processed"), 1u64.to_le_bytes(), MutationType::Add);
                        Ok(Some(le(Some(kv.value))))
                    })
                    .await?;
                match job {
                    Some(j) => done.push(j),
                    None => return Ok::<Vec<u64>, Error>(done),
                }
            }
        }));
    }
    let mut all = Vec::new();
    for c in consumers {
        all.extend(c.await??);
    }
    all.sort_unstable();
    let unique = {
        let mut u = all.clone();
        u.dedup();
        u.len()
    };
    let processed = db
        .run(|tx| async move { Ok(le(tx.get(key("processed")).await?)) })
        .await?;
    println!(
        "queue: {JOBS} jobs enqueued under versionstamped keys by 4 producers, popped by 3 consumers: \
         {} popped, {unique} distinct, processed counter = {processed}, in {:?}",
        all.len(),
        t.elapsed()
    );
    assert_eq!(
        (all.len() as u64, unique as u64, processed),
        (JOBS, JOBS, JOBS)
    );

    // 3. A watch.
    let tx = db.create_transaction();
    let watch = tx.watch(key("done"));
    tx.commit().await?;
    let setter = db.clone();
    let t = Instant::now();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        setter
            .run(|tx| async move {
                tx.set(key("done"), b"yes");
                Ok(())
            })
            .await
    });
    let fired = tokio::time::timeout(Duration::from_secs(10), watch).await??;
    println!(
        "watch: fired at version {fired}, {:?} after arming",
        t.elapsed()
    );

    // 4. The blocking mio driver on the same data.
    let mio_db = fdb_driver_mio::Database::from_cluster_file(cf, 0x5eee)?;
    let n = mio_db.run(|tx| {
        let n = tx.get(key("views"))?;
        let n = le(n) + 1;
        tx.set(key("views"), n.to_le_bytes());
        Ok(n)
    })?;
    println!("mio driver: views incremented to {n}");

    clear_all(&db).await?;
    println!("done: all invariants held");
    Ok(())
}
