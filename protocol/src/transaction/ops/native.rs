//! NativeAPI's reads with key selectors, as state machines (`getRange`, `getRangeFallback`,
//! `getExactRange`, `getKey` in `NativeAPI.actor.cpp`). They decide what to ask which shard
//! and what the answers mean; the transactions send the requests (`range.rs`).
//!
//! `getRange` sends the selectors themselves to the storage server of the begin key's shard
//! (the end key's in reverse), cut at the shard's edge where they must land beyond it, and
//! continues shard after shard until its limits or `more == false`. A storage server that
//! cannot resolve a selector inside what it holds answers `wrong_shard_server`; NativeAPI
//! then resolves both selectors with `getKey` and reads the exact key range.

use alloc::boxed::Box;
use alloc::vec::Vec;
use bytes::Bytes;

use crate::messages::types::{KeySelector, KeyValue};
use crate::ryw::range_read::{fdb_key_after, fge, is_backward, is_fge};
use crate::ryw::range_read::{NativeResult, RangeLimits, Row, REPLY_BYTE_LIMIT};
use crate::ryw::ALL_KEYS_END;

/// `CLIENT_KNOBS->GET_RANGE_SHARD_LIMIT`: shards `getExactRange` looks up at a time.
const GET_RANGE_SHARD_LIMIT: u32 = 2;

/// `KeySelectorRef::isDefinitelyGreater`: resolves past `k` whatever the data.
fn definitely_greater(s: &KeySelector, k: &[u8]) -> bool {
    s.offset >= 1
        && if is_fge(s) {
            s.key.as_ref() > k
        } else {
            s.key.as_ref() >= k
        }
}

/// `KeySelectorRef::isDefinitelyLess`: resolves before `k` whatever the data.
fn definitely_less(s: &KeySelector, k: &[u8]) -> bool {
    let last_less_or_equal = s.or_equal && s.offset == 0;
    s.offset <= 0
        && if last_less_or_equal {
            s.key.as_ref() < k
        } else {
            s.key.as_ref() <= k
        }
}

/// `transformRangeLimits`: a request's row and byte limits.
pub(in crate::transaction) fn request_limits(l: &RangeLimits, reverse: bool) -> (i32, i32) {
    let (rows, bytes) = if l.bytes != 0 {
        let rows = if l.has_row_limit() {
            l.rows.min(REPLY_BYTE_LIMIT)
        } else {
            REPLY_BYTE_LIMIT
        };
        let bytes = if l.has_byte_limit() {
            l.bytes.min(REPLY_BYTE_LIMIT)
        } else {
            REPLY_BYTE_LIMIT
        };
        (rows, bytes)
    } else {
        (l.min_rows, REPLY_BYTE_LIMIT)
    };
    (if reverse { -rows } else { rows }, bytes)
}

/// What a NativeAPI read asks next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::transaction) enum NativeStep {
    /// A range request to the shard of `key` (of the keys before it when `backward`).
    Range { key: Bytes, backward: bool },
    /// A key request to the shard of `key`.
    Key { key: Bytes, backward: bool },
    /// Finished.
    Done,
}

/// A storage answer that breaks the protocol (rows where there can be none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::transaction) struct BadReply;

/// NativeAPI's `getKey`: follows the selector the storage servers hand back until one
/// resolves it.
#[derive(Clone, Debug)]
pub(in crate::transaction) struct NativeKey {
    sel: KeySelector,
    result: Option<Bytes>,
}

impl NativeKey {
    pub(in crate::transaction) fn new(sel: KeySelector) -> Self {
        NativeKey { sel, result: None }
    }

    pub(in crate::transaction) fn step(&mut self) -> NativeStep {
        if self.result.is_some() {
            return NativeStep::Done;
        }
        if self.sel.key.as_ref() == ALL_KEYS_END {
            if self.sel.offset > 0 {
                self.result = Some(self.sel.key.clone());
                return NativeStep::Done;
            }
            self.sel.or_equal = false;
        } else if self.sel.key.is_empty() && self.sel.offset <= 0 {
            self.result = Some(Bytes::new());
            return NativeStep::Done;
        }
        NativeStep::Key {
            key: self.sel.key.clone(),
            backward: is_backward(&self.sel),
        }
    }

