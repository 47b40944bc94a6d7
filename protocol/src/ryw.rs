//! Read-your-writes: a transaction's own writes, merged into what it reads
//! (`fdbclient/ReadYourWrites.actor.cpp`, `WriteMap.h`).
//!
//! FDB keeps writes in a map of key segments: cleared ranges, and per key a stack of
//! operations that is either *independent* of the stored value (a set, or anything over a
//! cleared or set key, which FDB coalesces into a set) or *dependent* on it (atomic ops over a
//! value the transaction has not seen). Reads merge storage rows with that map, and only parts
//! of a read that the writes do not fully decide become read conflict ranges. At commit the
//! map is written out in FDB's order: every cleared range first, then each key's operations in
//! key order.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use bytes::Bytes;

use crate::atomic;
use crate::messages::commit::{mutation_type as mt, MutationRef};
use crate::messages::types::{KeyRange, KeyValue};

/// The smallest key after `key`.
pub(crate) fn key_after(key: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(key.len() + 1);
    v.extend_from_slice(key);
    v.push(0);
    Bytes::from(v)
}

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

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
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
        let merge: Vec<Bytes> = self
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

    /// Takes `[begin, end)` out of the set, splitting ranges it cuts.
    pub(crate) fn remove(&mut self, begin: &[u8], end: &[u8]) {
        if begin >= end {
            return;
        }
        for (b, e) in self.overlapping(begin, end) {
            // `overlapping` clips; find the stored range around each piece.
            let Some((rb, re)) = self
                .map
                .range::<[u8], _>((
                    core::ops::Bound::Unbounded,
                    core::ops::Bound::Included(&b[..]),
                ))
                .next_back()
                .map(|(rb, re)| (rb.clone(), re.clone()))
            else {
                continue;
            };
            self.map.remove(&rb);
            if rb < b {
                self.map.insert(rb, b.clone());
            }
            if e < re {
                self.map.insert(e, re);
            }
        }
    }

    /// Is `key` inside one of the ranges?
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.map
            .range::<[u8], _>((core::ops::Bound::Unbounded, core::ops::Bound::Included(key)))
            .next_back()
            .is_some_and(|(_, e)| key < e.as_ref())
    }

    /// Does any range intersect `[begin, end)`?
    pub(crate) fn intersects(&self, begin: &[u8], end: &[u8]) -> bool {
        !self.overlapping(begin, end).is_empty()
    }

    /// The ranges intersecting `[begin, end)`, clipped to it, in order.
    pub(crate) fn overlapping(&self, begin: &[u8], end: &[u8]) -> Vec<(Bytes, Bytes)> {
        let mut out = Vec::new();
        if begin >= end {
            return out;
        }
        let head = self
            .map
            .range::<[u8], _>((
                core::ops::Bound::Unbounded,
                core::ops::Bound::Included(begin),
            ))
            .next_back()
            .filter(|(_, e)| e.as_ref() > begin);
        let rest = self.map.range::<[u8], _>((
            core::ops::Bound::Excluded(begin),
            core::ops::Bound::Excluded(end),
        ));
        for (b, e) in head.into_iter().chain(rest) {
            let cb = if b.as_ref() < begin {
                Bytes::copy_from_slice(begin)
            } else {
                b.clone()
            };
            let ce = if e.as_ref() > end {
                Bytes::copy_from_slice(end)
            } else {
                e.clone()
            };
            out.push((cb, ce));
        }
        out
    }

    /// Every range, in order.
    pub(crate) fn ranges(&self) -> impl Iterator<Item = KeyRange> + '_ {
        self.map.iter().map(|(b, e)| KeyRange {
            begin: b.clone(),
            end: e.clone(),
        })
    }

    /// Whether the whole of `[begin, end)` is covered.
    pub(crate) fn covers(&self, begin: &[u8], end: &[u8]) -> bool {
        begin >= end
            || self
                .map
                .range::<[u8], _>((
                    core::ops::Bound::Unbounded,
                    core::ops::Bound::Included(begin),
                ))
                .next_back()
                .is_some_and(|(_, e)| e.as_ref() >= end)
    }

    /// The range holding `key`.
    pub(crate) fn containing(&self, key: &[u8]) -> Option<(&Bytes, &Bytes)> {
        self.map
            .range::<[u8], _>((core::ops::Bound::Unbounded, core::ops::Bound::Included(key)))
            .next_back()
            .filter(|(_, e)| key < e.as_ref())
    }

    /// The range holding the keys just before `key`: `begin < key <= end`.
    pub(crate) fn containing_before(&self, key: &[u8]) -> Option<(&Bytes, &Bytes)> {
        self.map
            .range::<[u8], _>((core::ops::Bound::Unbounded, core::ops::Bound::Excluded(key)))
            .next_back()
            .filter(|(_, e)| key <= e.as_ref())
    }

    /// The begin of the first range starting after `key`.
    pub(crate) fn next_begin_after(&self, key: &[u8]) -> Option<&Bytes> {
        self.map
            .range::<[u8], _>((core::ops::Bound::Excluded(key), core::ops::Bound::Unbounded))
            .next()
            .map(|(b, _)| b)
    }

    /// The end of the last range ending before `key`.
    pub(crate) fn prev_end_before(&self, key: &[u8]) -> Option<&Bytes> {
        self.map
            .range::<[u8], _>((core::ops::Bound::Unbounded, core::ops::Bound::Excluded(key)))
            .rev()
            .map(|(_, e)| e)
            .find(|e| e.as_ref() < key)
    }
}

