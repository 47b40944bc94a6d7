//! What the transaction already read from storage at its read version (`SnapshotCache.h`):
//! entries of known key ranges, each with the rows storage returned in it. Reading a known
//! range again needs no request. Iterating gives *segments*: unknown ranges (between
//! entries), known-empty ranges and single rows, as RYW's iterator sees them.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use bytes::Bytes;
use core::ops::Bound;
use once_cell::race::OnceBox;

use super::ext_key::{cmp_bytes, empty_key, ExtKey};
use super::write_map::ALL_KEYS_END;
use crate::keys::KeyValue;

/// A known range `[begin, end)` (its begin is the map key) and every row in it, ascending.
#[derive(Clone, Debug, Default)]
pub(crate) struct CacheEntry {
    end: Bytes,
    values: Vec<KeyValue>,
}

impl CacheEntry {
    /// The sentinel entry at the empty key, known-empty up to itself.
    fn first() -> Self {
        CacheEntry {
            end: empty_key(),
            values: Vec::new(),
        }
    }

    fn segments(&self) -> usize {
        2 * (self.values.len() + 1)
    }
}

/// The snapshot cache of one transaction.
#[derive(Clone, Debug, Default)]
pub(crate) struct SnapshotCache {
    /// Empty until the first insert: a transaction that reads nothing (a batch of writes)
    /// allocates no tree; until then readers see [`blank`]'s sentinels.
    entries: BTreeMap<Bytes, CacheEntry>,
}

/// The entries of a cache that knows nothing: empty entries at both ends, as FDB keeps
/// them, so every unknown range lies between two entries. Built once, shared by every
/// transaction that has read nothing yet.
fn sentinels() -> BTreeMap<Bytes, CacheEntry> {
    let mut entries = BTreeMap::new();
    entries.insert(empty_key(), CacheEntry::first());
    entries.insert(
        Bytes::from_static(ALL_KEYS_END),
        CacheEntry {
            end: Bytes::from_static(b"\xff\xff\x00"),
            values: Vec::new(),
        },
    );
    entries
}

fn blank() -> &'static BTreeMap<Bytes, CacheEntry> {
    static BLANK: OnceBox<BTreeMap<Bytes, CacheEntry>> = OnceBox::new();
    BLANK.get_or_init(|| Box::new(sentinels()))
}

/// What a cache segment is (`SnapshotCache::iterator::SEGMENT_TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CacheSeg {
    Unknown = 0,
    Empty = 1,
    Kv = 2,
}

/// A segment of the cache (`SnapshotCache::iterator`): `offset` 0 is the unknown range
/// before `entry`; odd offsets are the empty ranges around its rows; even ones its rows.
#[derive(Clone, Debug)]
pub(crate) struct CacheIter<'a> {
    map: &'a BTreeMap<Bytes, CacheEntry>,
    key: &'a Bytes,
    entry: &'a CacheEntry,
    /// The end of the entry before `entry` (where the unknown range at offset 0 begins).
    prev_end: &'a Bytes,
    offset: usize,
}

impl<'a> CacheIter<'a> {
    fn entry_after(&self, key: &Bytes) -> Option<(&'a Bytes, &'a CacheEntry)> {
        self.map
            .range::<[u8], _>((Bound::Excluded(key.as_ref()), Bound::Unbounded))
            .next()
    }

