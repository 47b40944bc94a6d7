//! A position in the write map (`WriteMap::iterator`): segments, their kinds and flags, and
//! the steps between them.

use bytes::Bytes;

use super::entries::Entries;
use super::{OpStack, RangeKind, WriteEntry, WriteSeg};
use crate::ryw::ext_key::ExtKey;

/// A position in the write map, between two entries (`WriteMap::iterator`).
#[derive(Clone, Debug)]
pub(crate) struct WriteIter<'a> {
    map: &'a Entries,
    pub(super) key: &'a Bytes,
    pub(super) entry: &'a WriteEntry,
    /// Where `key` and `next_key` are in the map (`next_at` is `at` past the last entry).
    at: u32,
    next_at: u32,
    next_key: &'a Bytes,
    next: &'a WriteEntry,
    /// `false`: the operations at `key`; `true`: the keys after it.
    offset: bool,
}

impl<'a> WriteIter<'a> {
    pub(super) fn at(map: &'a Entries, key: &[u8]) -> Self {
        // The last entry at or before `key`, and the one after it.
        let at = map
            .floor(key)
            .or_else(|| map.first())
            .expect("the map holds its sentinels");
        let next_at = map.next(at).unwrap_or(at);
        let (k, e) = (map.key(at), map.entry(at));
        WriteIter {
            map,
            key: k,
            entry: e,
            at,
            next_at,
            next_key: map.key(next_at),
            next: map.entry(next_at),
            offset: e.stack.is_empty() || k.as_ref() != key,
        }
    }

    /// Where the entry the segment belongs to is in the map.
    pub(super) fn pos(&self) -> u32 {
        self.at
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

    /// A range entry that goes on as this segment does, for where a write ends inside it.
    pub(super) fn continued_entry(&self) -> WriteEntry {
        WriteEntry::range(
            self.is_cleared_range(),
            self.is_conflict_range(),
            self.is_unreadable(),
        )
    }

    /// A range segment of exactly `kind`.
    pub(super) fn is_range_of(&self, kind: RangeKind) -> bool {
        self.offset && self.entry.following_cleared == kind.cleared && self.flags_match(kind)
    }

    /// The keys here go on as `kind` leaves them: an operation, or a range cleared alike,
    /// with the same conflict and unreadable flags.
    pub(super) fn goes_on_as(&self, kind: RangeKind) -> bool {
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
    pub(super) fn key_at_begin(&self) -> bool {
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
        let Some(n) = self.map.next(self.next_at) else {
            // Past the last sentinel: nothing follows (no reader goes there).
            self.offset = true;
            return;
        };
        self.at = self.next_at;
        self.key = self.next_key;
        self.entry = self.next;
        self.next_at = n;
        self.next_key = self.map.key(n);
        self.next = self.map.entry(n);
        self.offset = self.entry.stack.is_empty();
    }

    /// `advance` run backwards: the two stay apart (as the RYW iterator's pair does) since
    /// one of them runs for every segment a range read passes.
    pub(crate) fn retreat(&mut self) {
        if self.offset && !self.entry.stack.is_empty() {
            self.offset = false;
            return;
        }
        let Some(p) = self.map.prev(self.at) else {
            return;
        };
        self.next_at = self.at;
        self.next_key = self.key;
        self.next = self.entry;
        self.at = p;
        self.key = self.map.key(p);
        self.entry = self.map.entry(p);
        self.offset = self.entry.stack.is_empty() || !self.next_follows_directly();
    }

    /// The same segment of the same map.
    pub(crate) fn same(&self, other: &WriteIter<'_>) -> bool {
        self.offset == other.offset && self.key == other.key
    }
}
