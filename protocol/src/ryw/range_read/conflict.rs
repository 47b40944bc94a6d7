//! The read conflict ranges RYW adds after a read (`updateConflictMap`, `addConflictRange`).

use bytes::Bytes;

use super::{fdb_key_after, RywResult};
use crate::keys::KeySelector;
use crate::ryw::write_map::WriteMap;
use crate::ryw::RangeSet;

/// `updateConflictMap`: the parts of `[begin, end)` the writes leave to storage (never
/// written, or only by atomic ops) become read conflict ranges.
pub(crate) fn update_conflict_map(
    writes: &WriteMap,
    begin: &Bytes,
    end: &Bytes,
    out: &mut RangeSet,
) {
    // Only the unmodified walk fails.
    let _ = conflict_walk(writes, begin, end, out, false);
}

/// A mapped read met a key or range the transaction wrote
/// (`get_mapped_range_reads_your_writes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReadsYourWrites;

/// `updateConflictMap<mustUnmodified = true>`: as [`update_conflict_map`], but every part of
/// `[begin, end)` must be one the transaction never wrote; the first that is not stops it
/// (the parts before it stay read conflict ranges, as in RYW).
pub(crate) fn update_conflict_map_unmodified(
    writes: &WriteMap,
    begin: &Bytes,
    end: &Bytes,
    out: &mut RangeSet,
) -> Result<(), ReadsYourWrites> {
    conflict_walk(writes, begin, end, out, true)
}

/// The walk of both: `updateConflictMap` with its `mustUnmodified` parameter.
fn conflict_walk(
    writes: &WriteMap,
    begin: &Bytes,
    end: &Bytes,
    out: &mut RangeSet,
    must_unmodified: bool,
) -> Result<(), ReadsYourWrites> {
    if begin >= end {
        return Ok(());
    }
    let mut it = writes.iter_at(begin);
    while it.begin_key().cmp_key(end).is_lt() {
        let unmodified = it.is_unmodified_range();
        if must_unmodified && !unmodified {
            return Err(ReadsYourWrites);
        }
        if unmodified || (it.is_operation() && !it.is_independent()) {
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
    Ok(())
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
    let read = ReadShape {
        first: r.rows.first().map(|kv| &kv.key),
        last: r.rows.last().map(|kv| &kv.key),
        more: r.more,
        read_to_begin: r.read_to_begin,
        read_through_end: r.read_through_end,
    };
    range_conflict_of(begin, end, reverse, &read, max_key)
}

/// What [`range_conflict_of`] needs of a range read's result: its first and last keys (in
/// read order) and its flags.
pub(crate) struct ReadShape<'a> {
    pub(crate) first: Option<&'a Bytes>,
    pub(crate) last: Option<&'a Bytes>,
    pub(crate) more: bool,
    pub(crate) read_to_begin: bool,
    pub(crate) read_through_end: bool,
}

/// [`range_conflict`] from the shape of a result alone (a mapped read's rows, or the rows a
/// mapper read).
pub(crate) fn range_conflict_of(
    begin: &KeySelector,
    end: &KeySelector,
    reverse: bool,
    r: &ReadShape<'_>,
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
    if let (Some(first), Some(last)) = (r.first, r.last) {
        if reverse {
            if *last < b {
                b = last.clone();
            }
            if end.offset > 0 && e <= *first {
                e = fdb_key_after(first);
            }
        } else {
            if begin.offset <= 0 && *first < b {
                b = first.clone();
            }
            if e <= *last {
                e = fdb_key_after(last);
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
    use crate::keys::mutation_type as mt;
    use alloc::vec;
    use alloc::vec::Vec;

    fn b(s: &[u8]) -> Bytes {
        Bytes::copy_from_slice(s)
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
