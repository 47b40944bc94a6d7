//! RYW's range reads and selector resolution (`getRangeValue`, `getRangeValueBack`,
//! `read(GetKeyReq)`, `resolveKeySelectorFromCache` in `ReadYourWrites.actor.cpp`).
//!
//! Selectors are not resolved up front: each is moved over what the merged view already
//! knows, and the read walks from the begin selector (the end one in reverse), taking known
//! rows and asking storage (through NativeAPI, [`NativeRead`]) for the first unknown stretch,
//! with the selectors' remaining offsets sent along. A batch with a byte limit ends before it
//! would have to ask again. [`RangeRead`] is that walk as a state machine: [`RangeRead::step`]
//! runs it over the cache and the writes until it needs storage or is done;
//! [`RangeRead::feed`] takes storage's answer into the cache.
//!
//! The read conflict ranges RYW adds afterwards (`addConflictRange`, `updateConflictMap`) are
//! here too.

use alloc::boxed::Box;
use alloc::vec::Vec;
use bytes::Bytes;

use super::ext_key::ExtKey;
use super::iterator::{RywIter, Unreadable};
use super::snapshot_cache::SnapshotCache;
use super::write_map::{WriteMap, ALL_KEYS_END};
use super::RangeSet;
use crate::messages::types::{KeySelector, KeyValue};

/// `REPLY_BYTE_LIMIT`: the most a storage server returns per range request.
pub const REPLY_BYTE_LIMIT: i32 = 80_000;

/// FDB's `keyAfter`: the key after `key`, except that nothing comes after `\xff\xff`.
pub(crate) fn fdb_key_after(key: &Bytes) -> Bytes {
    if key.as_ref() == ALL_KEYS_END {
        return key.clone();
    }
    super::key_after(key)
}

/// `KeySelectorRef::removeOrEqual`.
pub(crate) fn remove_or_equal(sel: &mut KeySelector) {
    if sel.or_equal {
        sel.key = fdb_key_after(&sel.key);
        sel.or_equal = false;
    }
}

fn is_fge(sel: &KeySelector) -> bool {
    !sel.or_equal && sel.offset == 1
}

fn is_backward(sel: &KeySelector) -> bool {
    !sel.or_equal && sel.offset <= 0
}

fn fge(key: Bytes) -> KeySelector {
    KeySelector::new(key, false, 1)
}

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
    pub(crate) fn decrement(&mut self, kv: &KeyValue) {
        self.min_rows = (self.min_rows - 1).max(0);
        if self.rows != Self::UNLIMITED {
            self.rows -= 1;
        }
        if self.bytes != Self::UNLIMITED {
            let size = (kv.key.len() + kv.value.len() + 8).min(i32::MAX as usize) as i32;
            self.bytes = self.bytes.saturating_sub(size).max(0);
        }
    }

    pub(crate) fn decrement_all(&mut self, rows: &[KeyValue]) {
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

/// A range NativeAPI read (`RangeResult`), rows in read order.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct NativeResult {
    pub(crate) rows: Vec<KeyValue>,
    pub(crate) more: bool,
    pub(crate) read_to_begin: bool,
    pub(crate) read_through_end: bool,
    /// Where a read cut at a shard boundary is known to have read through.
    pub(crate) read_through: Option<Bytes>,
}

/// The storage read RYW asks NativeAPI for (always a snapshot read).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NativeRead {
    pub(crate) begin: KeySelector,
    pub(crate) end: KeySelector,
    pub(crate) limits: RangeLimits,
    pub(crate) reverse: bool,
}

/// What RYW's range read returned.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RywResult {
    pub(crate) rows: Vec<KeyValue>,
    pub(crate) more: bool,
    pub(crate) read_to_begin: bool,
    pub(crate) read_through_end: bool,
}

impl RywResult {
    fn empty(read_to_begin: bool, read_through_end: bool) -> Self {
        RywResult {
            rows: Vec::new(),
            more: false,
            read_to_begin,
            read_through_end,
        }
    }
}

/// What a step of a read needs next.
#[derive(Debug)]
pub(crate) enum Step<T> {
    /// This storage read; then [`RangeRead::feed`] its result.
    Native(NativeRead),
    Done(T),
}

#[derive(Debug)]
enum Stage {
    /// Nothing done yet.
    Start,
    /// Waiting for this storage read.
    Reading(NativeRead),
    /// Storage answered; the walk continues.
    Fed,
    /// Resolving the far selector first (`read(GetKeyReq)`), before the walk (`true`) or to
    /// end it.
    Key {
        sub: Box<KeyRead>,
        before_walk: bool,
    },
    Done,
}

/// RYW's range read between two selectors (`or_equal` already removed).
#[derive(Debug)]
pub(crate) struct RangeRead {
    begin: KeySelector,
    end: KeySelector,
    limits: RangeLimits,
    reverse: bool,
    max_key: Bytes,
    rows: Vec<KeyValue>,
    more: bool,
    additional_rows: i64,
    /// Rows seen past the limits (`itemsPastEnd` / `itemsPastBegin`).
    items_past: i32,
    request_count: i32,
    read_to_begin: bool,
    read_through_end: bool,
    actual_begin_offset: i32,
    actual_end_offset: i32,
    stage: Stage,
}

