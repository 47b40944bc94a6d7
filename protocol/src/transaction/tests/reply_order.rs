//! Replies are taken in the order they arrive, each read going on with its own before the
//! next one is looked at: libfdb_c delivers each reply as its own task (FlowTransport's
//! `deliver`), and RYW's range read walks on as soon as NativeAPI hands it storage's rows, so
//! what a later reply puts in the snapshot cache is not yet there for that walk.

use alloc::vec;
use alloc::vec::Vec;
use bytes::Bytes;

use super::backoff::sim;
use crate::keys::KeySelector;
use crate::messages::storage::{GetKeyValuesReply, GetValueReply, KeyValueBlob};
use crate::messages::types::KeyValue;
use crate::messages::{encode_reply, AnyMessage, ErrorOr};
use crate::transaction::{RangeOptions, StreamingMode};

fn kv(k: &'static [u8], v: &'static [u8]) -> KeyValue {
    KeyValue {
        key: Bytes::from_static(k),
        value: Bytes::from_static(v),
    }
}

/// A small-mode range read of `[b, z)` over the cleared `[d, f)`, and a get of `f` after it;
/// storage answers both in one packet batch (`b` in range, `f` = `\x80`), the get's reply
/// first if `get_first`. The range read's keys and `more`.
fn range_and_get(get_first: bool) -> (Vec<Bytes>, bool) {
    let mut s = sim();
    let tx = s.client.create_transaction(s.now());
    s.client.clear_range(tx, b"d", b"f").unwrap();
    let opts = RangeOptions {
        mode: StreamingMode::Small,
        iteration: 1,
        ..Default::default()
    };
    let range = s.client.get_range(
        s.now(),
        tx,
        KeySelector::first_greater_or_equal(b"b"),
        KeySelector::first_greater_or_equal(b"z"),
        opts,
        false,
    );
    let get = s.client.get(s.now(), tx, b"f", false);
    let rows_req = s
        .take_request(|r| matches!(r.msg, AnyMessage::GetKeyValuesRequest(_)))
        .expect("the range read asks storage");
    let AnyMessage::GetKeyValuesRequest(g) = &rows_req.msg else {
        unreachable!()
    };
    // It asks only up to the cleared stretch.
    assert_eq!(g.end.key.as_ref(), b"d");
    let get_req = s
        .take_request(|r| matches!(&r.msg, AnyMessage::GetValueRequest(g) if g.key == "f"))
        .expect("the get asks storage");
    let rows = encode_reply(&ErrorOr::Ok(GetKeyValuesReply {
        data: KeyValueBlob(vec![kv(b"b", b"1")]),
        ..Default::default()
    }));
    let value = encode_reply(&ErrorOr::Ok(GetValueReply {
        value: Some(Bytes::from_static(b"\x80")),
        ..Default::default()
    }));
    if get_first {
        s.reply_together(&[(&get_req, &value), (&rows_req, &rows)]);
    } else {
        s.reply_together(&[(&rows_req, &rows), (&get_req, &value)]);
    }
    assert_eq!(s.take(get), Some(Ok(Some(Bytes::from_static(b"\x80")))));
    let r = s.take(range).expect("the range read is done").unwrap();
    (r.rows.into_iter().map(|kv| kv.key).collect(), r.more)
}

/// The range read's reply first: its walk goes on at once, finds `f` unknown past the
/// cleared stretch and ends the batch there, as libfdb_c does (the differential test's seed
/// 56280124611354, program 140) — the get's value, taken in just after, is not in it.
#[test]
fn a_range_read_walks_on_before_a_later_reply_fills_the_cache() {
    assert_eq!(range_and_get(false), (vec![Bytes::from_static(b"b")], true));
}

/// The get's reply first: `f` is in the snapshot cache when the walk goes on, so the batch
/// takes it.
#[test]
fn an_earlier_reply_is_in_the_cache_for_the_walk() {
    assert_eq!(
        range_and_get(true),
        (
            vec![Bytes::from_static(b"b"), Bytes::from_static(b"f")],
            true
        )
    );
}