/// What the transaction already read from storage at its read version (RYW's snapshot
/// cache): reading it again needs no request, as in libfdb_c.
#[derive(Clone, Debug, Default)]
pub(crate) struct SnapshotCache {
    pub known: RangeSet,
    rows: BTreeMap<Bytes, Bytes>,
}

impl SnapshotCache {
    /// Storage said `[begin, end)` holds exactly `rows` (ascending).
    pub(crate) fn insert_range(&mut self, begin: &[u8], end: &[u8], rows: &[KeyValue]) {
        if begin >= end {
            return;
        }
        if rows.len().saturating_mul(8) >= self.rows.len() {
            // Built from the sorted rows and merged in: linear in both sizes, where a search
            // per row was most of a large range read's CPU. Only when the rows are at least
            // an eighth of what the cache holds (a merge then costs at most nine times the
            // batch), so that small reads into a large cache stay logarithmic.
            let mut new: BTreeMap<Bytes, Bytes> = rows
                .iter()
                .map(|kv| (kv.key.clone(), kv.value.clone()))
                .collect();
            self.rows.append(&mut new);
        } else {
            for kv in rows {
                self.rows.insert(kv.key.clone(), kv.value.clone());
            }
        }
        self.known.insert(begin, end);
    }

    pub(crate) fn insert_point(&mut self, key: &[u8], value: Option<Bytes>) {
        if let Some(v) = value {
            self.rows.insert(Bytes::copy_from_slice(key), v);
        }
        self.known.insert(key, &key_after(key));
    }

    /// `Some(value)` if the key's stored value is known.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Option<Bytes>> {
        self.known
            .contains(key)
            .then(|| self.rows.get(key).cloned())
    }

    /// Known rows in `[begin, end)`, ascending.
    pub(crate) fn rows_in(&self, begin: &[u8], end: &[u8]) -> Vec<KeyValue> {
        if begin >= end {
            return Vec::new();
        }
        self.rows
            .range::<[u8], _>((
                core::ops::Bound::Included(begin),
                core::ops::Bound::Excluded(end),
            ))
            .map(|(k, v)| KeyValue {
                key: k.clone(),
                value: v.clone(),
            })
            .collect()
    }
}

