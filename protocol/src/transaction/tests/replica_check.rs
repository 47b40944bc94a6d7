//! The replica consistency check's waits and answers on the simulated network, where time
//! moves only when the test moves it: a replica that does not answer, one that answers
//! otherwise or with an error, and a best-effort check that goes on without it.

use bytes::Bytes;
use core::time::Duration;

use super::backoff::{sim_with, storage_server, SimCluster};
use crate::error::ErrorCode;
use crate::event::{Call, ClientError};
use crate::knobs::Knobs;
use crate::messages::storage::GetValueReply;
use crate::messages::{AnyMessage, ErrorOr};
use crate::sim::Request;
use crate::TransactionOption;

/// Two replicas of the one shard, `hello` read under a check of `required`, the first
/// replica's answer given: the check's request to the other replica, held.
fn checked_get(knobs: Knobs, required: i64) -> (SimCluster, Call<Option<Bytes>>, Request) {
    let mut s = sim_with(knobs);
    s.server.servers.push(storage_server(1));
    let tx = s.client.create_transaction(s.now());
    for opt in [
        TransactionOption::EnableReplicaConsistencyCheck,
        TransactionOption::ConsistencyCheckRequiredReplicas(required),
    ] {
        s.client.set_option(s.now(), tx, opt).unwrap();
    }
    let get = s.client.get(s.now(), tx, b"hello", false);
    s.drive();
    let first = take_get(&mut s).expect("the read asks a replica");
    s.reply(&first, value(b"world"));
    let again = take_get(&mut s).expect("the check asks the other replica");
    assert_ne!(again.conn, first.conn, "another replica");
    assert_ne!(again.reply, first.reply, "answered to a token of its own");
    assert_eq!(s.take(get), None, "the read waits for the check");
    (s, get, again)
}

fn take_get(s: &mut SimCluster) -> Option<Request> {
    s.drive();
    s.take_request(|r| matches!(&r.msg, AnyMessage::GetValueRequest(_)))
}

fn value(v: &'static [u8]) -> ErrorOr<GetValueReply> {
    ErrorOr::Ok(GetValueReply {
        value: Some(Bytes::from_static(v)),
        ..Default::default()
    })
}

fn fdb(code: ErrorCode) -> Option<Result<Option<Bytes>, ClientError>> {
    Some(Err(ClientError::Fdb(code)))
}

#[test]
fn the_read_goes_on_when_the_other_replica_agrees() {
    let (mut s, get, again) = checked_get(Knobs::default(), -1);
    s.reply(&again, value(b"world"));
    s.drive();
    assert_eq!(s.take(get), Some(Ok(Some(Bytes::from_static(b"world")))));
}

#[test]
fn a_different_answer_fails_the_read() {
    for required in [-1, -2, 1] {
        let (mut s, get, again) = checked_get(Knobs::default(), required);
        s.reply(&again, value(b"worle"));
        s.drive();
        assert_eq!(
            s.take(get),
            fdb(ErrorCode::STORAGE_REPLICA_COMPARISON_ERROR)
        );
    }
}

/// Every replica required: one that does not answer within
/// `load_balance_fetch_replica_timeout` fails the read with `timed_out`, not before.
#[test]
fn a_replica_that_does_not_answer_in_time() {
    let knobs = Knobs::default()
        .with("load_balance_fetch_replica_timeout", "0.5")
        .unwrap();
    let (mut s, get, _) = checked_get(knobs, -1);
    let start = s.now();
    s.run_until(start + Duration::from_millis(499));
    assert_eq!(s.take(get), None);
    s.run_until(start + Duration::from_millis(501));
    assert_eq!(s.take(get), fdb(ErrorCode::TIMED_OUT));
}

/// Best effort: the silent replica is given up on at the timeout, and the read goes on.
#[test]
fn best_effort_goes_on_without_a_silent_replica() {
    let (mut s, get, _) = checked_get(Knobs::default(), -2);
    let start = s.now();
    s.run_until(start + Duration::from_millis(4_999));
    assert_eq!(s.take(get), None);
    s.run_until(start + Duration::from_secs(5) + Duration::from_millis(1));
    assert_eq!(s.take(get), Some(Ok(Some(Bytes::from_static(b"world")))));
}

