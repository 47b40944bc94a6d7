//! Disjoint, coalesced key ranges: read and write conflict ranges, known ranges.

use alloc::collections::BTreeMap;
use bytes::Bytes;

use crate::keys::KeyRange;

/// Disjoint, coalesced key ranges (`KeyRangeMap<bool>` with coalescing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RangeSet {
    /// begin -> end; ranges neither overlap nor touch.
    map: BTreeMap<Bytes, Bytes>,
}

impl RangeSet {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Adds `[begin, end)`, merging with ranges it overlaps or touches.
    pub(crate) fn insert(&mut self, begin: &[u8], end: &[u8]) {
        if begin >= end {
            return;
        }
        self.insert_owned(Bytes::copy_from_slice(begin), Bytes::copy_from_slice(end));
    }

    /// [`RangeSet::insert`] for keys the caller already owns (no copies).
    pub(crate) fn insert_owned(&mut self, begin: Bytes, end: Bytes) {
        if begin >= end {
            return;
        }
        let mut b = begin;
        let mut e = end;
        let (begin, end) = (b.clone(), e.clone());
        let (begin, end): (&[u8], &[u8]) = (&begin, &end);
        // Ranges starting at or before `end` that reach `begin` merge with it.
        let merge: smallvec::SmallVec<[Bytes; 4]> = self
            .map
            .range::<[u8], _>((core::ops::Bound::Unbounded, core::ops::Bound::Included(end)))
            .rev()
            .take_while(|(_, re)| re.as_ref() >= begin)
            .map(|(rb, _)| rb.clone())
            .collect();
        for rb in merge {
            let re = self.map.remove(&rb).expect("present");
            if rb < b {
                b = rb;
            }
            if re > e {
                e = re;
            }
        }
        self.map.insert(b, e);
    }

    /// Every range, in order, borrowed.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Bytes, &Bytes)> + '_ {
        self.map.iter()
    }

    /// Every range, in order.
    pub(crate) fn ranges(&self) -> impl Iterator<Item = KeyRange> + '_ {
        self.map.iter().map(|(b, e)| KeyRange {
            begin: b.clone(),
            end: e.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ryw::b;
    use alloc::vec;
    use alloc::vec::Vec;

    #[test]
    fn range_set_coalesces() {
        let mut s = RangeSet::new();
        s.insert(b"c", b"e");
        s.insert(b"a", b"b");
        s.insert(b"b", b"c");
        assert_eq!(s.len(), 1);
        s.insert(b"x", b"z");
        s.insert_owned(b(b"d"), b(b"f"));
        let got: Vec<(Bytes, Bytes)> = s.ranges().map(|r| (r.begin, r.end)).collect();
        assert_eq!(got, vec![(b(b"a"), b(b"f")), (b(b"x"), b(b"z"))]);
    }
}