/// What the transaction's writes say about one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Lookup<'a> {
    /// Not written: read storage.
    Unmodified,
    /// Decided by the writes alone.
    Known(Option<Bytes>),
    /// Atomic ops over the stored value: read storage, then apply these.
    Dependent(&'a [(u8, Bytes)]),
    /// A versionstamped write whose result is not known before commit (`accessed_unreadable`).
    Unreadable,
}

impl Lookup<'_> {
    /// The same answer, owned: what a read keeps from the moment it is issued.
    pub(crate) fn to_view(&self) -> PointView {
        match self {
            Lookup::Unmodified => PointView::Unmodified,
            Lookup::Known(v) => PointView::Known(v.clone()),
            Lookup::Dependent(ops) => PointView::Dependent(ops.to_vec()),
            Lookup::Unreadable => PointView::Unreadable,
        }
    }
}

/// What the writes said about a key when a read of it was issued. A read sees the writes made
/// before it, never those made while it is in flight: RYW reads through an iterator over the
/// write map as it was when the read began (`WriteMap::iterator` takes the map's current
/// version and bumps it, fdbclient/include/fdbclient/WriteMap.h; `RYWImpl::read` decides
/// `dependent` before it waits for storage).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PointView {
    Unmodified,
    Known(Option<Bytes>),
    Dependent(Vec<(u8, Bytes)>),
    Unreadable,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Point {
    /// Independent of the stored value: a set (`Some`) or a clear (`None`).
    Known(Option<Bytes>),
    /// Atomic ops over a value not yet known, oldest first.
    Ops(Vec<(u8, Bytes)>),
    /// A versionstamped value (resolved at commit): the parameter to send, then the atomic
    /// ops made on it since, oldest first (all applied by the server, in order).
    VersionstampedValue(Bytes, Vec<(u8, Bytes)>),
}

/// The write map of one transaction.
#[derive(Clone, Debug, Default)]
pub(crate) struct WriteMap {
    cleared: RangeSet,
    points: BTreeMap<Bytes, Point>,
    /// Versionstamped-key mutations, in issue order: `(key with placeholder + offset, value)`.
    versionstamped_keys: Vec<(Bytes, Bytes)>,
    /// Ranges that may hold versionstamped keys: reading them fails.
    unreadable: RangeSet,
}

