//! A transaction's own writes, kept the way RYW keeps them (`WriteMap.h` / `WriteMap.cpp`):
//! an ordered map of entries, one per key where something starts. An entry may hold a stack
//! of operations on its key; it also describes the keys that follow it up to the next entry
//! (cleared or not, inside a write conflict range or not, unreadable or not, i.e. possibly
//! holding a versionstamped key). Iterating gives *segments*: a key's operations `[k, k\0)`
//! and the ranges between entries. Segment boundaries follow FDB's exactly, because readers
//! walk them (selectors count keys segment by segment, range reads stop at them).
//!
//! At commit the map is written out as NativeAPI receives it (`writeRangeToNativeTransaction`):
//! every cleared range first, in key order, then each key's operations and the write conflict
//! ranges.

use alloc::collections::{btree_map, BTreeMap};
use alloc::vec::Vec;
use bytes::Bytes;
use core::ops::Bound;
use smallvec::SmallVec;

use super::ext_key::{ExtKey, KeyArena};
use crate::atomic;
use crate::messages::commit::{mutation_type as mt, MutationRef};
use crate::messages::types::KeyRange;

/// `allKeys.end`: no key the client reads or writes is past it.
pub(crate) const ALL_KEYS_END: &[u8] = b"\xff\xff";
/// `afterAllKeys`.
const AFTER_ALL_KEYS: &[u8] = b"\xff\xff\x00";

/// One operation on a key (`RYWMutation`): `value` is `None` only for a set that clears.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RywMutation {
    pub(crate) value: Option<Bytes>,
    pub(crate) kind: u8,
}

impl RywMutation {
    fn new(kind: u8, value: Option<Bytes>) -> Self {
        RywMutation { value, kind }
    }
}

/// `MutationRef::ATOMIC_MASK`: every single-key op but set (versionstamps included).
fn is_atomic_kind(kind: u8) -> bool {
    atomic::is_atomic_op(kind)
        || kind == mt::SET_VERSIONSTAMPED_KEY
        || kind == mt::SET_VERSIONSTAMPED_VALUE
}

/// `isNonAssociativeOp`: ops that combine only when their operands have one length.
fn is_non_associative(kind: u8) -> bool {
    matches!(
        kind,
        mt::ADD_VALUE
            | mt::OR
            | mt::XOR
            | mt::MAX
            | mt::MIN
            | mt::SET_VERSIONSTAMPED_KEY
            | mt::SET_VERSIONSTAMPED_VALUE
            | mt::MIN_V2
            | mt::COMPARE_AND_CLEAR
    )
}

/// The operations on one key, oldest first (`OperationStack`). One operation needs no
/// allocation of its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct OpStack(SmallVec<[RywMutation; 1]>);

impl OpStack {
    fn one(m: RywMutation) -> Self {
        let mut s = SmallVec::new();
        s.push(m);
        OpStack(s)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn ops(&self) -> &[RywMutation] {
        &self.0
    }

    /// Depends on the stored value: the oldest operation is an atomic op.
    pub(crate) fn is_dependent(&self) -> bool {
        self.0.first().is_some_and(|m| {
            !matches!(
                m.kind,
                mt::SET_VALUE
                    | mt::CLEAR_RANGE
                    | mt::SET_VERSIONSTAMPED_VALUE
                    | mt::SET_VERSIONSTAMPED_KEY
            )
        })
    }

    fn push(&mut self, m: RywMutation) {
        self.0.push(m);
    }

    fn replace_top(&mut self, m: RywMutation) {
        match self.0.last_mut() {
            Some(top) => *top = m,
            None => self.0.push(m),
        }
    }

    /// `coalesceOver`: a new operation on top, merged with the newest one where FDB merges.
    fn coalesce_over(&mut self, new: RywMutation) {
        let Some(top) = self.0.last() else {
            self.0.push(new);
            return;
        };
        let merge = if top.kind == new.kind && new.kind != mt::COMPARE_AND_CLEAR {
            !(is_non_associative(top.kind)
                && top
                    .value
                    .as_ref()
                    .is_some_and(|v| v.len() != new.value.as_ref().map_or(0, Bytes::len)))
        } else {
            !(is_atomic_kind(new.kind) && is_atomic_kind(top.kind))
        };
        match merge.then(|| coalesce(top, &new)).flatten() {
            Some(m) => self.replace_top(m),
            None => self.push(new),
        }
    }

    /// `coalesceUnder`: the key's value given the stored one.
    pub(crate) fn value_over(&self, stored: Option<&Bytes>) -> Option<Bytes> {
        if !self.is_dependent() && self.0.len() == 1 {
            return self.0[0].value.clone();
        }
        let mut cur = RywMutation::new(mt::SET_VALUE, stored.cloned());
        for m in &self.0 {
            if let Some(next) = coalesce(&cur, m) {
                cur = next;
            }
        }
        cur.value
    }
}

/// `WriteMap::coalesce`: one operation equivalent to `new` applied after `existing`; `None`
/// where FDB fails (`operation_failed`), which its callers never reach.
fn coalesce(existing: &RywMutation, new: &RywMutation) -> Option<RywMutation> {
    let param = new.value.as_deref().unwrap_or(&[]);
    match new.kind {
        mt::SET_VALUE | mt::SET_VERSIONSTAMPED_VALUE => Some(new.clone()),
        mt::COMPARE_AND_CLEAR => match existing.kind {
            mt::SET_VALUE => {
                let kept = atomic::apply(new.kind, existing.value.as_deref(), param).is_some();
                Some(if kept {
                    existing.clone()
                } else {
                    RywMutation::new(mt::SET_VALUE, None)
                })
            }
            _ => None,
        },
        k if atomic::is_atomic_op(k) => {
            // Over a set the result is a set; over the same op, the combined operand.
            if existing.kind != mt::SET_VALUE && existing.kind != k {
                return None;
            }
            let v = atomic::apply(k, existing.value.as_deref(), param).map(Bytes::from);
            Some(RywMutation::new(existing.kind, v))
        }
        _ => None,
    }
}

/// One entry of the map (`WriteMapEntry`): the operations on its key, and what holds for the
/// keys after it up to the next entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct WriteEntry {
    pub(crate) stack: OpStack,
    following_cleared: bool,
    following_conflict: bool,
    is_conflict: bool,
    following_unreadable: bool,
    is_unreadable: bool,
}