/// Where the walk goes after running over what is known.
enum Flow {
    Native(NativeRead),
    /// Resolve this selector first.
    Key(KeySelector, bool),
    /// Finish with the rows gathered.
    Finish,
    /// Finish with no rows.
    Empty(bool, bool),
}

/// `resolveKeySelectorFromCache`: moves `sel` over the known segments (counting rows) until
/// it is resolved or reaches what is unknown; the iterator returned is at that segment.
fn resolve_from_cache<'a>(
    sel: &mut KeySelector,
    cache: &'a SnapshotCache,
    writes: &'a WriteMap,
    max_key: &Bytes,
    read_to_begin: &mut bool,
    read_through_end: &mut bool,
    actual_offset: &mut i32,
) -> RywIter<'a> {
    remove_or_equal(sel);
    let exhausted = sel.offset == 1;
    let mut it = RywIter::new(cache, writes, &sel.key);
    if sel.offset <= 0 && it.begin_key().cmp_key(&sel.key).is_eq() && !sel.key.is_empty() {
        it.retreat();
    }
    let mut moved: Option<ExtKey<'_>> = None;
    while sel.offset > 1 && it.is_known() && it.end_key().cmp_key(max_key).is_lt() {
        if it.is_kv() == Ok(true) {
            sel.offset -= 1;
        }
        it.advance();
        moved = Some(it.begin_key());
    }
    while sel.offset < 1 && it.is_known() && !it.begin_key().cmp_key(b"").is_eq() {
        if it.is_kv() == Ok(true) {
            sel.offset += 1;
            if sel.offset == 1 {
                moved = Some(it.begin_key());
                break;
            }
        }
        it.retreat();
        moved = Some(it.end_key());
    }
    if !exhausted {
        *actual_offset = sel.offset;
    }
    if it.is_known() && sel.offset < 1 {
        *read_to_begin = true;
        *sel = fge(Bytes::new());
        return it;
    }
    if it.is_known() && sel.offset > 1 {
        *read_through_end = true;
        *sel = fge(max_key.clone());
        return it;
    }
    while !it.is_unreadable()
        && it.is_empty_range() == Ok(true)
        && it.end_key().cmp_key(max_key).is_lt()
    {
        it.advance();
        moved = Some(it.begin_key());
    }
    if let Some(k) = moved {
        sel.key = k.to_bytes();
    }
    it
}

/// A direction over the merged view: `FORWARD` walks with `advance` towards `max_key`, and
/// the segment's end is its far side; backward walks with `retreat` towards `""`.
struct Walk<const FORWARD: bool>;

impl<const FORWARD: bool> Walk<FORWARD> {
    fn step(it: &mut RywIter<'_>) {
        if FORWARD {
            it.advance()
        } else {
            it.retreat()
        }
    }

    /// The side of the segment the walk goes on from.
    fn far<'a>(it: &RywIter<'a>) -> ExtKey<'a> {
        if FORWARD {
            it.end_key()
        } else {
            it.begin_key()
        }
    }

    /// The side it came from.
    fn near<'a>(it: &RywIter<'a>) -> ExtKey<'a> {
        if FORWARD {
            it.begin_key()
        } else {
            it.end_key()
        }
    }

    /// Steps back (against the walk) to the nearest unknown segment.
    fn back_to_unknown(it: &mut RywIter<'_>) {
        while it.is_unreadable() || it.is_unknown_range() != Ok(true) {
            if FORWARD {
                it.retreat()
            } else {
                it.advance()
            }
        }
    }

    /// A single-key empty segment or an unreadable one stops the counting walks; this says
    /// which of the two, for the span from `near` (where the last row ended) to `far`.
    fn single_empty(it: &RywIter<'_>, near: ExtKey<'_>, far: ExtKey<'_>) -> Option<bool> {
        if !(it.is_unreadable() || it.is_empty_range() == Ok(true)) {
            return None;
        }
        let (b, e) = if FORWARD { (near, far) } else { (far, near) };
        Some(!it.is_unreadable() && e.is_key_after(b))
    }

    /// `skipUncached` (forward) / `skipUncachedBack`: from an unknown segment, on past
    /// single-key empty ranges and rows to the last unknown segment before something known
    /// and wider; counts the single empty keys.
    fn skip_uncached(it: &mut RywIter<'_>, end: &RywIter<'_>, mut limit: i32) -> i32 {
        let (mut near, mut far) = (Self::near(it), Self::far(it));
        let mut single = 0;
        while !it.same(end) && {
            limit -= 1;
            limit >= 0
        } {
            match Self::single_empty(it, near, far) {
                Some(false) => break,
                Some(true) => single += 1,
                None => near = far,
            }
            Self::step(it);
            far = Self::far(it);
        }
        Self::back_to_unknown(it);
        single
    }

    /// `countUncached` (forward, up to `max_key`) / `countUncachedBack` (down to `""`): the
    /// single-key empty ranges that follow, up to `max` of them.
    fn count_uncached(mut it: RywIter<'_>, max_key: &Bytes, max: i32) -> i32 {
        if max <= 0 {
            return 0;
        }
        let (mut near, mut far) = (Self::near(&it), Self::far(&it));
        let mut single = 0;
        while if FORWARD {
            far.cmp_key(max_key).is_lt()
        } else {
            far.cmp_key(b"").is_gt()
        } {
            match Self::single_empty(&it, near, far) {
                Some(false) => return single,
                Some(true) => {
                    single += 1;
                    if single >= max {
                        return max;
                    }
                }
                None => near = far,
            }
            Self::step(&mut it);
            far = Self::far(&it);
        }
        single
    }
}

