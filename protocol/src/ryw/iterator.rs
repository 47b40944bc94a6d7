//! The merged view a read walks (`RYWIterator`): the snapshot cache under the write map,
//! segment by segment. Each segment is the overlap of one cache segment and one write
//! segment, and is either unknown (storage must be read), empty, or one row. A dependent
//! write (an atomic op) over a key the cache knows is a row, even one the op deletes
//! (compare_and_clear): it is counted as a key, and reading it gives nothing.

use bytes::Bytes;
use core::cmp::Ordering;

use super::ext_key::ExtKey;
use super::snapshot_cache::{CacheIter, CacheSeg, SnapshotCache};
use super::write_map::{OpStack, WriteIter, WriteMap, WriteSeg};
use crate::keys::KeyValue;

/// What a merged segment is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seg {
    Unknown,
    Empty,
    Kv,
}

/// The segment holds a versionstamped write (`accessed_unreadable` when read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Unreadable;

/// `RYWIterator::typeMap`, by write segment then cache segment.
const TYPE_MAP: [Seg; 12] = [
    // unmodified
    Seg::Unknown,
    Seg::Empty,
    Seg::Kv,
    // cleared
    Seg::Empty,
    Seg::Empty,
    Seg::Empty,
    // independent write
    Seg::Kv,
    Seg::Kv,
    Seg::Kv,
    // dependent write
    Seg::Unknown,
    Seg::Kv,
    Seg::Kv,
];

/// A point read as RYW settles it the moment it is issued. `RYWImpl::read(GetValueReq)` walks
/// an iterator that pins the write map's version (`WriteMap::iterator`), decides whether the
/// key's writes depend on the stored value before it waits for storage, and adds the read
/// conflict range through that same iterator: writes made while the read is in flight change
/// neither its value nor its conflict range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PointView {
    pub(crate) answer: PointAnswer,
    /// `updateConflictMap`: a non-snapshot read of the key gets a read conflict range (the
    /// writes leave its value to storage, or depend on it).
    pub(crate) conflicts: bool,
}

/// What the merged view says of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PointAnswer {
    /// Known without storage (a write, a clear, or what was already read): the value.
    Known(Option<Bytes>),
    /// The key holds a versionstamped write.
    Unreadable,
    /// Storage must answer; a dependent write's operations then apply over its value.
    Stored(Option<OpStack>),
}

impl PointView {
    #[cfg(test)]
    pub(crate) fn of(cache: &SnapshotCache, writes: &WriteMap, key: &[u8]) -> PointView {
        PointView::reading(cache, writes, key, false)
    }

    /// As [`PointView::of`]; with `bypass_unreadable` (the transaction option, which RYW
    /// honours in point reads alone) a versionstamped write reads as what it holds now.
    pub(crate) fn reading(
        cache: &SnapshotCache,
        writes: &WriteMap,
        key: &[u8],
        bypass_unreadable: bool,
    ) -> PointView {
        let mut it = RywIter::new(cache, writes, key);
        it.bypass_unreadable = bypass_unreadable;
        let w = &it.writes;
        let conflicts = w.is_unmodified_range() || (w.is_operation() && !w.is_independent());
        let answer = match it.seg() {
            Err(Unreadable) => PointAnswer::Unreadable,
            Ok(Seg::Kv) => PointAnswer::Known(it.kv().ok().flatten().map(|kv| kv.value)),
            Ok(Seg::Empty) => PointAnswer::Known(None),
            Ok(Seg::Unknown) => PointAnswer::Stored(it.is_dependent().then(|| w.op().clone())),
        };
        PointView { answer, conflicts }
    }

    /// The value read, given what storage holds (for [`PointAnswer::Stored`]).
    pub(crate) fn over_stored(&self, stored: Option<Bytes>) -> Option<Bytes> {
        match &self.answer {
            PointAnswer::Stored(Some(ops)) => ops.value_over(stored.as_ref()),
            PointAnswer::Known(v) => v.clone(),
            PointAnswer::Stored(None) | PointAnswer::Unreadable => stored,
        }
    }
}