impl WriteEntry {
    fn range(cleared: bool, conflict: bool, unreadable: bool) -> Self {
        WriteEntry {
            stack: OpStack::default(),
            following_cleared: cleared,
            following_conflict: conflict,
            is_conflict: conflict,
            following_unreadable: unreadable,
            is_unreadable: unreadable,
        }
    }
}

/// What a range segment says of its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RangeKind {
    cleared: bool,
    conflict: bool,
    unreadable: bool,
}

impl RangeKind {
    /// A clear with its write conflict range.
    const CLEARED: RangeKind = RangeKind {
        cleared: true,
        conflict: true,
        unreadable: false,
    };
    /// Where a versionstamped key may land.
    const UNREADABLE: RangeKind = RangeKind {
        cleared: false,
        conflict: false,
        unreadable: true,
    };
}

/// What a write segment is (`WriteMap::iterator::SEGMENT_TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteSeg {
    Unmodified = 0,
    Cleared = 1,
    Independent = 2,
    Dependent = 3,
}

/// What the writes say about one key.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Lookup<'a> {
    /// Not written: read storage.
    Unmodified,
    /// Cleared, never written since.
    Cleared,
    /// Operations whose result does not depend on the stored value.
    Independent(&'a OpStack),
    /// Atomic ops over the stored value.
    Dependent(&'a OpStack),
    /// A versionstamped write whose result is not known before commit.
    Unreadable,
}

impl Lookup<'_> {
    /// The key's value as the writes decide it, or `None` if storage must be read.
    pub(crate) fn decided(&self) -> Option<Option<Bytes>> {
        match self {
            Lookup::Cleared => Some(None),
            Lookup::Independent(s) => Some(s.value_over(None)),
            _ => None,
        }
    }
}

/// The write map of one transaction.
#[derive(Clone, Debug)]
pub(crate) struct WriteMap {
    entries: BTreeMap<Bytes, WriteEntry>,
    /// `writeMapEmpty`: nothing was written (a versionstamped key's unreadable range alone
    /// does not count).
    empty: bool,
}

impl Default for WriteMap {
    fn default() -> Self {
        let mut entries = BTreeMap::new();
        for k in [&b""[..], ALL_KEYS_END, AFTER_ALL_KEYS] {
            entries.insert(Bytes::from_static(k), WriteEntry::default());
        }
        WriteMap {
            entries,
            empty: true,
        }
    }
}

/// A position in the write map, between two entries (`WriteMap::iterator`).
#[derive(Clone, Debug)]
pub(crate) struct WriteIter<'a> {
    map: &'a BTreeMap<Bytes, WriteEntry>,
    key: &'a Bytes,
    entry: &'a WriteEntry,
    next_key: &'a Bytes,
    next: &'a WriteEntry,
    /// `false`: the operations at `key`; `true`: the keys after it.
    offset: bool,
    /// The entries after `next_key`, where the search for `next` left them: walking forward
    /// takes the next one without a new search (`None` after a step back).
    ahead: Option<btree_map::Range<'a, Bytes, WriteEntry>>,
}

