//! Fault injection in the test cluster, observed with raw protocol messages: each fault takes
//! effect the way a real cluster would show it, and goes away when cleared.

use std::time::{Duration, Instant};

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::commit::{
    mutation_type as mt, CommitID, CommitTransactionRef, MutationRef,
};
use fdb_protocol::messages::coordination::{ClientDBInfo, OpenDatabaseCoordRequest, PingRequest};
use fdb_protocol::messages::storage::StorageServerInterface;
use fdb_protocol::messages::types::{KeyRange, KeySelector, Version};
use fdb_protocol::messages::{ErrorOr, Void};
use fdb_protocol::uid::well_known;
use fdb_protocol::Uid;
use fdb_tests::cluster::{
    Injected, RawClient, RawError, ReleaseOrder, RequestKind, Role, TestCluster,
};

fn ok<T: std::fmt::Debug>(r: Result<ErrorOr<T>, RawError>) -> T {
    match r {
        Ok(ErrorOr::Ok(v)) => v,
        other => panic!("expected a reply, got {other:?}"),
    }
}

fn boot(c: &TestCluster) -> (RawClient, ClientDBInfo) {
    let mut rc = RawClient::new();
    let info = ok(rc.open_database(c.coordinator_addr(), Uid::default(), Duration::from_secs(5)));
    (rc, info)
}

fn grv(rc: &mut RawClient, info: &ClientDBInfo) -> Version {
    ok(rc.read_version(info)).version
}

fn set(k: &[u8], v: &[u8]) -> MutationRef {
    MutationRef::new(
        mt::SET_VALUE,
        Bytes::copy_from_slice(k),
        Bytes::copy_from_slice(v),
    )
}

fn blind(rv: Version, k: &[u8], v: &[u8]) -> CommitTransactionRef {
    CommitTransactionRef {
        write_conflict_ranges: vec![KeyRange::single_key(k)],
        mutations: vec![set(k, v)],
        read_snapshot: rv,
        ..Default::default()
    }
}

fn storage_of(rc: &mut RawClient, info: &ClientDBInfo, key: &[u8]) -> StorageServerInterface {
    ok(rc.locations(info, key, None, 100, false)).results[0].servers[0].clone()
}

fn index_of(c: &TestCluster, ss: &StorageServerInterface) -> usize {
    (0..c.storage_server_count())
        .find(|&i| c.storage_interface(i).unique_id == ss.unique_id)
        .unwrap()
}

#[test]
fn injected_errors_take_each_reply_format() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    c.set(b"k", b"v");
    let v = grv(&mut rc, &info);
    let ss = storage_of(&mut rc, &info, b"k");
    // Storage reads: in the reply's error field, as a real storage server sends them.
    c.fail_next(RequestKind::GetValue, 2, ErrorCode::WRONG_SHARD_SERVER);
    for _ in 0..2 {
        let r = ok(rc.get_value(&ss, b"k", v));
        assert_eq!(
            (r.error, r.value),
            (Some(ErrorCode::WRONG_SHARD_SERVER), None)
        );
    }
    assert_eq!(
        ok(rc.get_value(&ss, b"k", v)).value.as_deref(),
        Some(&b"v"[..])
    );
    c.fail_next(RequestKind::GetKeyValues, 1, ErrorCode::FUTURE_VERSION);
    let r = ok(rc.get_key_values(
        &ss,
        KeySelector::first_greater_or_equal(Bytes::from_static(b"h")),
        KeySelector::first_greater_or_equal(Bytes::from_static(b"p")),
        v,
        10,
        1000,
    ));
    assert_eq!(r.error, Some(ErrorCode::FUTURE_VERSION));
    c.fail_next(RequestKind::GetKey, 1, ErrorCode::PROCESS_BEHIND);
    let r = ok(rc.get_key(
        &ss,
        KeySelector::first_greater_or_equal(Bytes::from_static(b"h")),
        v,
    ));
    assert_eq!(r.error, Some(ErrorCode::PROCESS_BEHIND));
    // Everything else: an ErrorOr error.
    c.fail_next(RequestKind::GetReadVersion, 1, ErrorCode::PROCESS_BEHIND);
    assert_eq!(
        rc.read_version(&info).unwrap(),
        ErrorOr::Err(ErrorCode::PROCESS_BEHIND)
    );
    c.fail_next(
        RequestKind::GetKeyServerLocations,
        1,
        ErrorCode::ALL_ALTERNATIVES_FAILED,
    );
    let r = rc.locations(&info, b"k", None, 100, false).unwrap();
    assert_eq!(r, ErrorOr::Err(ErrorCode::ALL_ALTERNATIVES_FAILED));
    c.fail_next(RequestKind::Commit, 1, ErrorCode::NOT_COMMITTED);
    let r = rc.commit(&info, blind(v, b"k", b"w")).unwrap();
    assert_eq!(r, ErrorOr::Err(ErrorCode::NOT_COMMITTED));
    assert_eq!(c.get(b"k").as_deref(), Some(&b"v"[..]));
    c.fail_next(RequestKind::WatchValue, 1, ErrorCode::WRONG_SHARD_SERVER);
    let (addr, reply, tok) = rc.send_watch(&ss, b"k", Some(b"v"), v).unwrap();
    let r = rc.recv::<fdb_protocol::messages::storage::WatchValueReply>(
        addr,
        reply,
        tok,
        Duration::from_secs(2),
    );
    assert_eq!(r, Ok(ErrorOr::Err(ErrorCode::WRONG_SHARD_SERVER)));
    assert_eq!(c.requests(RequestKind::GetValue), 3);
    assert_eq!(c.requests(RequestKind::Commit), 1);
}