    /// The selector to send.
    pub(in crate::transaction) fn selector(&self) -> &KeySelector {
        &self.sel
    }

    /// The storage server's answer: resolved, or a selector to go on from.
    pub(in crate::transaction) fn on_reply(&mut self, sel: KeySelector) {
        if sel.offset == 0 && sel.or_equal {
            self.result = Some(sel.key);
        } else {
            self.sel = sel;
        }
    }

    pub(in crate::transaction) fn result(&self) -> Option<&Bytes> {
        self.result.as_ref()
    }
}

/// NativeAPI's `getExactRange`: `[begin, end)` shard by shard.
#[derive(Clone, Debug)]
struct ExactRange<R> {
    begin: Bytes,
    end: Bytes,
    limits: RangeLimits,
    reverse: bool,
    rows: Vec<R>,
    /// The part of the current shard still to read.
    range: Option<(Bytes, Bytes)>,
    /// Shards finished since the last location lookup (NativeAPI looks up two at a time).
    shards_in_batch: u32,
    done: Option<bool>,
}

impl<R: Row> ExactRange<R> {
    fn step(&self) -> NativeStep {
        if self.done.is_some() {
            return NativeStep::Done;
        }
        if self.reverse {
            NativeStep::Range {
                key: self.end.clone(),
                backward: true,
            }
        } else {
            NativeStep::Range {
                key: self.begin.clone(),
                backward: false,
            }
        }
    }

    fn request(&mut self, shard: (&Bytes, &Bytes)) -> (KeySelector, KeySelector, i32, i32) {
        let range = match &self.range {
            Some(r) => r.clone(),
            None => {
                let b = core::cmp::max(shard.0, &self.begin).clone();
                let e = core::cmp::min(shard.1, &self.end).clone();
                self.range = Some((b.clone(), e.clone()));
                (b, e)
            }
        };
        let (rows, bytes) = request_limits(&self.limits, self.reverse);
        (fge(range.0), fge(range.1), rows, bytes)
    }

    fn on_reply(&mut self, rows: Vec<R>, more: bool) -> Result<(), BadReply> {
        let Some((rb, re)) = self.range.clone() else {
            return Ok(());
        };
        if self.limits.has_row_limit() && rows.len() > self.limits.rows.max(0) as usize {
            return Err(BadReply);
        }
        self.limits.decrement_all(&rows);
        self.rows.extend(rows);
        if self.limits.is_reached() {
            self.done = Some(true);
            return Ok(());
        }
        let last = self.rows.last().map(|kv| kv.key().clone());
        let mut more = more;
        if self.reverse && more && last.as_ref() == Some(&rb) {
            more = false;
        }
        let mut range = (rb, re);
        if more {
            let Some(last) = last else {
                return Err(BadReply);
            };
            range = if self.reverse {
                (range.0, last)
            } else {
                (fdb_key_after(&last), range.1)
            };
        }
        if !more || range.0 >= range.1 {
            // On to the keys past this shard.
            if self.reverse {
                self.end = range.0.clone();
            } else {
                self.begin = range.1.clone();
            }
            self.range = None;
            if self.begin >= self.end {
                self.done = Some(false);
                return Ok(());
            }
            self.shards_in_batch += 1;
            if self.shards_in_batch >= GET_RANGE_SHARD_LIMIT {
                // The last shard of a lookup: NativeAPI looks the next ones up first.
                self.shards_in_batch = 0;
                return Ok(());
            }
        } else {
            self.range = Some(range);
        }
        if self.limits.has_satisfied_min_rows() && !self.rows.is_empty() {
            self.done = Some(true);
        }
        Ok(())
    }

    /// `wrong_shard_server` / `all_alternatives_failed`: read the rest of the shard again.
    fn retry(&mut self) {
        if let Some((rb, re)) = self.range.take() {
            if self.reverse {
                self.end = re;
            } else {
                self.begin = rb;
            }
        }
        self.shards_in_batch = 0;
    }
}

