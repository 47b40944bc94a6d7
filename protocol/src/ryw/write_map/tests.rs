//! The map's segments, lookups and write-out after sets, atomic ops, clears and conflict
//! ranges.

use super::*;
use crate::ryw::b;
use alloc::vec;
use alloc::vec::Vec;

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