impl<'a> WriteIter<'a> {
    fn at(map: &'a BTreeMap<Bytes, WriteEntry>, key: &[u8]) -> Self {
        // The last entry at or before `key`, and the one after it.
        let (k, e) = map
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()
            .or_else(|| map.iter().next())
            .expect("the map holds its sentinels");
        let mut ahead = map.range::<[u8], _>((Bound::Excluded(key), Bound::Unbounded));
        let (nk, n) = ahead.next().unwrap_or((k, e));
        WriteIter {
            map,
            key: k,
            entry: e,
            next_key: nk,
            next: n,
            offset: e.stack.is_empty() || k.as_ref() != key,
            ahead: Some(ahead),
        }
    }

    /// Moves to the segment holding `key`.
    pub(crate) fn skip(&mut self, key: &[u8]) {
        *self = WriteIter::at(self.map, key);
    }

    pub(crate) fn seg(&self) -> WriteSeg {
        if self.offset {
            if self.entry.following_cleared {
                WriteSeg::Cleared
            } else {
                WriteSeg::Unmodified
            }
        } else if self.entry.stack.is_dependent() {
            WriteSeg::Dependent
        } else {
            WriteSeg::Independent
        }
    }

    pub(crate) fn is_cleared_range(&self) -> bool {
        self.offset && self.entry.following_cleared
    }

    pub(crate) fn is_unmodified_range(&self) -> bool {
        self.offset && !self.entry.following_cleared
    }

    pub(crate) fn is_operation(&self) -> bool {
        !self.offset
    }

    pub(crate) fn is_conflict_range(&self) -> bool {
        if self.offset {
            self.entry.following_conflict
        } else {
            self.entry.is_conflict
        }
    }

    pub(crate) fn is_unreadable(&self) -> bool {
        if self.offset {
            self.entry.following_unreadable
        } else {
            self.entry.is_unreadable
        }
    }

    /// A range segment of exactly `kind`.
    fn is_range_of(&self, kind: RangeKind) -> bool {
        self.offset && self.entry.following_cleared == kind.cleared && self.flags_match(kind)
    }

    /// The keys here go on as `kind` leaves them: an operation, or a range cleared alike,
    /// with the same conflict and unreadable flags.
    fn goes_on_as(&self, kind: RangeKind) -> bool {
        (!self.offset || self.entry.following_cleared == kind.cleared) && self.flags_match(kind)
    }

    fn flags_match(&self, kind: RangeKind) -> bool {
        self.is_conflict_range() == kind.conflict && self.is_unreadable() == kind.unreadable
    }

    /// An operation segment whose result does not depend on the stored value.
    pub(crate) fn is_independent(&self) -> bool {
        self.entry.following_cleared || !self.entry.stack.is_dependent()
    }

    /// The operations of an operation segment.
    pub(crate) fn op(&self) -> &'a OpStack {
        &self.entry.stack
    }

    /// The key of the entry the segment belongs to.
    pub(crate) fn entry_key(&self) -> &'a Bytes {
        self.key
    }

    pub(crate) fn begin_key(&self) -> ExtKey<'a> {
        ExtKey::new(
            self.key,
            usize::from(self.offset && !self.entry.stack.is_empty()),
        )
    }

    pub(crate) fn end_key(&self) -> ExtKey<'a> {
        if self.offset {
            ExtKey::of(self.next_key)
        } else {
            ExtKey::new(self.key, 1)
        }
    }

    /// `keyAtBegin`: the segment starts at its entry's key.
    fn key_at_begin(&self) -> bool {
        !self.offset || self.entry.stack.is_empty()
    }

    fn next_follows_directly(&self) -> bool {
        ExtKey::of(self.next_key).is_key_after(ExtKey::of(self.key))
    }

    pub(crate) fn advance(&mut self) {
        if !self.offset && !self.next_follows_directly() {
            self.offset = true;
            return;
        }
        let (map, after) = (self.map, self.next_key.as_ref());
        let ahead = self.ahead.get_or_insert_with(|| {
            map.range::<[u8], _>((Bound::Excluded(after), Bound::Unbounded))
        });
        let Some((nk, n)) = ahead.next() else {
            // Past the last sentinel: nothing follows (no reader goes there).
            self.offset = true;
            return;
        };
        self.key = self.next_key;
        self.entry = self.next;
        self.next_key = nk;
        self.next = n;
        self.offset = self.entry.stack.is_empty();
    }

    pub(crate) fn retreat(&mut self) {
        if self.offset && !self.entry.stack.is_empty() {
            self.offset = false;
            return;
        }
        let Some((pk, p)) = self
            .map
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(self.key.as_ref())))
            .next_back()
        else {
            return;
        };
        self.ahead = None;
        self.next_key = self.key;
        self.next = self.entry;
        self.key = pk;
        self.entry = p;
        self.offset = self.entry.stack.is_empty() || !self.next_follows_directly();
    }

    /// The same segment of the same map.
    pub(crate) fn same(&self, other: &WriteIter<'_>) -> bool {
        self.offset == other.offset && self.key == other.key
    }
}

