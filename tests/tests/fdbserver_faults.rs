//! The test cluster's faults in the shape fdbserver 7.3.77 gives them (measured by
//! `real_faults.rs` on a real cluster): a recovery's burst of `ClientDBInfo` (no proxies
//! first, then the new ones, then more of the same) with its version jump, a `SIGSTOP`ped
//! process (sockets open, nothing answered, late replies when continued; a stopped log
//! stalls every commit until the cluster recovers without it), and a coordinator change
//! (the old coordinators forward, the description stays, the id changes, a recovery
//! follows). Each is checked on the wire, then driven through the tokio driver under the
//! bank workload of `fdb_tests::bank`, whose idempotent retry loop must see no error at all —
//! what libfdb_c and this client did on the real server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use fdb_driver_tokio::Database;
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::commit::{mutation_type as mt, CommitTransactionRef, MutationRef};
use fdb_protocol::messages::coordination::{
    ClientDBInfo, GetLeaderRequest, OpenDatabaseCoordRequest,
};
use fdb_protocol::messages::types::KeyRange;
use fdb_protocol::messages::{decode_any, AnyMessage, EnsureTable, ErrorOr};
use fdb_protocol::uid::well_known;
use fdb_protocol::Uid;
use fdb_tests::bank::{Bank, Outcome, Rng, TxRecord};
use fdb_tests::cluster::{RawClient, RawError, RequestKind, Role, TestCluster};

const LIMIT: Duration = Duration::from_secs(30);
/// `MAX_VERSIONS_IN_FLIGHT`: what a recovery skips.
const JUMP: i64 = 100_000_000;

fn ok<T: std::fmt::Debug>(r: Result<ErrorOr<T>, RawError>) -> T {
    match r {
        Ok(ErrorOr::Ok(v)) => v,
        other => panic!("expected a reply, got {other:?}"),
    }
}

fn db(c: &TestCluster, seed: u64) -> Database {
    Database::from_cluster_file(ClusterFile::parse(&c.cluster_file_string()).unwrap(), seed)
        .unwrap()
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f).await.expect("timed out")
}

/// Waits (without blocking the runtime) until `f` holds, at most [`LIMIT`].
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < LIMIT, "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn set(k: &[u8], v: &[u8]) -> MutationRef {
    MutationRef::new(
        mt::SET_VALUE,
        Bytes::copy_from_slice(k),
        Bytes::copy_from_slice(v),
    )
}

// ---------------------------------------------------------------------------------------
// The bank workload: transfers through the standard retry loop until told to stop.

struct Workload {
    stop: Arc<AtomicBool>,
    records: Arc<Mutex<Vec<TxRecord>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn bank(tag: &str) -> Bank {
    Bank::new(
        format!("bank/{tag}/").as_bytes(),
        10,
        1000,
        Duration::from_secs(20),
    )
}

/// The bank's keys all lie in the shard `a..h` of the default split points.
async fn open_bank(db: &Database, bank: &Bank) {
    within(bank.init(db)).await.expect("open the bank");
}

fn start(db: &Database, bank: &Bank, workers: u64) -> Workload {
    let stop = Arc::new(AtomicBool::new(false));
    let records = Arc::new(Mutex::new(Vec::new()));
    let tasks = (0..workers)
        .map(|w| {
            let (db, bank) = (db.clone(), bank.clone());
            let (stop, records) = (stop.clone(), records.clone());
            let mut rng = Rng::new(0x5eed ^ (w << 32));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let t = bank.random_transfer(&mut rng);
                    let r = bank.transfer_tokio(&db, t, "tokio").await;
                    records.lock().unwrap().push(r);
                }
            })
        })
        .collect();
    Workload {
        stop,
        records,
        tasks,
    }
}

impl Workload {
    /// Transfers committed so far that ended after `t`.
    fn committed_since(&self, t: Instant) -> usize {
        self.records
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.committed() && r.ended > t)
            .count()
    }

    async fn finish(self) -> Vec<TxRecord> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            within(t).await.unwrap();
        }
        std::mem::take(&mut *self.records.lock().unwrap())
    }
}

/// What libfdb_c and this client did on fdbserver through the same faults: every transfer
/// committed (none failed to the application, none hung), the balances sum up, nothing was
/// applied twice or lost. Returns every error the retry loops absorbed.
async fn judge(db: &Database, bank: &Bank, records: &[TxRecord]) -> Vec<ErrorCode> {
    assert!(!records.is_empty(), "the workload ran no transfer");
    let failed: Vec<&TxRecord> = records.iter().filter(|r| !r.committed()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} transfers did not commit: {:?}",
        failed.len(),
        records.len(),
        failed.iter().map(|r| &r.outcome).collect::<Vec<_>>()
    );
    let state = bank
        .read_state(db, LIMIT)
        .await
        .expect("read the bank back");
    let verdict = state.judge(bank, records, Duration::from_secs(5));
    assert!(verdict.violations.is_empty(), "{:?}", verdict.violations);
    records
        .iter()
        .flat_map(|r| r.retried.iter().map(|(c, _)| *c))
        .collect()
}

/// A bank on the cluster under the load of six transfer workers, running for `warm` already.
struct Loaded {
    db: Database,
    bank: Bank,
    work: Workload,
}