/// `getRangeFallback`: resolve both selectors, then read the exact range.
#[derive(Clone, Debug)]
struct Fallback<R> {
    begin: Option<Bytes>,
    end: Option<Bytes>,
    key: Option<NativeKey>,
    exact: Option<ExactRange<R>>,
}

/// `resolveKey`: plain selectors need no request.
fn resolve_plain(s: &KeySelector) -> Option<Bytes> {
    if is_fge(s) {
        Some(s.key.clone())
    } else if s.or_equal && s.offset == 1 {
        Some(fdb_key_after(&s.key))
    } else {
        None
    }
}

#[derive(Clone, Debug)]
enum Phase<R> {
    Range,
    Fallback(Box<Fallback<R>>),
    Done,
}

/// NativeAPI's `getRange` between two selectors (`or_equal` removed): plain rows, or a
/// mapped read's rows (the same actor serves both in NativeAPI).
#[derive(Clone, Debug)]
pub(in crate::transaction) struct NativeRange<R = KeyValue> {
    original_begin: KeySelector,
    original_end: KeySelector,
    original_limits: RangeLimits,
    begin: KeySelector,
    end: KeySelector,
    limits: RangeLimits,
    reverse: bool,
    out: NativeResult<R>,
    /// The shard of the request in flight, and whether its selectors were cut at its edges.
    shard: Option<(Bytes, Bytes)>,
    modified: bool,
    phase: Phase<R>,
}

impl<R: Row> NativeRange<R> {
    pub(in crate::transaction) fn new(
        begin: KeySelector,
        end: KeySelector,
        limits: RangeLimits,
        reverse: bool,
    ) -> Self {
        let mut r = NativeRange {
            original_begin: begin.clone(),
            original_end: end.clone(),
            original_limits: limits,
            begin,
            end,
            limits,
            reverse,
            out: NativeResult::default(),
            shard: None,
            modified: false,
            phase: Phase::Range,
        };
        if r.begin.key.is_empty() && r.begin.offset < 1 {
            r.out.read_to_begin = true;
            r.begin = fge(Bytes::new());
        }
        r
    }

    pub(in crate::transaction) fn step(&mut self) -> NativeStep {
        match &mut self.phase {
            Phase::Done => NativeStep::Done,
            Phase::Range => {
                let end = &self.end;
                if end.key.is_empty() && (end.offset < 1 || is_fge(end)) {
                    self.phase = Phase::Done;
                    return NativeStep::Done;
                }
                if self.reverse {
                    let mut before = end.clone();
                    before.offset -= 1;
                    NativeStep::Range {
                        key: end.key.clone(),
                        backward: is_backward(&before),
                    }
                } else {
                    NativeStep::Range {
                        key: self.begin.key.clone(),
                        backward: is_backward(&self.begin),
                    }
                }
            }
            Phase::Fallback(f) => loop {
                if let Some(k) = &mut f.key {
                    match k.step() {
                        NativeStep::Done => {}
                        s => return s,
                    }
                    let key = k.result().cloned().unwrap_or_default();
                    f.key = None;
                    if f.begin.is_none() {
                        f.begin = Some(key);
                    } else {
                        f.end = Some(key);
                    }
                    continue;
                }
                let (Some(b), Some(e)) = (&f.begin, &f.end) else {
                    let sel = if f.begin.is_none() {
                        &self.original_begin
                    } else {
                        &self.original_end
                    };
                    match resolve_plain(sel) {
                        Some(k) if f.begin.is_none() => f.begin = Some(k),
                        Some(k) => f.end = Some(k),
                        None => f.key = Some(NativeKey::new(sel.clone())),
                    }
                    continue;
                };
                if f.exact.is_none() {
                    if b >= e {
                        self.out = NativeResult::default();
                        self.phase = Phase::Done;
                        return NativeStep::Done;
                    }
                    f.exact = Some(ExactRange {
                        begin: b.clone(),
                        end: e.clone(),
                        limits: self.original_limits,
                        reverse: self.reverse,
                        rows: Vec::new(),
                        range: None,
                        shards_in_batch: 0,
                        done: None,
                    });
                }
                let exact = f.exact.as_mut().expect("just set");
                match exact.step() {
                    NativeStep::Done => {}
                    s => return s,
                }
                let more = exact.done == Some(true);
                let (b, e) = (b.clone(), e.clone());
                let rows = core::mem::take(&mut exact.rows);
                self.out = NativeResult {
                    rows,
                    more,
                    read_to_begin: b.is_empty() && (!self.reverse || !more),
                    read_through_end: e.as_ref() == ALL_KEYS_END && (self.reverse || !more),
                    read_through: None,
                };
                self.phase = Phase::Done;
                return NativeStep::Done;
            },
        }
    }