type Forward = Walk<true>;
type Backward = Walk<false>;

fn clamp_i32(v: i64) -> i32 {
    v.clamp(i32::MIN as i64, i32::MAX as i64) as i32
}

/// `setRequestLimits`: the limits of the storage read, with room for the rows the selectors
/// still have to skip.
fn set_request_limits(l: &mut RangeLimits, additional: i64, offset: i32, request_count: i32) {
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
fn known_range(d: &NativeResult, begin: &KeySelector, end: &KeySelector) -> Option<(Bytes, Bytes)> {
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
            None => super::key_after(&last.key),
        };
    }
    (b < e).then_some((b, e))
}

/// `getKnownKeyRangeBack`: the same for a reverse read (rows descending).
fn known_range_back(
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
    if d.read_to_begin {
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
            super::key_after(&first.key)
        };
    }
    (b < e).then_some((b, e))
}

impl RangeRead {
    /// A read of `[begin, end)` (selectors with `or_equal` removed) within `limits`.
    pub(crate) fn new(
        begin: KeySelector,
        end: KeySelector,
        limits: RangeLimits,
        reverse: bool,
        max_key: Bytes,
    ) -> Self {
        RangeRead {
            actual_begin_offset: begin.offset,
            actual_end_offset: end.offset,
            begin,
            end,
            limits,
            reverse,
            max_key,
            rows: Vec::new(),
            more: false,
            additional_rows: 0,
            items_past: 0,
            request_count: 0,
            read_to_begin: false,
            read_through_end: false,
            stage: Stage::Start,
        }
    }

    /// Runs the read over what the transaction knows until it needs storage or is done.
    pub(crate) fn step(
        &mut self,
        cache: &SnapshotCache,
        writes: &WriteMap,
    ) -> Result<Step<RywResult>, Unreadable> {
        loop {
            let flow = match core::mem::replace(&mut self.stage, Stage::Done) {
                Stage::Done => return Ok(Step::Done(RywResult::default())),
                // Asked again before the answer came: the same read.
                Stage::Reading(r) => {
                    self.stage = Stage::Reading(r.clone());
                    return Ok(Step::Native(r));
                }
                Stage::Key {
                    mut sub,
                    before_walk,
                } => match sub.step(cache, writes)? {
                    Step::Native(r) => {
                        self.stage = Stage::Key { sub, before_walk };
                        return Ok(Step::Native(r));
                    }
                    Step::Done(key) => self.after_key(cache, writes, key, before_walk)?,
                },
                Stage::Start => self.start(cache, writes)?,
                Stage::Fed => self.resume(cache, writes)?,
            };
            match flow {
                Flow::Native(r) => {
                    self.stage = Stage::Reading(r.clone());
                    return Ok(Step::Native(r));
                }
                Flow::Key(sel, before_walk) => {
                    let sub = Box::new(KeyRead::new(sel, self.max_key.clone()));
                    self.stage = Stage::Key { sub, before_walk };
                }
                Flow::Finish => {
                    self.stage = Stage::Done;
                    return Ok(Step::Done(self.finish()));
                }
                Flow::Empty(rtb, rte) => {
                    self.stage = Stage::Done;
                    return Ok(Step::Done(RywResult::empty(rtb, rte)));
                }
            }
        }
    }

    /// Takes the storage read's result into the cache.
    pub(crate) fn feed(&mut self, cache: &mut SnapshotCache, mut result: NativeResult) {
        match &mut self.stage {
            Stage::Key { sub, .. } => sub.inner.feed(cache, result),
            Stage::Reading(r) => {
                let known = if self.reverse {
                    known_range_back(&result, &r.begin, &r.end)
                } else {
                    known_range(&result, &r.begin, &r.end)
                };
                if let Some((b, e)) = known {
                    if self.reverse {
                        result.rows.reverse();
                    }
                    cache.insert_range(b, e, result.rows);
                }
                self.stage = Stage::Fed;
            }
            _ => {}
        }
    }