async fn loaded(c: &TestCluster, seed: u64, tag: &str, warm: Duration) -> Loaded {
    load(db(c, seed), tag, warm).await
}

async fn load(db: Database, tag: &str, warm: Duration) -> Loaded {
    let bank = bank(tag);
    open_bank(&db, &bank).await;
    let work = start(&db, &bank, 6);
    tokio::time::sleep(warm).await;
    Loaded { db, bank, work }
}

impl Loaded {
    /// Waits until `n` transfers committed after this call.
    async fn commits(&self, what: &str, n: usize) {
        let from = Instant::now();
        until(what, || self.work.committed_since(from) >= n).await;
    }

    /// Stops the workload and judges it (see [`judge`]); returns the errors retried.
    async fn judge(self) -> Vec<ErrorCode> {
        let records = self.work.finish().await;
        judge(&self.db, &self.bank, &records).await
    }
}

/// Storage server 0's process holding a log: a transaction that read `key` before `fault`
/// sends its commit after it; the commit reaches the proxy and stalls — nothing durable, no
/// recovery yet — until failure detection recovers the cluster without the log: then it is
/// `commit_unknown_result`, and the old logs had it.
async fn a_commit_stalled_by_the_log(
    c: &TestCluster,
    db: &Database,
    key: &'static [u8],
    fault: impl FnOnce(),
) {
    assert_eq!(
        c.servers_of(b"bank/"),
        vec![1],
        "the bank is not on the log's process"
    );
    let tx = db.create_transaction();
    within(tx.get(key)).await.unwrap();
    tx.set(key, b"committed in the old generation");
    let commits = c.requests(RequestKind::Commit);
    fault();
    let commit = tokio::spawn(async move { tx.commit().await });
    until("the commit reaches the proxy", || {
        c.requests(RequestKind::Commit) > commits
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(c.recoveries(), 0);
    assert!(!commit.is_finished());
    assert_eq!(c.get(key), None);
    until("a recovery", || c.recoveries() == 1).await;
    let e = within(commit).await.unwrap().unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::COMMIT_UNKNOWN_RESULT), "{e}");
    assert_eq!(
        c.get(key).as_deref(),
        Some(&b"committed in the old generation"[..]),
        "the old logs had it"
    );
}

// ---------------------------------------------------------------------------------------
// Recovery.

#[test]
fn a_recovery_lists_no_proxies_then_new_ones_then_the_same_again() {
    // A one-second MVCC window, so the storage server's window passes quickly.
    let c = TestCluster::builder().mvcc_window(1_000_000).start();
    c.set(b"k", b"v");
    let coord = c.coordinator_addr();
    let mut rc = RawClient::new();
    let info = ok(rc.open_database(coord, Uid::default(), LIMIT));
    let before = ok(rc.read_version(&info)).version;
    c.recover();
    // The first ClientDBInfo after the fault lists no proxy at all.
    let empty = ok(rc.open_database(coord, info.id, LIMIT));
    assert_ne!(empty.id, info.id);
    assert!(empty.grv_proxies.is_empty(), "{empty:?}");
    assert!(empty.commit_proxies.is_empty(), "{empty:?}");
    // The old proxies are gone: their tokens are unknown.
    assert!(matches!(
        rc.read_version(&info),
        Err(RawError::EndpointNotFound(_))
    ));
    // Then the new proxies.
    let new = ok(rc.open_database(coord, empty.id, LIMIT));
    assert_eq!((new.grv_proxies.len(), new.commit_proxies.len()), (1, 1));
    assert_ne!(
        new.commit_proxies[0].commit.endpoint.token,
        info.commit_proxies[0].commit.endpoint.token
    );
    // The version jumped by `MAX_VERSIONS_IN_FLIGHT`.
    let after = ok(rc.read_version(&new)).version;
    assert!(after >= before + JUMP, "{before} -> {after}");
    // The same proxies are published twice more, each time with a new id, then nothing.
    let mut last = new.clone();
    for _ in 0..2 {
        let again = ok(rc.open_database(coord, last.id, LIMIT));
        assert_ne!(again.id, last.id);
        assert_eq!(again.grv_proxies, new.grv_proxies);
        assert_eq!(again.commit_proxies, new.commit_proxies);
        last = again;
    }
    assert_eq!(
        rc.open_database(coord, last.id, Duration::from_millis(300)),
        Err(RawError::Timeout)
    );
    assert_eq!(c.recoveries(), 1);
    // The resolver starts empty: a commit reading at a snapshot from before the recovery is
    // too old; a blind write is not checked.
    let reads = CommitTransactionRef {
        read_conflict_ranges: vec![KeyRange::single_key(b"k")],
        write_conflict_ranges: vec![KeyRange::single_key(b"k")],
        mutations: vec![set(b"k", b"w")],
        read_snapshot: before,
        ..Default::default()
    };
    assert_eq!(
        rc.commit(&new, reads).unwrap(),
        ErrorOr::Err(ErrorCode::TRANSACTION_TOO_OLD)
    );
    let blind = CommitTransactionRef {
        write_conflict_ranges: vec![KeyRange::single_key(b"b")],
        mutations: vec![set(b"b", b"1")],
        read_snapshot: before,
        ..Default::default()
    };
    assert!(matches!(rc.commit(&new, blind), Ok(ErrorOr::Ok(_))));
    // The storage server still reads at that version: it stretches its MVCC window over the
    // jump until a window of versions has passed after the recovery (fdbserver's
    // `recoveryVersionSkips`; it served such reads for about five seconds) ...
    let r = ok(rc.get(&new, b"k", before));
    assert_eq!(r.error, None);
    assert_eq!(r.value.as_deref(), Some(&b"v"[..]));
    // ... and refuses it once the window has passed.
    let mut r = r;
    let start = Instant::now();
    while r.error.is_none() && start.elapsed() < LIMIT {
        std::thread::sleep(Duration::from_millis(100));
        r = ok(rc.get(&new, b"k", before));
    }
    assert_eq!(r.error, Some(ErrorCode::TRANSACTION_TOO_OLD));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_retry_loop_rides_out_recoveries() {
    // A one-second MVCC window: the old read version below has left it by the end.
    let c = TestCluster::builder().mvcc_window(1_000_000).start();
    let polls = c.requests(RequestKind::OpenDatabase);
    let l = loaded(&c, 1, "recoveries", Duration::from_millis(200)).await;
    // A transaction holding a read version from before the recoveries.
    let old = l.db.create_transaction();
    let rv = within(old.get_read_version()).await.unwrap();
    for _ in 0..3 {
        c.recover();
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    l.commits("commits after the last recovery", 10).await;
    let bank = l.bank.clone();
    l.judge().await;
    assert_eq!(c.recoveries(), 3);
    // Every publication (none, new, twice the same) answered the client's long poll.
    assert!(
        c.requests(RequestKind::OpenDatabase) >= polls + 3 * 4,
        "{} long polls after {polls}",
        c.requests(RequestKind::OpenDatabase)
    );
    // The old read version has left the storage server's window (a window of versions
    // has passed since the last recovery, the jumps no longer stretch it): too old, and
    // retried at a read version past the three jumps.
    let e = within(old.get(bank.account_key(0))).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TRANSACTION_TOO_OLD), "{e}");
    within(old.on_error(ErrorCode::TRANSACTION_TOO_OLD))
        .await
        .unwrap();
    assert!(within(old.get_read_version()).await.unwrap() >= rv + 3 * JUMP);
    within(old.get(bank.account_key(0))).await.unwrap();
}

