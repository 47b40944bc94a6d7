//! The in-process test cluster, exercised with raw protocol messages over TCP (no client
//! transaction layer): bootstrap, read versions, locations, commits of every mutation kind,
//! reads of every kind across shards and servers, conflicts, versions out of the window,
//! wrong shards and watches.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::commit::{
    mutation_type as mt, CommitID, CommitTransactionRef, MutationRef,
};
use fdb_protocol::messages::coordination::ClientDBInfo;
use fdb_protocol::messages::storage::{StorageServerInterface, WatchValueReply};
use fdb_protocol::messages::types::{KeyRange, KeySelector, Version};
use fdb_protocol::messages::ErrorOr;
use fdb_protocol::Uid;
use fdb_tests::cluster::{RawClient, RawError, Role, TestCluster};

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

fn b(s: &[u8]) -> Bytes {
    Bytes::copy_from_slice(s)
}

fn set(k: &[u8], v: &[u8]) -> MutationRef {
    MutationRef::new(mt::SET_VALUE, b(k), b(v))
}

/// A blind write transaction (no read conflicts).
fn tx(read_snapshot: Version, mutations: Vec<MutationRef>) -> CommitTransactionRef {
    let writes = mutations
        .iter()
        .map(|m| match m.kind {
            mt::CLEAR_RANGE => KeyRange::new(m.param1.clone(), m.param2.clone()),
            _ => KeyRange::single_key(&m.param1),
        })
        .collect();
    CommitTransactionRef {
        write_conflict_ranges: writes,
        mutations,
        read_snapshot,
        ..Default::default()
    }
}

fn commit(rc: &mut RawClient, info: &ClientDBInfo, t: CommitTransactionRef) -> ErrorOr<CommitID> {
    rc.commit(info, t).expect("commit reply")
}

fn commit_ok(rc: &mut RawClient, info: &ClientDBInfo, muts: Vec<MutationRef>) -> CommitID {
    let v = grv(rc, info);
    match commit(rc, info, tx(v, muts)) {
        ErrorOr::Ok(id) => id,
        ErrorOr::Err(e) => panic!("commit failed: {e:?}"),
    }
}

fn team_of(rc: &mut RawClient, info: &ClientDBInfo, key: &[u8]) -> StorageServerInterface {
    ok(rc.locations(info, key, None, 100, false)).results[0].servers[0].clone()
}

const KEYS: &[&[u8]] = &[
    b"\x01a", b"\x02b", b"\x02zz", b"B", b"a", b"b", b"g", b"h", b"k", b"p", b"q", b"w", b"zz",
];

fn fill(rc: &mut RawClient, info: &ClientDBInfo) -> Version {
    let muts = KEYS.iter().map(|k| set(k, &[b"v-", *k].concat())).collect();
    commit_ok(rc, info, muts).version
}

#[test]
fn bootstrap_and_read_versions() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    assert_eq!(info.grv_proxies.len(), 1);
    assert_eq!(info.commit_proxies.len(), 1);
    assert_eq!(info, c.client_db_info());
    // The long poll is held while the client knows the current id.
    let held = rc.open_database(c.coordinator_addr(), info.id, Duration::from_millis(300));
    assert_eq!(held, Err(RawError::Timeout));
    // Versions advance about a million per second.
    let v1 = grv(&mut rc, &info);
    std::thread::sleep(Duration::from_millis(100));
    let v2 = grv(&mut rc, &info);
    // (A lower bound only: a loaded machine may sleep longer than asked.)
    assert!(v2 - v1 >= 90_000, "{v1} -> {v2}");
    // A commit's version is above every read version handed out; reads see it at once.
    let id = commit_ok(&mut rc, &info, vec![set(b"k", b"v")]);
    assert!(id.version > v2);
    assert_eq!(id.txn_batch_id, 0);
    assert!(grv(&mut rc, &info) >= id.version);
    assert!(c.version() >= id.version);
    // Ping and protocol info on every process.
    for role in [
        Role::Coordinator(0),
        Role::Proxies,
        Role::Storage(0),
        Role::Storage(2),
    ] {
        let addr = c.addr(role);
        let reply = rc.reply_promise();
        let tok = fdb_protocol::uid::well_known::PING_PACKET;
        rc.send(
            addr,
            tok,
            &fdb_protocol::messages::coordination::PingRequest {
                reply: reply.clone(),
            },
        )
        .unwrap();
        let r: ErrorOr<fdb_protocol::messages::Void> = rc
            .recv(addr, reply.token, tok, Duration::from_secs(2))
            .unwrap();
        assert!(matches!(r, ErrorOr::Ok(_)));
    }
}

