//! What RYW's range read asks NativeAPI for and what storage's answers prove
//! (`GetRangeLimits`, `setRequestLimits`, `getKnownKeyRange`, `getKnownKeyRangeBack`).

use alloc::vec::Vec;
use bytes::Bytes;

use crate::keys::{KeySelector, KeyValue};
use crate::ryw::write_map::ALL_KEYS_END;

/// A row of a range reply, as NativeAPI's range read counts and continues it: a plain range
/// read's `KeyValueRef`, or a mapped read's `MappedKeyValueRef` (whose size is only its
/// primary row's, as `GetRangeLimits::decrement` counts it).
pub(crate) trait Row {
    /// The row's key: where a continuation starts.
    fn key(&self) -> &Bytes;
    /// Its bytes against a byte limit, without the 8 a row adds.
    fn size(&self) -> usize;
}

impl Row for KeyValue {
    fn key(&self) -> &Bytes {
        &self.key
    }
    fn size(&self) -> usize {
        self.key.len() + self.value.len()
    }
}

/// `REPLY_BYTE_LIMIT`: the most a storage server returns per range request.
pub const REPLY_BYTE_LIMIT: i32 = 80_000;

/// `GetRangeLimits`: rows, bytes (`-1`: unlimited) and the rows a byte-limited read returns
/// anyway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RangeLimits {
    pub(crate) rows: i32,
    pub(crate) min_rows: i32,
    pub(crate) bytes: i32,
}

impl RangeLimits {
    pub(crate) const UNLIMITED: i32 = -1;

    pub(crate) fn new(rows: i32, bytes: i32) -> Self {
        RangeLimits {
            rows,
            min_rows: 1,
            bytes,
        }
    }

    /// One row read: `key + value + 8` bytes.
    pub(crate) fn decrement<R: Row>(&mut self, kv: &R) {
        self.min_rows = (self.min_rows - 1).max(0);
        if self.rows != Self::UNLIMITED {
            self.rows -= 1;
        }
        if self.bytes != Self::UNLIMITED {
            let size = (kv.size() + 8).min(i32::MAX as usize) as i32;
            self.bytes = self.bytes.saturating_sub(size).max(0);
        }
    }

    pub(crate) fn decrement_all<R: Row>(&mut self, rows: &[R]) {
        for kv in rows {
            self.decrement(kv);
        }
    }

    pub(crate) fn is_reached(&self) -> bool {
        self.rows == 0 || (self.bytes == 0 && self.min_rows == 0)
    }

    pub(crate) fn has_byte_limit(&self) -> bool {
        self.bytes != Self::UNLIMITED
    }

    pub(crate) fn has_row_limit(&self) -> bool {
        self.rows != Self::UNLIMITED
    }

    pub(crate) fn has_satisfied_min_rows(&self) -> bool {
        self.has_byte_limit() && self.min_rows == 0
    }
}

/// A range NativeAPI read (`RangeResult`, or `MappedRangeResult` with mapped rows), rows in
/// read order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NativeResult<R = KeyValue> {
    pub(crate) rows: Vec<R>,
    pub(crate) more: bool,
    pub(crate) read_to_begin: bool,
    pub(crate) read_through_end: bool,
    /// Where a read cut at a shard boundary is known to have read through.
    pub(crate) read_through: Option<Bytes>,
}

impl<R> Default for NativeResult<R> {
    fn default() -> Self {
        NativeResult {
            rows: Vec::new(),
            more: false,
            read_to_begin: false,
            read_through_end: false,
            read_through: None,
        }
    }
}

/// The storage read RYW asks NativeAPI for (always a snapshot read).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NativeRead {
    pub(crate) begin: KeySelector,
    pub(crate) end: KeySelector,
    pub(crate) limits: RangeLimits,
    pub(crate) reverse: bool,
}

fn clamp_i32(v: i64) -> i32 {
    v.clamp(i32::MIN as i64, i32::MAX as i64) as i32
}

/// `setRequestLimits`: the limits of the storage read, with room for the rows the selectors
/// still have to skip.
pub(super) fn set_request_limits(
    l: &mut RangeLimits,
    additional: i64,
    offset: i32,
    request_count: i32,
) {
    let offset = offset as i64;
    l.min_rows = clamp_i32((1 + additional).max(offset));
    if l.has_row_limit() {
        l.rows = clamp_i32((l.rows.max(1) as i64 + additional).max(offset));
    }
    if l.bytes == 0 {
        l.bytes = RangeLimits::UNLIMITED;
        if !l.has_row_limit() {
            l.rows = clamp_i32((l.rows.max(1) as i64 + additional).max(offset));
        }
    } else if l.has_byte_limit() {
        let shifted = (l.bytes as i64) << request_count.clamp(0, 20);
        l.bytes = shifted.min(REPLY_BYTE_LIMIT as i64) as i32;
    }
}

