//! Transaction tags (`tag`, `auto_throttle_tag`) on the simulated network: their limits, the
//! read version request's tag counts, the commit's `tagSet`, and a GRV reply's throttle.

use alloc::vec;
use alloc::vec::Vec;
use bytes::Bytes;

use super::backoff_tests::sim;
use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::messages::grv::{ClientTagThrottleLimits, TagCount, TagThrottleEntry};
use crate::messages::types::TagSet;
use crate::messages::AnyMessage;
use crate::TransactionOption as O;

fn tag(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[test]
fn tags_are_limited_in_length_and_number() {
    let mut s = sim();
    let now = s.now();
    let tx = s.client.create_transaction(now);
    let long = O::Tag(vec![b'x'; 256]);
    assert_eq!(
        s.client.set_option(now, tx, long),
        Err(ClientError::Fdb(ErrorCode::TAG_TOO_LONG))
    );
    let tx = s.client.create_transaction(now);
    s.client
        .set_option(now, tx, O::Tag(vec![b'x'; 255]))
        .unwrap();
    for t in ["a", "b", "a", "c", "d"] {
        s.client
            .set_option(now, tx, O::AutoThrottleTag(tag(t)))
            .unwrap();
    }
    // Five tags: even a repeat fails, as the count is checked before a repeat is noticed.
    assert_eq!(
        s.client.set_option(now, tx, O::Tag(tag("a"))),
        Err(ClientError::Fdb(ErrorCode::TOO_MANY_TAGS))
    );
}

#[test]
fn tags_go_with_the_read_version_request_and_the_commit() {
    let mut s = sim();
    let now = s.now();
    let (t1, t2) = (
        s.client.create_transaction(now),
        s.client.create_transaction(now),
    );
    s.client.set_option(now, t1, O::Tag(tag("hot"))).unwrap();
    s.client.set_option(now, t1, O::Tag(tag("cold"))).unwrap();
    s.client
        .set_option(now, t2, O::AutoThrottleTag(tag("hot")))
        .unwrap();
    let (g1, g2) = (
        s.client.get(now, t1, b"k", false),
        s.client.get(now, t2, b"k", false),
    );
    s.drive();
    // Each tag with how many transactions of the batch carry it (here each rode a batch of
    // its own), summed over the batches.
    let mut sums = alloc::collections::BTreeMap::new();
    for c in s.server.grv_tags.concat() {
        *sums.entry(c.tag).or_insert(0) += c.count;
    }
    let counts: Vec<TagCount> = sums
        .into_iter()
        .map(|(tag, count)| TagCount { tag, count })
        .collect();
    let tc = |t: &str, count| TagCount {
        tag: Bytes::from(tag(t)),
        count,
    };
    assert_eq!(counts, vec![tc("cold", 1), tc("hot", 2)]);
    s.answer(b"k", None);
    s.answer(b"k", None);
    assert!(s.take(g1).is_some() && s.take(g2).is_some());
    s.client.set(t1, b"k", b"v").unwrap();
    let _commit = s.client.commit(now, t1);
    s.drive();
    let req = s
        .take_request(|r| matches!(r.msg, AnyMessage::CommitTransactionRequest(_)))
        .expect("a commit");
    let AnyMessage::CommitTransactionRequest(c) = &req.msg else {
        unreachable!()
    };
    let want = TagSet(vec![Bytes::from(tag("hot")), Bytes::from(tag("cold"))]);
    assert_eq!(c.tag_set, Some(want));
    // An untagged transaction's requests carry none.
    let t3 = s.client.create_transaction(now);
    let g3 = s.client.get(now, t3, b"k", false);
    s.drive();
    assert_eq!(s.server.grv_tags.last(), Some(&Vec::new()));
    s.answer(b"k", None);
    assert!(s.take(g3).is_some());
}

#[test]
fn a_throttled_tag_fails_its_transactions_with_tag_throttled() {
    let mut s = sim();
    let now = s.now();
    let entry = |t: &str, tps_rate| TagThrottleEntry {
        tag: Bytes::from(tag(t)),
        limits: ClientTagThrottleLimits {
            tps_rate,
            expiration: 1e12,
        },
    };
    s.server.throttles = vec![entry("stop", 0.0), entry("slow", 10.0)];
    let txs: Vec<_> = ["stop", "slow", "other"]
        .iter()
        .map(|t| {
            let tx = s.client.create_transaction(now);
            s.client.set_option(now, tx, O::Tag(tag(t))).unwrap();
            tx
        })
        .collect();
    let calls: Vec<_> = txs
        .iter()
        .map(|tx| s.client.tx_read_version(now, *tx))
        .collect();
    s.drive();
    let got: Vec<_> = calls
        .into_iter()
        .map(|c| s.take(c).expect("answered").map(drop))
        .collect();
    assert_eq!(
        got,
        vec![
            Err(ClientError::Fdb(ErrorCode::TAG_THROTTLED)),
            Ok(()),
            Ok(())
        ]
    );
}

#[test]
fn transactions_batched_together_have_their_tags_counted() {
    let mut s = sim();
    let now = s.now();
    // A read version in flight holds the next ones back into one batch.
    let first = s.client.create_transaction(now);
    let c0 = s.client.tx_read_version(now, first);
    let txs: Vec<_> = (0..3)
        .map(|_| {
            let tx = s.client.create_transaction(now);
            s.client.set_option(now, tx, O::Tag(tag("hot"))).unwrap();
            tx
        })
        .collect();
    let calls: Vec<_> = txs
        .iter()
        .map(|tx| s.client.tx_read_version(now, *tx))
        .collect();
    s.drive();
    assert!(s.take(c0).is_some());
    for c in calls {
        assert!(s.take(c).expect("answered").is_ok());
    }
    let hot = TagCount {
        tag: Bytes::from(tag("hot")),
        count: 3,
    };
    assert!(
        s.server.grv_tags.contains(&vec![hot]),
        "{:?}",
        s.server.grv_tags
    );
}