    /// The key request of the fallback's selector resolution.
    pub(in crate::transaction) fn key_selector(&self) -> Option<&KeySelector> {
        match &self.phase {
            Phase::Fallback(f) => f.key.as_ref().map(NativeKey::selector),
            _ => None,
        }
    }

    /// The range request for `shard` (the shard of [`NativeStep::Range`]'s key): selectors
    /// and limits.
    pub(in crate::transaction) fn range_request(
        &mut self,
        shard: (&Bytes, &Bytes),
    ) -> (KeySelector, KeySelector, i32, i32) {
        if let Phase::Fallback(f) = &mut self.phase {
            if let Some(exact) = &mut f.exact {
                return exact.request(shard);
            }
        }
        self.shard = Some((shard.0.clone(), shard.1.clone()));
        self.modified = false;
        let (sb, se) = shard;
        let mut before = self.begin.clone();
        before.offset -= 1;
        let begin = if self.reverse
            && definitely_less(&before, sb)
            && (!is_fge(&self.begin) || self.begin.key != *sb)
        {
            self.modified = true;
            fge(sb.clone())
        } else {
            self.begin.clone()
        };
        let end = if !self.reverse && definitely_greater(&self.end, se) {
            self.modified = true;
            fge(se.clone())
        } else {
            self.end.clone()
        };
        let (rows, bytes) = request_limits(&self.limits, self.reverse);
        (begin, end, rows, bytes)
    }

    /// A range reply (rows in read order).
    pub(in crate::transaction) fn on_range_reply(
        &mut self,
        rows: Vec<R>,
        more: bool,
    ) -> Result<(), BadReply> {
        if let Phase::Fallback(f) = &mut self.phase {
            if let Some(exact) = &mut f.exact {
                return exact.on_reply(rows, more);
            }
            return Ok(());
        }
        if !matches!(self.phase, Phase::Range) {
            return Ok(());
        }
        if (more && rows.is_empty())
            || (self.limits.has_row_limit() && rows.len() > self.limits.rows.max(0) as usize)
        {
            return Err(BadReply);
        }
        let Some((sb, se)) = self.shard.take() else {
            return Ok(());
        };
        self.limits.decrement_all(&rows);
        let last_less_or_equal = self.begin.or_equal && self.begin.offset == 0;
        if self.reverse
            && last_less_or_equal
            && rows.last().is_some_and(|kv| *kv.key() == self.begin.key)
        {
            self.modified = false;
        }
        let modified = self.modified;
        let reached = self.limits.is_reached();
        let finished = reached || (!modified && !more) || self.limits.has_satisfied_min_rows();
        let read_through = modified && !more;
        let empty_before = self.out.rows.is_empty();
        let reply_empty = rows.is_empty();
        if empty_before {
            self.out.rows = rows;
        } else {
            self.out.rows.extend(rows);
        }
        if finished {
            self.out.more = modified || reached || more;
            if read_through {
                self.out.more = true;
                self.out.read_through = Some(if self.reverse { sb } else { se });
            }
            self.phase = Phase::Done;
            return Ok(());
        }
        if !more {
            if reply_empty {
                self.fall_back();
                return Ok(());
            }
            if self.reverse {
                self.end = fge(sb);
            } else {
                self.begin = fge(se);
            }
        } else {
            let last = self.out.rows.last().expect("more rows").key().clone();
            if self.reverse {
                self.end = fge(last);
            } else {
                self.begin = KeySelector::new(last, true, 1);
            }
        }
        Ok(())
    }

