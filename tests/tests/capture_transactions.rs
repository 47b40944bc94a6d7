//! Transactions replayed against the server side of real libfdb_c 7.3.77 captures.
//!
//! For each scenario the client core makes the same API calls the captured Python program
//! made, through `fdb_tests::replay::Replay`: every request must equal libfdb_c's field for
//! field (random parts masked) and go to the same endpoint; results must equal what the
//! scenario recorded in its `result.json`.

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::types::KeySelector;
use fdb_protocol::MutationType;
use fdb_protocol::RangeOptions;
use fdb_tests::replay::{result_json, Replay};

const TXN_REQUESTS: &[&str] = &[
    "GetReadVersionRequest",
    "GetKeyServerLocationsRequest",
    "GetValueRequest",
    "GetKeyValuesRequest",
    "CommitTransactionRequest",
    "WatchValueRequest",
];

#[test]
fn get() {
    let mut r = Replay::new("get");
    let tx = r.tx();
    let v = r.get(tx, b"cap/get/exists", false).unwrap().unwrap();
    assert_eq!(v.len(), 100);
    assert_eq!(r.get(tx, b"cap/get/missing", false).unwrap(), None);
    r.all_used(TXN_REQUESTS);
}

#[test]
fn get_range_iterates_like_the_bindings() {
    let mut r = Replay::new("get_range");
    let tx = r.tx();
    let mut begin = KeySelector::first_greater_or_equal(Bytes::from_static(b"cap/range/"));
    let end = KeySelector::first_greater_or_equal(Bytes::from_static(b"cap/range0"));
    let mut rows = Vec::new();
    for iteration in 1.. {
        let opts = RangeOptions {
            iteration,
            ..RangeOptions::default()
        };
        let batch = r.range(tx, begin.clone(), end.clone(), opts);
        let last = batch.rows.last().unwrap().key.clone();
        rows.extend(batch.rows);
        if !batch.more {
            break;
        }
        begin = KeySelector::first_greater_than(last);
    }
    let want = result_json("get_range");
    assert_eq!(rows.len() as u64, want["count"].as_u64().unwrap());
    assert_eq!(rows[0].key, want["first"].as_str().unwrap().as_bytes());
    r.all_used(TXN_REQUESTS);
}

#[test]
fn range_large_takes_nineteen_batches() {
    let mut r = Replay::new("range_large");
    let tx = r.tx();
    let mut begin = KeySelector::first_greater_or_equal(Bytes::from_static(b"cap/big/"));
    let end = KeySelector::first_greater_or_equal(Bytes::from_static(b"cap/big0"));
    let mut rows = 0;
    let mut calls = 0;
    for iteration in 1.. {
        calls += 1;
        let opts = RangeOptions {
            iteration,
            ..RangeOptions::default()
        };
        let batch = r.range(tx, begin.clone(), end.clone(), opts);
        rows += batch.rows.len();
        if !batch.more {
            break;
        }
        begin = KeySelector::first_greater_than(batch.rows.last().unwrap().key.clone());
    }
    let want = result_json("range_large");
    assert_eq!(rows as u64, want["count"].as_u64().unwrap());
    assert_eq!(calls, want["client_get_range_calls"].as_u64().unwrap());
    r.all_used(TXN_REQUESTS);
}

#[test]
fn get_key_selectors() {
    let mut r = Replay::new("get_key");
    let tx = r.tx();
    let want = result_json("get_key");
    let q = r.sim.client.get_key(
        r.sim.now(),
        tx,
        KeySelector::first_greater_than(Bytes::from_static(b"cap/range/050")),
        false,
    );
    let k = r.wait(q).unwrap();
    assert_eq!(
        k,
        want["first_greater_than(range/050)"]
            .as_str()
            .unwrap()
            .as_bytes()
    );
    let q = r.sim.client.get_key(
        r.sim.now(),
        tx,
        KeySelector::last_less_or_equal(Bytes::from_static(b"cap/range/050x")),
        false,
    );
    let k = r.wait(q).unwrap();
    assert_eq!(
        k,
        want["last_less_or_equal(range/050x)"]
            .as_str()
            .unwrap()
            .as_bytes()
    );
    r.all_used(TXN_REQUESTS);
}

#[test]
fn set_commit() {
    let mut r = Replay::new("set_commit");
    let tx = r.tx();
    let value: Vec<u8> = (0..100).map(|i| b'a' + (i % 26) as u8).collect();
    r.sim.client.set(tx, b"cap/set/k", &value).unwrap();
    let v = r.commit(tx).unwrap();
    assert_eq!(
        v,
        result_json("set_commit")["committed_version"]
            .as_i64()
            .unwrap()
    );
    r.all_used(TXN_REQUESTS);
}

#[test]
fn mutations_in_ryw_order() {
    let mut r = Replay::new("mutations");
    let (v, stamp) = r.commit_captured_mutations();
    let want = result_json("mutations");
    assert_eq!(v, want["committed_version"].as_i64().unwrap());
    assert_eq!(
        fdb_tests::to_hex(&stamp),
        want["versionstamp"].as_str().unwrap()
    );
    r.all_used(TXN_REQUESTS);
}

