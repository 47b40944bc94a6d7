//! The floor under reads at a read version set by hand, on the simulated network: libfdb_c
//! refuses, with `transaction_too_old` and without asking a storage server, a read below the
//! smallest read version its database got from a GRV proxy, and every such read before the
//! first one (`DatabaseContext::validateVersion`, `minAcceptableReadVersion`). Commits are not
//! checked; another cluster's connection string forgets the floor.

use bytes::Bytes;

use super::backoff::sim;
use crate::cluster_file::ClusterFile;
use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::grv::Priority;
use crate::messages::types::KeySelector;
use crate::messages::AnyMessage;
use crate::transaction::RangeOptions;

const TOO_OLD: ClientError = ClientError::Fdb(ErrorCode::TRANSACTION_TOO_OLD);

/// All three refused, or all three sent.
const REFUSED: [Option<ClientError>; 3] = [Some(TOO_OLD), Some(TOO_OLD), Some(TOO_OLD)];
const SENT: [Option<ClientError>; 3] = [None, None, None];

type S = crate::sim::Sim<super::backoff::Cluster>;

/// A get, a key selector and a range read at `version`, each in a fresh transaction:
/// `Some(error)` for each refused before it was sent, `None` for each sent.
fn reads_at(s: &mut S, version: i64) -> [Option<ClientError>; 3] {
    let now = s.now();
    let txs: [_; 3] = core::array::from_fn(|_| {
        let tx = s.client.create_transaction(now);
        s.client.set_read_version(tx, version).unwrap();
        tx
    });
    let get = s.client.get(now, txs[0], b"k", false);
    let key = s.client.get_key(
        now,
        txs[1],
        KeySelector::new(Bytes::from_static(b"k"), false, 1),
        false,
    );
    let range = s.client.get_range(
        now,
        txs[2],
        KeySelector::new(Bytes::from_static(b"a"), false, 1),
        KeySelector::new(Bytes::from_static(b"z"), false, 1),
        RangeOptions::default(),
        false,
    );
    s.drive();
    let sent = s.take_requests();
    let count = |f: fn(&AnyMessage) -> bool| sent.iter().filter(|r| f(&r.msg)).count();
    let outcome = |r: Option<Result<(), ClientError>>| match r {
        Some(Err(e)) => Some(e),
        None => None,
        Some(Ok(())) => panic!("answered without a storage server"),
    };
    let got = [
        outcome(s.take(get).map(|r| r.map(drop))),
        outcome(s.take(key).map(|r| r.map(drop))),
        outcome(s.take(range).map(|r| r.map(drop))),
    ];
    // What was not refused was sent (a key selector is resolved by a range read here too).
    let gets = count(|m| matches!(m, AnyMessage::GetValueRequest(_)));
    let scans = count(|m| {
        matches!(
            m,
            AnyMessage::GetKeyRequest(_) | AnyMessage::GetKeyValuesRequest(_)
        )
    });
    assert_eq!(gets, usize::from(got[0].is_none()), "gets sent");
    assert_eq!(
        scans,
        got[1..].iter().filter(|g| g.is_none()).count(),
        "key and range reads sent"
    );
    got
}

fn grv(s: &mut S) -> i64 {
    let call = s.client.get_read_version(s.now(), Priority::Default);
    s.run(call).expect("answered").expect("a read version")
}

#[test]
fn reads_below_the_smallest_read_version_served_are_refused_before_they_are_sent() {
    let mut s = sim();
    // No read version yet: every read at a set version is refused, however recent.
    assert_eq!(reads_at(&mut s, 1_000), REFUSED);
    let first = grv(&mut s);
    assert_eq!(first, 100);
    assert_eq!(reads_at(&mut s, first - 1), REFUSED);
    assert_eq!(reads_at(&mut s, first), SENT);
    assert_eq!(reads_at(&mut s, first + 50), SENT, "ahead of it too");
    // Later read versions do not raise the floor: it is the smallest ever served.
    assert!(grv(&mut s) > first);
    assert_eq!(reads_at(&mut s, first), SENT);
    assert_eq!(reads_at(&mut s, first - 1), REFUSED);
    // Nor does a transaction's own read version, asked by a read.
    let tx = s.client.create_transaction(s.now());
    let read = s.client.get(s.now(), tx, b"own", false);
    assert!(s.answer(b"own", None) > first);
    assert_eq!(s.take(read), Some(Ok(None)));
    assert_eq!(reads_at(&mut s, first), SENT);

    // A commit below the floor is sent: the resolver judges it, not this check.
    let tx = s.client.create_transaction(s.now());
    s.client.set_read_version(tx, first - 1).unwrap();
    s.client.set(tx, b"w", b"1").unwrap();
    let _commit = s.client.commit(s.now(), tx);
    s.drive();
    let sent = s.take_requests();
    assert!(sent
        .iter()
        .any(|r| matches!(r.msg, AnyMessage::CommitTransactionRequest(_))));
}

#[test]
fn another_cluster_forgets_the_floor_and_moved_coordinators_do_not() {
    let mut s = sim();
    let first = grv(&mut s);
    assert_eq!(reads_at(&mut s, first), SENT);
    // The same cluster (`description:id`) at other coordinators keeps it.
    let moved = ClusterFile::parse("t:t@127.0.0.1:4600").unwrap();
    s.client.set_cluster(s.now(), moved);
    s.drive();
    s.take_requests();
    assert_eq!(reads_at(&mut s, first), SENT);
    // Another cluster: what the first one served says nothing about it.
    let other = ClusterFile::parse("u:u@127.0.0.1:4700").unwrap();
    s.client.set_cluster(s.now(), other);
    s.drive();
    s.take_requests();
    assert_eq!(reads_at(&mut s, first + 10), REFUSED);
    let again = grv(&mut s);
    assert_eq!(reads_at(&mut s, again), SENT);
    assert_eq!(reads_at(&mut s, again - 1), REFUSED);
}
