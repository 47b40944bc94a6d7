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
//! One concern a file: this module holds the [`RangeRead`] state machine and its stages;
//! [`native`] what is asked of storage and what its answers prove; [`selector`] the selector
//! resolution over the known segments and [`KeyRead`]; [`forward`] and [`backward`] the two
//! walks (over the direction helpers of [`walk`]); [`conflict`] the read conflict ranges RYW
//! adds afterwards (`addConflictRange`, `updateConflictMap`).

mod backward;
mod conflict;
mod forward;
mod native;
mod selector;
#[cfg(test)]
mod tests;
mod walk;

use alloc::boxed::Box;
use alloc::vec::Vec;
use bytes::Bytes;

use super::ext_key::cmp_bytes;
use super::iterator::{RywIter, Unreadable};
use super::snapshot_cache::SnapshotCache;
use super::write_map::{WriteMap, ALL_KEYS_END};
use crate::keys::{KeySelector, KeyValue};

pub(crate) use conflict::{
    key_conflict, range_conflict, range_conflict_of, update_conflict_map,
    update_conflict_map_unmodified, ReadShape,
};
pub use native::REPLY_BYTE_LIMIT;
use native::{known_range, known_range_back, set_request_limits};
pub(crate) use native::{NativeRead, NativeResult, RangeLimits, Row};
use selector::resolve_from_cache;
pub(crate) use selector::KeyRead;

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

/// `first_greater_or_equal`: the selector names its own key.
pub(crate) fn is_fge(sel: &KeySelector) -> bool {
    !sel.or_equal && sel.offset == 1
}

/// A selector that lands before its key (`last_less_than` or further back).
pub(crate) fn is_backward(sel: &KeySelector) -> bool {
    !sel.or_equal && sel.offset <= 0
}

/// `first_greater_or_equal(key)`.
pub(crate) fn fge(key: Bytes) -> KeySelector {
    KeySelector::new(key, false, 1)
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
            Stage::Key { sub, .. } => sub.feed(cache, result),
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

    /// How many unknown keys a storage read may reach past (RYW's clear limit): none on the
    /// first request, then doubling, so a walk through a long clear asks in fewer, larger
    /// steps. Both walks size their read with it.
    fn clear_limit(&self) -> i32 {
        if self.request_count > 0 {
            1i32 << self.request_count.min(20)
        } else {
            0
        }
    }

    /// The storage read both walks end with: its limits leave room for the rows the
    /// selectors still skip (`offset`, the far selector's), and the request is counted.
    fn native_read(
        &mut self,
        begin: KeySelector,
        end: KeySelector,
        offset: i32,
        reverse: bool,
    ) -> NativeRead {
        let mut limits = self.limits;
        set_request_limits(
            &mut limits,
            self.additional_rows,
            offset,
            self.request_count,
        );
        self.request_count += 1;
        self.additional_rows = 0;
        NativeRead {
            begin,
            end,
            limits,
            reverse,
        }
    }

    fn finish(&mut self) -> RywResult {
        let mut rows = core::mem::take(&mut self.rows);
        let mut more = self.more || self.limits.is_reached();
        if !self.reverse && is_fge(&self.end) {
            let keep = rows.partition_point(|kv| cmp_bytes(&kv.key, &self.end.key).is_lt());
            if keep < rows.len() {
                more = false;
            }
            rows.truncate(keep);
        }
        if self.reverse && is_fge(&self.begin) {
            // Descending: keep the rows at or after the begin key.
            let keep = rows.partition_point(|kv| cmp_bytes(&kv.key, &self.begin.key).is_ge());
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