#[test]
fn conflict_gives_not_committed() {
    let mut r = Replay::new("conflict");
    let a = r.tx();
    let read = r.get(a, b"cap/conflict/k", false).unwrap().unwrap();
    let want = result_json("conflict");
    assert_eq!(read, want["a_read"].as_str().unwrap().as_bytes());
    let b = r.tx();
    r.sim
        .client
        .set(b, b"cap/conflict/k", b"written-by-B")
        .unwrap();
    assert_eq!(r.commit(b).unwrap(), want["b_committed"].as_i64().unwrap());
    r.sim
        .client
        .set(a, b"cap/conflict/k", b"written-by-A")
        .unwrap();
    let err = r.commit(a).unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode(want["a_error_code"].as_u64().unwrap() as u16)
    );
    r.all_used(TXN_REQUESTS);
}

#[test]
fn watch_fires_after_another_commit() {
    let mut r = Replay::new("watch");
    let t1 = r.tx();
    let w = r.sim.client.watch(r.sim.now(), t1, b"cap/watch/k");
    r.sim.drive();
    r.commit(t1).unwrap();
    r.sim.drive();
    let t2 = r.tx();
    r.sim.client.set(t2, b"cap/watch/k", b"after").unwrap();
    let committed = r.commit(t2).unwrap();
    assert_eq!(
        committed,
        result_json("watch")["writer_committed"].as_i64().unwrap()
    );
    r.release_held();
    let v = r.wait(w).unwrap();
    assert_eq!(v, committed);
    // After the watch fires libfdb_c confirms it with a read version (`waitForCommittedVersion`:
    // no transaction count, no flags); so do we, so every captured request was matched.
    r.all_used(TXN_REQUESTS);
}

#[test]
fn versionstamped_value_reads_back() {
    let mut r = Replay::new("versionstamp_value");
    let t1 = r.tx();
    let mut param = b"vsv:".to_vec();
    param.extend_from_slice(&[0u8; 10]);
    param.extend_from_slice(b":end");
    param.extend_from_slice(&4u32.to_le_bytes());
    r.sim
        .client
        .atomic_op(
            t1,
            b"cap/vsv/k",
            &param,
            MutationType::SetVersionstampedValue,
        )
        .unwrap();
    r.commit(t1).unwrap();
    let stamp = r.sim.client.versionstamp(t1).unwrap();
    let want = result_json("versionstamp_value");
    assert_eq!(
        fdb_tests::to_hex(&stamp),
        want["versionstamp"].as_str().unwrap()
    );
    let t2 = r.tx();
    let v = r.get(t2, b"cap/vsv/k", false).unwrap().unwrap();
    let mut expect = b"vsv:".to_vec();
    expect.extend_from_slice(&stamp);
    expect.extend_from_slice(b":end");
    assert_eq!(v.to_vec(), expect);
    r.all_used(TXN_REQUESTS);
}

#[test]
fn snapshot_and_cleared_range_need_no_range_read() {
    let mut r = Replay::new("snapshot_clear_range");
    let tx = r.tx();
    r.sim
        .client
        .clear_range(tx, b"cap/scr/", b"cap/scr0")
        .unwrap();
    r.sim.client.set(tx, b"cap/scr/new", b"new-value").unwrap();
    let rows = r.range(
        tx,
        KeySelector::first_greater_or_equal(Bytes::from_static(b"cap/scr/")),
        KeySelector::first_greater_or_equal(Bytes::from_static(b"cap/scr0")),
        RangeOptions::default(),
    );
    assert_eq!(rows.rows.len(), 1);
    assert_eq!(rows.rows[0].key, &b"cap/scr/new"[..]);
    assert_eq!(rows.rows[0].value, &b"new-value"[..]);
    let v = r.get(tx, b"cap/snap/other", true).unwrap().unwrap();
    assert_eq!(v, &b"snapshot-value"[..]);
    let want = result_json("snapshot_clear_range");
    assert_eq!(
        r.commit(tx).unwrap(),
        want["committed_version"].as_i64().unwrap()
    );
    assert!(!r.sent().contains(&"GetKeyValuesRequest"));
    r.all_used(TXN_REQUESTS);
}

#[test]
fn too_old_read_fails_with_1007() {
    let mut r = Replay::new("too_old");
    let tx = r.tx();
    let q = r.sim.client.tx_read_version(r.sim.now(), tx);
    let v = r.wait(q).unwrap();
    let want = result_json("too_old");
    assert_eq!(v, want["read_version"].as_i64().unwrap());
    let err = r.get(tx, b"cap/tooold/k", false).unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode(want["error_code"].as_u64().unwrap() as u16)
    );
    r.all_used(TXN_REQUESTS);
}

#[test]
fn batchset50x1000_is_one_commit_of_fifty_sets() {
    let mut r = Replay::new("batchset50x1000");
    let tx = r.tx();
    for i in 0..50u32 {
        let key = format!("cap/batch/{i:02}");
        let value: Vec<u8> = (0..1000u32).map(|j| 0x30 + ((i + j) % 10) as u8).collect();
        r.sim.client.set(tx, key.as_bytes(), &value).unwrap();
    }
    let v = r.commit(tx).unwrap();
    let want = result_json("batchset50x1000");
    assert_eq!(v, want["committed_version"].as_i64().unwrap());
    r.all_used(TXN_REQUESTS);
}