    /// A key reply of the fallback's selector resolution.
    pub(in crate::transaction) fn on_key_reply(&mut self, sel: KeySelector) {
        if let Phase::Fallback(f) = &mut self.phase {
            if let Some(k) = &mut f.key {
                k.on_reply(sel);
            }
        }
    }

    /// `wrong_shard_server` to a range request of `getRange`: resolve the selectors first
    /// and read the exact range (`getRangeFallback`), from the start.
    pub(in crate::transaction) fn fall_back(&mut self) {
        self.phase = Phase::Fallback(Box::new(Fallback {
            begin: None,
            end: None,
            key: None,
            exact: None,
        }));
    }

    /// Rows come in descending order.
    pub(in crate::transaction) fn reverse(&self) -> bool {
        self.reverse
    }

    /// Whether a `wrong_shard_server` now means falling back (rather than trying again).
    pub(in crate::transaction) fn in_range_phase(&self) -> bool {
        matches!(self.phase, Phase::Range)
    }

    /// Before trying the shard again (after `all_alternatives_failed`, or `wrong_shard_server`
    /// in the fallback): forget the request in flight.
    pub(in crate::transaction) fn retry(&mut self) {
        self.shard = None;
        if let Phase::Fallback(f) = &mut self.phase {
            if let Some(exact) = &mut f.exact {
                exact.retry();
            }
        }
    }

    /// The result, once [`NativeStep::Done`].
    pub(in crate::transaction) fn take_result(&mut self) -> NativeResult<R> {
        core::mem::take(&mut self.out)
    }
}

