//! The two directions over the merged view, and the counting walks over unknown segments
//! (`skipUncached`, `countUncached` and their `Back` twins) that size a storage read.

use bytes::Bytes;

use crate::ryw::ext_key::ExtKey;
use crate::ryw::iterator::RywIter;

/// A direction over the merged view: `FORWARD` walks with `advance` towards `max_key`, and
/// the segment's end is its far side; backward walks with `retreat` towards `""`.
pub(super) struct Walk<const FORWARD: bool>;

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
    pub(super) fn skip_uncached(it: &mut RywIter<'_>, end: &RywIter<'_>, mut limit: i32) -> i32 {
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
    pub(super) fn count_uncached(mut it: RywIter<'_>, max_key: &Bytes, max: i32) -> i32 {
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

pub(super) type Forward = Walk<true>;
pub(super) type Backward = Walk<false>;