    fn resolve_both<'a>(
        &mut self,
        cache: &'a SnapshotCache,
        writes: &'a WriteMap,
    ) -> (RywIter<'a>, RywIter<'a>) {
        // Forward, `it` follows the begin selector and `it_end` the end one; in reverse the
        // other way round.
        let (first, second, first_off, second_off) = if self.reverse {
            (
                &mut self.end,
                &mut self.begin,
                &mut self.actual_end_offset,
                &mut self.actual_begin_offset,
            )
        } else {
            (
                &mut self.begin,
                &mut self.end,
                &mut self.actual_begin_offset,
                &mut self.actual_end_offset,
            )
        };
        let a = resolve_from_cache(
            first,
            cache,
            writes,
            &self.max_key,
            &mut self.read_to_begin,
            &mut self.read_through_end,
            first_off,
        );
        let b = resolve_from_cache(
            second,
            cache,
            writes,
            &self.max_key,
            &mut self.read_to_begin,
            &mut self.read_through_end,
            second_off,
        );
        (a, b)
    }

    fn start(&mut self, cache: &SnapshotCache, writes: &WriteMap) -> Result<Flow, Unreadable> {
        let (it, it_end) = self.resolve_both(cache, writes);
        if self.actual_begin_offset >= self.actual_end_offset && self.begin.key >= self.end.key {
            return Ok(Flow::Empty(false, false));
        }
        if (is_fge(&self.begin) && self.begin.key == self.max_key)
            || (is_fge(&self.end) && self.end.key.is_empty())
        {
            return Ok(Flow::Empty(self.read_to_begin, self.read_through_end));
        }
        if self.reverse {
            if !is_fge(&self.begin) && self.begin.key > self.end.key {
                return Ok(Flow::Key(self.begin.clone(), true));
            }
            self.walk_back(it, it_end)
        } else {
            if !is_fge(&self.end) && self.begin.key > self.end.key {
                return Ok(Flow::Key(self.end.clone(), true));
            }
            self.walk(it, it_end)
        }
    }

    fn resume(&mut self, cache: &SnapshotCache, writes: &WriteMap) -> Result<Flow, Unreadable> {
        let (it, it_end) = self.resolve_both(cache, writes);
        if self.reverse {
            self.walk_back(it, it_end)
        } else {
            self.walk(it, it_end)
        }
    }

    fn after_key(
        &mut self,
        cache: &SnapshotCache,
        writes: &WriteMap,
        key: Bytes,
        before_walk: bool,
    ) -> Result<Flow, Unreadable> {
        if key.is_empty() {
            self.read_to_begin = true;
        }
        if key == self.max_key {
            self.read_through_end = true;
        }
        if !before_walk {
            // The far selector is settled; the rows gathered are the answer.
            if self.reverse {
                self.begin = fge(key);
            } else {
                self.end = fge(key);
            }
            return Ok(Flow::Finish);
        }
        if self.reverse {
            if key >= self.end.key && self.end.offset <= 1 {
                return Ok(Flow::Empty(false, false));
            } else if key == self.max_key {
                return Ok(Flow::Empty(self.read_to_begin, self.read_through_end));
            }
        } else if self.begin.key >= key && !is_backward(&self.begin) {
            return Ok(Flow::Empty(false, false));
        } else if key.is_empty() {
            return Ok(Flow::Empty(self.read_to_begin, self.read_through_end));
        }
        self.resume(cache, writes)
    }

    /// `getRangeValue`'s loop.
    fn walk(&mut self, mut it: RywIter<'_>, it_end: RywIter<'_>) -> Result<Flow, Unreadable> {
        loop {
            let (begin, end) = (&self.begin, &self.end);
            if self.rows.is_empty()
                && self.actual_begin_offset >= self.actual_end_offset
                && begin.key >= end.key
            {
                return Ok(Flow::Empty(false, false));
            }
            if end.offset <= 1 && end.key.is_empty() {
                return Ok(Flow::Empty(self.read_to_begin, self.read_through_end));
            }
            if (begin.offset >= end.offset && begin.key >= end.key)
                || (begin.offset >= 1 && begin.key >= self.max_key)
            {
                if is_fge(end) || self.rows.is_empty() {
                    return Ok(Flow::Finish);
                }
                return Ok(Flow::Key(end.clone(), false));
            }
            if it.is_known() && it.begin_key() > it_end.begin_key() {
                if is_fge(end) {
                    return Ok(Flow::Finish);
                }
                return Ok(Flow::Empty(self.read_to_begin, self.read_through_end));
            }
            if self.limits.is_reached() && self.items_past >= 1 - end.offset {
                return Ok(Flow::Finish);
            }
            if it.same(&it_end)
                && (it.is_known()
                    || (begin.offset > 0
                        && is_fge(end)
                        && it.begin_key().cmp_key(&end.key).is_eq()))
            {
                return Ok(Flow::Finish);
            }
            if it.is_unknown_range()? {
                if self.limits.has_byte_limit()
                    && self.limits.has_satisfied_min_rows()
                    && !self.rows.is_empty()
                    && self.items_past >= 1 - end.offset
                {
                    self.more = true;
                    return Ok(Flow::Finish);
                }
                return Ok(Flow::Native(self.read_forward(&it, &it_end)));
            } else if it.is_kv()? {
                let Some(first) = it.kv()? else {
                    it.advance();
                    continue;
                };
                let start = it.clone();
                let limit = if is_fge(&self.end) {
                    self.end.key.clone()
                } else {
                    self.max_key.clone()
                };
                it.skip_contiguous(&limit)?;
                if it.row_from_cache() {
                    let run = it.cached_rows_from(&start);
                    self.take(run, false);
                } else {
                    self.take(core::slice::from_ref(&first), false);
                }
                it.advance();
            } else {
                it.advance();
            }
        }
    }

    /// Takes rows in read order (`run` ascending; taken from its end in reverse) until the
    /// limits are reached; the rest only count as rows past the limit.
    fn take(&mut self, run: &[KeyValue], reverse: bool) {
        let max = run.len();
        let mut count = 0;
        while count < max && !self.limits.is_reached() {
            let kv = if reverse {
                &run[max - count - 1]
            } else {
                &run[count]
            };
            self.limits.decrement(kv);
            count += 1;
        }
        self.items_past += (max - count) as i32;
        self.rows.reserve(count);
        if reverse {
            self.rows.extend(run[max - count..].iter().rev().cloned());
        } else {
            self.rows.extend_from_slice(&run[..count]);
        }
    }

    /// The storage read for the unknown stretch at `it` (forward).
    fn read_forward(&mut self, it: &RywIter<'_>, it_end: &RywIter<'_>) -> NativeRead {
        let mut uc_end = it.clone();
        let mut single = 0;
        let clear_limit = if self.request_count > 0 {
            1i32 << self.request_count.min(20)
        } else {
            0
        };
        if it.begin_key() < it_end.begin_key() {
            single =
                Forward::skip_uncached(&mut uc_end, it_end, clear_limit + 100).min(clear_limit);
        }
        let end = &self.end;
        let read_end = if !uc_end.same(it_end) {
            if end.offset < 1 {
                self.additional_rows += 1 - end.offset as i64;
            }
            fge(uc_end.end_key().to_bytes())
        } else if end.offset < 1 {
            self.additional_rows += 1 - end.offset as i64;
            fge(end.key.clone())
        } else {
            let mut r = end.clone();
            if end.offset > 1 {
                single +=
                    Forward::count_uncached(uc_end.clone(), &self.max_key, clear_limit - single);
                r.offset += single;
            }
            r
        };
        self.additional_rows += single as i64;
        let read_begin = if is_fge(&self.begin) {
            let k = if it.begin_key().cmp_key(&self.begin.key).is_gt() {
                it.begin_key().to_bytes()
            } else {
                self.begin.key.clone()
            };
            self.begin = fge(k);
            self.begin.clone()
        } else if self.begin.offset > 1 {
            self.additional_rows += self.begin.offset as i64 - 1;
            fge(self.begin.key.clone())
        } else {
            let mut r = self.begin.clone();
            let s = Backward::count_uncached(it.clone(), &self.max_key, clear_limit);
            r.offset -= s;
            self.additional_rows += s as i64;
            r
        };
        let mut read_end = read_end;
        if read_end.key < read_begin.key {
            read_end.key = read_begin.key.clone();
        }
        let mut limits = self.limits;
        set_request_limits(
            &mut limits,
            self.additional_rows,
            2 - read_begin.offset,
            self.request_count,
        );
        self.request_count += 1;
        self.additional_rows = 0;
        NativeRead {
            begin: read_begin,
            end: read_end,
            limits,
            reverse: false,
        }
    }

    /// `getRangeValueBack`'s loop.
    fn walk_back(&mut self, mut it: RywIter<'_>, it_end: RywIter<'_>) -> Result<Flow, Unreadable> {
        loop {
            let (begin, end) = (&self.begin, &self.end);
            if self.rows.is_empty()
                && self.actual_begin_offset >= self.actual_end_offset
                && begin.key >= end.key
            {
                return Ok(Flow::Empty(false, false));
            }
            if !is_backward(begin) && begin.key >= self.max_key {
                return Ok(Flow::Empty(self.read_to_begin, self.read_through_end));
            }
            if (begin.offset >= end.offset && begin.key >= end.key)
                || (end.offset <= 1 && end.key.is_empty())
            {
                if is_fge(begin) || self.rows.is_empty() {
                    return Ok(Flow::Finish);
                }
                return Ok(Flow::Key(begin.clone(), false));
            }
            let past = self.items_past >= begin.offset - 1;
            if past && it.is_known() && it.begin_key() < it_end.begin_key() {
                if is_fge(begin) {
                    return Ok(Flow::Finish);
                }
                return Ok(Flow::Empty(self.read_to_begin, self.read_through_end));
            }
            if self.limits.is_reached() && past {
                return Ok(Flow::Finish);
            }
            if is_fge(end) && it.begin_key().cmp_key(&end.key).is_eq() {
                if past && it.same(&it_end) {
                    return Ok(Flow::Finish);
                }
                it.retreat();
            }
            if it.is_unknown_range()? {
                if self.limits.has_byte_limit() && !self.rows.is_empty() && past {
                    self.more = true;
                    return Ok(Flow::Finish);
                }
                return Ok(Flow::Native(self.read_backward(&it, &it_end)));
            }
            let last = if it.is_kv()? { it.kv()? } else { None };
            if let Some(last) = last {
                let end_it = it.clone();
                let limit = if is_fge(&self.begin) {
                    self.begin.key.clone()
                } else {
                    Bytes::new()
                };
                it.skip_contiguous_back(&limit)?;
                if it.row_from_cache() {
                    let run = end_it.cached_rows_from(&it);
                    self.take(run, true);
                } else {
                    self.take(core::slice::from_ref(&last), true);
                }
            }
            if it.same(&it_end) {
                return Ok(Flow::Finish);
            }
            it.retreat();
        }
    }

    /// The storage read for the unknown stretch at `it` (reverse).
    fn read_backward(&mut self, it: &RywIter<'_>, it_end: &RywIter<'_>) -> NativeRead {
        let mut uc_end = it.clone();
        let mut single = 0;
        let clear_limit = if self.request_count > 0 {
            1i32 << self.request_count.min(20)
        } else {
            0
        };
        if it.begin_key() > it_end.begin_key() {
            single =
                Backward::skip_uncached(&mut uc_end, it_end, clear_limit + 100).min(clear_limit);
        }
        let begin = &self.begin;
        let read_begin = if !uc_end.same(it_end) {
            if begin.offset > 1 {
                self.additional_rows += begin.offset as i64 - 1;
            }
            fge(uc_end.begin_key().to_bytes())
        } else if begin.offset > 1 {
            self.additional_rows += begin.offset as i64 - 1;
            fge(begin.key.clone())
        } else {
            let mut r = begin.clone();
            if begin.offset < 1 {
                single +=
                    Backward::count_uncached(uc_end.clone(), &self.max_key, clear_limit - single);
                r.offset -= single;
            }
            r
        };
        self.additional_rows += single as i64;
        let read_end = if is_fge(&self.end) {
            let k = if it.end_key().cmp_key(&self.end.key).is_lt() {
                it.end_key().to_bytes()
            } else {
                self.end.key.clone()
            };
            self.end = fge(k);
            self.end.clone()
        } else if self.end.offset < 1 {
            self.additional_rows += 1 - self.end.offset as i64;
            fge(self.end.key.clone())
        } else {
            let mut r = self.end.clone();
            let s = Forward::count_uncached(it.clone(), &self.max_key, clear_limit);
            r.offset += s;
            self.additional_rows += s as i64;
            r
        };
        let mut read_begin = read_begin;
        if read_begin.key > read_end.key {
            read_begin.key = read_end.key.clone();
        }
        let mut limits = self.limits;
        set_request_limits(
            &mut limits,
            self.additional_rows,
            read_end.offset,
            self.request_count,
        );
        self.request_count += 1;
        self.additional_rows = 0;
        NativeRead {
            begin: read_begin,
            end: read_end,
            limits,
            reverse: true,
        }
    }

    fn finish(&mut self) -> RywResult {
        let mut rows = core::mem::take(&mut self.rows);
        let mut more = self.more || self.limits.is_reached();
        if !self.reverse && is_fge(&self.end) {
            let keep = rows.partition_point(|kv| kv.key < self.end.key);
            if keep < rows.len() {
                more = false;
            }
            rows.truncate(keep);
        }
        if self.reverse && is_fge(&self.begin) {
            // Descending: keep the rows at or after the begin key.
            let keep = rows.partition_point(|kv| kv.key >= self.begin.key);
            if keep < rows.len() {
                more = false;
            }
            rows.truncate(keep);
        }
        let (rtb, rte) = if self.reverse {
            (!more && self.read_to_begin, self.read_through_end)
        } else {
            (self.read_to_begin, !more && self.read_through_end)
        };
        RywResult {
            rows,
            more,
            read_to_begin: rtb,
            read_through_end: rte,
        }
    }
}