#[test]
fn locations_cover_the_key_space_on_several_servers() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    let all = ok(rc.locations(&info, b"", Some(b"\xff\xff"), 100, false));
    let shards = c.shards();
    assert_eq!(all.results.len(), shards.len());
    assert!(shards.len() >= 6);
    let mut ports = std::collections::BTreeSet::new();
    let mut prev_end = Bytes::new();
    for (r, s) in all.results.iter().zip(&shards) {
        assert_eq!(r.range.begin, prev_end);
        assert_eq!(
            (&r.range.begin[..], &r.range.end[..]),
            (&s.begin[..], &s.end[..])
        );
        prev_end = r.range.end.clone();
        assert_eq!(r.servers.len(), 1);
        ports.insert(r.servers[0].get_value.endpoint.addresses.address.port);
    }
    assert_eq!(&prev_end[..], b"\xff\xff");
    assert_eq!(ports.len(), 3, "every storage server has its own port");
    assert_eq!(all.results_tag_mapping.len(), shards.len());

    // One key: the shard containing it.
    let one = ok(rc.locations(&info, b"b", None, 100, false));
    assert_eq!(one.results.len(), 1);
    assert_eq!(&one.results[0].range.begin[..], b"a");
    assert_eq!(&one.results[0].range.end[..], b"h");
    // Reverse, no end: the shard containing the key before (here [a, h) for "h").
    let before = ok(rc.locations(&info, b"h", None, 100, true));
    assert_eq!(&before.results[0].range.begin[..], b"a");
    // A bounded range and a limit.
    let some = ok(rc.locations(&info, b"b", Some(b"q"), 100, false));
    let begins: Vec<&[u8]> = some.results.iter().map(|r| &r.range.begin[..]).collect();
    assert_eq!(begins, vec![&b"a"[..], b"h", b"p"]);
    let limited = ok(rc.locations(&info, b"b", Some(b"q"), 2, false));
    assert_eq!(limited.results.len(), 2);
    let rev = ok(rc.locations(&info, b"b", Some(b"q"), 100, true));
    let begins: Vec<&[u8]> = rev.results.iter().map(|r| &r.range.begin[..]).collect();
    assert_eq!(begins, vec![&b"p"[..], b"h", b"a"]);
    // System keys are served too.
    let sys = ok(rc.locations(&info, b"\xff/x", None, 100, false));
    assert_eq!(&sys.results[0].range.end[..], b"\xff\xff");
    assert_eq!(
        c.requests(fdb_tests::cluster::RequestKind::GetKeyServerLocations),
        7
    );
}

