//! Transaction tags (`tag`, `auto_throttle_tag`) on the simulated network: their limits, the
//! read version request's tag counts, the commit's `tagSet`, the read requests' sampled
//! `tags`, a GRV reply's throttle and the throttles remembered after it.

use alloc::vec;
use alloc::vec::Vec;
use bytes::Bytes;

use super::backoff::sim;
use crate::error::ErrorCode;
use crate::event::{Call, ClientError};
use crate::messages::grv::{ClientTagThrottleLimits, TagCount, TagThrottleEntry};
use crate::messages::types::{KeySelector, KeyValue, TagSet, Version};
use crate::messages::AnyMessage;
use crate::time::Instant;
use crate::transaction::RangeOptions;
use crate::transaction::TransactionOption as O;
use core::time::Duration;

fn tag(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// One new transaction a tag, each asking for its read version (asked before any is sent).
fn tagged_read_versions(
    s: &mut super::backoff::SimCluster,
    now: Instant,
    tags: &[&str],
) -> Vec<Call<Version>> {
    let txs: Vec<_> = tags
        .iter()
        .map(|t| {
            let tx = s.client.create_transaction(now);
            s.client.set_option(now, tx, O::Tag(tag(t))).unwrap();
            tx
        })
        .collect();
    let calls = txs
        .iter()
        .map(|tx| s.client.tx_read_version(now, *tx))
        .collect();
    s.drive();
    calls
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
    let [t1, t2] = s.create_transactions();
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
            duration: 1e12,
        },
    };
    s.server.throttles = vec![entry("stop", 0.0), entry("slow", 10.0)];
    let calls = tagged_read_versions(&mut s, now, &["stop", "slow", "other"]);
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
    // Read versions asked within one batching window go out as one batch.
    let first = s.client.create_transaction(now);
    let c0 = s.client.tx_read_version(now, first);
    let calls = tagged_read_versions(&mut s, now, &["hot"; 3]);
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

/// The `tags` of every held read request, taken.
fn read_tags_sent(s: &mut super::backoff::SimCluster) -> Vec<Option<TagSet>> {
    s.take_requests()
        .into_iter()
        .filter_map(|r| match r.msg {
            AnyMessage::GetValueRequest(g) => Some(g.tags),
            AnyMessage::GetKeyRequest(g) => Some(g.tags),
            AnyMessage::GetKeyValuesRequest(g) => Some(g.tags),
            _ => None,
        })
        .collect()
}

#[test]
fn reads_carry_the_auto_throttle_tags_in_a_sampled_fraction() {
    let mut s = sim();
    let now = s.now();
    let tx = s.client.create_transaction(now);
    s.client.set_option(now, tx, O::Tag(tag("plain"))).unwrap();
    s.client
        .set_option(now, tx, O::AutoThrottleTag(tag("auto")))
        .unwrap();
    // Distinct keys, so that every read reaches the storage server.
    for i in 0..1000 {
        let k = alloc::format!("k{i:04}");
        let _ = s.client.get(now, tx, k.as_bytes(), true);
        let sel = KeySelector::first_greater_or_equal(alloc::format!("s{i:04}").into_bytes());
        let _ = s.client.get_key(now, tx, sel, true);
        let (b, e) = (
            KeySelector::first_greater_or_equal(alloc::format!("r{i:04}").into_bytes()),
            KeySelector::first_greater_or_equal(alloc::format!("r{i:04}\x00").into_bytes()),
        );
        let _ = s
            .client
            .get_range(now, tx, b, e, RangeOptions::default(), true);
    }
    s.drive();
    let tags = read_tags_sent(&mut s);
    assert_eq!(tags.len(), 3000);
    // `READ_TAG_SAMPLE_RATE` = 0.01: about 30 of them (a binomial's 5 sigma either side),
    // each with the auto-throttle tags only (`readTags`), never the plain `tag`.
    let sampled: Vec<&TagSet> = tags.iter().flatten().collect();
    assert!((5..=60).contains(&sampled.len()), "{}", sampled.len());
    let want = TagSet(vec![Bytes::from(tag("auto"))]);
    assert!(sampled.iter().all(|t| **t == want), "{sampled:?}");
    // An untagged transaction's sampled reads send an empty tag set.
    let plain = s.client.create_transaction(now);
    for i in 0..1000 {
        let _ = s
            .client
            .get(now, plain, alloc::format!("p{i:04}").as_bytes(), true);
    }
    let tags = read_tags_sent(&mut s);
    let sampled: Vec<&TagSet> = tags.iter().flatten().collect();
    assert!((1..=30).contains(&sampled.len()), "{}", sampled.len());
    assert!(sampled.iter().all(|t| t.0.is_empty()));
}

