//! The write map at commit (`writeRangeToNativeTransaction`): every cleared range first, in
//! key order, then each key's operations and the write conflict ranges, as NativeAPI receives
//! them, or only their size.

use alloc::vec::Vec;
use bytes::Bytes;

use super::op_stack::is_atomic_kind;
use super::{WriteIter, WriteMap, ALL_KEYS_END};
use crate::keys::KeyRange;
use crate::keys::{mutation_type as mt, MutationRef};
use crate::ryw::ext_key::{ExtKey, KeyArena};

impl WriteMap {
    /// `writeRangeToNativeTransaction`: the clears, operations and write conflict ranges of
    /// `[begin, end)` as NativeAPI receives them, appended to `mutations` and `conflicts`.
    pub(crate) fn write_to_native(
        &self,
        begin: &Bytes,
        end: &Bytes,
        mutations: &mut Vec<MutationRef>,
        conflicts: &mut Vec<KeyRange>,
    ) {
        // Mostly one key with an appended zero per entry (a key's conflict end `k\0`). Only
        // for the whole map (the commit): a versionstamped key's part of it is small.
        let whole = begin.is_empty() && end.as_ref() >= ALL_KEYS_END;
        let zeroed = if whole {
            self.entries.key_bytes() + self.entries.len()
        } else {
            0
        };
        let mut out = NativeLists {
            mutations,
            conflicts,
            keys: KeyArena::for_bytes(zeroed),
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