#[test]
fn commits_apply_every_mutation_kind() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    fill(&mut rc, &info);
    let mut vs_key = b"vs/".to_vec();
    vs_key.extend_from_slice(&[0; 10]);
    vs_key.extend_from_slice(&3u32.to_le_bytes());
    let mut vs_val = b"val:".to_vec();
    vs_val.extend_from_slice(&[0; 10]);
    vs_val.extend_from_slice(&4u32.to_le_bytes());
    let muts = vec![
        set(b"a-counter", &5u64.to_le_bytes()),
        MutationRef::new(mt::ADD_VALUE, b(b"a-counter"), b(&7u64.to_le_bytes())),
        MutationRef::new(mt::ADD_VALUE, b(b"a-fresh"), b(&1u32.to_le_bytes())),
        MutationRef::new(mt::CLEAR_RANGE, b(b"b"), b(b"k")), // b, g, h (crosses a shard boundary)
        MutationRef::new(mt::CLEAR_RANGE, b(b"q"), b(b"q\x00")),
        MutationRef::new(mt::BYTE_MAX, b(b"zz"), b(b"zzz")),
        MutationRef::new(mt::COMPARE_AND_CLEAR, b(b"w"), b(b"v-w")),
        MutationRef::new(mt::SET_VERSIONSTAMPED_KEY, b(&vs_key), b(b"stamped")),
        MutationRef::new(mt::SET_VERSIONSTAMPED_VALUE, b(b"vsv"), b(&vs_val)),
        set(b"k", b"new"),
        set(b"k", b"newer"),
    ];
    let id = commit_ok(&mut rc, &info, muts);
    let stamp = id.versionstamp();
    let snap = c.snapshot();
    assert_eq!(snap[&b"a-counter"[..]], 12u64.to_le_bytes());
    assert_eq!(snap[&b"a-fresh"[..]], 1u32.to_le_bytes());
    for gone in [&b"b"[..], b"g", b"h", b"q", b"w"] {
        assert!(!snap.contains_key(gone), "{gone:?} should be cleared");
    }
    assert_eq!(snap[&b"zz"[..]], b"zzz");
    assert_eq!(snap[&b"k"[..]], b"newer");
    assert_eq!(snap[&[&b"vs/"[..], &stamp].concat()], b"stamped");
    assert_eq!(snap[&b"vsv"[..]], [&b"val:"[..], &stamp].concat());

    // Read back through the storage servers, shard by shard, at the commit version.
    let v = grv(&mut rc, &info);
    let rows = rc.range(&info, b"", b"\xff", v).unwrap().unwrap();
    let got: BTreeMap<Vec<u8>, Vec<u8>> = rows
        .into_iter()
        .map(|kv| (kv.key.to_vec(), kv.value.to_vec()))
        .collect();
    // (The store also holds the system keys, `\xff/conf/tenant_mode` among them.)
    let user: BTreeMap<Vec<u8>, Vec<u8>> = snap
        .into_iter()
        .filter(|(k, _)| k.as_slice() < b"\xff".as_slice())
        .collect();
    assert_eq!(got, user);
    // And at the version before the commit, the old values.
    let old = ok(rc.get(&info, b"h", id.version - 1));
    assert_eq!(old.value.as_deref(), Some(&b"v-h"[..]));
    let new = ok(rc.get(&info, b"h", id.version));
    assert_eq!(new.value, None);
    assert_eq!(new.error, None);
}

/// What a key selector resolves to, computed from a snapshot.
fn expected(snap: &BTreeMap<Vec<u8>, Vec<u8>>, sel: &KeySelector) -> Vec<u8> {
    let keys: Vec<&Vec<u8>> = snap.keys().collect();
    let base = keys
        .iter()
        .rposition(|k| {
            if sel.or_equal {
                k[..] <= sel.key[..]
            } else {
                k[..] < sel.key[..]
            }
        })
        .map_or(-1, |i| i as i64);
    let i = base + sel.offset as i64;
    if i < 0 {
        Vec::new()
    } else if i as usize >= keys.len() {
        b"\xff\xff".to_vec()
    } else {
        keys[i as usize].clone()
    }
}

/// Resolves a selector the way NativeAPI's `getKey` does: ask the server for the shard, and
/// continue with the selector it answers until it says "found".
fn resolve(
    rc: &mut RawClient,
    info: &ClientDBInfo,
    mut sel: KeySelector,
    v: Version,
) -> (Vec<u8>, usize) {
    for hops in 1..50 {
        if &sel.key[..] == b"\xff\xff" {
            if sel.offset > 0 {
                return (sel.key.to_vec(), hops);
            }
            sel.or_equal = false;
        } else if sel.key.is_empty() && sel.offset <= 0 {
            return (Vec::new(), hops);
        }
        let backward = !sel.or_equal && sel.offset <= 0;
        let loc = ok(rc.locations(info, &sel.key, None, 100, backward));
        let rep = ok(rc.get_key(&loc.results[0].servers[0], sel.clone(), v));
        assert_eq!(rep.error, None);
        sel = rep.sel;
        if sel.offset == 0 && sel.or_equal {
            return (sel.key.to_vec(), hops);
        }
    }
    panic!("selector did not resolve");
}