impl WriteMap {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.cleared.is_empty() && self.points.is_empty() && self.versionstamped_keys.is_empty()
    }

    pub(crate) fn set(&mut self, key: Bytes, value: Bytes) {
        // A key holding a versionstamped value stays unreadable: FDB's write map pushes the
        // set on its op stack (`WriteMap::mutate`) until a clear.
        if let Some(Point::VersionstampedValue(_, ops)) = self.points.get_mut(&key) {
            ops.push((mt::SET_VALUE, value));
            return;
        }
        self.points.insert(key, Point::Known(Some(value)));
    }

    pub(crate) fn clear_range(&mut self, begin: &[u8], end: &[u8]) {
        if begin >= end {
            return;
        }
        let gone: Vec<Bytes> = self
            .points
            .range::<[u8], _>((
                core::ops::Bound::Included(begin),
                core::ops::Bound::Excluded(end),
            ))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            self.points.remove(&k);
        }
        // A versionstamped key sits in FDB's write map at its placeholder key, so a clear over
        // it removes it (it is never sent) and makes that part readable again.
        self.versionstamped_keys
            .retain(|(k, _)| !(begin <= k.as_ref() && k.as_ref() < end));
        self.unreadable.remove(begin, end);
        self.cleared.insert(begin, end);
    }

    /// An atomic op (not a versionstamp op) on `key`.
    pub(crate) fn atomic_op(&mut self, key: Bytes, kind: u8, operand: Bytes) {
        let base = match self.points.get_mut(&key) {
            Some(Point::Known(v)) => Some(v.clone()),
            Some(Point::Ops(ops)) => {
                ops.push((kind, operand));
                return;
            }
            Some(Point::VersionstampedValue(_, ops)) => {
                // FDB keeps both on the op stack; the op applies to the stamped value on the
                // server. Neither can be read back.
                ops.push((kind, operand));
                return;
            }
            None if self.cleared.contains(&key) => Some(None),
            None => None,
        };
        let point = match base {
            Some(v) => Point::Known(atomic::apply(kind, v.as_deref(), &operand).map(Bytes::from)),
            None => Point::Ops(alloc::vec![(kind, operand)]),
        };
        self.points.insert(key, point);
    }

    pub(crate) fn set_versionstamped_value(&mut self, key: Bytes, param: Bytes) {
        self.points
            .insert(key, Point::VersionstampedValue(param, Vec::new()));
    }

    /// Records a versionstamped key; `unreadable` is the range its final key may fall in.
    pub(crate) fn set_versionstamped_key(
        &mut self,
        key: Bytes,
        value: Bytes,
        unreadable: KeyRange,
    ) {
        self.unreadable.insert(&unreadable.begin, &unreadable.end);
        self.versionstamped_keys.push((key, value));
    }

    pub(crate) fn lookup(&self, key: &[u8]) -> Lookup<'_> {
        if self.unreadable.contains(key) {
            return Lookup::Unreadable;
        }
        match self.points.get(key) {
            Some(Point::Known(v)) => Lookup::Known(v.clone()),
            Some(Point::Ops(ops)) => Lookup::Dependent(ops),
            Some(Point::VersionstampedValue(..)) => Lookup::Unreadable,
            None if self.cleared.contains(key) => Lookup::Known(None),
            None => Lookup::Unmodified,
        }
    }

    /// Where a scan of `[begin, end)` first meets what it cannot read (a range that may hold
    /// versionstamped keys, or a versionstamped value): forward, the first such key; in
    /// reverse, the end of the last one. RYW's iterator fails only when it gets there.
    pub(crate) fn first_unreadable(
        &self,
        begin: &[u8],
        end: &[u8],
        reverse: bool,
    ) -> Option<Bytes> {
        let ranges = self.unreadable.overlapping(begin, end);
        let mut stamped = self
            .points
            .range::<[u8], _>((
                core::ops::Bound::Included(begin),
                core::ops::Bound::Excluded(end),
            ))
            .filter(|(_, p)| matches!(p, Point::VersionstampedValue(..)))
            .map(|(k, _)| k);
        if reverse {
            let a = ranges
                .last()
                .map(|(_, e)| core::cmp::min(e.clone(), Bytes::copy_from_slice(end)));
            let b = stamped.next_back().map(|k| key_after(k));
            a.into_iter().chain(b).max()
        } else {
            let a = ranges
                .first()
                .map(|(b, _)| core::cmp::max(b.clone(), Bytes::copy_from_slice(begin)));
            let b = stamped.next().cloned();
            a.into_iter().chain(b).min()
        }
    }

    /// Does `[begin, end)` hold any write at all?
    pub(crate) fn touches(&self, begin: &[u8], end: &[u8]) -> bool {
        self.cleared.intersects(begin, end)
            || self
                .points
                .range::<[u8], _>((
                    core::ops::Bound::Included(begin),
                    core::ops::Bound::Excluded(end),
                ))
                .next()
                .is_some()
    }

    /// Is all of `[begin, end)` cleared and never written since (so storage need not be read)?
    pub(crate) fn fully_cleared(&self, begin: &[u8], end: &[u8]) -> bool {
        self.cleared.covers(begin, end)
    }

    /// Merges storage rows of `[begin, end)` (ascending) with the writes there, ascending.
    pub(crate) fn merge(&self, begin: &[u8], end: &[u8], storage: &[KeyValue]) -> Vec<KeyValue> {
        let mut out = Vec::with_capacity(storage.len());
        let mut writes = self
            .points
            .range::<[u8], _>((
                core::ops::Bound::Included(begin),
                core::ops::Bound::Excluded(end),
            ))
            .peekable();
        let mut rows = storage.iter().peekable();
        loop {
            let take_write = match (writes.peek(), rows.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((wk, _)), Some(r)) => wk.as_ref() <= r.key.as_ref(),
            };
            if take_write {
                let (k, p) = writes.next().expect("peeked");
                let stored = match rows.peek() {
                    Some(r) if r.key == *k => {
                        let v = r.value.clone();
                        rows.next();
                        Some(v)
                    }
                    _ => None,
                };
                let value = match p {
                    Point::Known(v) => v.clone(),
                    Point::Ops(ops) => {
                        let base = if self.cleared.contains(k) {
                            None
                        } else {
                            stored
                        };
                        apply_ops(base, ops)
                    }
                    // Reads of these are refused before merging; show nothing.
                    Point::VersionstampedValue(..) => None,
                };
                if let Some(value) = value {
                    out.push(KeyValue {
                        key: k.clone(),
                        value,
                    });
                }
            } else {
                let r = rows.next().expect("peeked");
                if !self.cleared.contains(&r.key) {
                    out.push(r.clone());
                }
            }
        }
        out
    }

    /// The parts of `[begin, end)` the writes do not decide: reading them needs a read
    /// conflict range (`updateConflictMap`).
    pub(crate) fn undecided(&self, begin: &[u8], end: &[u8]) -> Vec<(Bytes, Bytes)> {
        self.uncovered(begin, end, false)
    }

    /// The parts of `[begin, end)` the transaction never wrote (RYW's `UNMODIFIED_RANGE`):
    /// an explicit read conflict range covers only these (`updateConflictMap`).
    pub(crate) fn unmodified(&self, begin: &[u8], end: &[u8]) -> Vec<(Bytes, Bytes)> {
        self.uncovered(begin, end, true)
    }

    /// `[begin, end)` less the cleared ranges and the written keys: every written key with
    /// `all_writes`, else only those whose value the writes decide.
    fn uncovered(&self, begin: &[u8], end: &[u8], all_writes: bool) -> Vec<(Bytes, Bytes)> {
        let mut out: Vec<(Bytes, Bytes)> = Vec::new();
        let mut cur = Bytes::copy_from_slice(begin);
        let push = |out: &mut Vec<(Bytes, Bytes)>, b: Bytes, e: Bytes| {
            if b < e {
                match out.last_mut() {
                    Some(last) if last.1 == b => last.1 = e,
                    _ => out.push((b, e)),
                }
            }
        };
        // Walk cleared ranges and independent points in key order.
        let mut decided: Vec<(Bytes, Bytes)> = self.cleared.overlapping(begin, end);
        for (k, p) in self.points.range::<[u8], _>((
            core::ops::Bound::Included(begin),
            core::ops::Bound::Excluded(end),
        )) {
            if all_writes || matches!(p, Point::Known(_)) {
                decided.push((k.clone(), key_after(k)));
            }
        }
        if all_writes {
            for (k, _) in &self.versionstamped_keys {
                if begin <= k.as_ref() && k.as_ref() < end {
                    decided.push((k.clone(), key_after(k)));
                }
            }
        }
        decided.sort();
        for (b, e) in decided {
            if b > cur {
                push(&mut out, cur.clone(), b.clone());
            }
            if e > cur {
                cur = e;
            }
        }
        if cur.as_ref() < end {
            push(&mut out, cur, Bytes::copy_from_slice(end));
        }
        out
    }

    /// The mutations to commit, in FDB's order; `stamp` fills versionstamped-key placeholders
    /// with the read version as libfdb_c does (zeros when there is none).
    pub(crate) fn mutations(&self) -> Vec<MutationRef> {
        let mut out = Vec::new();
        // A key written after a clear is its own segment in FDB's write map, so the clear is
        // sent in pieces around it (the snapshot_clear_range capture).
        for r in self.cleared.ranges() {
            let mut cur = r.begin.clone();
            for (k, _) in self.points.range::<[u8], _>((
                core::ops::Bound::Included(r.begin.as_ref()),
                core::ops::Bound::Excluded(r.end.as_ref()),
            )) {
                if cur < *k {
                    out.push(MutationRef::new(mt::CLEAR_RANGE, cur, k.clone()));
                }
                cur = key_after(k);
            }
            if cur < r.end {
                out.push(MutationRef::new(mt::CLEAR_RANGE, cur, r.end));
            }
        }
        // Versionstamped keys sit in FDB's write map at their placeholder key; interleave them
        // in key order with the other points.
        let mut vs: Vec<&(Bytes, Bytes)> = self.versionstamped_keys.iter().collect();
        vs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut vs = vs.into_iter().peekable();
        for (k, p) in &self.points {
            while let Some((vk, vv)) = vs.next_if(|(vk, _)| vk < k) {
                out.push(MutationRef::new(
                    mt::SET_VERSIONSTAMPED_KEY,
                    vk.clone(),
                    vv.clone(),
                ));
            }
            match p {
                Point::Known(Some(v)) => {
                    out.push(MutationRef::new(mt::SET_VALUE, k.clone(), v.clone()))
                }
                Point::Known(None) => {
                    out.push(MutationRef::new(mt::CLEAR_RANGE, k.clone(), key_after(k)));
                }
                Point::Ops(ops) => {
                    for (kind, operand) in ops {
                        out.push(MutationRef::new(*kind, k.clone(), operand.clone()));
                    }
                }
                Point::VersionstampedValue(param, ops) => {
                    out.push(MutationRef::new(
                        mt::SET_VERSIONSTAMPED_VALUE,
                        k.clone(),
                        param.clone(),
                    ));
                    for (kind, operand) in ops {
                        out.push(MutationRef::new(*kind, k.clone(), operand.clone()));
                    }
                }
            }
        }
        for (vk, vv) in vs {
            out.push(MutationRef::new(
                mt::SET_VERSIONSTAMPED_KEY,
                vk.clone(),
                vv.clone(),
            ));
        }
        out
    }

    /// The bytes NativeAPI's `getSize` counts for the mutations [`WriteMap::mutations`]
    /// sends (for `size_limit`): each mutation's parameters plus `sizeof(MutationRef)`, 44
    /// bytes in libfdb_c 7.3.77 (measured with `size_limit`). Built from the mutations
    /// themselves, so a clear split around keys written inside it counts every piece.
    ///
    /// Counted without building them (it runs at every commit): the same walk as
    /// [`WriteMap::mutations`], lengths only.
    pub(crate) fn approximate_size(&self) -> usize {
        const PER_MUTATION: usize = 44;
        let mut total = 0;
        let mut add = |a: usize, b: usize| total += a + b + PER_MUTATION;
        for r in self.cleared.ranges() {
            // `cur` is `r.begin`, or `key_after(k)` (k with a zero byte appended).
            let (mut cur, mut after): (&[u8], bool) = (&r.begin, false);
            let lt = |cur: &[u8], after: bool, k: &[u8]| {
                cur.iter().chain(after.then_some(&0u8)).lt(k.iter())
            };
            for (k, _) in self.points.range::<[u8], _>((
                core::ops::Bound::Included(r.begin.as_ref()),
                core::ops::Bound::Excluded(r.end.as_ref()),
            )) {
                if lt(cur, after, k) {
                    add(cur.len() + usize::from(after), k.len());
                }
                (cur, after) = (k, true);
            }
            if lt(cur, after, &r.end) {
                add(cur.len() + usize::from(after), r.end.len());
            }
        }
        for (vk, vv) in &self.versionstamped_keys {
            add(vk.len(), vv.len());
        }
        for (k, p) in &self.points {
            match p {
                Point::Known(Some(v)) => add(k.len(), v.len()),
                Point::Known(None) => add(k.len(), k.len() + 1),
                Point::Ops(ops) => ops.iter().for_each(|(_, o)| add(k.len(), o.len())),
                Point::VersionstampedValue(param, ops) => {
                    add(k.len(), param.len());
                    ops.iter().for_each(|(_, o)| add(k.len(), o.len()));
                }
            }
        }
        total
    }
}