impl WriteMap {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// How many entries the map holds (its sentinels included).
    pub(crate) fn entry_count(&self) -> usize {
        self.entries.len()
    }

    /// Nothing was written (`WriteMap::empty`).
    pub(crate) fn is_empty(&self) -> bool {
        self.empty
    }

    /// An iterator at the segment holding `key`.
    pub(crate) fn iter_at(&self, key: &[u8]) -> WriteIter<'_> {
        WriteIter::at(&self.entries, key)
    }

    /// What the writes say about `key`.
    pub(crate) fn lookup(&self, key: &[u8]) -> Lookup<'_> {
        let it = self.iter_at(key);
        if it.is_unreadable() {
            return Lookup::Unreadable;
        }
        match it.seg() {
            WriteSeg::Unmodified => Lookup::Unmodified,
            WriteSeg::Cleared => Lookup::Cleared,
            WriteSeg::Independent => Lookup::Independent(it.op()),
            WriteSeg::Dependent if it.is_independent() => Lookup::Independent(it.op()),
            WriteSeg::Dependent => Lookup::Dependent(it.op()),
        }
    }

    /// Removes the entries with keys in `[begin, end)` (each bound plus `zeros` zero bytes).
    fn remove_between(&mut self, begin: ExtKey<'_>, end: ExtKey<'_>) {
        let (b, e) = (begin.to_bytes(), end.to_bytes());
        if b >= e {
            return;
        }
        let gone: SmallVec<[Bytes; 4]> = self
            .entries
            .range::<[u8], _>((Bound::Included(b.as_ref()), Bound::Excluded(e.as_ref())))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            self.entries.remove(&k);
        }
    }

    /// `WriteMap::mutate`: a set or an atomic op (versionstamps included) on `key`.
    pub(crate) fn mutate(&mut self, key: Bytes, kind: u8, param: Bytes, add_conflict: bool) {
        self.empty = false;
        let it = self.iter_at(&key);
        let entry = it.entry;
        let is_cleared = entry.following_cleared;
        let following_conflict = entry.following_conflict;
        let is_conflict = add_conflict || it.is_conflict_range();
        let following_unreadable = entry.following_unreadable;
        let is_unreadable = it.is_unreadable()
            || kind == mt::SET_VERSIONSTAMPED_VALUE
            || kind == mt::SET_VERSIONSTAMPED_KEY;
        let is_dependent = kind != mt::SET_VALUE
            && kind != mt::SET_VERSIONSTAMPED_VALUE
            && kind != mt::SET_VERSIONSTAMPED_KEY;
        let new = RywMutation::new(kind, Some(param));
        let flags = |stack, cleared| WriteEntry {
            stack,
            following_cleared: cleared,
            following_conflict,
            is_conflict,
            following_unreadable,
            is_unreadable,
        };
        let updated = if it.key.as_ref() != key.as_ref() {
            if it.is_cleared_range() && is_dependent {
                let mut stack = OpStack::one(RywMutation::new(mt::SET_VALUE, None));
                stack.coalesce_over(new);
                flags(stack, true)
            } else {
                flags(OpStack::one(new), is_cleared)
            }
        } else if !it.is_unreadable()
            && (kind == mt::SET_VALUE || kind == mt::SET_VERSIONSTAMPED_VALUE)
        {
            flags(OpStack::one(new), is_cleared)
        } else {
            let mut e = entry.clone();
            e.is_conflict = is_conflict;
            e.is_unreadable = is_unreadable;
            if e.stack.is_empty() && it.is_cleared_range() && is_dependent {
                e.stack.push(RywMutation::new(mt::SET_VALUE, None));
                e.stack.coalesce_over(new);
            } else if !is_unreadable && !e.stack.is_empty() {
                e.stack.coalesce_over(new);
            } else {
                e.stack.push(new);
            }
            e
        };
        self.entries.insert(key, updated);
    }

    /// `WriteMap::clear`.
    pub(crate) fn clear(&mut self, begin: &[u8], end: &[u8], add_conflict: bool) {
        if begin >= end {
            return;
        }
        self.empty = false;
        if !add_conflict {
            return self.clear_no_conflict(begin, end);
        }
        self.replace_range(begin, end, RangeKind::CLEARED);
    }

    /// Makes `[begin, end)` one range segment of `kind`, forgetting what was written there
    /// (`clear` with a conflict range, `addUnmodifiedAndUnreadableRange`): the entries inside
    /// go, an entry at `begin` starts the range unless the segment there is of that kind
    /// already, and one at `end` keeps what follows unless it continues alike.
    fn replace_range(&mut self, begin: &[u8], end: &[u8], kind: RangeKind) {
        let mut it = self.iter_at(begin);
        let insert_begin = !it.is_range_of(kind);
        match it.end_key().cmp_key(end) {
            core::cmp::Ordering::Equal => it.advance(),
            core::cmp::Ordering::Less => it.skip(end),
            core::cmp::Ordering::Greater => {}
        }
        let at_end = it.begin_key().cmp_key(end).is_eq();
        let insert_end = !it.goes_on_as(kind) && (!it.key_at_begin() || !at_end);
        let end_coalesce = it.is_range_of(kind) && at_end;
        let end_entry = WriteEntry::range(
            it.is_cleared_range(),
            it.is_conflict_range(),
            it.is_unreadable(),
        );
        let (b, e) = (Bytes::copy_from_slice(begin), Bytes::copy_from_slice(end));
        self.remove_between(
            ExtKey::new(&b, usize::from(!insert_begin)),
            ExtKey::new(&e, usize::from(end_coalesce)),
        );
        if insert_begin {
            let k = kind;
            self.entries
                .insert(b, WriteEntry::range(k.cleared, k.conflict, k.unreadable));
        }
        if insert_end {
            self.entries.insert(e, end_entry);
        }
    }

    /// `WriteMap::clearNoConflict`: a clear that keeps the write conflict ranges inside it.
    fn clear_no_conflict(&mut self, begin: &[u8], end: &[u8]) {
        let mut it = self.iter_at(begin);
        let insert_begin = !it.is_cleared_range() || it.is_unreadable();
        let mut last_conflicted = it.is_conflict_range();
        let mut conflicted = last_conflicted;
        let mut starts: SmallVec<[Bytes; 4]> = SmallVec::new();
        if insert_begin {
            starts.push(Bytes::copy_from_slice(begin));
        } else {
            conflicted = !conflicted;
        }
        while it.end_key().cmp_key(end).is_lt() {
            it.advance();
            if last_conflicted != it.is_conflict_range() {
                starts.push(it.begin_key().to_bytes());
                last_conflicted = it.is_conflict_range();
            }
        }
        if it.end_key().cmp_key(end).is_eq() {
            it.advance();
        }
        let at_end = it.begin_key().cmp_key(end).is_eq();
        let insert_end = ((it.is_unmodified_range() || it.is_unreadable())
            && (!it.key_at_begin() || !at_end))
            || (it.entry.is_conflict
                && !it.entry.following_conflict
                && at_end
                && !it.key_at_begin());
        let end_coalesce = it.is_cleared_range()
            && at_end
            && it.is_conflict_range() == last_conflicted
            && !it.is_unreadable();
        let end_entry = WriteEntry::range(
            it.is_cleared_range(),
            it.is_conflict_range(),
            it.is_unreadable(),
        );
        let (b, e) = (Bytes::copy_from_slice(begin), Bytes::copy_from_slice(end));
        self.remove_between(
            ExtKey::new(&b, usize::from(!insert_begin)),
            ExtKey::new(&e, usize::from(end_coalesce)),
        );
        for k in starts {
            self.entries
                .insert(k, WriteEntry::range(true, conflicted, false));
            conflicted = !conflicted;
        }
        if insert_end {
            self.entries.insert(e, end_entry);
        }
    }

    /// `WriteMap::addUnmodifiedAndUnreadableRange`: the range a versionstamped key may land in
    /// becomes unreadable (and forgets what was written there, which the caller has sent on).
    pub(crate) fn add_unmodified_and_unreadable_range(&mut self, begin: &[u8], end: &[u8]) {
        if begin >= end {
            return;
        }
        self.replace_range(begin, end, RangeKind::UNREADABLE);
    }

    /// `WriteMap::addConflictRange`: a write conflict range without a write.
    pub(crate) fn add_conflict_range(&mut self, begin: &[u8], end: &[u8]) {
        if begin >= end {
            return;
        }
        self.empty = false;
        let mut it = self.iter_at(begin);
        let mut removals: SmallVec<[Bytes; 4]> = SmallVec::new();
        let mut insertions: SmallVec<[(Bytes, WriteEntry); 4]> = SmallVec::new();
        if !it.entry.following_conflict || !it.entry.is_conflict {
            if it.key_at_begin() && it.begin_key().cmp_key(begin).is_eq() {
                removals.push(Bytes::copy_from_slice(begin));
            }
            insertions.push((
                Bytes::copy_from_slice(begin),
                WriteEntry {
                    stack: if it.is_operation() {
                        it.op().clone()
                    } else {
                        OpStack::default()
                    },
                    following_cleared: it.entry.following_cleared,
                    following_conflict: true,
                    is_conflict: true,
                    following_unreadable: it.entry.following_unreadable,
                    is_unreadable: it.entry.is_unreadable,
                },
            ));
        }
        while it.end_key().cmp_key(end).is_lt() {
            it.advance();
            if it.key_at_begin() && (!it.entry.following_conflict || !it.entry.is_conflict) {
                let mut e = it.entry.clone();
                e.following_conflict = true;
                e.is_conflict = true;
                removals.push(it.key.clone());
                insertions.push((it.key.clone(), e));
            }
        }
        if !it.entry.following_conflict || !it.entry.is_conflict {
            let cleared = it.entry.following_cleared;
            let unreadable = it.entry.is_unreadable;
            let following_unreadable = it.entry.following_unreadable;
            it.advance();
            if !it.key_at_begin() || !it.begin_key().cmp_key(end).is_eq() {
                insertions.push((
                    Bytes::copy_from_slice(end),
                    WriteEntry {
                        stack: OpStack::default(),
                        following_cleared: cleared,
                        following_conflict: false,
                        is_conflict: false,
                        following_unreadable,
                        is_unreadable: unreadable,
                    },
                ));
            }
        }
        for k in removals {
            self.entries.remove(&k);
        }
        for (k, e) in insertions {
            self.entries.insert(k, e);
        }
    }

    /// `writeRangeToNativeTransaction`: the clears, operations and write conflict ranges of
    /// `[begin, end)` as NativeAPI receives them, appended to `mutations` and `conflicts`.
    pub(crate) fn write_to_native(
        &self,
        begin: &Bytes,
        end: &Bytes,
        mutations: &mut Vec<MutationRef>,
        conflicts: &mut Vec<KeyRange>,
    ) {
        let mut out = NativeLists {
            mutations,
            conflicts,
            keys: KeyArena::default(),
        };
        self.walk_native(begin, end, &mut out);
    }

    /// The size of what [`WriteMap::write_to_native`] would append, as NativeAPI's `getSize`
    /// counts it (see `Transactions::list_size`), without building any of it.
    pub(crate) fn native_size(&self, begin: &Bytes, end: &Bytes) -> usize {
        let mut size = NativeSize(0);
        self.walk_native(begin, end, &mut size);
        size.0
    }

    /// The walk of `writeRangeToNativeTransaction`: every cleared run first, in key order,
    /// then each key's operations and the write conflict runs.
    fn walk_native<'a, S: NativeSink<'a>>(&'a self, begin: &'a Bytes, end: &'a Bytes, out: &mut S) {
        let clear = |out: &mut S, b: ExtKey<'a>, e: ExtKey<'a>| {
            if b < e {
                out.mutation(mt::CLEAR_RANGE, b, e);
            }
        };
        self.runs(
            begin,
            end,
            WriteIter::is_cleared_range,
            out,
            |_, _| {},
            clear,
        );
        let ops = |out: &mut S, it: &WriteIter<'a>| {
            let key = ExtKey::of(it.key);
            for m in it.op().ops() {
                match (m.kind, &m.value) {
                    (mt::SET_VALUE, Some(v)) => out.mutation(mt::SET_VALUE, key, ExtKey::of(v)),
                    (mt::SET_VALUE, None) => out.mutation(mt::CLEAR_RANGE, key, key.key_after()),
                    (k, v) if is_atomic_kind(k) => {
                        out.mutation(k, key, ExtKey::of(v.as_ref().unwrap_or(&EMPTY)))
                    }
                    _ => {}
                }
            }
        };
        let conflict = |out: &mut S, b, e| out.conflict(b, e);
        self.runs(begin, end, WriteIter::is_conflict_range, out, ops, conflict);
    }

    /// Walks the segments of `[begin, end)`: `each` sees every operation segment, `run` every
    /// maximal run of segments where `pred` holds (cut to `[begin, end)`).
    fn runs<'a, S>(
        &'a self,
        begin: &'a Bytes,
        end: &'a Bytes,
        pred: fn(&WriteIter<'a>) -> bool,
        out: &mut S,
        each: impl Fn(&mut S, &WriteIter<'a>),
        run: impl Fn(&mut S, ExtKey<'a>, ExtKey<'a>),
    ) {
        let mut it = self.iter_at(begin);
        let mut run_begin: Option<ExtKey<'a>> = None;
        while it.begin_key().cmp_key(end).is_lt() {
            if pred(&it) {
                run_begin.get_or_insert_with(|| core::cmp::max(it.begin_key(), ExtKey::of(begin)));
            } else if let Some(b) = run_begin.take() {
                run(out, b, it.begin_key());
            }
            if it.is_operation() {
                each(out, &it);
            }
            it.advance();
        }
        if let Some(b) = run_begin {
            run(out, b, ExtKey::of(end));
        }
    }
}

