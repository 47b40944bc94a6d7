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
//!
//! One concern a file: this module holds the map, its entries and its edits (sets and atomic
//! ops, clears, unreadable and conflict ranges); [`entries`] the ordered store of the
//! entries (a skip list in one vector: few allocations however many keys); [`op_stack`] one
//! key's operations and how they coalesce; [`iter`] the segment iterator; [`native`] the
//! write-out at commit and its size.

mod entries;
mod iter;
mod native;
mod op_stack;
#[cfg(test)]
mod tests;

use alloc::boxed::Box;
use alloc::sync::Arc;
use bytes::Bytes;
use once_cell::race::OnceBox;
use smallvec::SmallVec;

use super::ext_key::{empty_key, ExtKey};
use crate::keys::mutation_type as mt;
use entries::Entries;

pub(crate) use iter::WriteIter;
pub(crate) use native::{MUTATION_OVERHEAD, RANGE_OVERHEAD};
pub(crate) use op_stack::{OpStack, RywMutation};

/// `allKeys.end`: no key the client reads or writes is past it.
pub(crate) const ALL_KEYS_END: &[u8] = b"\xff\xff";
/// `afterAllKeys`.
const AFTER_ALL_KEYS: &[u8] = b"\xff\xff\x00";

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
    entries: Entries,
    /// `writeMapEmpty`: nothing was written (a versionstamped key's unreadable range alone
    /// does not count).
    empty: bool,
}

impl Default for WriteMap {
    fn default() -> Self {
        let mut entries = Entries::new();
        entries.insert(empty_key(), WriteEntry::default());
        for k in [ALL_KEYS_END, AFTER_ALL_KEYS] {
            entries.insert(Bytes::from_static(k), WriteEntry::default());
        }
        WriteMap {
            entries,
            empty: true,
        }
    }
}

impl WriteMap {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The map of a transaction that wrote nothing, one for all of them: a transaction
    /// copies it at its first write (`Arc::make_mut`), so one that only reads allocates no
    /// map of its own.
    pub(crate) fn blank() -> Arc<WriteMap> {
        static BLANK: OnceBox<Arc<WriteMap>> = OnceBox::new();
        BLANK
            .get_or_init(|| Box::new(Arc::new(WriteMap::new())))
            .clone()
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

    /// Removes the entries with keys in `[begin, end)`, but the one at `begin` when
    /// `keep_begin`, and the one at `end` too when `with_end`; returns the two bounds, owned,
    /// for the entries that take their place.
    fn remove_between(
        &mut self,
        begin: &[u8],
        end: &[u8],
        keep_begin: bool,
        with_end: bool,
    ) -> (Bytes, Bytes) {
        let (b, e) = (Bytes::copy_from_slice(begin), Bytes::copy_from_slice(end));
        let lo = ExtKey::new(&b, usize::from(keep_begin));
        let hi = ExtKey::new(&e, usize::from(with_end));
        if lo < hi {
            self.entries
                .remove_range(|k| lo.cmp_key(k).is_gt(), |k| hi.cmp_key(k).is_gt());
        }
        (b, e)
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
        let floor = it.pos();
        self.entries.insert_at(floor, key, updated);
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
        let end_entry = it.continued_entry();
        let (b, e) = self.remove_between(begin, end, !insert_begin, end_coalesce);
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
        let end_entry = it.continued_entry();
        let (_, e) = self.remove_between(begin, end, !insert_begin, end_coalesce);
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
}
