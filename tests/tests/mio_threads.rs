//! Many threads blocking on one mio loop (the blocking driver's usual shape: one `Database`
//! shared by a thread pool). One thread turns the loop at a time; the others sleep until
//! their reply arrives or the turning thread stops and passes the loop on. These tests check
//! that the loop is always passed on: a thread left waiting with no one turning would never
//! see its reply.

use std::sync::mpsc;
use std::time::Duration;

use fdb_driver_mio::Database;
use fdb_protocol::cluster_file::ClusterFile;
use fdb_tests::cluster::TestCluster;

const LIMIT: Duration = Duration::from_secs(20);

fn db(c: &TestCluster, seed: u64) -> Database {
    Database::from_cluster_file(ClusterFile::parse(&c.cluster_file_string()).unwrap(), seed)
        .expect("the driver starts")
}

/// Sets a watch on `key` and commits it.
fn watch(db: &Database, key: &[u8]) -> fdb_driver_mio::Watch {
    let tx = db.create_transaction();
    let w = tx.watch(key);
    tx.commit().expect("the watch's transaction commits");
    w
}

/// The thread turning the loop stops (its own watch fired) while another thread waits on a
/// watch whose change comes from outside this client: only a turn of the loop can read that
/// reply, so the waiting thread must be given the loop.
#[test]
fn a_waiting_thread_takes_the_loop_over_when_the_turner_leaves() {
    let c = TestCluster::start();
    let db = db(&c, 1);
    let first = watch(&db, b"first");
    let second = watch(&db, b"second");
    let (started, is_started) = mpsc::channel();
    let (done, is_done) = mpsc::channel();
    std::thread::scope(|s| {
        // Turns the loop: the first to block on it, and alone until the second thread comes.
        s.spawn(|| {
            started.send(()).unwrap();
            db.wait_watch(first, LIMIT).expect("the first watch fires");
        });
        is_started.recv().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        s.spawn(|| {
            let fired = db.wait_watch(second, LIMIT);
            done.send(fired.is_ok()).unwrap();
        });
        std::thread::sleep(Duration::from_millis(200));
        // The turner's watch fires and it returns; then the second key changes.
        c.set(b"first", b"1");
        std::thread::sleep(Duration::from_millis(300));
        c.set(b"second", b"2");
        assert!(
            is_done
                .recv_timeout(LIMIT + Duration::from_secs(5))
                .unwrap(),
            "the second watch fired"
        );
    });
}

/// Eight threads share one database, each running transactions that conflict on one counter
/// while two more wait on watches set from outside: every call finishes, the count is
/// exact, and both watches see their change.
#[test]
fn eight_threads_share_one_loop() {
    let c = TestCluster::start();
    let db = db(&c, 2);
    let watches: Vec<_> = (0..2u8).map(|i| watch(&db, &[b'w', i])).collect();
    std::thread::scope(|s| {
        let waiters: Vec<_> = watches
            .into_iter()
            .map(|w| s.spawn(|| db.wait_watch(w, LIMIT)))
            .collect();
        let workers: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    for _ in 0..20 {
                        db.run(|tx| {
                            let n = tx
                                .get(b"counter")?
                                .map_or(0, |v| u64::from_le_bytes(v[..8].try_into().unwrap()));
                            tx.set(b"counter", (n + 1).to_le_bytes());
                            Ok(())
                        })
                        .expect("the increment commits");
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        c.set(b"w\x00", b"x");
        c.set(b"w\x01", b"x");
        for w in waiters {
            w.join().unwrap().expect("the watch fires");
        }
    });
    assert_eq!(c.get(b"counter").unwrap(), 160u64.to_le_bytes());
}