/// A position in the merged view.
#[derive(Clone, Debug)]
pub(crate) struct RywIter<'a> {
    cache: CacheIter<'a>,
    writes: WriteIter<'a>,
    /// `cache.begin_key()` against `writes.begin_key()`.
    begin_cmp: Ordering,
    /// `cache.end_key()` against `writes.end_key()`.
    end_cmp: Ordering,
    /// `bypassUnreadableProtection`: unreadable segments read as the others.
    bypass_unreadable: bool,
}

impl<'a> RywIter<'a> {
    /// An iterator at the segment holding `key`.
    pub(crate) fn new(cache: &'a SnapshotCache, writes: &'a WriteMap, key: &[u8]) -> Self {
        let mut it = RywIter {
            cache: cache.iter_at(key),
            writes: writes.iter_at(key),
            begin_cmp: Ordering::Equal,
            end_cmp: Ordering::Equal,
            bypass_unreadable: false,
        };
        it.update_cmp();
        it
    }

    fn update_cmp(&mut self) {
        self.begin_cmp = self.cache.begin_key().cmp(&self.writes.begin_key());
        self.end_cmp = self.cache.end_key().cmp(&self.writes.end_key());
    }

    pub(crate) fn is_unreadable(&self) -> bool {
        self.writes.is_unreadable()
    }

    /// The segment's kind; reading an unreadable one fails.
    pub(crate) fn seg(&self) -> Result<Seg, Unreadable> {
        if self.is_unreadable() && !self.bypass_unreadable {
            return Err(Unreadable);
        }
        Ok(TYPE_MAP[self.writes.seg() as usize * 3 + self.cache.seg() as usize])
    }

    /// Readable and known (neither unreadable nor unknown), without failing.
    pub(crate) fn is_known(&self) -> bool {
        !self.is_unreadable() && self.seg() != Ok(Seg::Unknown)
    }

    pub(crate) fn is_unknown_range(&self) -> Result<bool, Unreadable> {
        Ok(self.seg()? == Seg::Unknown)
    }

    pub(crate) fn is_kv(&self) -> Result<bool, Unreadable> {
        Ok(self.seg()? == Seg::Kv)
    }

    pub(crate) fn is_empty_range(&self) -> Result<bool, Unreadable> {
        Ok(self.seg()? == Seg::Empty)
    }

    /// A dependent write (atomic ops on a value the transaction has not read).
    pub(crate) fn is_dependent(&self) -> bool {
        self.writes.seg() == WriteSeg::Dependent
    }