#[test]
fn commit_unknown_result_applied_or_not() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    let v = grv(&mut rc, &info);
    c.commit_unknown_result_next(1, true);
    let r = rc.commit(&info, blind(v, b"applied", b"1")).unwrap();
    assert_eq!(r, ErrorOr::Err(ErrorCode::COMMIT_UNKNOWN_RESULT));
    assert_eq!(c.get(b"applied").as_deref(), Some(&b"1"[..]));
    c.commit_unknown_result_next(1, false);
    let r = rc.commit(&info, blind(v, b"lost", b"1")).unwrap();
    assert_eq!(r, ErrorOr::Err(ErrorCode::COMMIT_UNKNOWN_RESULT));
    assert_eq!(c.get(b"lost"), None);
    // Back to normal.
    let r = rc.commit(&info, blind(v, b"lost", b"2")).unwrap();
    assert!(matches!(r, ErrorOr::Ok(CommitID { version, .. }) if version > v));
}

/// Sends a read version request and a location request to the proxies on one connection,
/// in that order, and returns the reply tokens in the order the replies arrived
/// (`[grv, locations]` when undelayed).
fn race_grv_and_locations(rc: &mut RawClient, info: &ClientDBInfo) -> (Vec<&'static str>, Instant) {
    use fdb_protocol::messages::commit::GetKeyServerLocationsRequest;
    use fdb_protocol::messages::coordination::CommitProxyInterface;
    use fdb_protocol::messages::grv::GetReadVersionRequest;
    use fdb_protocol::messages::types::TenantInfo;
    let grv = &info.grv_proxies[0];
    let cp = &info.commit_proxies[0];
    let addr = fdb_tests::cluster::stream_addr(&grv.get_consistent_read_version);
    assert_eq!(addr, fdb_tests::cluster::stream_addr(&cp.commit));
    let (g, l) = (rc.reply_promise(), rc.reply_promise());
    let sent = Instant::now();
    let req = GetReadVersionRequest {
        transaction_count: 1,
        flags: GetReadVersionRequest::PRIORITY_DEFAULT,
        reply: g.clone(),
        max_version: -1,
        ..Default::default()
    };
    rc.send(addr, grv.stream(0), &req).unwrap();
    let req = GetKeyServerLocationsRequest {
        begin: Bytes::from_static(b"a"),
        limit: 100,
        reply: l.clone(),
        tenant: TenantInfo::none(),
        ..Default::default()
    };
    rc.send(
        addr,
        cp.stream(CommitProxyInterface::GET_KEY_SERVERS_LOCATIONS),
        &req,
    )
    .unwrap();
    let mut got = Vec::new();
    while got.len() < 2 && sent.elapsed() < Duration::from_secs(5) {
        got = rc.pump(addr, Duration::from_millis(10));
    }
    for t in &got {
        let _ = rc.recv_bytes(addr, *t, *t, Duration::ZERO);
    }
    let names = got
        .iter()
        .map(|t| {
            if *t == g.token {
                "grv"
            } else if *t == l.token {
                "locations"
            } else {
                "other"
            }
        })
        .collect();
    (names, sent)
}