/// RYW's `read(GetKeyReq)`: a selector resolved as a one-row range read.
#[derive(Debug)]
pub(crate) struct KeyRead {
    forward: bool,
    max_key: Bytes,
    inner: RangeRead,
}

impl KeyRead {
    pub(crate) fn new(mut sel: KeySelector, max_key: Bytes) -> Self {
        let forward = sel.offset > 0;
        let one = RangeLimits::new(1, RangeLimits::UNLIMITED);
        let inner = if forward {
            RangeRead::new(sel, fge(max_key.clone()), one, false, max_key.clone())
        } else {
            sel.offset += 1;
            RangeRead::new(fge(Bytes::new()), sel, one, true, max_key.clone())
        };
        KeyRead {
            forward,
            max_key,
            inner,
        }
    }

    pub(crate) fn step(
        &mut self,
        cache: &SnapshotCache,
        writes: &WriteMap,
    ) -> Result<Step<Bytes>, Unreadable> {
        let r = match self.inner.step(cache, writes)? {
            Step::Native(n) => return Ok(Step::Native(n)),
            Step::Done(r) => r,
        };
        let key = if self.forward {
            if r.read_to_begin {
                Bytes::new()
            } else if r.read_through_end || r.rows.is_empty() {
                self.max_key.clone()
            } else {
                r.rows[0].key.clone()
            }
        } else if r.read_through_end {
            self.max_key.clone()
        } else if r.read_to_begin || r.rows.is_empty() {
            Bytes::new()
        } else {
            r.rows[0].key.clone()
        };
        Ok(Step::Done(key))
    }

