//! Selector resolution over what the transaction knows (`resolveKeySelectorFromCache`) and
//! RYW's `read(GetKeyReq)`, a selector resolved as a one-row range read.

use bytes::Bytes;

use super::{fge, remove_or_equal, NativeResult, RangeLimits, RangeRead, Step};
use crate::keys::KeySelector;
use crate::ryw::ext_key::ExtKey;
use crate::ryw::iterator::{RywIter, Unreadable};
use crate::ryw::snapshot_cache::SnapshotCache;
use crate::ryw::write_map::WriteMap;

/// `resolveKeySelectorFromCache`: moves `sel` over the known segments (counting rows) until
/// it is resolved or reaches what is unknown; the iterator returned is at that segment.
pub(super) fn resolve_from_cache<'a>(
    sel: &mut KeySelector,
    cache: &'a SnapshotCache,
    writes: &'a WriteMap,
    max_key: &Bytes,
    read_to_begin: &mut bool,
    read_through_end: &mut bool,
    actual_offset: &mut i32,
) -> RywIter<'a> {
    remove_or_equal(sel);
    let exhausted = sel.offset == 1;
    let mut it = RywIter::new(cache, writes, &sel.key);
    if sel.offset <= 0 && it.begin_key().cmp_key(&sel.key).is_eq() && !sel.key.is_empty() {
        it.retreat();
    }
    let mut moved: Option<ExtKey<'_>> = None;
    while sel.offset > 1 && it.is_known() && it.end_key().cmp_key(max_key).is_lt() {
        if it.is_kv() == Ok(true) {
            sel.offset -= 1;
        }
        it.advance();
        moved = Some(it.begin_key());
    }
    while sel.offset < 1 && it.is_known() && !it.begin_key().cmp_key(b"").is_eq() {
        if it.is_kv() == Ok(true) {
            sel.offset += 1;
            if sel.offset == 1 {
                moved = Some(it.begin_key());
                break;
            }
        }
        it.retreat();
        moved = Some(it.end_key());
    }
    if !exhausted {
        *actual_offset = sel.offset;
    }
    if it.is_known() && sel.offset < 1 {
        *read_to_begin = true;
        *sel = fge(Bytes::new());
        return it;
    }
    if it.is_known() && sel.offset > 1 {
        *read_through_end = true;
        *sel = fge(max_key.clone());
        return it;
    }
    while !it.is_unreadable()
        && it.is_empty_range() == Ok(true)
        && it.end_key().cmp_key(max_key).is_lt()
    {
        it.advance();
        moved = Some(it.begin_key());
    }
    if let Some(k) = moved {
        sel.key = k.to_bytes();
    }
    it
}

/// RYW's `read(GetKeyReq)`: a selector resolved as a one-row range read.
#[derive(Debug)]
pub(crate) struct KeyRead {
    forward: bool,
    max_key: Bytes,
    inner: RangeRead,
}

impl KeyRead {
    pub(crate) fn new(mut sel: KeySelector, max_key: Bytes) -> Self {
        let forward = sel.offset > 0;
        let one = RangeLimits::new(1, RangeLimits::UNLIMITED);
        let inner = if forward {
            RangeRead::new(sel, fge(max_key.clone()), one, false, max_key.clone())
        } else {
            sel.offset += 1;
            RangeRead::new(fge(Bytes::new()), sel, one, true, max_key.clone())
        };
        KeyRead {
            forward,
            max_key,
            inner,
        }
    }

    pub(crate) fn step(
        &mut self,
        cache: &SnapshotCache,
        writes: &WriteMap,
    ) -> Result<Step<Bytes>, Unreadable> {
        let r = match self.inner.step(cache, writes)? {
            Step::Native(n) => return Ok(Step::Native(n)),
            Step::Done(r) => r,
        };
        let key = if self.forward {
            if r.read_to_begin {
                Bytes::new()
            } else if r.read_through_end || r.rows.is_empty() {
                self.max_key.clone()
            } else {
                r.rows[0].key.clone()
            }
        } else if r.read_through_end {
            self.max_key.clone()
        } else if r.read_to_begin || r.rows.is_empty() {
            Bytes::new()
        } else {
            r.rows[0].key.clone()
        };
        Ok(Step::Done(key))
    }

    pub(crate) fn feed(&mut self, cache: &mut SnapshotCache, result: NativeResult) {
        self.inner.feed(cache, result);
    }
}