#[test]
fn delayed_replies() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    // Undelayed, replies come in the order of the requests.
    assert_eq!(
        race_grv_and_locations(&mut rc, &info).0,
        ["grv", "locations"]
    );
    // A delay for one kind: the reply asked first arrives last, at least that late.
    c.set_reply_delay(
        Some(RequestKind::GetReadVersion),
        Duration::from_millis(300),
    );
    let (order, sent) = race_grv_and_locations(&mut rc, &info);
    assert_eq!(order, ["locations", "grv"], "other kinds are not delayed");
    assert!(sent.elapsed() >= Duration::from_millis(300));
    // A delay for every other kind: the locations wait too, less than the read version.
    c.set_reply_delay(None, Duration::from_millis(100));
    let (order, sent) = race_grv_and_locations(&mut rc, &info);
    assert_eq!(order, ["locations", "grv"]);
    assert!(sent.elapsed() >= Duration::from_millis(300));
    let t = Instant::now();
    ok(rc.locations(&info, b"a", None, 100, false));
    assert!(t.elapsed() >= Duration::from_millis(100));
    c.clear_faults();
    assert_eq!(
        race_grv_and_locations(&mut rc, &info).0,
        ["grv", "locations"]
    );
}

#[test]
fn held_replies_are_released_reordered() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    c.set(b"k", b"v");
    let v = grv(&mut rc, &info);
    let ss = storage_of(&mut rc, &info, b"k");
    let addr = fdb_tests::cluster::stream_addr(&ss.get_value);
    c.hold_replies(Some(RequestKind::GetValue));
    let mut replies = Vec::new();
    for key in [&b"k"[..], b"l", b"m"] {
        let reply = rc.reply_promise();
        let req = fdb_protocol::messages::storage::GetValueRequest {
            key: Bytes::copy_from_slice(key),
            version: v,
            reply: reply.clone(),
            ..Default::default()
        };
        rc.send(addr, ss.stream(StorageServerInterface::GET_VALUE), &req)
            .unwrap();
        replies.push(reply.token);
    }
    assert!(fdb_tests::testkit::eventually(
        Duration::from_secs(2),
        || c.held_replies() == 3
    ));
    assert!(rc.pump(addr, Duration::from_millis(100)).is_empty());
    assert_eq!(c.release_replies(ReleaseOrder::Reversed), 3);
    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < 3 && start.elapsed() < Duration::from_secs(2) {
        got = rc.pump(addr, Duration::from_millis(20));
    }
    replies.reverse();
    assert_eq!(got, replies);
    // No longer holding.
    assert_eq!(
        ok(rc.get_value(&ss, b"k", v)).value.as_deref(),
        Some(&b"v"[..])
    );
}

#[test]
fn silent_process_answers_nothing() {
    let c = TestCluster::start();
    c.set(b"k", b"v");
    let (mut rc, info) = boot(&c);
    let v = grv(&mut rc, &info);
    let ss = storage_of(&mut rc, &info, b"k");
    let role = Role::Storage(index_of(&c, &ss));
    rc.timeout = Duration::from_millis(200);
    c.set_silent(role, true);
    assert_eq!(rc.get_value(&ss, b"k", v), Err(RawError::Timeout));
    let addr = c.addr(role);
    let reply = rc.reply_promise();
    rc.send(
        addr,
        well_known::PING_PACKET,
        &PingRequest {
            reply: reply.clone(),
        },
    )
    .unwrap();
    let r = rc.recv::<Void>(
        addr,
        reply.token,
        well_known::PING_PACKET,
        Duration::from_millis(200),
    );
    assert_eq!(r, Err(RawError::Timeout));
    // Other processes are fine.
    grv(&mut rc, &info);
    c.set_silent(role, false);
    // Speaking again, it serves what it holds.
    assert_eq!(
        ok(rc.get_value(&ss, b"k", v)).value.as_deref(),
        Some(&b"v"[..])
    );
}