/// Applies atomic ops in order to a stored value.
pub(crate) fn apply_ops(base: Option<Bytes>, ops: &[(u8, Bytes)]) -> Option<Bytes> {
    let mut v: Option<Vec<u8>> = base.map(|b| b.to_vec());
    for (kind, operand) in ops {
        v = atomic::apply(*kind, v.as_deref(), operand);
    }
    v.map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// Range rows enter the snapshot cache alike whether merged in bulk (at least an eighth
    /// of what the cache holds) or one by one; a later read's value wins.
    #[test]
    fn snapshot_cache_takes_range_rows_in_bulk_or_one_by_one() {
        let kv = |k: &'static [u8], v: &'static [u8]| KeyValue {
            key: b(k),
            value: b(v),
        };
        let mut c = SnapshotCache::default();
        let first: Vec<KeyValue> = (0..20u8)
            .map(|i| KeyValue {
                key: Bytes::from(alloc::vec![b'a', i]),
                value: b(b"x"),
            })
            .chain([kv(b"a", b"1"), kv(b"b", b"2"), kv(b"c", b"3")])
            .collect();
        let mut first = first;
        first.sort_by(|x, y| x.key.cmp(&y.key));
        c.insert_range(b"a", b"d", &first);
        // Under an eighth of the cache: one by one; more: in bulk, overwriting `c`.
        c.insert_range(b"b", b"b\x00", &[kv(b"b", b"22")]);
        let many = [
            kv(b"c", b"33"),
            kv(b"e", b"5"),
            kv(b"f", b"6"),
            kv(b"g", b"7"),
        ];
        c.insert_range(b"c", b"h", &many);
        assert_eq!(c.get(b"a"), Some(Some(b(b"1"))));
        assert_eq!(c.get(b"b"), Some(Some(b(b"22"))));
        assert_eq!(c.get(b"c"), Some(Some(b(b"33"))));
        assert_eq!(c.get(b"d"), Some(None), "read, and absent");
        assert_eq!(c.get(b"h"), None, "never read");
        let keys: Vec<Bytes> = c.rows_in(b"a", b"z").into_iter().map(|kv| kv.key).collect();
        assert_eq!(keys.len(), 26);
        assert_eq!(keys[21..], [b(b"b"), b(b"c"), b(b"e"), b(b"f"), b(b"g")]);
    }

    /// The size counted without building the mutations is the size of the mutations.
    #[test]
    fn approximate_size_counts_what_mutations_sends() {
        let size = |w: &WriteMap| -> usize {
            w.mutations()
                .iter()
                .map(|m| m.param1.len() + m.param2.len() + 44)
                .sum()
        };
        let mut w = WriteMap::new();
        assert_eq!(w.approximate_size(), 0);
        w.set(b(b"a"), b(b"1"));
        w.clear_range(b"b", b"f");
        w.set(b(b"c"), b(b"22"));
        w.set(b(b"c\x00"), b(b"333"));
        w.set(b(b"e"), b(b""));
        w.clear_range(b"e\x00", b"e\x00\x00");
        w.atomic_op(b(b"g"), mt::ADD_VALUE, b(b"\x01\x00"));
        w.atomic_op(b(b"g"), mt::MAX, b(b"\x05"));
        w.set_versionstamped_value(b(b"h"), b(b"0123456789\x00\x00\x00\x00"));
        w.clear_range(b"x", b"z");
        w.set(b(b"x"), b(b"first key of a clear"));
        assert!(w.mutations().len() >= 10);
        assert_eq!(w.approximate_size(), size(&w));
        let mut w = WriteMap::new();
        w.clear_range(b"k", b"k\x00");
        w.set(b(b"k"), b(b"v"));
        assert_eq!(w.approximate_size(), size(&w));
    }

    fn b(s: &'static [u8]) -> Bytes {
        Bytes::from_static(s)
    }
    fn kv(k: &'static [u8], v: &'static [u8]) -> KeyValue {
        KeyValue {
            key: b(k),
            value: b(v),
        }
    }

    #[test]
    fn range_set_coalesces() {
        let mut s = RangeSet::new();
        s.insert(b"c", b"e");
        s.insert(b"a", b"b");
        s.insert(b"b", b"c");
        assert_eq!(s.len(), 1);
        s.insert(b"x", b"z");
        assert!(s.contains(b"d"));
        assert!(!s.contains(b"e"));
        assert!(s.intersects(b"y", b"zz"));
        assert!(!s.intersects(b"e", b"x"));
        assert!(s.covers(b"a", b"e"));
        assert!(!s.covers(b"a", b"f"));
        assert_eq!(
            s.overlapping(b"d", b"y"),
            vec![(b(b"d"), b(b"e")), (b(b"x"), b(b"y"))]
        );
    }

    #[test]
    fn merge_overlays_sets_clears_and_ops() {
        let mut w = WriteMap::new();
        w.clear_range(b"b", b"d");
        w.set(b(b"c"), b(b"new"));
        w.atomic_op(b(b"e"), mt::ADD_VALUE, b(b"\x01"));
        w.set(b(b"a0"), b(b"ins"));
        let storage = [
            kv(b"a", b"1"),
            kv(b"b", b"2"),
            kv(b"c", b"3"),
            kv(b"e", b"\x05"),
        ];
        let merged = w.merge(b"a", b"z", &storage);
        assert_eq!(
            merged,
            vec![
                kv(b"a", b"1"),
                kv(b"a0", b"ins"),
                kv(b"c", b"new"),
                kv(b"e", b"\x06")
            ]
        );
        assert_eq!(w.lookup(b"b"), Lookup::Known(None));
        assert_eq!(w.lookup(b"x"), Lookup::Unmodified);
        assert!(matches!(w.lookup(b"e"), Lookup::Dependent(_)));
    }

    #[test]
    fn ops_over_known_values_coalesce() {
        let mut w = WriteMap::new();
        w.set(b(b"k"), b(b"\x01"));
        w.atomic_op(b(b"k"), mt::ADD_VALUE, b(b"\x02"));
        assert_eq!(w.lookup(b"k"), Lookup::Known(Some(b(b"\x03"))));
        w.clear_range(b"q", b"r");
        w.atomic_op(b(b"q1"), mt::ADD_VALUE, b(b"\x02"));
        assert_eq!(w.lookup(b"q1"), Lookup::Known(Some(b(b"\x02"))));
    }

    #[test]
    fn mutations_clears_first_then_key_order() {
        let mut w = WriteMap::new();
        w.set(b(b"cap/mut/set"), b(b"v"));
        w.clear_range(b"cap/mut/clear", b"cap/mut/clear\0");
        w.clear_range(b"cap/mut/cr/", b"cap/mut/cr0");
        w.atomic_op(b(b"cap/mut/counter"), mt::ADD_VALUE, b(b"\x01"));
        let kinds: Vec<(u8, Bytes)> = w
            .mutations()
            .into_iter()
            .map(|m| (m.kind, m.param1))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (mt::CLEAR_RANGE, b(b"cap/mut/clear")),
                (mt::CLEAR_RANGE, b(b"cap/mut/cr/")),
                (mt::ADD_VALUE, b(b"cap/mut/counter")),
                (mt::SET_VALUE, b(b"cap/mut/set")),
            ]
        );
    }

    #[test]
    fn undecided_excludes_known_parts() {
        let mut w = WriteMap::new();
        w.set(b(b"b"), b(b"1"));
        w.clear_range(b"d", b"f");
        w.atomic_op(b(b"g"), mt::ADD_VALUE, b(b"\x01"));
        let u = w.undecided(b"a", b"z");
        assert_eq!(
            u,
            vec![(b(b"a"), b(b"b")), (b(b"b\0"), b(b"d")), (b(b"f"), b(b"z"))]
        );
    }
}