/// The read's outcome when the other replica answers `code` under a check of `required`.
fn other_replica_fails(
    required: i64,
    code: ErrorCode,
) -> Option<Result<Option<Bytes>, ClientError>> {
    let (mut s, get, again) = checked_get(Knobs::default(), required);
    s.reply(&again, ErrorOr::<GetValueReply>::Err(code));
    s.drive();
    s.take(get)
}

/// A count of one that the one other replica fails to meet: `unreachable_storage_replica`;
/// with every replica required, its own error; best effort counts only disagreements.
#[test]
fn an_error_from_the_other_replica() {
    assert_eq!(
        other_replica_fails(1, ErrorCode::FUTURE_VERSION),
        fdb(ErrorCode::UNREACHABLE_STORAGE_REPLICA)
    );
    assert_eq!(
        other_replica_fails(-1, ErrorCode::PROCESS_BEHIND),
        fdb(ErrorCode::PROCESS_BEHIND)
    );
    assert_eq!(
        other_replica_fails(-2, ErrorCode::PROCESS_BEHIND),
        Some(Ok(Some(Bytes::from_static(b"world"))))
    );
}

/// `wrong_shard_server` from the other replica relocates the read, as from the first: the
/// shard is looked up again and the read asked anew (and checked anew).
#[test]
fn wrong_shard_server_from_the_other_replica_relocates_the_read() {
    let (mut s, get, again) = checked_get(Knobs::default(), -1);
    s.reply(
        &again,
        ErrorOr::<GetValueReply>::Err(ErrorCode::WRONG_SHARD_SERVER),
    );
    s.run_until(s.now() + Duration::from_millis(50));
    let first = take_get(&mut s).expect("the read is asked again");
    s.reply(&first, value(b"world"));
    let again = take_get(&mut s).expect("and checked again");
    // The first check's reply, if it came now, would be ignored: the new one decides.
    s.reply(&again, value(b"world"));
    s.drive();
    assert_eq!(s.take(get), Some(Ok(Some(Bytes::from_static(b"world")))));
}

/// `enable_replica_consistency_check_on_reads` checks a transaction that did not ask, with
/// `read_consistency_check_required_replicas`; a transaction's own options still decide for
/// it (its count of 0 checks nothing).
#[test]
fn the_knob_checks_every_read() {
    let knobs = Knobs::default()
        .with("enable_replica_consistency_check_on_reads", "true")
        .unwrap();
    let asks = |own: Option<i64>| {
        let mut s = sim_with(knobs);
        s.server.servers.push(storage_server(1));
        let tx = s.client.create_transaction(s.now());
        if let Some(required) = own {
            for opt in [
                TransactionOption::EnableReplicaConsistencyCheck,
                TransactionOption::ConsistencyCheckRequiredReplicas(required),
            ] {
                s.client.set_option(s.now(), tx, opt).unwrap();
            }
        }
        let get = s.client.get(s.now(), tx, b"hello", false);
        let first = take_get(&mut s).expect("the read asks a replica");
        s.reply(&first, value(b"world"));
        let checked = take_get(&mut s);
        if let Some(again) = &checked {
            s.reply(again, value(b"world"));
        }
        s.drive();
        assert_eq!(s.take(get), Some(Ok(Some(Bytes::from_static(b"world")))));
        checked.is_some()
    };
    assert!(asks(None));
    assert!(!asks(Some(0)));
    assert!(asks(Some(1)));
    assert!(!asks_without_knob());
}

/// The same read without the knob: one replica.
fn asks_without_knob() -> bool {
    let mut s = sim_with(Knobs::default());
    s.server.servers.push(storage_server(1));
    let tx = s.client.create_transaction(s.now());
    let _ = s.client.get(s.now(), tx, b"hello", false);
    let first = take_get(&mut s).expect("the read asks a replica");
    s.reply(&first, value(b"world"));
    take_get(&mut s).is_some()
}