#[test]
fn key_selectors_resolve_across_shards() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    fill(&mut rc, &info);
    let snap = c.snapshot();
    let v = grv(&mut rc, &info);
    let mut crossed = 0;
    let probes: &[&[u8]] = &[
        b"", b"\x01", b"\x02b", b"A", b"a", b"b", b"c", b"h", b"zz", b"zzz", b"\xff",
    ];
    for key in probes {
        for or_equal in [false, true] {
            for offset in [-4, -1, 0, 1, 2, 5, 20] {
                let sel = KeySelector::new(b(key), or_equal, offset);
                let (got, hops) = resolve(&mut rc, &info, sel.clone(), v);
                assert_eq!(got, expected(&snap, &sel), "{sel:?}");
                if hops > 1 {
                    crossed += 1;
                }
            }
        }
    }
    assert!(crossed > 10, "selectors should walk off shards ({crossed})");
}

#[test]
fn range_reads_limits_more_and_reverse() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    let muts = (0..50)
        .map(|i| set(format!("h{i:02}").as_bytes(), &[b'x'; 100]))
        .collect();
    commit_ok(&mut rc, &info, muts);
    let v = grv(&mut rc, &info);
    let ss = team_of(&mut rc, &info, b"h");
    let fge = |k: &[u8]| KeySelector::first_greater_or_equal(b(k));
    // Row limit: `more` when the limit stopped it.
    let r = ok(rc.get_key_values(&ss, fge(b"h"), fge(b"p"), v, 10, 1 << 20));
    assert_eq!((r.data.0.len(), r.more, r.version), (10, true, v));
    assert_eq!(&r.data.0[9].key[..], b"h09");
    let r = ok(rc.get_key_values(&ss, fge(b"h"), fge(b"p"), v, 100, 1 << 20));
    assert_eq!((r.data.0.len(), r.more), (50, false));
    // Byte limit: the row crossing it is included (FDB counts key + value + 24 per row).
    let r = ok(rc.get_key_values(&ss, fge(b"h"), fge(b"p"), v, 100, 3 * 127));
    assert_eq!((r.data.0.len(), r.more), (3, true));
    let r = ok(rc.get_key_values(&ss, fge(b"h"), fge(b"p"), v, 100, 3 * 127 + 1));
    assert_eq!((r.data.0.len(), r.more), (4, true));
    // Reverse.
    let r = ok(rc.get_key_values(&ss, fge(b"h"), fge(b"p"), v, -3, 1 << 20));
    let keys: Vec<&[u8]> = r.data.0.iter().map(|kv| &kv.key[..]).collect();
    assert_eq!((keys, r.more), (vec![&b"h49"[..], b"h48", b"h47"], true));
    // Selectors that are not firstGreaterOrEqual, inside the shard.
    let r = ok(rc.get_key_values(
        &ss,
        KeySelector::first_greater_than(b(b"h10")),
        KeySelector::last_less_or_equal(b(b"h13")),
        v,
        100,
        1 << 20,
    ));
    let keys: Vec<&[u8]> = r.data.0.iter().map(|kv| &kv.key[..]).collect();
    assert_eq!(keys, vec![&b"h11"[..], b"h12"]);
    // Empty result.
    let r = ok(rc.get_key_values(&ss, fge(b"h2"), fge(b"h1"), v, 100, 1 << 20));
    assert_eq!((r.data.0.len(), r.more), (0, false));
    // A range past this server's shard is wrong_shard_server, in the reply's error field.
    let r = ok(rc.get_key_values(&ss, fge(b"h"), fge(b"z"), v, 100, 1 << 20));
    assert_eq!(r.error, Some(ErrorCode::WRONG_SHARD_SERVER));
    // ... and so is a selector whose offset leaves the shard.
    let r = ok(rc.get_key_values(
        &ss,
        KeySelector::new(b(b"h"), false, 60),
        fge(b"p"),
        v,
        100,
        1 << 20,
    ));
    assert_eq!(r.error, Some(ErrorCode::WRONG_SHARD_SERVER));
}