#[test]
fn dropped_connections_close_and_reconnect() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    grv(&mut rc, &info);
    assert!(c.connection_count() >= 2);
    c.drop_connections_of(Role::Proxies);
    assert!(matches!(rc.read_version(&info), Err(RawError::Io(_))));
    // The coordinator connection survived; a new proxy connection works.
    grv(&mut rc, &info);
    c.drop_connections();
    let r = rc.open_database(c.coordinator_addr(), Uid::default(), Duration::from_secs(2));
    assert!(matches!(r, Err(RawError::Io(_))));
    ok(rc.open_database(c.coordinator_addr(), Uid::default(), Duration::from_secs(2)));
}

#[test]
fn injected_no_reply_and_closed_connection() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    rc.timeout = Duration::from_millis(300);
    c.inject(RequestKind::GetReadVersion, 1, Injected::NoReply);
    assert_eq!(rc.read_version(&info), Err(RawError::Timeout));
    grv(&mut rc, &info);
    let v = grv(&mut rc, &info);
    c.inject(RequestKind::Commit, 1, Injected::CloseConnection);
    assert!(matches!(
        rc.commit(&info, blind(v, b"x", b"1")),
        Err(RawError::Io(_))
    ));
    assert_eq!(c.get(b"x"), None);
    assert!(matches!(
        rc.commit(&info, blind(v, b"x", b"1")),
        Ok(ErrorOr::Ok(_))
    ));
}

#[test]
fn kill_and_restart_a_storage_server() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    c.set(b"k", b"v");
    let v = grv(&mut rc, &info);
    let ss = storage_of(&mut rc, &info, b"k");
    let role = Role::Storage(index_of(&c, &ss));
    c.kill(role);
    assert!(!c.is_alive(role));
    assert!(matches!(rc.get_value(&ss, b"k", v), Err(RawError::Io(_))));
    assert!(
        matches!(rc.get_value(&ss, b"k", v), Err(RawError::Io(_))),
        "refused"
    );
    c.restart(role);
    // Its old interface is gone; the new one serves the same data.
    assert_eq!(
        rc.get_value(&ss, b"k", v),
        Err(RawError::EndpointNotFound(ss.stream(0)))
    );
    let new = storage_of(&mut rc, &info, b"k");
    assert_eq!(new.unique_id, ss.unique_id);
    assert_ne!(new.get_value.endpoint.token, ss.get_value.endpoint.token);
    assert_eq!(
        new.get_value.endpoint.addresses,
        ss.get_value.endpoint.addresses
    );
    assert_eq!(
        ok(rc.get_value(&new, b"k", v)).value.as_deref(),
        Some(&b"v"[..])
    );
}