    pub(crate) fn feed(&mut self, cache: &mut SnapshotCache, result: NativeResult) {
        self.inner.feed(cache, result);
    }
}

/// `updateConflictMap`: the parts of `[begin, end)` the writes leave to storage (never
/// written, or only by atomic ops) become read conflict ranges.
pub(crate) fn update_conflict_map(
    writes: &WriteMap,
    begin: &Bytes,
    end: &Bytes,
    out: &mut RangeSet,
) {
    if begin >= end {
        return;
    }
    let mut it = writes.iter_at(begin);
    while it.begin_key().cmp_key(end).is_lt() {
        if it.is_unmodified_range() || (it.is_operation() && !it.is_independent()) {
            let b = it.begin_key();
            let e = it.end_key();
            let lo = if b.cmp_key(begin).is_gt() {
                b.to_bytes()
            } else {
                begin.clone()
            };
            let hi = if e.cmp_key(end).is_lt() {
                e.to_bytes()
            } else {
                end.clone()
            };
            out.insert_owned(lo, hi);
        }
        it.advance();
    }
}

/// `KeyRangeRef`'s check: an inverted range fails the read (`inverted_range`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Inverted;

/// `addConflictRange(GetKeyReq)`: what a resolved selector read.
pub(crate) fn key_conflict(sel: &KeySelector, result: &Bytes) -> Result<(Bytes, Bytes), Inverted> {
    let key = if sel.or_equal {
        fdb_key_after(&sel.key)
    } else {
        sel.key.clone()
    };
    let (b, e) = if sel.offset <= 0 {
        (result.clone(), key)
    } else {
        (key, fdb_key_after(result))
    };
    if b > e {
        return Err(Inverted);
    }
    Ok((b, e))
}