    fn entry_before(&self, key: &Bytes) -> Option<(&'a Bytes, &'a CacheEntry)> {
        self.map
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(key.as_ref())))
            .next_back()
    }

    fn set_entry(&mut self, key: &'a Bytes, entry: &'a CacheEntry) {
        self.key = key;
        self.entry = entry;
        self.prev_end = self.entry_before(key).map_or(key, |(_, e)| &e.end);
    }

    pub(crate) fn seg(&self) -> CacheSeg {
        if self.offset == 0 {
            CacheSeg::Unknown
        } else if self.offset & 1 == 1 {
            CacheSeg::Empty
        } else {
            CacheSeg::Kv
        }
    }

    pub(crate) fn begin_key(&self) -> ExtKey<'a> {
        match self.offset {
            0 => ExtKey::of(self.prev_end),
            1 => ExtKey::of(self.key),
            o => ExtKey::new(&self.entry.values[(o - 2) >> 1].key, o & 1),
        }
    }

    pub(crate) fn end_key(&self) -> ExtKey<'a> {
        let o = self.offset;
        if o == 0 {
            ExtKey::of(self.key)
        } else if o == self.entry.segments() - 1 {
            ExtKey::of(&self.entry.end)
        } else {
            ExtKey::new(&self.entry.values[(o - 1) >> 1].key, 1 - (o & 1))
        }
    }

    /// The row of a row segment.
    pub(crate) fn kv(&self) -> &'a KeyValue {
        &self.entry.values[(self.offset.max(2) - 2) >> 1]
    }

    /// The rows of this entry from this row segment through `last`'s (both in it).
    pub(crate) fn rows_to(&self, last: &CacheIter<'_>) -> &'a [KeyValue] {
        let (a, b) = ((self.offset.max(2) - 2) >> 1, (last.offset.max(2) - 2) >> 1);
        &self.entry.values[a.min(b)..=b.max(a)]
    }

    pub(crate) fn advance(&mut self) {
        let original = self.end_key();
        loop {
            self.offset += 1;
            if self.offset == self.entry.segments() {
                let Some((k, e)) = self.entry_after(self.key) else {
                    // The last sentinel ends past every key: stay on it.
                    self.offset -= 1;
                    return;
                };
                self.prev_end = &self.entry.end;
                self.key = k;
                self.entry = e;
                self.offset = 0;
            }
            if self.end_key() != original {
                return;
            }
        }
    }

    pub(crate) fn retreat(&mut self) {
        let original = self.begin_key();
        loop {
            if self.offset == 0 {
                let Some((k, e)) = self.entry_before(self.key) else {
                    return;
                };
                self.set_entry(k, e);
                self.offset = self.entry.segments() - 1;
            } else {
                self.offset -= 1;
            }
            if self.begin_key() != original {
                return;
            }
        }
    }

    /// Moves to the segment holding `key`.
    pub(crate) fn skip(&mut self, key: &[u8]) {
        // The last entry at or before `key`, and the one before it, from one search.
        let mut upto = self
            .map
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)));
        let (k, e) = upto.next_back().expect("the cache holds its sentinels");
        let prev_end = upto.next_back().map_or(k, |(_, p)| &p.end);
        if cmp_bytes(key, ALL_KEYS_END).is_eq() {
            (self.key, self.entry, self.prev_end) = (k, e, prev_end);
            self.offset = 1;
            return;
        }
        if cmp_bytes(key, &e.end).is_ge() {
            match self.entry_after(k) {
                Some((nk, ne)) => {
                    self.key = nk;
                    self.entry = ne;
                    self.prev_end = &e.end;
                    self.offset = 0;
                }
                None => {
                    (self.key, self.entry, self.prev_end) = (k, e, prev_end);
                    self.offset = e.segments() - 1;
                }
            }
        } else {
            (self.key, self.entry, self.prev_end) = (k, e, prev_end);
            let idx = e
                .values
                .partition_point(|kv| cmp_bytes(&kv.key, key).is_lt());
            let exact = e
                .values
                .get(idx)
                .is_some_and(|kv| cmp_bytes(&kv.key, key).is_eq());
            self.offset = idx * 2 + 1 + usize::from(exact);
        }
    }

    /// From a row segment, the last row of the entry before `key` (rows in between are all
    /// known and adjacent but for empty ranges).
    pub(crate) fn skip_contiguous(&mut self, key: ExtKey<'_>) {
        let from = self.offset / 2;
        let vals = &self.entry.values;
        let i = from + vals[from.min(vals.len())..].partition_point(|kv| ExtKey::of(&kv.key) < key);
        self.offset = 2 * i;
    }

    /// From a row segment, the first row of the entry at or after `key` (back to here).
    pub(crate) fn skip_contiguous_back(&mut self, key: ExtKey<'_>) {
        let upto = (self.offset / 2).saturating_sub(1);
        let i = self.entry.values[..upto].partition_point(|kv| ExtKey::of(&kv.key) < key);
        self.offset = 2 * i + 2;
    }

    /// The same segment.
    pub(crate) fn same(&self, other: &CacheIter<'_>) -> bool {
        self.offset == other.offset && self.key == other.key
    }
}

impl SnapshotCache {
    /// Gives the cache its own sentinels before its first insert.
    fn fill_sentinels(&mut self) {
        if self.entries.is_empty() {
            self.entries = sentinels();
        }
    }