/// `getKnownKeyRange`: what a forward storage read proved about the keys it covered.
pub(super) fn known_range(
    d: &NativeResult,
    begin: &KeySelector,
    end: &KeySelector,
) -> Option<(Bytes, Bytes)> {
    let mut b = if begin.offset <= 1 {
        begin.key.clone()
    } else {
        Bytes::from_static(ALL_KEYS_END)
    };
    let mut e = if !d.more && end.offset >= 1 {
        end.key.clone()
    } else {
        Bytes::new()
    };
    if d.read_to_begin {
        b = Bytes::new();
    }
    if d.read_through_end {
        e = Bytes::from_static(ALL_KEYS_END);
    }
    if let (Some(first), Some(last)) = (d.rows.first(), d.rows.last()) {
        b = b.min(first.key.clone());
        e = match &d.read_through {
            Some(rt) => e.max(rt.clone()),
            None if !d.more && last.key < e => e,
            None => crate::ryw::key_after(&last.key),
        };
    }
    (b < e).then_some((b, e))
}

/// `getKnownKeyRangeBack`: the same for a reverse read (rows descending).
pub(super) fn known_range_back(
    d: &NativeResult,
    begin: &KeySelector,
    end: &KeySelector,
) -> Option<(Bytes, Bytes)> {
    let mut b = if !d.more && begin.offset <= 1 {
        begin.key.clone()
    } else {
        Bytes::from_static(ALL_KEYS_END)
    };
    let mut e = if end.offset >= 1 {
        end.key.clone()
    } else {
        Bytes::new()
    };
    // NativeAPI's `getRange` sets `readToBegin` for any begin selector before the first key,
    // before it reads anything; a reverse read that stops early (`more`) has not read down to
    // the beginning. libfdb_c 7.3.77 takes the flag as is, and with a `readThrough` (a read
    // cut at a shard boundary after a byte limit's rows) `min(readThrough, "")` then marks
    // everything below the rows known and empty: a later read misses the keys there.
    if d.read_to_begin && !d.more {
        b = Bytes::new();
    }
    if d.read_through_end {
        e = Bytes::from_static(ALL_KEYS_END);
    }
    if let (Some(first), Some(last)) = (d.rows.first(), d.rows.last()) {
        b = match &d.read_through {
            Some(rt) => rt.clone().min(b),
            None if !d.more && last.key > b => b,
            None => last.key.clone(),
        };
        e = if first.key < e {
            e
        } else {
            crate::ryw::key_after(&first.key)
        };
    }
    (b < e).then_some((b, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_limits_grow_with_the_requests() {
        let mut l = RangeLimits::new(RangeLimits::UNLIMITED, 1000);
        set_request_limits(&mut l, 2, 1, 3);
        assert_eq!(
            l,
            RangeLimits {
                rows: -1,
                min_rows: 3,
                bytes: 8000
            }
        );
        let mut l = RangeLimits::new(5, 0);
        l.min_rows = 1;
        set_request_limits(&mut l, 0, 1, 0);
        assert_eq!((l.rows, l.bytes), (5, RangeLimits::UNLIMITED));
    }

    fn kv(k: &[u8]) -> KeyValue {
        KeyValue {
            key: Bytes::copy_from_slice(k),
            value: Bytes::new(),
        }
    }

    #[test]
    fn a_reverse_read_cut_short_does_not_know_the_keys_below_it() {
        // `[last_less_than(""), first_greater_or_equal("h"))` backward, stopped after the
        // shard `[a, h)` with `more`: NativeAPI's `read_to_begin` is set, but only `[a, h)`
        // was read.
        let d = NativeResult {
            rows: alloc::vec![kv(b"b")],
            more: true,
            read_to_begin: true,
            read_through_end: false,
            read_through: Some(Bytes::from_static(b"a")),
        };
        let begin = KeySelector::new(Bytes::new(), false, 0);
        let end = KeySelector::new(Bytes::from_static(b"h"), false, 1);
        assert_eq!(
            known_range_back(&d, &begin, &end),
            Some((Bytes::from_static(b"a"), Bytes::from_static(b"h")))
        );
        // Read to the end (no `more`): down to "" is known.
        let d = NativeResult {
            more: false,
            read_through: None,
            ..d
        };
        assert_eq!(
            known_range_back(&d, &begin, &end),
            Some((Bytes::new(), Bytes::from_static(b"h")))
        );
    }
}