/// Sets the global configuration's `config/transaction_tag_sample_rate` (a tuple-packed
/// double) and starts the client's view of it with a read of its module.
fn set_sample_rate(s: &mut super::backoff::SimCluster, rate: f64) {
    let now = s.now();
    s.server.global_config = vec![KeyValue {
        key: Bytes::from_static(b"\xff/globalConfig/k/config/transaction_tag_sample_rate"),
        value: Bytes::from(crate::tuple::pack(&(rate,))),
    }];
    let tx = s.client.create_transaction(now);
    let (b, e) = crate::global_config::GLOBAL_CONFIG_MODULE;
    let (b, e) = (
        KeySelector::first_greater_or_equal(b),
        KeySelector::first_greater_or_equal(e),
    );
    let c = s
        .client
        .get_range(now, tx, b, e, RangeOptions::default(), false);
    s.drive();
    let rows = s.take(c).expect("answered").unwrap();
    assert_eq!(rows.rows.len(), 1, "{rows:?}");
}

/// A transaction with the read tag `auto` on a cluster whose global configuration samples
/// every read's tags.
fn auto_tagged_sampling_all() -> (super::backoff::SimCluster, Instant, crate::TransactionId) {
    let mut s = sim();
    let now = s.now();
    set_sample_rate(&mut s, 1.0);
    let tx = s.client.create_transaction(now);
    s.client
        .set_option(now, tx, O::AutoThrottleTag(tag("auto")))
        .unwrap();
    (s, now, tx)
}

#[test]
fn the_global_configuration_sets_the_sample_rate() {
    // 1.0: every read.
    let (mut s, now, tx) = auto_tagged_sampling_all();
    for i in 0..100 {
        let _ = s
            .client
            .get(now, tx, alloc::format!("k{i:03}").as_bytes(), true);
    }
    let tags = read_tags_sent(&mut s);
    assert_eq!(tags.len(), 100);
    let want = Some(TagSet(vec![Bytes::from(tag("auto"))]));
    assert!(tags.iter().all(|t| *t == want), "{tags:?}");
}

/// The global configuration's refresh whose only proxy endpoint is gone waits for new proxies
/// without asking to be woken in the past (that spun the driver until a new `ClientDBInfo`).
#[test]
fn a_refresh_with_every_proxy_gone_does_not_spin() {
    let mut s = sim();
    s.server.global_config_gone = true;
    let now = s.now();
    let tx = s.client.create_transaction(now);
    let (b, e) = crate::global_config::GLOBAL_CONFIG_MODULE;
    let c = s.client.get_range(
        now,
        tx,
        KeySelector::first_greater_or_equal(b),
        KeySelector::first_greater_or_equal(e),
        RangeOptions::default(),
        false,
    );
    s.drive();
    // The refresh was told its endpoint is gone; its backoff passes, and no other proxy
    // can be asked.
    s.advance_by(Duration::from_secs(1));
    let now = s.now();
    assert!(
        s.client.poll_timeout().is_none_or(|t| t > now),
        "a timer at {:?} is due again at {now:?}",
        s.client.poll_timeout()
    );
    assert!(s.take(c).is_none(), "the read waits for the refresh");
}

#[test]
fn a_watch_request_carries_the_read_tags_of_its_transaction() {
    let (mut s, now, tx) = auto_tagged_sampling_all();
    let w = s.client.watch(now, tx, b"wk");
    s.answer(b"wk", None);
    let c = s.client.commit(now, tx);
    s.drive();
    assert!(s.take(c).expect("a read-only commit").is_ok());
    let req = s
        .take_request(|r| matches!(r.msg, AnyMessage::WatchValueRequest(_)))
        .expect("the watch's request");
    let AnyMessage::WatchValueRequest(r) = &req.msg else {
        unreachable!()
    };
    assert_eq!(r.tags, Some(TagSet(vec![Bytes::from(tag("auto"))])));
    // The watch waits for the storage server's answer.
    assert!(s.take(w).is_none());
}

fn throttle(t: &str, tps_rate: f64, duration: f64) -> TagThrottleEntry {
    TagThrottleEntry {
        tag: Bytes::from(tag(t)),
        limits: ClientTagThrottleLimits { tps_rate, duration },
    }
}