#[test]
fn conflicts_and_conflicting_keys() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    fill(&mut rc, &info);
    let rv = grv(&mut rc, &info);
    // B writes k after A's read version.
    commit_ok(&mut rc, &info, vec![set(b"k", b"by-B")]);
    // A read k and the range [p, q]: it conflicts.
    let mut a = tx(rv, vec![set(b"k", b"by-A")]);
    a.read_conflict_ranges = vec![KeyRange::new(b(b"p"), b(b"q")), KeyRange::single_key(b"k")];
    assert_eq!(
        commit(&mut rc, &info, a.clone()),
        ErrorOr::Err(ErrorCode::NOT_COMMITTED)
    );
    a.report_conflicting_keys = true;
    match commit(&mut rc, &info, a.clone()) {
        ErrorOr::Ok(id) => {
            assert_eq!(id.version, -1);
            assert_eq!(id.conflicting_kr_indices, Some(vec![1]));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.get(b"k").as_deref(), Some(&b"by-B"[..]));
    // Reads that do not intersect, or a fresh read version, commit.
    let mut a2 = tx(rv, vec![set(b"k2", b"x")]);
    a2.read_conflict_ranges = vec![KeyRange::new(b(b"k\x00"), b(b"p"))];
    assert!(matches!(commit(&mut rc, &info, a2), ErrorOr::Ok(_)));
    a.read_snapshot = grv(&mut rc, &info);
    a.report_conflicting_keys = false;
    assert!(matches!(commit(&mut rc, &info, a), ErrorOr::Ok(_)));
    // Range conflict: a clear over a read range.
    let rv = grv(&mut rc, &info);
    commit_ok(
        &mut rc,
        &info,
        vec![MutationRef::new(mt::CLEAR_RANGE, b(b"a"), b(b"c"))],
    );
    let mut r = tx(rv, vec![set(b"x", b"1")]);
    r.read_conflict_ranges = vec![KeyRange::single_key(b"b")];
    assert_eq!(
        commit(&mut rc, &info, r),
        ErrorOr::Err(ErrorCode::NOT_COMMITTED)
    );
}

#[test]
fn versions_outside_the_window() {
    let c = TestCluster::builder().mvcc_window(1_000_000).start();
    let (mut rc, info) = boot(&c);
    fill(&mut rc, &info);
    let old = grv(&mut rc, &info);
    let ss = team_of(&mut rc, &info, b"k");
    c.advance_version(2_000_000);
    // Reads and read-conflicting commits at `old` are too old; blind writes are not.
    let r = ok(rc.get_value(&ss, b"k", old));
    assert_eq!(r.error, Some(ErrorCode::TRANSACTION_TOO_OLD));
    let mut t = tx(old, vec![set(b"k", b"x")]);
    t.read_conflict_ranges = vec![KeyRange::single_key(b"k")];
    assert_eq!(
        commit(&mut rc, &info, t),
        ErrorOr::Err(ErrorCode::TRANSACTION_TOO_OLD)
    );
    assert!(matches!(
        commit(&mut rc, &info, tx(old, vec![set(b"k", b"y")])),
        ErrorOr::Ok(_)
    ));
    // A version ahead of the cluster: held up to FUTURE_VERSION_DELAY, then future_version.
    let now = grv(&mut rc, &info);
    let t0 = Instant::now();
    let r = ok(rc.get_value(&ss, b"k", now + 10_000_000));
    assert_eq!(r.error, Some(ErrorCode::FUTURE_VERSION));
    assert!(t0.elapsed() >= Duration::from_millis(900));
    // Slightly ahead: served once the version arrives.
    let r = ok(rc.get_value(&ss, b"k", now + 50_000));
    assert_eq!((r.error, r.value.as_deref()), (None, Some(&b"y"[..])));
}