#[test]
fn restarting_the_proxies_answers_the_long_poll() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    let coord = c.coordinator_addr();
    let reply = rc.reply_promise();
    let tok = well_known::CLIENT_LEADER_REG_OPEN_DATABASE;
    let req = OpenDatabaseCoordRequest {
        known_client_info_id: info.id,
        reply: reply.clone(),
        ..Default::default()
    };
    rc.send(coord, tok, &req).unwrap();
    assert!(rc.pump(coord, Duration::from_millis(200)).is_empty());
    c.kill(Role::Proxies);
    assert!(matches!(rc.read_version(&info), Err(RawError::Io(_))));
    assert!(
        rc.pump(coord, Duration::from_millis(100)).is_empty(),
        "no change yet"
    );
    // A restarted process does not take its roles up again: the cluster recovers, and the
    // held long poll is answered with the recovery's first publication, which names no
    // proxies (fdbserver's shape); the new ones follow.
    c.restart(Role::Proxies);
    assert_eq!(c.recoveries(), 1);
    let first: ClientDBInfo = match rc.recv(coord, reply.token, tok, Duration::from_secs(2)) {
        Ok(ErrorOr::Ok(i)) => i,
        other => panic!("{other:?}"),
    };
    assert_ne!(first.id, info.id);
    assert!(first.commit_proxies.is_empty() && first.grv_proxies.is_empty());
    assert_eq!(rc.read_version(&first), Err(RawError::NoProxies));
    let new = ok(rc.open_database(coord, first.id, Duration::from_secs(2)));
    assert_ne!(new.id, first.id);
    assert_ne!(
        new.commit_proxies[0].commit.endpoint.token,
        info.commit_proxies[0].commit.endpoint.token
    );
    assert!(matches!(
        rc.read_version(&info),
        Err(RawError::EndpointNotFound(_))
    ));
    grv(&mut rc, &new);
    // Restarting a coordinator: refused while down, same address after.
    c.kill(Role::Coordinator(0));
    for _ in 0..2 {
        let r = rc.open_database(coord, Uid::default(), Duration::from_secs(1));
        assert!(
            matches!(r, Err(RawError::Io(_))),
            "connecting is refused: {r:?}"
        );
    }
    c.restart(Role::Coordinator(0));
    // The same proxies (the recovery's later publications only change the id).
    assert_eq!(
        ok(rc.open_database(coord, Uid::default(), Duration::from_secs(2))).commit_proxies,
        new.commit_proxies
    );
}

#[test]
fn moving_a_shard_fails_watches_on_the_old_server() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    c.set(b"k", b"v");
    let v = grv(&mut rc, &info);
    let ss = storage_of(&mut rc, &info, b"k");
    let (addr, reply, tok) = rc.send_watch(&ss, b"k", Some(b"v"), v).unwrap();
    assert!(fdb_tests::testkit::eventually(
        Duration::from_secs(2),
        || c.pending_watches() == 1
    ));
    let to = (index_of(&c, &ss) + 1) % 3;
    c.move_shard(b"k", to);
    let r = rc.recv::<fdb_protocol::messages::storage::WatchValueReply>(
        addr,
        reply,
        tok,
        Duration::from_secs(2),
    );
    assert_eq!(r, Ok(ErrorOr::Err(ErrorCode::WRONG_SHARD_SERVER)));
    assert_eq!(
        storage_of(&mut rc, &info, b"k").unique_id,
        c.storage_interface(to).unique_id
    );
}