/// A new transaction with these options asks for its read version at `now`: what it got,
/// and whether a read version request went out for it.
fn read_version_at(
    s: &mut super::backoff::SimCluster,
    now: Instant,
    options: &[O],
) -> (Result<(), ClientError>, bool) {
    let asked = s.server.grv_tags.len();
    let tx = s.client.create_transaction(now);
    for o in options {
        s.client.set_option(now, tx, o.clone()).unwrap();
    }
    let c = s.client.tx_read_version(now, tx);
    s.drive();
    let r = s.take(c).expect("answered").map(drop);
    (r, s.server.grv_tags.len() > asked)
}

fn stop() -> O {
    O::Tag(tag("stop"))
}

fn throttled() -> Result<(), ClientError> {
    Err(ClientError::Fdb(ErrorCode::TAG_THROTTLED))
}

/// A cluster whose proxy throttles tag `stop` entirely for `seconds`, says so to a first
/// transaction at the start, then says nothing more of it: the client remembers.
fn stop_throttled_for(seconds: f64) -> (super::backoff::SimCluster, Instant) {
    let mut s = sim();
    let t0 = s.now();
    s.server.throttles = vec![throttle("stop", 0.0, seconds)];
    assert_eq!(read_version_at(&mut s, t0, &[stop()]), (throttled(), true));
    s.server.throttles.clear();
    (s, t0)
}

#[test]
fn a_throttle_learnt_refuses_later_transactions_without_asking_until_the_recheck() {
    let (mut s, t0) = stop_throttled_for(60.0);
    let throttled = throttled();
    assert_eq!(
        read_version_at(&mut s, t0, &[stop()]),
        (throttled.clone(), false)
    );
    // Another tag, and the same tag at another priority, ask and get their version.
    assert_eq!(
        read_version_at(&mut s, t0, &[O::Tag(tag("other"))]),
        (Ok(()), true)
    );
    assert_eq!(
        read_version_at(&mut s, t0, &[O::PriorityBatch, stop()]),
        (Ok(()), true)
    );
    assert_eq!(
        read_version_at(&mut s, t0, &[O::AutoThrottleTag(tag("stop"))]),
        (throttled.clone(), false)
    );
    // Until `TAG_THROTTLE_RECHECK_INTERVAL` (5 s) has passed, then one asks again; the
    // proxy's silence lifts the throttle.
    let t = t0 + Duration::from_millis(4900);
    s.advance_to(t);
    assert_eq!(
        read_version_at(&mut s, t, &[stop()]),
        (throttled.clone(), false)
    );
    let t = t0 + Duration::from_millis(5100);
    s.advance_to(t);
    assert_eq!(read_version_at(&mut s, t, &[stop()]), (Ok(()), true));
    assert_eq!(read_version_at(&mut s, t, &[stop()]), (Ok(()), true));
}

#[test]
fn a_remembered_throttle_ends_when_it_expires() {
    // A throttle for 2 s: the wire carries the duration, the client adds its own now.
    let (mut s, t0) = stop_throttled_for(2.0);
    let throttled = throttled();
    let t = t0 + Duration::from_millis(1900);
    s.advance_to(t);
    assert_eq!(read_version_at(&mut s, t, &[stop()]), (throttled, false));
    let t = t0 + Duration::from_millis(2100);
    s.advance_to(t);
    assert_eq!(read_version_at(&mut s, t, &[stop()]), (Ok(()), true));
}

#[test]
fn a_tag_throttled_retry_waits_for_the_throttle() {
    let mut s = sim();
    let t0 = s.now();
    s.server.throttles = vec![throttle("stop", 0.0, 60.0)];
    let tx = s.client.create_transaction(t0);
    s.client.set_option(t0, tx, O::Tag(tag("stop"))).unwrap();
    let c = s.client.tx_read_version(t0, tx);
    s.drive();
    assert_eq!(
        s.take(c).expect("answered").map(drop),
        Err(ClientError::Fdb(ErrorCode::TAG_THROTTLED))
    );
    // `getBackoff`: uniform(0, 1) times the throttle's wait, at most 5 s, instead of the
    // 10 ms a first retry waits otherwise. Over a few retries, the longest is well above.
    let mut longest = Duration::ZERO;
    for _ in 0..5 {
        let start = s.now();
        let c = s.client.on_error(start, tx, ErrorCode::TAG_THROTTLED);
        let mut done = None;
        while done.is_none() {
            s.advance().expect("a timer");
            done = s.take(c);
        }
        assert_eq!(done, Some(Ok(())));
        longest = longest.max(s.now().saturating_since(start));
        assert!(s.now().saturating_since(start) <= Duration::from_secs(5));
    }
    assert!(longest > Duration::from_millis(500), "{longest:?}");
}