#[test]
fn wrong_shard_server_after_a_move() {
    let c = TestCluster::start();
    let (mut rc, info) = boot(&c);
    fill(&mut rc, &info);
    let v = grv(&mut rc, &info);
    let owner = team_of(&mut rc, &info, b"k");
    let other = team_of(&mut rc, &info, b"b");
    assert_ne!(owner.unique_id, other.unique_id);
    let r = ok(rc.get_value(&other, b"k", v));
    assert_eq!(r.error, Some(ErrorCode::WRONG_SHARD_SERVER));
    let r = ok(rc.get_value(&owner, b"k", v));
    assert_eq!(r.value.as_deref(), Some(&b"v-k"[..]));
    // Move [h, p) to b's server.
    let to = (0..3)
        .find(|&i| c.storage_interface(i).unique_id == other.unique_id)
        .unwrap();
    c.move_shard(b"k", to);
    let r = ok(rc.get_value(&owner, b"k", v));
    assert_eq!(r.error, Some(ErrorCode::WRONG_SHARD_SERVER));
    let moved = team_of(&mut rc, &info, b"k");
    assert_eq!(moved.unique_id, other.unique_id);
    let r = ok(rc.get_value(&moved, b"k", v));
    assert_eq!(r.value.as_deref(), Some(&b"v-k"[..]));
    // Adjacent shards on one server are read as one range.
    let r = ok(rc.get_key_values(
        &moved,
        KeySelector::first_greater_or_equal(b(b"a")),
        KeySelector::first_greater_or_equal(b(b"p")),
        v,
        100,
        1 << 20,
    ));
    assert_eq!(r.error, None);
    assert_eq!(r.data.0.len(), 5); // a b g h k
}

#[test]
fn watches_fire_on_change() {
    let c = TestCluster::builder()
        .watch_timeout(Duration::from_millis(500))
        .start();
    let (mut rc, info) = boot(&c);
    fill(&mut rc, &info);
    let v = grv(&mut rc, &info);
    let ss = team_of(&mut rc, &info, b"k");
    // Value already different: fires at once.
    let (addr, reply, tok) = rc.send_watch(&ss, b"k", Some(b"other"), v).unwrap();
    let r: ErrorOr<WatchValueReply> = rc.recv(addr, reply, tok, Duration::from_secs(2)).unwrap();
    assert!(matches!(r, ErrorOr::Ok(w) if w.version >= v));
    // Same value: held until a commit changes it.
    let (addr, reply, tok) = rc.send_watch(&ss, b"k", Some(b"v-k"), v).unwrap();
    assert_eq!(
        rc.recv::<WatchValueReply>(addr, reply, tok, Duration::from_millis(100)),
        Err(RawError::Timeout)
    );
    assert_eq!(c.pending_watches(), 1);
    // Setting the same value again does not fire it.
    commit_ok(&mut rc, &info, vec![set(b"k", b"v-k")]);
    assert_eq!(
        rc.recv::<WatchValueReply>(addr, reply, tok, Duration::from_millis(100)),
        Err(RawError::Timeout)
    );
    let id = commit_ok(&mut rc, &info, vec![set(b"k", b"changed")]);
    let r: ErrorOr<WatchValueReply> = rc.recv(addr, reply, tok, Duration::from_secs(2)).unwrap();
    // At the storage server's version when it noticed: the change's, or a later one (as a
    // real storage server answers), never past what a read version can be.
    let fired = match r {
        ErrorOr::Ok(w) => w.version,
        other => panic!("{other:?}"),
    };
    assert!(fired >= id.version, "{fired} < {}", id.version);
    assert!(fired <= grv(&mut rc, &info));
    // A watch on an absent key fires when it appears; an unchanged one times out.
    let v = grv(&mut rc, &info);
    let (addr, reply, tok) = rc.send_watch(&ss, b"missing", None, v).unwrap();
    let (_, reply2, tok2) = rc.send_watch(&ss, b"l", None, v).unwrap();
    c.set(b"missing", b"here");
    let r: ErrorOr<WatchValueReply> = rc.recv(addr, reply, tok, Duration::from_secs(2)).unwrap();
    assert!(matches!(r, ErrorOr::Ok(_)));
    let r: ErrorOr<WatchValueReply> = rc.recv(addr, reply2, tok2, Duration::from_secs(2)).unwrap();
    assert_eq!(r, ErrorOr::Err(ErrorCode::TIMED_OUT));
    // A watch at a server that does not hold the key.
    let other = team_of(&mut rc, &info, b"b");
    let (addr, reply, tok) = rc.send_watch(&other, b"k", None, v).unwrap();
    let r: ErrorOr<WatchValueReply> = rc.recv(addr, reply, tok, Duration::from_secs(2)).unwrap();
    assert_eq!(r, ErrorOr::Err(ErrorCode::WRONG_SHARD_SERVER));
}