    /// An iterator at the segment holding `key`.
    pub(crate) fn iter_at(&self, key: &[u8]) -> CacheIter<'_> {
        let map = if self.entries.is_empty() {
            blank()
        } else {
            &self.entries
        };
        let (k, e) = map.iter().next().expect("the cache holds its sentinels");
        let mut it = CacheIter {
            map,
            key: k,
            entry: e,
            prev_end: k,
            offset: 1,
        };
        it.skip(key);
        it
    }

    /// Storage said `key` holds `value` (`insert(KeyRef, Optional<ValueRef>)`); ignored where
    /// the cache already knows. `end` is `key_after(key)`, which the caller shares with the
    /// read conflict range: the keys are kept, not copied.
    pub(crate) fn insert_point(&mut self, key: &Bytes, end: &Bytes, value: Option<Bytes>) {
        self.fill_sentinels();
        if self.iter_at(key).seg() != CacheSeg::Unknown {
            return;
        }
        let (k, end) = (key.clone(), end.clone());
        let values = match value {
            Some(v) => alloc::vec![KeyValue {
                key: k.clone(),
                value: v
            }],
            None => Vec::new(),
        };
        self.entries.insert(k, CacheEntry { end, values });
    }

    /// Storage said `[begin, end)` holds exactly `values` (ascending). What the cache already
    /// knows stays; the new entry covers only the unknown part from `begin` on.
    pub(crate) fn insert_range(&mut self, begin: Bytes, end: Bytes, mut values: Vec<KeyValue>) {
        if cmp_bytes(&begin, &end).is_ge() {
            return;
        }
        self.fill_sentinels();
        let itb = self.iter_at(&begin);
        let ite = self.iter_at(&end);
        let mut from = begin;
        let mut erase_from = itb.key.clone();
        if itb.seg() != CacheSeg::Unknown && cmp_bytes(itb.key, &from).is_ne() {
            from = itb.entry.end.clone();
            let i = values.partition_point(|kv| cmp_bytes(&kv.key, &from).is_lt());
            values.drain(..i);
            erase_from = match itb.entry_after(itb.key) {
                Some((k, _)) => k.clone(),
                None => return,
            };
        }
        let mut to = end;
        if ite.seg() != CacheSeg::Unknown {
            to = ite.key.clone();
            let i = values.partition_point(|kv| cmp_bytes(&kv.key, &to).is_lt());
            values.truncate(i);
        }
        let erase_to = ite.key.clone();
        if cmp_bytes(&from, &to).is_ge() {
            return;
        }
        let add_begin = !from.is_empty() && erase_from.is_empty();
        let gone: smallvec::SmallVec<[Bytes; 4]> = self
            .entries
            .range::<[u8], _>((
                Bound::Included(erase_from.as_ref()),
                Bound::Excluded(erase_to.as_ref()),
            ))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            self.entries.remove(&k);
        }
        self.entries.insert(from, CacheEntry { end: to, values });
        if add_begin {
            self.entries.insert(empty_key(), CacheEntry::first());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ryw::b;
    use alloc::vec;

    fn kv(k: &'static [u8]) -> KeyValue {
        KeyValue {
            key: b(k),
            value: b(b"v"),
        }
    }

    fn segments(c: &SnapshotCache) -> Vec<(Bytes, Bytes, CacheSeg)> {
        let mut it = c.iter_at(b"");
        let mut out = Vec::new();
        while it.begin_key().cmp_key(ALL_KEYS_END).is_lt() {
            out.push((it.begin_key().to_bytes(), it.end_key().to_bytes(), it.seg()));
            it.advance();
        }
        out
    }

    #[test]
    fn segments_are_unknown_empty_and_rows() {
        let mut c = SnapshotCache::default();
        c.insert_range(b(b"d"), b(b"f\x00"), vec![kv(b"d"), kv(b"e"), kv(b"f")]);
        c.insert_range(b(b"g"), b(b"h"), Vec::new());
        c.insert_point(&b(b"j"), &b(b"j\x00"), None);
        use CacheSeg::*;
        assert_eq!(
            segments(&c),
            vec![
                (b(b""), b(b"d"), Unknown),
                (b(b"d"), b(b"d\x00"), Kv),
                (b(b"d\x00"), b(b"e"), Empty),
                (b(b"e"), b(b"e\x00"), Kv),
                (b(b"e\x00"), b(b"f"), Empty),
                (b(b"f"), b(b"f\x00"), Kv),
                (b(b"f\x00"), b(b"g"), Unknown),
                (b(b"g"), b(b"h"), Empty),
                (b(b"h"), b(b"j"), Unknown),
                (b(b"j"), b(b"j\x00"), Empty),
                (b(b"j\x00"), b(b"\xff\xff"), Unknown),
            ]
        );
        // Walking back gives the same segments.
        let mut it = c.iter_at(b"z");
        let mut back = Vec::new();
        loop {
            back.push((it.begin_key().to_bytes(), it.end_key().to_bytes(), it.seg()));
            if it.begin_key().cmp_key(b"").is_eq() {
                break;
            }
            it.retreat();
        }
        back.reverse();
        assert_eq!(back, segments(&c));
    }

    #[test]
    fn a_range_over_known_parts_adds_only_the_unknown_rest() {
        let mut c = SnapshotCache::default();
        c.insert_range(b(b"b"), b(b"d"), vec![kv(b"c")]);
        // Storage answers for [a, e) again; the known [b, d) stays as it is.
        c.insert_range(b(b"c0"), b(b"e"), vec![kv(b"c5"), kv(b"d5")]);
        use CacheSeg::*;
        let segs = segments(&c);
        assert_eq!(segs[0], (b(b""), b(b"b"), Unknown));
        assert!(segs.contains(&(b(b"d"), b(b"d5"), Empty)));
        assert!(segs.contains(&(b(b"d5"), b(b"d5\x00"), Kv)));
        assert!(!segs.iter().any(|s| s.0 == b(b"c5")));
        let mut it = c.iter_at(b"c");
        assert_eq!(it.seg(), Kv);
        it.skip_contiguous(ExtKey::of(&b(b"z")));
        assert_eq!(it.kv().key, b(b"c"), "the row run ends with the entry");
    }
}
