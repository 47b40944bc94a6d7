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

/// `turner` turns the loop (the first to block on it, alone until a second thread comes to
/// wait on the watch of `second`) and leaves its own way once the key `first` changes. Only
/// then does `second` change, a change from outside this client: only a turn of the loop
/// can read that reply, so the waiting thread must have been given the loop. Returns how
/// `turner` ended.
fn the_loop_is_passed_on<T: Send>(
    c: &TestCluster,
    db: &Database,
    second: fdb_driver_mio::Watch,
    turner: impl FnOnce() -> T + Send,
) -> std::thread::Result<T> {
    let (done, is_done) = mpsc::channel();
    std::thread::scope(|s| {
        let turner = s.spawn(turner);
        std::thread::sleep(Duration::from_millis(200));
        s.spawn(|| {
            let fired = db.wait_watch(second, LIMIT);
            done.send(fired.is_ok()).unwrap();
        });
        std::thread::sleep(Duration::from_millis(200));
        c.set(b"first", b"1");
        let ended = turner.join();
        c.set(b"second", b"2");
        let fired = is_done.recv_timeout(LIMIT + Duration::from_secs(5));
        assert!(fired.unwrap(), "the second watch fired");
        ended
    })
}

/// The thread turning the loop returns (its own watch fired) while another waits.
#[test]
fn a_waiting_thread_takes_the_loop_over_when_the_turner_leaves() {
    let c = TestCluster::start();
    let db = db(&c, 1);
    let first = watch(&db, b"first");
    let second = watch(&db, b"second");
    let turner = || db.wait_watch(first, LIMIT);
    let ended = the_loop_is_passed_on(&c, &db, second, turner);
    ended.unwrap().expect("the first watch fires");
}

/// The same, when the thread turning the loop leaves by a panic (here its own future's, once
/// its watch fired): the loop is still passed on.
#[test]
fn a_turner_that_panics_passes_the_loop_on() {
    let c = TestCluster::start();
    let db = db(&c, 4);
    let tx = db.async_db().create_transaction();
    let first = tx.watch(b"first");
    db.block_on(tx.commit(), LIMIT).unwrap().unwrap();
    let second = watch(&db, b"second");
    let turner = || {
        let fails = async {
            let _ = first.await;
            panic!("the application's future fails");
        };
        db.block_on(fails, LIMIT)
    };
    let ended = the_loop_is_passed_on(&c, &db, second, turner);
    assert!(ended.is_err(), "the turner panicked");
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

/// This thread's id as the kernel knows it (Linux), to read its counters from another thread.
fn kernel_tid() -> Option<String> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

/// How many times the thread went to sleep to be woken again (`voluntary_ctxt_switches`).
fn sleeps_of(tid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    let line = status
        .lines()
        .find(|l| l.starts_with("voluntary_ctxt_switches:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Threads waiting for replies on a loop that another thread turns sleep until something
/// happens for them: over a second with nothing to do they wake a few times at most. (They
/// used to look every millisecond whether the loop was free: a thousand wake-ups a second
/// each, on an idle client.) Linux only, where the kernel counts a thread's sleeps.
#[test]
fn threads_waiting_on_the_loop_sleep() {
    if kernel_tid().is_none() {
        println!("NOTICE: no /proc/thread-self here; the sleep count is not checked");
        return;
    }
    let c = TestCluster::start();
    let db = db(&c, 3);
    let watches: Vec<_> = (0..3u8).map(|i| watch(&db, &[b'i', i])).collect();
    let (tids, tid) = mpsc::channel();
    std::thread::scope(|s| {
        let waiters: Vec<_> = watches
            .into_iter()
            .map(|w| {
                let tids = tids.clone();
                let db = &db;
                s.spawn(move || {
                    tids.send(kernel_tid().unwrap()).unwrap();
                    db.wait_watch(w, LIMIT)
                })
            })
            .collect();
        let tids: Vec<String> = (0..3).map(|_| tid.recv().unwrap()).collect();
        // Settled: each has polled its watch and is waiting, one of them turning the loop.
        std::thread::sleep(Duration::from_millis(300));
        let before: Vec<u64> = tids.iter().map(|t| sleeps_of(t).unwrap()).collect();
        std::thread::sleep(Duration::from_secs(1));
        let after: Vec<u64> = tids.iter().map(|t| sleeps_of(t).unwrap()).collect();
        for i in 0..3u8 {
            c.set(&[b'i', i], b"x");
        }
        for w in waiters {
            w.join().unwrap().expect("the watch fires");
        }
        let woke: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        println!("sleeps of the three waiting threads in an idle second: {woke:?}");
        assert!(
            woke.iter().all(|&n| n <= 50),
            "idle waiting threads woke {woke:?} times in a second"
        );
    });
}