static EMPTY: Bytes = Bytes::new();

/// Where the walk of `writeRangeToNativeTransaction` goes: the lists NativeAPI commits, or
/// only their size.
trait NativeSink<'a> {
    fn mutation(&mut self, kind: u8, param1: ExtKey<'a>, param2: ExtKey<'a>);
    fn conflict(&mut self, begin: ExtKey<'a>, end: ExtKey<'a>);
}

/// The lists themselves; keys with appended zeros come from one arena.
struct NativeLists<'l> {
    mutations: &'l mut Vec<MutationRef>,
    conflicts: &'l mut Vec<KeyRange>,
    keys: KeyArena,
}

impl<'a> NativeSink<'a> for NativeLists<'_> {
    fn mutation(&mut self, kind: u8, param1: ExtKey<'a>, param2: ExtKey<'a>) {
        let (p1, p2) = (
            param1.to_bytes_in(&mut self.keys),
            param2.to_bytes_in(&mut self.keys),
        );
        self.mutations.push(MutationRef::new(kind, p1, p2));
    }

    fn conflict(&mut self, begin: ExtKey<'a>, end: ExtKey<'a>) {
        let (b, e) = (
            begin.to_bytes_in(&mut self.keys),
            end.to_bytes_in(&mut self.keys),
        );
        self.conflicts.push(KeyRange::new(b, e));
    }
}