/// Bank transfers from several threads, each with its own connections, through a raw retry
/// loop (re-read, recompute, commit; re-bootstrap on connection trouble), while faults come and
/// go. Money is conserved: transfers are absolute writes checked by read conflicts, so even a
/// `commit_unknown_result` that was applied cannot create or destroy any.
#[test]
fn bank_transfers_survive_faults() {
    const ACCOUNTS: usize = 12;
    let c = TestCluster::builder().replication(1).start();
    let key = |i: usize| format!("{}acct{i:02}", ["a", "h", "p"][i % 3]).into_bytes();
    for i in 0..ACCOUNTS {
        c.set(&key(i), &100i64.to_le_bytes());
    }
    let acked = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..3u64 {
        let cluster_addr = c.coordinator_addr();
        let acked = acked.clone();
        let stop = stop.clone();
        workers.push(std::thread::spawn(move || {
            let mut rc = RawClient::new();
            rc.timeout = Duration::from_millis(500);
            let mut rng = 0x1234_5678_9abc_def0u64 ^ (w << 40);
            let mut next = move || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let mut info: Option<ClientDBInfo> = None;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let inf = match &info {
                    Some(i) => i.clone(),
                    None => {
                        match rc.open_database(cluster_addr, Uid::default(), Duration::from_secs(1))
                        {
                            Ok(ErrorOr::Ok(i)) => {
                                info = Some(i.clone());
                                i
                            }
                            _ => continue,
                        }
                    }
                };
                let (from, to) = (next() as usize % ACCOUNTS, next() as usize % ACCOUNTS);
                if from == to {
                    continue;
                }
                let attempt = (|| -> Result<bool, ()> {
                    let rv = match rc.read_version(&inf) {
                        Ok(ErrorOr::Ok(r)) => r.version,
                        _ => return Err(()),
                    };
                    let mut bal = [0i64; 2];
                    for (j, k) in [key(from), key(to)].iter().enumerate() {
                        let r = match rc.get(&inf, k, rv) {
                            Ok(ErrorOr::Ok(r)) if r.error.is_none() => r,
                            _ => return Err(()),
                        };
                        bal[j] = i64::from_le_bytes(r.value.unwrap()[..8].try_into().unwrap());
                    }
                    let amount = (next() % 7) as i64;
                    let t = CommitTransactionRef {
                        read_conflict_ranges: vec![
                            KeyRange::single_key(&key(from)),
                            KeyRange::single_key(&key(to)),
                        ],
                        write_conflict_ranges: vec![
                            KeyRange::single_key(&key(from)),
                            KeyRange::single_key(&key(to)),
                        ],
                        mutations: vec![
                            set(&key(from), &(bal[0] - amount).to_le_bytes()),
                            set(&key(to), &(bal[1] + amount).to_le_bytes()),
                        ],
                        read_snapshot: rv,
                        ..Default::default()
                    };
                    match rc.commit(&inf, t) {
                        Ok(ErrorOr::Ok(_)) => Ok(true),
                        Ok(ErrorOr::Err(_)) => Ok(false),
                        Err(_) => Err(()),
                    }
                })();
                match attempt {
                    Ok(true) => {
                        acked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    Ok(false) => {}
                    Err(()) => {
                        // Connection trouble: re-bootstrap, as a client would after a recovery.
                        info = None;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            }
        }));
    }
    type Fault = Box<dyn Fn(&TestCluster)>;
    let faults: Vec<Fault> = vec![
        Box::new(|c| c.fail_next(RequestKind::GetValue, 3, ErrorCode::WRONG_SHARD_SERVER)),
        Box::new(|c| c.commit_unknown_result_next(2, true)),
        Box::new(|c| c.commit_unknown_result_next(2, false)),
        Box::new(|c| c.drop_connections()),
        Box::new(|c| c.set_reply_delay(Some(RequestKind::Commit), Duration::from_millis(30))),
        Box::new(|c| c.move_shard(b"h", 0)),
        Box::new(|c| c.restart(Role::Storage(1))),
        Box::new(|c| c.restart(Role::Proxies)),
        Box::new(|c| c.fail_next(RequestKind::GetReadVersion, 2, ErrorCode::PROCESS_BEHIND)),
        Box::new(|c| c.clear_faults()),
    ];
    let progress = |n: u64| {
        let want = acked.load(std::sync::atomic::Ordering::SeqCst) + n;
        assert!(
            fdb_tests::testkit::eventually(Duration::from_secs(30), || {
                acked.load(std::sync::atomic::Ordering::SeqCst) >= want
            }),
            "no progress"
        );
    };
    for (i, f) in faults.iter().enumerate() {
        progress(10);
        f(&c);
        // Each injected error was met by a request before the next fault.
        assert!(
            fdb_tests::testkit::eventually(Duration::from_secs(30), || {
                c.injections_left(None) == 0
            }),
            "fault {i}: {} injections never fired",
            c.injections_left(None)
        );
    }
    c.clear_faults();
    progress(20);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for w in workers {
        w.join().unwrap();
    }
    let snap = c.snapshot();
    let total: i64 = (0..ACCOUNTS)
        .map(|i| i64::from_le_bytes(snap[&key(i)][..8].try_into().unwrap()))
        .sum();
    assert_eq!(total, 100 * ACCOUNTS as i64);
    assert!(
        acked.load(std::sync::atomic::Ordering::SeqCst) >= 100,
        "workers made progress"
    );
    assert!(c.requests(RequestKind::Commit) >= 100);
}