    pub(crate) fn begin_key(&self) -> ExtKey<'a> {
        if self.begin_cmp.is_le() {
            self.writes.begin_key()
        } else {
            self.cache.begin_key()
        }
    }

    pub(crate) fn end_key(&self) -> ExtKey<'a> {
        if self.end_cmp.is_le() {
            self.cache.end_key()
        } else {
            self.writes.end_key()
        }
    }

    /// The row of a row segment; `None` when the transaction's op removed the key.
    pub(crate) fn kv(&self) -> Result<Option<KeyValue>, Unreadable> {
        if self.is_unreadable() && !self.bypass_unreadable {
            return Err(Unreadable);
        }
        if self.writes.is_unmodified_range() {
            return Ok(Some(self.cache.kv().clone()));
        }
        let stored = if self.writes.is_independent() || self.cache.seg() == CacheSeg::Empty {
            None
        } else {
            Some(&self.cache.kv().value)
        };
        Ok(self.writes.op().value_over(stored).map(|value| KeyValue {
            key: self.writes.entry_key().clone(),
            value,
        }))
    }

    /// The row segment comes from the cache alone (so adjacent rows can be taken at once).
    pub(crate) fn row_from_cache(&self) -> bool {
        self.writes.is_unmodified_range()
    }

    /// The cached rows from `start`'s row through this one (`skipContiguous` moved here).
    pub(crate) fn cached_rows_from(&self, start: &RywIter<'a>) -> &'a [KeyValue] {
        start.cache.rows_to(&self.cache)
    }

    /// To the next segment (`RYWIterator::operator++`).
    pub(crate) fn advance(&mut self) {
        if self.end_cmp.is_le() {
            self.cache.advance();
        }
        if self.end_cmp.is_ge() {
            self.writes.advance();
        }
        self.begin_cmp = self.end_cmp.reverse();
        self.end_cmp = self.cache.end_key().cmp(&self.writes.end_key());
    }

    /// To the previous segment (`operator--`).
    // `advance` mirrored: each side's begin and end swap, as in RYWIterator.
    pub(crate) fn retreat(&mut self) {
        if self.begin_cmp.is_ge() {
            self.cache.retreat();
        }
        if self.begin_cmp.is_le() {
            self.writes.retreat();
        }
        self.end_cmp = self.begin_cmp.reverse();
        self.begin_cmp = self.cache.begin_key().cmp(&self.writes.begin_key());
    }

    /// From a cached row in an unmodified range, moves to the last row before `key` that
    /// follows without a gap.
    pub(crate) fn skip_contiguous(&mut self, key: &Bytes) -> Result<(), Unreadable> {
        if self.is_kv()? && self.writes.is_unmodified_range() {
            let limit = core::cmp::min(ExtKey::of(key), self.writes.end_key());
            self.cache.skip_contiguous(limit);
            self.update_cmp();
        }
        Ok(())
    }

    /// The mirror of [`RywIter::skip_contiguous`]: back to the first row at or after `key`.
    pub(crate) fn skip_contiguous_back(&mut self, key: &Bytes) -> Result<(), Unreadable> {
        if self.is_kv()? && self.writes.is_unmodified_range() {
            let limit = core::cmp::max(ExtKey::of(key), self.writes.begin_key().key_after());
            self.cache.skip_contiguous_back(limit);
            self.update_cmp();
        }
        Ok(())
    }

    /// The same segment.
    pub(crate) fn same(&self, other: &RywIter<'_>) -> bool {
        self.cache.same(&other.cache) && self.writes.same(&other.writes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::mutation_type as mt;
    use crate::ryw::b;
    use alloc::vec;
    use alloc::vec::Vec;

    fn kv(k: &'static [u8], v: &'static [u8]) -> KeyValue {
        KeyValue {
            key: b(k),
            value: b(v),
        }
    }

    /// The example of `testSnapshotCache` (RYWIterator.cpp), walked both ways.
    #[test]
    fn merges_the_cache_under_the_writes() {
        let mut cache = SnapshotCache::default();
        cache.insert_range(
            b(b"d"),
            b(b"f\x00"),
            vec![
                kv(b"d", b"doo"),
                kv(b"e", b"eoo"),
                kv(b"e\x00", b"zoo"),
                kv(b"f", b"foo"),
            ],
        );
        cache.insert_range(b(b"g"), b(b"h"), Vec::new());
        cache.insert_range(b(b"j"), b(b"m"), vec![kv(b"k", b"koo"), kv(b"l", b"loo")]);
        let mut writes = WriteMap::new();
        writes.mutate(b(b"c"), mt::SET_VALUE, b(b"c--"), true);
        writes.clear(b"c\x00", b"e", true);
        writes.mutate(b(b"c\x00"), mt::SET_VALUE, b(b"c00--"), true);
        writes.mutate(b(b"d"), mt::SET_VALUE, b(b"d--"), true);
        writes.mutate(b(b"e"), mt::SET_VALUE, b(b"e++"), true);
        writes.mutate(b(b"i"), mt::SET_VALUE, b(b"i--"), true);

        let describe = |it: &RywIter<'_>| {
            let seg = it.seg().unwrap();
            let v = match seg {
                Seg::Kv => it.kv().unwrap().map(|kv| kv.value),
                _ => None,
            };
            (it.begin_key().to_bytes(), it.end_key().to_bytes(), seg, v)
        };
        let mut it = RywIter::new(&cache, &writes, b"a");
        let mut fwd = Vec::new();
        loop {
            fwd.push(describe(&it));
            if it.end_key().cmp_key(b"z").is_ge() {
                break;
            }
            it.advance();
        }
        use Seg::*;
        let kvs: Vec<(Bytes, Option<Bytes>)> = fwd
            .iter()
            .filter(|s| s.2 == Kv)
            .map(|s| (s.0.clone(), s.3.clone()))
            .collect();
        assert_eq!(
            kvs,
            vec![
                (b(b"c"), Some(b(b"c--"))),
                (b(b"c\x00"), Some(b(b"c00--"))),
                (b(b"d"), Some(b(b"d--"))),
                (b(b"e"), Some(b(b"e++"))),
                (b(b"e\x00"), Some(b(b"zoo"))),
                (b(b"f"), Some(b(b"foo"))),
                (b(b"i"), Some(b(b"i--"))),
                (b(b"k"), Some(b(b"koo"))),
                (b(b"l"), Some(b(b"loo"))),
            ]
        );
        assert_eq!(fwd[0], (b(b""), b(b"c"), Unknown, None));
        // Segments tile the keys without gaps.
        for w in fwd.windows(2) {
            assert_eq!(w[0].1, w[1].0);
        }
        let mut it = RywIter::new(&cache, &writes, b"z");
        let mut back = Vec::new();
        loop {
            back.push(describe(&it));
            if it.begin_key().cmp_key(b"a").is_le() {
                break;
            }
            it.retreat();
        }
        back.reverse();
        assert_eq!(back, fwd);
    }

    #[test]
    fn a_dependent_write_over_a_known_key_is_a_row_even_when_cleared() {
        let mut cache = SnapshotCache::default();
        cache.insert_range(b(b"a"), b(b"z"), Vec::new());
        let mut writes = WriteMap::new();
        writes.mutate(b(b"m"), mt::COMPARE_AND_CLEAR, b(b"x"), true);
        let it = RywIter::new(&cache, &writes, b"m");
        assert_eq!(it.seg(), Ok(Seg::Kv));
        assert_eq!(it.kv(), Ok(None));
        // Over an unknown key it is unknown: storage must be read.
        let cache = SnapshotCache::default();
        let it = RywIter::new(&cache, &writes, b"m");
        assert_eq!(it.seg(), Ok(Seg::Unknown));
        assert!(it.is_dependent());
    }

    #[test]
    fn bypass_unreadable_reads_a_versionstamped_value_as_its_parameter() {
        let cache = SnapshotCache::default();
        let mut writes = WriteMap::new();
        writes.mutate(b(b"apple"), mt::SET_VALUE, b(b"red"), true);
        writes.mutate(
            b(b"apple"),
            mt::SET_VERSIONSTAMPED_VALUE,
            b(b"vs\0\0\0\0"),
            true,
        );
        let guarded = PointView::of(&cache, &writes, b"apple");
        assert_eq!(guarded.answer, PointAnswer::Unreadable);
        let bypassed = PointView::reading(&cache, &writes, b"apple", true);
        assert_eq!(bypassed.answer, PointAnswer::Known(Some(b(b"vs\0\0\0\0"))));
        // A versionstamped key's possible range is left to storage.
        let mut writes = WriteMap::new();
        writes.add_unmodified_and_unreadable_range(b"k", b"l");
        assert_eq!(
            PointView::of(&cache, &writes, b"k1").answer,
            PointAnswer::Unreadable
        );
        assert_eq!(
            PointView::reading(&cache, &writes, b"k1", true).answer,
            PointAnswer::Stored(None)
        );
    }
}