/// `getRangeFinished`'s read conflict range of a non-snapshot NativeAPI range read.
pub(in crate::transaction) fn range_finished_conflict(
    begin: &KeySelector,
    end: &KeySelector,
    reverse: bool,
    r: &NativeResult,
) -> (Bytes, Bytes) {
    let mut rb = if r.read_to_begin {
        Bytes::new()
    } else if ((!reverse || !r.more || begin.offset > 1) && begin.offset > 0) || r.rows.is_empty() {
        begin.key.clone()
    } else if reverse {
        r.rows.last().expect("rows").key.clone()
    } else {
        r.rows[0].key.clone()
    };
    if end.offset > begin.offset && end.key < rb {
        rb = end.key.clone();
    }
    let mut re = if r.read_through_end {
        Bytes::from_static(ALL_KEYS_END)
    } else if ((reverse || !r.more || end.offset <= 0) && end.offset <= 1) || r.rows.is_empty() {
        end.key.clone()
    } else if reverse {
        fdb_key_after(&r.rows[0].key)
    } else {
        fdb_key_after(&r.rows.last().expect("rows").key)
    };
    if begin.offset < end.offset && begin.key > re {
        re = begin.key.clone();
    }
    (rb, re)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn b(s: &[u8]) -> Bytes {
        Bytes::copy_from_slice(s)
    }
    fn kv(k: &[u8]) -> KeyValue {
        KeyValue {
            key: b(k),
            value: Bytes::new(),
        }
    }

    #[test]
    fn a_selector_past_the_shard_is_cut_and_the_read_goes_on() {
        let mut r = NativeRange::new(
            fge(b(b"a")),
            fge(b(b"z")),
            RangeLimits::new(RangeLimits::UNLIMITED, RangeLimits::UNLIMITED),
            false,
        );
        assert_eq!(
            r.step(),
            NativeStep::Range {
                key: b(b"a"),
                backward: false
            }
        );
        let (begin, end, rows, bytes) = r.range_request((&b(b""), &b(b"m")));
        assert_eq!((begin, end), (fge(b(b"a")), fge(b(b"m"))));
        assert_eq!((rows, bytes), (REPLY_BYTE_LIMIT, REPLY_BYTE_LIMIT));
        r.on_range_reply(vec![kv(b"b")], false).unwrap();
        // The shard is done but the range is not: on to the next shard.
        assert_eq!(
            r.step(),
            NativeStep::Range {
                key: b(b"m"),
                backward: false
            }
        );
        let _ = r.range_request((&b(b"m"), &b(b"\xff\xff")));
        r.on_range_reply(vec![kv(b"n")], false).unwrap();
        assert_eq!(r.step(), NativeStep::Done);
        let res = r.take_result();
        assert_eq!(res.rows, vec![kv(b"b"), kv(b"n")]);
        assert!(!res.more);
    }

    #[test]
    fn a_byte_limited_read_ends_after_the_first_rows_and_says_where_it_read_through() {
        let mut r = NativeRange::new(
            KeySelector::new(b(b"a"), false, 3),
            fge(b(b"z")),
            RangeLimits::new(RangeLimits::UNLIMITED, 10),
            false,
        );
        let _ = r.step();
        let (begin, end, rows, bytes) = r.range_request((&b(b""), &b(b"m")));
        assert_eq!(begin, KeySelector::new(b(b"a"), false, 3));
        assert_eq!(end, fge(b(b"m")));
        assert_eq!((rows, bytes), (REPLY_BYTE_LIMIT, 10));
        r.on_range_reply(vec![kv(b"c"), kv(b"d")], false).unwrap();
        assert_eq!(r.step(), NativeStep::Done);
        let res = r.take_result();
        assert!(res.more);
        assert_eq!(res.read_through, Some(b(b"m")));
    }

    #[test]
    fn wrong_shard_falls_back_to_resolving_the_selectors() {
        let mut r = NativeRange::new(
            KeySelector::new(b(b"a"), false, 5),
            fge(b(b"z")),
            RangeLimits::new(RangeLimits::UNLIMITED, RangeLimits::UNLIMITED),
            false,
        );
        let _ = r.step();
        let _ = r.range_request((&b(b""), &b(b"m")));
        r.fall_back();
        assert_eq!(
            r.step(),
            NativeStep::Key {
                key: b(b"a"),
                backward: false
            }
        );
        assert_eq!(r.key_selector(), Some(&KeySelector::new(b(b"a"), false, 5)));
        r.on_key_reply(KeySelector::new(b(b"q"), true, 0));
        // The end is first_greater_or_equal: no request. Then the exact range [q, z).
        assert_eq!(
            r.step(),
            NativeStep::Range {
                key: b(b"q"),
                backward: false
            }
        );
        let (begin, end, _, _) = r.range_request((&b(b"m"), &b(b"\xff\xff")));
        assert_eq!((begin, end), (fge(b(b"q")), fge(b(b"z"))));
        r.on_range_reply(vec![kv(b"q"), kv(b"r")], false).unwrap();
        assert_eq!(r.step(), NativeStep::Done);
        assert_eq!(r.take_result().rows, vec![kv(b"q"), kv(b"r")]);
    }

    #[test]
    fn get_key_follows_the_selectors_it_is_given() {
        let mut k = NativeKey::new(KeySelector::new(b(b"a"), false, 3));
        assert_eq!(
            k.step(),
            NativeStep::Key {
                key: b(b"a"),
                backward: false
            }
        );
        k.on_reply(KeySelector::new(b(b"m"), false, 2));
        assert_eq!(
            k.step(),
            NativeStep::Key {
                key: b(b"m"),
                backward: false
            }
        );
        k.on_reply(KeySelector::new(b(b"n"), true, 0));
        assert_eq!(k.step(), NativeStep::Done);
        assert_eq!(k.result(), Some(&b(b"n")));
        let mut end = NativeKey::new(KeySelector::new(b(b"\xff\xff"), false, 2));
        assert_eq!(end.step(), NativeStep::Done);
        assert_eq!(end.result(), Some(&b(b"\xff\xff")));
    }
}