/// `addConflictRange(GetRangeReq)`: what a range read between `begin` and `end` (`or_equal`
/// removed) covered, given its result.
pub(crate) fn range_conflict(
    begin: &KeySelector,
    end: &KeySelector,
    reverse: bool,
    r: &RywResult,
    max_key: &Bytes,
) -> Result<(Bytes, Bytes), Inverted> {
    let (mut b, mut e) = if begin.key < end.key {
        if reverse {
            let b = if begin.offset <= 1 && r.more {
                end.key.clone()
            } else {
                begin.key.clone()
            };
            (b, end.key.clone())
        } else {
            let e = if end.offset > 0 && r.more {
                begin.key.clone()
            } else {
                end.key.clone()
            };
            (begin.key.clone(), e)
        }
    } else {
        (end.key.clone(), begin.key.clone())
    };
    if r.read_to_begin && begin.offset <= 0 {
        b = Bytes::new();
    }
    if r.read_through_end && end.offset > 0 {
        e = max_key.clone();
    }
    if let (Some(first), Some(last)) = (r.rows.first(), r.rows.last()) {
        if reverse {
            if last.key < b {
                b = last.key.clone();
            }
            if end.offset > 0 && e <= first.key {
                e = fdb_key_after(&first.key);
            }
        } else {
            if begin.offset <= 0 && first.key < b {
                b = first.key.clone();
            }
            if e <= last.key {
                e = fdb_key_after(&last.key);
            }
        }
    }
    if b > e {
        return Err(Inverted);
    }
    Ok((b, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::commit::mutation_type as mt;
    use alloc::vec;

    fn b(s: &[u8]) -> Bytes {
        Bytes::copy_from_slice(s)
    }
    fn kv(k: &[u8]) -> KeyValue {
        KeyValue {
            key: b(k),
            value: b(b"v"),
        }
    }

    /// A toy storage server: answers a native read the way NativeAPI would over one shard.
    fn storage(data: &[KeyValue], r: &NativeRead) -> NativeResult {
        let resolve = |sel: &KeySelector| -> usize {
            // Index of the key the selector names in `data` (0..=len).
            let ge = data.partition_point(|kv| kv.key < sel.key);
            let base = if sel.or_equal {
                data.partition_point(|kv| kv.key <= sel.key)
            } else {
                ge
            };
            (base as i64 + sel.offset as i64 - 1).clamp(0, data.len() as i64) as usize
        };
        let (lo, hi) = (resolve(&r.begin), resolve(&r.end));
        let mut rows: Vec<KeyValue> = if lo < hi {
            data[lo..hi].to_vec()
        } else {
            Vec::new()
        };
        if r.reverse {
            rows.reverse();
        }
        let mut limits = r.limits;
        let mut n = 0;
        while n < rows.len() && !limits.is_reached() {
            limits.decrement(&rows[n]);
            n += 1;
            if limits.has_satisfied_min_rows() {
                break;
            }
        }
        let more = n < rows.len();
        rows.truncate(n);
        NativeResult {
            rows,
            more,
            ..NativeResult::default()
        }
    }

    fn run(
        r: &mut RangeRead,
        cache: &mut SnapshotCache,
        writes: &WriteMap,
        data: &[KeyValue],
    ) -> (RywResult, Vec<NativeRead>) {
        let mut reads = Vec::new();
        loop {
            match r.step(cache, writes).expect("readable") {
                Step::Done(res) => return (res, reads),
                Step::Native(n) => {
                    let res = storage(data, &n);
                    reads.push(n);
                    r.feed(cache, res);
                }
            }
        }
    }

    fn keys(r: &RywResult) -> Vec<Bytes> {
        r.rows.iter().map(|kv| kv.key.clone()).collect()
    }

    #[test]
    fn selectors_are_sent_to_storage_and_the_rows_cached() {
        let data: Vec<KeyValue> = [&b"a"[..], b"b", b"c", b"d", b"e"]
            .iter()
            .map(|k| kv(k))
            .collect();
        let mut cache = SnapshotCache::default();
        let writes = WriteMap::new();
        // [first_greater_than(a) + 1, last_less_than(e)): c, d.
        let mut r = RangeRead::new(
            KeySelector::new(b(b"a\x00"), false, 2),
            KeySelector::new(b(b"e"), false, 0),
            RangeLimits::new(RangeLimits::UNLIMITED, RangeLimits::UNLIMITED),
            false,
            b(b"\xff"),
        );
        let (res, reads) = run(&mut r, &mut cache, &writes, &data);
        assert_eq!(keys(&res), vec![b(b"c")]);
        assert_eq!(reads.len(), 1);
        assert_eq!(reads[0].begin, KeySelector::new(b(b"a\x00"), false, 1));
        // The same read again is answered from the cache.
        let mut r = RangeRead::new(
            KeySelector::new(b(b"c"), false, 1),
            KeySelector::new(b(b"d"), false, 1),
            RangeLimits::new(RangeLimits::UNLIMITED, RangeLimits::UNLIMITED),
            false,
            b(b"\xff"),
        );
        let (res, reads) = run(&mut r, &mut cache, &writes, &data);
        assert_eq!(keys(&res), vec![b(b"c")]);
        assert!(reads.is_empty(), "answered from the cache: {reads:?}");
    }

    #[test]
    fn own_writes_merge_and_a_compare_and_clear_counts_for_selectors() {
        let data: Vec<KeyValue> = [&b"a"[..], b"c"].iter().map(|k| kv(k)).collect();
        let mut cache = SnapshotCache::default();
        let mut writes = WriteMap::new();
        writes.mutate(b(b"b"), mt::SET_VALUE, b(b"w"), true);
        writes.mutate(b(b"bb"), mt::COMPARE_AND_CLEAR, b(b"x"), true);
        let mut r = RangeRead::new(
            KeySelector::new(b(b""), false, 1),
            KeySelector::new(b(b"\xff"), false, 1),
            RangeLimits::new(RangeLimits::UNLIMITED, RangeLimits::UNLIMITED),
            false,
            b(b"\xff"),
        );
        let (res, _) = run(&mut r, &mut cache, &writes, &data);
        assert_eq!(keys(&res), vec![b(b"a"), b(b"b"), b(b"c")]);
        // Now everything is known: first_greater_or_equal(b) + 2 (offset 3) lands on c because the
        // compare_and_clear key `bb` that holds nothing still counts as a key (without it,
        // it would land past the end).
        let mut k = KeyRead::new(KeySelector::new(b(b"b"), false, 3), b(b"\xff"));
        let key = match k.step(&cache, &writes).unwrap() {
            Step::Done(key) => key,
            Step::Native(n) => panic!("no read needed: {n:?}"),
        };
        assert_eq!(key, b(b"c"));
    }

    #[test]
    fn a_versionstamped_range_fails_only_when_reached() {
        let data: Vec<KeyValue> = [&b"a"[..], b"b"].iter().map(|k| kv(k)).collect();
        let mut cache = SnapshotCache::default();
        let mut writes = WriteMap::new();
        writes.add_unmodified_and_unreadable_range(b"m", b"n");
        let mut r = RangeRead::new(
            KeySelector::new(b(b""), false, 1),
            KeySelector::new(b(b"c"), false, 1),
            RangeLimits::new(RangeLimits::UNLIMITED, RangeLimits::UNLIMITED),
            false,
            b(b"\xff"),
        );
        let (res, _) = run(&mut r, &mut cache, &writes, &data);
        assert_eq!(keys(&res), vec![b(b"a"), b(b"b")]);
        let mut r = RangeRead::new(
            KeySelector::new(b(b""), false, 1),
            KeySelector::new(b(b"z"), false, 1),
            RangeLimits::new(RangeLimits::UNLIMITED, RangeLimits::UNLIMITED),
            false,
            b(b"\xff"),
        );
        let mut outcome = Ok(());
        for _ in 0..10 {
            match r.step(&cache, &writes) {
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
                Ok(Step::Done(_)) => break,
                Ok(Step::Native(n)) => {
                    let res = storage(&data, &n);
                    r.feed(&mut cache, res);
                }
            }
        }
        assert_eq!(outcome, Err(Unreadable));
    }

    #[test]
    fn reverse_reads_walk_back_from_the_end() {
        let data: Vec<KeyValue> = [&b"a"[..], b"b", b"c", b"d"]
            .iter()
            .map(|k| kv(k))
            .collect();
        let mut cache = SnapshotCache::default();
        let writes = WriteMap::new();
        let mut r = RangeRead::new(
            KeySelector::new(b(b"a"), false, 1),
            KeySelector::new(b(b"d"), false, 1),
            RangeLimits::new(2, RangeLimits::UNLIMITED),
            true,
            b(b"\xff"),
        );
        let (res, _) = run(&mut r, &mut cache, &writes, &data);
        assert_eq!(keys(&res), vec![b(b"c"), b(b"b")]);
        assert!(res.more);
        let c = range_conflict(
            &KeySelector::new(b(b"a"), false, 1),
            &KeySelector::new(b(b"d"), false, 1),
            true,
            &res,
            &b(b"\xff"),
        )
        .unwrap();
        assert_eq!(c, (b(b"b"), b(b"d")));
    }

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

    #[test]
    fn conflicts_cover_only_what_the_writes_do_not_decide() {
        let mut w = WriteMap::new();
        w.mutate(b(b"b"), mt::SET_VALUE, b(b"1"), true);
        w.mutate(b(b"c"), mt::ADD_VALUE, b(b"\x01"), true);
        w.clear(b"d", b"e", true);
        let mut out = RangeSet::new();
        update_conflict_map(
            &w,
            &Bytes::from_static(b"a"),
            &Bytes::from_static(b"z"),
            &mut out,
        );
        let got: Vec<(Bytes, Bytes)> = out.ranges().map(|r| (r.begin, r.end)).collect();
        assert_eq!(
            got,
            vec![
                (b(b"a"), b(b"b")),
                (b(b"b\x00"), b(b"d")),
                (b(b"e"), b(b"z"))
            ]
        );
        assert_eq!(
            key_conflict(&KeySelector::new(b(b"\xff\xff"), false, 1), &b(b"\xff\xff")),
            Ok((b(b"\xff\xff"), b(b"\xff\xff")))
        );
    }
}