/// `getSize` of the lists: per mutation its parameters and `sizeof(MutationRef)`, per
/// conflict range its keys and `sizeof(KeyRangeRef)`.
struct NativeSize(usize);

/// `sizeof(MutationRef)` in libfdb_c 7.3.77 (measured with `size_limit`).
pub(crate) const MUTATION_OVERHEAD: usize = 44;
/// `sizeof(KeyRangeRef)`.
pub(crate) const RANGE_OVERHEAD: usize = 24;

impl<'a> NativeSink<'a> for NativeSize {
    fn mutation(&mut self, _: u8, param1: ExtKey<'a>, param2: ExtKey<'a>) {
        self.0 += param1.len() + param2.len() + MUTATION_OVERHEAD;
    }

    fn conflict(&mut self, begin: ExtKey<'a>, end: ExtKey<'a>) {
        self.0 += begin.len() + end.len() + RANGE_OVERHEAD;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn b(s: &'static [u8]) -> Bytes {
        Bytes::from_static(s)
    }

    /// Every segment from `""` to `\xff\xff`: (begin, end, kind letter).
    fn segments(w: &WriteMap) -> Vec<(Bytes, Bytes, char)> {
        let mut it = w.iter_at(b"");
        let mut out = Vec::new();
        while it.begin_key().cmp_key(ALL_KEYS_END).is_lt() {
            let c = if it.is_unreadable() {
                'u'
            } else {
                match it.seg() {
                    WriteSeg::Unmodified => '.',
                    WriteSeg::Cleared => 'c',
                    WriteSeg::Independent => 'i',
                    WriteSeg::Dependent => 'd',
                }
            };
            out.push((it.begin_key().to_bytes(), it.end_key().to_bytes(), c));
            it.advance();
        }
        out
    }

    /// What NativeAPI receives: (type, param1, param2) mutations and write conflict ranges.
    type Native = (Vec<(u8, Bytes, Bytes)>, Vec<(Bytes, Bytes)>);

    fn native(w: &WriteMap) -> Native {
        let (mut m, mut c) = (Vec::new(), Vec::new());
        let (all_b, all_e) = (Bytes::new(), Bytes::from_static(ALL_KEYS_END));
        w.write_to_native(&all_b, &all_e, &mut m, &mut c);
        // The size counted without building the lists is theirs.
        let size: usize = m
            .iter()
            .map(|m| m.param1.len() + m.param2.len() + 44)
            .sum::<usize>()
            + c.iter()
                .map(|r| r.begin.len() + r.end.len() + 24)
                .sum::<usize>();
        assert_eq!(w.native_size(&all_b, &all_e), size);
        (
            m.into_iter()
                .map(|m| (m.kind, m.param1, m.param2))
                .collect(),
            c.into_iter().map(|r| (r.begin, r.end)).collect(),
        )
    }

    #[test]
    fn segments_split_at_keys_and_clears() {
        let mut w = WriteMap::new();
        w.mutate(b(b"c"), mt::SET_VALUE, b(b"1"), true);
        w.clear(b"c\x00", b"e", true);
        w.mutate(b(b"d"), mt::ADD_VALUE, b(b"\x01"), true);
        w.mutate(b(b"x"), mt::ADD_VALUE, b(b"\x01"), true);
        assert_eq!(
            segments(&w),
            vec![
                (b(b""), b(b"c"), '.'),
                (b(b"c"), b(b"c\x00"), 'i'),
                (b(b"c\x00"), b(b"d"), 'c'),
                // An atomic op inside a clear knows its base: a set of the result.
                (b(b"d"), b(b"d\x00"), 'i'),
                (b(b"d\x00"), b(b"e"), 'c'),
                (b(b"e"), b(b"x"), '.'),
                (b(b"x"), b(b"x\x00"), 'd'),
                (b(b"x\x00"), b(b"\xff\xff"), '.'),
            ]
        );
        assert_eq!(w.lookup(b"d").decided(), Some(Some(b(b"\x01"))));
        assert!(matches!(w.lookup(b"x"), Lookup::Dependent(_)));
        assert!(matches!(w.lookup(b"c\x01"), Lookup::Cleared));
        let (m, c) = native(&w);
        assert_eq!(
            m,
            vec![
                (mt::CLEAR_RANGE, b(b"c\x00"), b(b"d")),
                (mt::CLEAR_RANGE, b(b"d\x00"), b(b"e")),
                (mt::SET_VALUE, b(b"c"), b(b"1")),
                (mt::SET_VALUE, b(b"d"), b(b"\x01")),
                (mt::ADD_VALUE, b(b"x"), b(b"\x01")),
            ]
        );
        assert_eq!(c, vec![(b(b"c"), b(b"e")), (b(b"x"), b(b"x\x00"))]);
    }

    #[test]
    fn same_atomic_ops_combine_and_different_ones_stack() {
        let mut w = WriteMap::new();
        w.mutate(b(b"k"), mt::ADD_VALUE, b(b"\x01"), true);
        w.mutate(b(b"k"), mt::ADD_VALUE, b(b"\x02"), true);
        w.mutate(b(b"k"), mt::OR, b(b"\x10"), true);
        let (m, _) = native(&w);
        assert_eq!(
            m,
            vec![
                (mt::ADD_VALUE, b(b"k"), b(b"\x03")),
                (mt::OR, b(b"k"), b(b"\x10")),
            ]
        );
        let Lookup::Dependent(s) = w.lookup(b"k") else {
            panic!("dependent");
        };
        assert_eq!(s.value_over(Some(&b(b"\x01"))), Some(b(b"\x14")));
        // A compare_and_clear over nothing stays absent.
        w.mutate(b(b"q"), mt::COMPARE_AND_CLEAR, b(b"\x02"), true);
        let Lookup::Dependent(s) = w.lookup(b"q") else {
            panic!("dependent");
        };
        assert_eq!(s.value_over(None), None);
        assert_eq!(s.value_over(Some(&b(b"\x03"))), Some(b(b"\x03")));
    }

    #[test]
    fn clears_without_conflict_keep_the_conflict_ranges_inside() {
        let mut w = WriteMap::new();
        w.mutate(b(b"b"), mt::SET_VALUE, b(b"1"), true);
        w.clear(b"a", b"c", false);
        let (m, c) = native(&w);
        assert_eq!(m, vec![(mt::CLEAR_RANGE, b(b"a"), b(b"c"))]);
        assert_eq!(c, vec![(b(b"b"), b(b"b\x00"))]);
        // Later a clear with a conflict range over part of it: two cleared segments.
        w.clear(b"b", b"b\x00", true);
        let segs = segments(&w);
        assert!(segs.contains(&(b(b"a"), b(b"b"), 'c')));
        assert!(segs.contains(&(b(b"b"), b(b"b\x00"), 'c')));
    }

    #[test]
    fn a_versionstamped_key_range_is_unreadable_until_cleared() {
        let mut w = WriteMap::new();
        w.clear(b"a", b"z", true);
        w.add_unmodified_and_unreadable_range(b"m", b"n");
        w.mutate(b(b"m1"), mt::SET_VERSIONSTAMPED_KEY, b(b"v"), false);
        assert!(matches!(w.lookup(b"m"), Lookup::Unreadable));
        assert!(matches!(w.lookup(b"m1"), Lookup::Unreadable));
        assert!(matches!(w.lookup(b"l"), Lookup::Cleared));
        let (m, c) = native(&w);
        assert_eq!(
            m,
            vec![
                (mt::CLEAR_RANGE, b(b"a"), b(b"m")),
                (mt::CLEAR_RANGE, b(b"n"), b(b"z")),
                (mt::SET_VERSIONSTAMPED_KEY, b(b"m1"), b(b"v")),
            ]
        );
        assert_eq!(c, vec![(b(b"a"), b(b"m")), (b(b"n"), b(b"z"))]);
        w.clear(b"m", b"m2", true);
        assert!(matches!(w.lookup(b"m1"), Lookup::Cleared));
        assert!(matches!(w.lookup(b"m3"), Lookup::Unreadable));
    }

    #[test]
    fn explicit_write_conflict_ranges_split_segments() {
        let mut w = WriteMap::new();
        w.add_conflict_range(b"b", b"d");
        assert!(!w.is_empty());
        let segs = segments(&w);
        assert_eq!(
            segs,
            vec![
                (b(b""), b(b"b"), '.'),
                (b(b"b"), b(b"d"), '.'),
                (b(b"d"), b(b"\xff\xff"), '.'),
            ]
        );
        let (m, c) = native(&w);
        assert!(m.is_empty());
        assert_eq!(c, vec![(b(b"b"), b(b"d"))]);
    }
}