// ---------------------------------------------------------------------------------------
// SIGSTOP.

#[test]
fn a_stopped_process_answers_nothing_and_then_everything_late() {
    let c = TestCluster::start();
    c.set(b"k", b"v");
    let coord = c.coordinator_addr();
    let mut rc = RawClient::new();
    let info = ok(rc.open_database(coord, Uid::default(), LIMIT));
    let v = ok(rc.read_version(&info)).version;
    let ss = ok(rc.locations(&info, b"k", None, 100, false)).results[0].servers[0].clone();
    let role = Role::Storage(
        (0..c.storage_server_count())
            .find(|&i| c.storage_interface(i).unique_id == ss.unique_id)
            .unwrap(),
    );
    let addr = fdb_tests::cluster::stream_addr(&ss.get_value);
    c.sigstop(role);
    assert!(c.is_stopped(role));
    // A read and a ping: the socket takes them, nothing answers.
    let read = rc.reply_promise();
    let req = fdb_protocol::messages::storage::GetValueRequest {
        key: Bytes::from_static(b"k"),
        version: v,
        reply: read.clone(),
        // A plain read names no tenant (a defaulted TenantInfo would name tenant 0).
        tenant_info: fdb_protocol::messages::types::TenantInfo::none(),
        ..Default::default()
    };
    rc.send(
        addr,
        ss.stream(fdb_protocol::messages::storage::StorageServerInterface::GET_VALUE),
        &req,
    )
    .unwrap();
    let ping = rc.reply_promise();
    rc.send(
        addr,
        well_known::PING_PACKET,
        &fdb_protocol::messages::coordination::PingRequest {
            reply: ping.clone(),
        },
    )
    .unwrap();
    assert!(rc.pump(addr, Duration::from_millis(300)).is_empty());
    assert_eq!(c.requests(RequestKind::GetValue), 0, "not even read");
    // Other processes carry on.
    ok(rc.read_version(&info));
    c.sigcont(role);
    // Both answers arrive, late: the ping first, as fdbserver's did (its read yields).
    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < 2 && start.elapsed() < LIMIT {
        got.extend(rc.pump(addr, Duration::from_millis(20)));
    }
    assert_eq!(got, vec![ping.token, read.token]);
    let body = rc
        .recv_bytes(addr, read.token, read.token, Duration::ZERO)
        .unwrap();
    match decode_any(&body) {
        Ok(AnyMessage::GetValueReply(ErrorOr::Ok(r))) => {
            assert_eq!((r.error, r.value.as_deref()), (None, Some(&b"v"[..])))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.requests_to(role, RequestKind::GetValue), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_log_stalls_every_commit_until_the_cluster_recovers_without_it() {
    // Storage server 0's process holds a log; the bank lives on server 1.
    let c = TestCluster::builder()
        .logs_on_storage([0])
        .failure_detection_delay(Duration::from_millis(800))
        .stop_noticed_after(Duration::from_millis(500))
        .start();
    let l = loaded(&c, 2, "stalled", Duration::from_millis(200)).await;
    let before = within(l.db.read_version()).await.unwrap();
    let mut grv = None;
    a_commit_stalled_by_the_log(&c, &l.db, b"stalled", || {
        c.sigstop(Role::Storage(0));
        // Read versions stall as well, until the recovery.
        let db = l.db.clone();
        grv = Some(tokio::spawn(async move { db.read_version().await }));
    })
    .await;
    // The stalled read version was asked again of the new generation.
    assert!(within(grv.unwrap()).await.unwrap().unwrap() >= before + JUMP);
    l.commits("commits with the log still stopped", 10).await;
    c.sigcont(Role::Storage(0));
    l.commits("commits after SIGCONT", 5).await;
    let records = l.work.finish().await;
    judge(&l.db, &l.bank, &records).await;
    assert_eq!(c.recoveries(), 1, "one stop, one recovery");
    // Transfers stalled too ended unknown, but not each of them was applied: the recovery
    // resolves the stalled commits against each other (a conflicting one is not kept), and
    // a commit sent to the ended proxies' old endpoint is unknown without having arrived
    // (libfdb_c's `request_maybe_delivered`). The judge's exactly-once check covers both
    // (an applied one written again would count twice); a retry that found its id must
    // have followed an unknown result.
    for r in &records {
        if r.outcome == (Outcome::Committed { by_id: true }) {
            assert!(
                r.retried
                    .iter()
                    .any(|(code, _)| *code == ErrorCode::COMMIT_UNKNOWN_RESULT),
                "{r:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_log_that_comes_back_in_time_lets_the_stalled_commits_through() {
    let c = TestCluster::builder()
        .logs_on_storage([0])
        .failure_detection_delay(Duration::from_secs(30))
        .start();
    let db = db(&c, 3);
    // Read versions stall too: this transaction gets its own first.
    let tx = db.create_transaction();
    within(tx.get_read_version()).await.unwrap();
    let commits = c.requests(RequestKind::Commit);
    c.sigstop(Role::Storage(0));
    tx.set(b"late", b"1");
    let grv = tokio::spawn({
        let db = db.clone();
        async move { db.read_version().await }
    });
    let commit = tokio::spawn(async move { tx.commit().await });
    until("the commit reaches the proxy", || {
        c.requests(RequestKind::Commit) > commits
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!commit.is_finished() && !grv.is_finished());
    assert_eq!(c.get(b"late"), None);
    c.sigcont(Role::Storage(0));
    within(commit).await.unwrap().expect("committed late");
    within(grv).await.unwrap().expect("a read version, late");
    assert_eq!(c.get(b"late").as_deref(), Some(&b"1"[..]));
    assert_eq!(c.recoveries(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_move_off_a_stopped_replica_and_its_late_replies_do_no_harm() {
    let c = TestCluster::builder()
        .storage_servers(3)
        .replication(2)
        .start();
    let replicas = c.servers_of(b"bank/");
    assert_eq!(replicas.len(), 2);
    let l = loaded(&c, 4, "replica", Duration::from_millis(300)).await;
    // Stop the replica the client reads from most.
    let reads = |i: usize| c.requests_to(Role::Storage(replicas[i]), RequestKind::GetValue);
    let (stopped, other) = if reads(0) >= reads(1) {
        (Role::Storage(replicas[0]), Role::Storage(replicas[1]))
    } else {
        (Role::Storage(replicas[1]), Role::Storage(replicas[0]))
    };
    let moved = c.requests_to(other, RequestKind::GetValue);
    c.sigstop(stopped);
    l.commits("commits while a replica is stopped", 20).await;
    // All but the (at most 6) transfers that had read before the stop read their two
    // accounts after it: from the other replica; the stopped one read nothing.
    assert!(c.requests_to(other, RequestKind::GetValue) >= moved + 2 * (20 - 6));
    let unread = c.requests_to(stopped, RequestKind::GetValue);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(c.requests_to(stopped, RequestKind::GetValue), unread);
    c.sigcont(stopped);
    l.commits("commits after SIGCONT", 20).await;
    l.judge().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_server_catching_up_after_sigcont_answers_future_version() {
    let c = TestCluster::start();
    let db = db(&c, 5);
    let ss = Role::Storage(c.servers_of(b"k")[0]);
    within(db.run(|tx| async move {
        tx.set(b"k", b"old");
        Ok(())
    }))
    .await
    .unwrap();
    c.sigstop(ss);
    // Commits go through the logs, not the stopped storage server.
    within(db.run(|tx| async move {
        tx.set(b"k", b"new");
        Ok(())
    }))
    .await
    .unwrap();
    c.sigcont(ss);
    // The server has nothing past the version it stopped at until it caught up: a read at a
    // fresh version waits, gets `future_version`, and the retry loop reads again.
    let tx = db.create_transaction();
    let mut retried = Vec::new();
    let v = loop {
        match within(tx.get(b"k")).await {
            Ok(v) => break v,
            Err(e) => {
                let code = e.code().expect("an FDB error");
                retried.push(code);
                within(tx.on_error(code)).await.unwrap();
            }
        }
    };
    assert_eq!(v.as_deref(), Some(&b"new"[..]));
    assert!(retried.contains(&ErrorCode::FUTURE_VERSION), "{retried:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_proxies_are_recovered_around_and_their_commits_stay_unknown() {
    let c = TestCluster::builder()
        .failure_detection_delay(Duration::from_millis(500))
        .stop_noticed_after(Duration::from_millis(500))
        .start();
    let l = loaded(&c, 6, "proxies", Duration::from_millis(200)).await;
    let old = c.addr(Role::Proxies);
    let tx = l.db.create_transaction();
    within(tx.get(b"bank/proxies/acct/0000")).await.unwrap();
    tx.set(b"lost", b"sent to a stopped proxy");
    c.sigstop(Role::Proxies);
    let commit = tokio::spawn(async move { tx.commit().await });
    until("a recovery", || c.recoveries() == 1).await;
    // The proxies moved to another process; the old one stays stopped.
    assert_ne!(c.addr(Role::Proxies), old);
    let e = within(commit).await.unwrap().unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::COMMIT_UNKNOWN_RESULT), "{e}");
    l.commits("commits on the new proxies", 10).await;
    c.sigcont(Role::Proxies);
    l.commits("commits after SIGCONT", 5).await;
    l.judge().await;
    // The old generation could not commit what waited in its socket.
    assert_eq!(c.get(b"lost"), None);
}

/// fdbserver notices a killed process after `FAILURE_DETECTION_DELAY` of refused connects,
/// a stopped one much later (its sockets stay open, and each reconnect that the kernel
/// completes resets the failure clock; 17.6 s against 4.2 s on the real cluster): a stop
/// longer than a kill takes to notice is not noticed, its stalled commit goes through when
/// it continues and no recovery happens, where a kill makes one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_as_long_as_a_kill_takes_to_notice_goes_unnoticed() {
    let c = TestCluster::builder()
        .failure_detection_delay(Duration::from_millis(300))
        .start();
    let db = db(&c, 12);
    within(db.read_version()).await.unwrap();
    let tx = db.create_transaction();
    within(tx.get_read_version()).await.unwrap();
    tx.set(b"brief", b"stopped and continued");
    c.sigstop(Role::Proxies);
    let commit = tokio::spawn(async move { tx.commit().await });
    // Longer than a killed process goes unnoticed, shorter than a stopped one.
    tokio::time::sleep(Duration::from_millis(800)).await;
    c.sigcont(Role::Proxies);
    within(commit).await.unwrap().expect("committed late");
    assert_eq!(c.recoveries(), 0, "a brief stop is not a failure");
    assert_eq!(
        c.get(b"brief").as_deref(),
        Some(&b"stopped and continued"[..])
    );
    // Killed instead: noticed while still down, and recovered around (the proxies move to
    // another process).
    let old = c.addr(Role::Proxies);
    c.kill(Role::Proxies);
    until("a recovery without the killed process", || {
        c.recoveries() == 1
    })
    .await;
    assert_ne!(c.addr(Role::Proxies), old);
    within(db.run(|tx| async move {
        tx.set(b"brief", b"after the kill");
        Ok(())
    }))
    .await
    .unwrap();
}

// ---------------------------------------------------------------------------------------
// SIGKILL. A killed fdbserver process loses its roles for good: when it held the proxies or
// a log, the cluster recovers — without it once the failure is noticed, or as soon as the
// process is back (a restarted process does not take its old roles up again). Nothing
// recovers while no coordinator quorum is up.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_proxies_are_recovered_around() {
    let c = TestCluster::builder()
        .failure_detection_delay(Duration::from_millis(400))
        .start();
    let l = loaded(&c, 7, "killed", Duration::from_millis(200)).await;
    let before = within(l.db.read_version()).await.unwrap();
    let old = c.addr(Role::Proxies);
    c.kill(Role::Proxies);
    until("a recovery without the killed process", || {
        c.recoveries() == 1
    })
    .await;
    // The proxies run in another process now, a version jump later.
    assert_ne!(c.addr(Role::Proxies), old);
    assert!(c.is_alive(Role::Proxies));
    l.commits("commits on the new proxies", 10).await;
    assert!(within(l.db.read_version()).await.unwrap() >= before + JUMP);
    l.judge().await;
    assert_eq!(c.recoveries(), 1);
}

/// fdbserver (`real_faults.rs`, `master_kill`): the master's process killed, commits stopped
/// for about 4 s, a recovery (several generations), and no error reached libfdb_c's or this
/// client's application. The proxies' process lives on; its roles end with the master's
/// generation and come back with new tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_makes_a_recovery_the_proxies_process_survives() {
    let c = TestCluster::builder()
        .failure_detection_delay(Duration::from_millis(300))
        .start();
    let l = loaded(&c, 13, "master", Duration::from_millis(200)).await;
    let before = within(l.db.read_version()).await.unwrap();
    let (proxies, master) = (c.addr(Role::Proxies), c.addr(Role::Master));
    let info = c.client_db_info();
    c.kill(Role::Master);
    until("a recovery without the master", || c.recoveries() == 1).await;
    // The master moved; the proxies stayed in their process, under new tokens.
    assert_ne!(c.addr(Role::Master), master);
    assert_eq!(c.addr(Role::Proxies), proxies);
    // (The first ClientDBInfo of a recovery lists no proxies.)
    until("the new proxies are published", || {
        !c.client_db_info().commit_proxies.is_empty()
    })
    .await;
    let after = c.client_db_info();
    assert_ne!(
        after.commit_proxies[0].commit.endpoint.token,
        info.commit_proxies[0].commit.endpoint.token
    );
    l.commits("commits after the master's recovery", 10).await;
    assert!(within(l.db.read_version()).await.unwrap() >= before + JUMP);
    l.judge().await;
    assert_eq!(c.recoveries(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxies_process_restarted_before_anyone_noticed_still_makes_a_recovery() {
    // Failure detection never comes first here: the restart does.
    let c = TestCluster::builder()
        .failure_detection_delay(Duration::from_secs(3600))
        .start();
    let l = loaded(&c, 8, "restarted", Duration::from_millis(200)).await;
    let tx = l.db.create_transaction();
    let rv = within(tx.get_read_version()).await.unwrap();
    within(tx.get(b"restarted")).await.unwrap();
    tx.set(b"restarted", b"read before the restart");
    let old = c.addr(Role::Proxies);
    c.restart(Role::Proxies);
    // Back on the same port, in a new generation.
    assert_eq!(c.recoveries(), 1);
    assert_eq!(c.addr(Role::Proxies), old);
    // Once the client follows the new generation (its read versions are a jump later),
    // what read before the recovery cannot commit: the resolver starts empty.
    assert!(within(l.db.read_version()).await.unwrap() >= rv + JUMP);
    let e = within(tx.commit()).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TRANSACTION_TOO_OLD), "{e}");
    within(tx.on_error(ErrorCode::TRANSACTION_TOO_OLD))
        .await
        .unwrap();
    assert!(within(tx.get_read_version()).await.unwrap() >= rv + JUMP);
    l.commits("commits after the restart", 10).await;
    l.judge().await;
    assert_eq!(c.get(b"restarted"), None);
    assert_eq!(c.recoveries(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_log_stalls_commits_until_the_cluster_recovers_without_it() {
    let c = TestCluster::builder()
        .logs_on_storage([0])
        .failure_detection_delay(Duration::from_millis(1000))
        .start();
    let l = loaded(&c, 9, "killed-log", Duration::from_millis(200)).await;
    // The ended proxies answer the stalled commit with broken_promise (unknown to the
    // client).
    a_commit_stalled_by_the_log(&c, &l.db, b"after-kill", || c.kill(Role::Storage(0))).await;
    // The storage server comes back without its log: no second recovery.
    c.restart(Role::Storage(0));
    l.commits("commits after the restart", 5).await;
    l.judge().await;
    assert_eq!(c.recoveries(), 1, "one kill, one recovery");
}

/// What fdbserver did when every process was killed and restarted 5 s later: the same data,
/// one recovery, and clients that only saw `transaction_too_old` and `commit_unknown_result`
/// (both retried).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_process_killed_and_restarted_keeps_the_data_after_one_recovery() {
    let c = TestCluster::builder()
        .failure_detection_delay(Duration::from_millis(300))
        .start();
    let l = loaded(&c, 10, "kill-all", Duration::from_millis(300)).await;
    let before = within(l.db.read_version()).await.unwrap();
    let roles = [
        Role::Coordinator(0),
        Role::Proxies,
        Role::Storage(0),
        Role::Storage(1),
        Role::Storage(2),
    ];
    for r in roles {
        c.kill(r);
    }
    // Long past failure detection: without a coordinator nothing recovers.
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(c.recoveries(), 0);
    // The coordinator last: the recovery waits for it, and is made with every process up.
    for r in roles.into_iter().rev() {
        c.restart(r);
    }
    assert_eq!(c.recoveries(), 1);
    l.commits("commits after the restart", 10).await;
    let db = l.db.clone();
    let retried = l.judge().await;
    assert!(within(db.read_version()).await.unwrap() >= before + JUMP);
    assert_eq!(c.recoveries(), 1);
    assert!(
        !retried.contains(&ErrorCode::BROKEN_PROMISE),
        "a killed process sends nothing: {retried:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Exclude / include. On fdbserver (`real_faults.rs`, 5 processes, double redundancy), the
// data of an excluded storage-only process moved away in about 6 s and neither libfdb_c nor
// this client reported anything to the application: the storage server's
// `wrong_shard_server` and the location refresh stay inside the client.

const EXCLUDED: &[u8] = b"\xff/conf/excluded/";

/// `fdbcli exclude ADDR` / `include ADDR` as its pre-special-key form writes it.
async fn set_excluded(db: &Database, addr: std::net::SocketAddr, excluded: bool) {
    let key = [EXCLUDED, addr.to_string().as_bytes()].concat();
    within(db.run(|tx| {
        let key = key.clone();
        async move {
            tx.set_option(fdb_protocol::TransactionOption::AccessSystemKeys)?;
            if excluded {
                tx.set(&key, b"");
            } else {
                tx.clear(&key);
            }
            Ok(())
        }
    }))
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_excluded_storage_server_loses_its_shards_and_nobody_notices() {
    let c = TestCluster::builder()
        .storage_servers(3)
        .replication(2)
        .start();
    let l = loaded(&c, 11, "exclude", Duration::from_millis(200)).await;
    let gone = c.servers_of(b"bank/")[0];
    let addr = c.addr(Role::Storage(gone));
    let mut rc = RawClient::new();
    let info = ok(rc.open_database(c.coordinator_addr(), Uid::default(), LIMIT));
    let v = ok(rc.read_version(&info)).version;
    let before = ok(rc.get_value(&c.storage_interface(gone), b"bank/", v));
    assert_eq!(before.error, None);
    set_excluded(&l.db, addr, true).await;
    // No shard is left on it; every team kept its size.
    for shard in c.shards() {
        assert!(!shard.servers.contains(&gone), "{shard:?}");
        assert_eq!(shard.servers.len(), 2, "{shard:?}");
    }
    // The process lives on, and answers wrong_shard_server for what it held.
    let v = ok(rc.read_version(&info)).version;
    let after = ok(rc.get_value(&c.storage_interface(gone), b"bank/", v));
    assert_eq!(after.error, Some(ErrorCode::WRONG_SHARD_SERVER));
    let reads = c.requests_to(Role::Storage(gone), RequestKind::GetValue);
    l.commits("commits after the exclude", 20).await;
    // Clients asked the others: at most the transfers in flight read from it once more.
    assert!(c.requests_to(Role::Storage(gone), RequestKind::GetValue) <= reads + 2 * 6);
    // `include` moves nothing back at once.
    set_excluded(&l.db, addr, false).await;
    assert!(c.shards().iter().all(|s| !s.servers.contains(&gone)));
    l.commits("commits after the include", 10).await;
    let retried = l.judge().await;
    assert!(
        !retried.contains(&ErrorCode::WRONG_SHARD_SERVER),
        "wrong_shard_server is the client's to retry: {retried:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_move_that_takes_time_serves_from_the_old_team_meanwhile() {
    // fdbserver's move took about 6 s; here 3 s, long enough to look at it in flight.
    let c = TestCluster::builder()
        .storage_servers(3)
        .replication(2)
        .data_move_delay(Duration::from_secs(3))
        .start();
    let l = loaded(&c, 12, "slow-exclude", Duration::from_millis(200)).await;
    let gone = c.servers_of(b"bank/")[0];
    let before = c.shards();
    let mut rc = RawClient::new();
    let info = ok(rc.open_database(c.coordinator_addr(), Uid::default(), LIMIT));
    set_excluded(&l.db, c.addr(Role::Storage(gone)), true).await;
    // In flight: the teams are unchanged, and the excluded server still serves its shards.
    assert_eq!(c.shards(), before);
    let v = ok(rc.read_version(&info)).version;
    let during = ok(rc.get_value(&c.storage_interface(gone), b"bank/", v));
    assert_eq!(during.error, None);
    l.commits("commits during the move", 5).await;
    until("the move", || {
        c.shards().iter().all(|s| !s.servers.contains(&gone))
    })
    .await;
    assert!(c.shards().iter().all(|s| s.servers.len() == 2));
    let v = ok(rc.read_version(&info)).version;
    let after = ok(rc.get_value(&c.storage_interface(gone), b"bank/", v));
    assert_eq!(after.error, Some(ErrorCode::WRONG_SHARD_SERVER));
    l.commits("commits after the move", 10).await;
    let retried = l.judge().await;
    assert!(
        !retried.contains(&ErrorCode::WRONG_SHARD_SERVER),
        "wrong_shard_server is the client's to retry: {retried:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Coordinator change.

/// An `OpenDatabaseCoordRequest` for `key` (what a client of that connection string sends).
fn open_for(
    rc: &mut RawClient,
    coord: std::net::SocketAddr,
    key: &str,
    known: Uid,
    timeout: Duration,
) -> Result<ErrorOr<ClientDBInfo>, RawError> {
    let reply = rc.reply_promise();
    let req = OpenDatabaseCoordRequest {
        cluster_key: Bytes::from(key.to_string()),
        known_client_info_id: known,
        reply: reply.clone(),
        ..Default::default()
    };
    let tok = well_known::CLIENT_LEADER_REG_OPEN_DATABASE;
    rc.send(coord, tok, &req)?;
    rc.recv(coord, reply.token, tok, timeout)
}

fn key_of(conn: &str) -> String {
    conn.split('@').next().unwrap().to_string()
}

#[test]
fn old_coordinators_forward_the_old_connection_string() {
    let c = TestCluster::builder().coordinators(2).start();
    let first = c.cluster_file_string();
    let old = key_of(&first);
    let (c0, c1) = (c.addr(Role::Coordinator(0)), c.addr(Role::Coordinator(1)));
    let mut rc = RawClient::new();
    let info = ok(open_for(&mut rc, c0, &old, Uid::default(), LIMIT));
    assert!(info.forward.is_none());
    // A long poll held at coordinator 1 while the coordinators change.
    let held = rc.reply_promise();
    let tok = well_known::CLIENT_LEADER_REG_OPEN_DATABASE;
    let poll = OpenDatabaseCoordRequest {
        cluster_key: Bytes::from(old.clone()),
        known_client_info_id: info.id,
        reply: held.clone(),
        ..Default::default()
    };
    rc.send(c1, tok, &poll).unwrap();
    assert!(rc.pump(c1, Duration::from_millis(200)).is_empty());
    let second = c.change_coordinators(&[1], 2);
    assert_eq!(c.cluster_file_string(), second);
    // The description stays, the id is new (32 alphanumerics), the set is 1 + two new.
    let new = key_of(&second);
    let (desc, id) = new.split_once(':').unwrap();
    assert_eq!(desc, old.split(':').next().unwrap());
    assert_eq!(id.len(), 32);
    assert!(id.bytes().all(|b| b.is_ascii_alphanumeric()));
    let parsed = ClusterFile::parse(&second).unwrap();
    assert_eq!(parsed.coordinators.len(), 3);
    assert!(second.contains(&c1.to_string()) && !second.contains(&c0.to_string()));
    // The held long poll ends with the forward.
    match rc.recv::<ClientDBInfo>(c1, held.token, tok, LIMIT) {
        Ok(ErrorOr::Ok(i)) => assert_eq!(i.forward.as_deref(), Some(second.as_bytes())),
        other => panic!("{other:?}"),
    }
    // Every old coordinator forwards the old key, at once, whatever the client knew.
    for coord in [c0, c1] {
        let i = ok(open_for(&mut rc, coord, &old, info.id, LIMIT));
        assert_eq!(i.forward.as_deref(), Some(second.as_bytes()));
        assert!(i.commit_proxies.is_empty());
    }
    // The kept coordinator and the new ones serve the new key.
    for coord in [
        c1,
        c.addr(Role::Coordinator(2)),
        c.addr(Role::Coordinator(3)),
    ] {
        let i = ok(open_for(&mut rc, coord, &new, Uid::default(), LIMIT));
        assert!(i.forward.is_none());
    }
    // The leader of the old key is the forward too.
    let reply = rc.reply_promise();
    let req = GetLeaderRequest {
        key: Bytes::from(old.clone()),
        known_leader: Uid::default(),
        reply: reply.clone(),
    };
    let tok = well_known::CLIENT_LEADER_REG_GET_LEADER;
    rc.send(c0, tok, &req).unwrap();
    let body = rc.recv_bytes(c0, reply.token, tok, LIMIT).unwrap();
    match decode_any(&body) {
        Ok(AnyMessage::Leader(ErrorOr::Ok(EnsureTable(Some(l))))) => {
            assert!(l.forward);
            assert_eq!(l.serialized_info, second.as_bytes());
        }
        other => panic!("{other:?}"),
    }
    // The change made a recovery.
    assert_eq!(c.recoveries(), 1);
    // A second change: the intermediate coordinators forward the intermediate key.
    let third = c.change_coordinators(&[2], 0);
    let i = ok(open_for(
        &mut rc,
        c.addr(Role::Coordinator(3)),
        &new,
        Uid::default(),
        LIMIT,
    ));
    assert_eq!(i.forward.as_deref(), Some(third.as_bytes()));
    let i = ok(open_for(&mut rc, c0, &old, Uid::default(), LIMIT));
    assert_eq!(
        i.forward.as_deref(),
        Some(second.as_bytes()),
        "step by step"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_change_is_followed_and_the_cluster_file_rewritten() {
    let c = TestCluster::start();
    let dir = std::env::temp_dir().join(format!(
        "fdb-coordinators-{}-{}",
        std::process::id(),
        c.coordinator_addr().port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = c.write_cluster_file(&dir);
    let stale = dir.join("stale.cluster");
    std::fs::copy(&path, &stale).unwrap();
    let l = load(
        Database::open_file_with_seed(&path, 7).unwrap(),
        "coordinators",
        Duration::from_millis(200),
    )
    .await;
    let old = c.cluster_file_string();
    let new = c.change_coordinators(&[], 2);
    let want = ClusterFile::parse(&new).unwrap();
    assert_ne!(want, ClusterFile::parse(&old).unwrap());
    let start = Instant::now();
    while std::fs::read_to_string(&path).ok() != Some(want.file_contents()) {
        if start.elapsed() >= LIMIT {
            // Once seen in a CI run (and never here): say what the client was at.
            let client = tokio::time::timeout(Duration::from_secs(1), l.db.cluster()).await;
            panic!(
                "never: the cluster file is rewritten; it holds {:?}, the new string is {new:?}, \
                 the client uses {client:?}, coordinators were polled {} times",
                std::fs::read_to_string(&path),
                c.requests(RequestKind::OpenDatabase)
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(within(l.db.cluster()).await.unwrap(), want);
    // From now on only the new coordinators know the cluster: the old one goes, and new
    // proxies can only be learnt from the new ones.
    c.kill(Role::Coordinator(0));
    c.recover();
    l.commits("commits after the change and a recovery", 10)
        .await;
    l.judge().await;
    assert_eq!(c.recoveries(), 2);
    // A client still holding the old file is forwarded too, as long as an old coordinator
    // answers: bring it back and open the stale copy.
    c.restart(Role::Coordinator(0));
    let late = Database::open_file_with_seed(&stale, 8).unwrap();
    within(late.run(|tx| async move { tx.get(b"bank/").await }))
        .await
        .unwrap();
    until("the stale file is rewritten", || {
        std::fs::read_to_string(&stale).ok() == Some(want.file_contents())
    })
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}
