//! The backward walk (`getRangeValueBack`): rows from the end selector down, and the storage
//! read for the first unknown stretch below.

use bytes::Bytes;

use super::walk::{Backward, Forward};
use super::{fge, is_backward, is_fge, Flow, NativeRead, RangeRead};
use crate::ryw::ext_key::cmp_bytes;
use crate::ryw::iterator::{RywIter, Unreadable};

impl RangeRead {
    /// `getRangeValueBack`'s loop.
    // Mirrors `walk` as RYW's two loops mirror each other; their checks differ in order.
    pub(super) fn walk_back(
        &mut self,
        mut it: RywIter<'_>,
        it_end: RywIter<'_>,
    ) -> Result<Flow, Unreadable> {
        loop {
            let (begin, end) = (&self.begin, &self.end);
            // Keys compared with `cmp_bytes`, not `memcmp`, as in `walk`.
            let begin_ge_end = cmp_bytes(&begin.key, &end.key).is_ge();
            if self.rows.is_empty()
                && self.actual_begin_offset >= self.actual_end_offset
                && begin_ge_end
            {
                return Ok(Flow::Empty(false, false));
            }
            if !is_backward(begin) && cmp_bytes(&begin.key, &self.max_key).is_ge() {
                return Ok(Flow::Empty(self.read_to_begin, self.read_through_end));
            }
            if (begin.offset >= end.offset && begin_ge_end)
                || (end.offset <= 1 && end.key.is_empty())
            {
                if is_fge(begin) || self.rows.is_empty() {
                    return Ok(Flow::Finish);
                }
                return Ok(Flow::Key(begin.clone(), false));
            }
            let past = self.items_past >= begin.offset - 1;
            if past && it.is_known() && it.begin_key() < it_end.begin_key() {
                if is_fge(begin) {
                    return Ok(Flow::Finish);
                }
                return Ok(Flow::Empty(self.read_to_begin, self.read_through_end));
            }
            if self.limits.is_reached() && past {
                return Ok(Flow::Finish);
            }
            if is_fge(end) && it.begin_key().cmp_key(&end.key).is_eq() {
                if past && it.same(&it_end) {
                    return Ok(Flow::Finish);
                }
                it.retreat();
            }
            if it.is_unknown_range()? {
                if self.limits.has_byte_limit() && !self.rows.is_empty() && past {
                    self.more = true;
                    return Ok(Flow::Finish);
                }
                return Ok(Flow::Native(self.read_backward(&it, &it_end)));
            }
            let last = if it.is_kv()? { it.kv()? } else { None };
            if let Some(last) = last {
                let end_it = it.clone();
                let limit = if is_fge(&self.begin) {
                    self.begin.key.clone()
                } else {
                    Bytes::new()
                };
                it.skip_contiguous_back(&limit)?;
                if it.row_from_cache() {
                    let run = end_it.cached_rows_from(&it);
                    self.take(run, true);
                } else {
                    self.take(core::slice::from_ref(&last), true);
                }
            }
            if it.same(&it_end) {
                return Ok(Flow::Finish);
            }
            it.retreat();
        }
    }

    /// The storage read for the unknown stretch at `it` (reverse).
    fn read_backward(&mut self, it: &RywIter<'_>, it_end: &RywIter<'_>) -> NativeRead {
        let mut uc_end = it.clone();
        let mut single = 0;
        let clear_limit = self.clear_limit();
        if it.begin_key() > it_end.begin_key() {
            single =
                Backward::skip_uncached(&mut uc_end, it_end, clear_limit + 100).min(clear_limit);
        }
        let begin = &self.begin;
        let read_begin = if !uc_end.same(it_end) {
            if begin.offset > 1 {
                self.additional_rows += begin.offset as i64 - 1;
            }
            fge(uc_end.begin_key().to_bytes())
        } else if begin.offset > 1 {
            self.additional_rows += begin.offset as i64 - 1;
            fge(begin.key.clone())
        } else {
            let mut r = begin.clone();
            if begin.offset < 1 {
                single +=
                    Backward::count_uncached(uc_end.clone(), &self.max_key, clear_limit - single);
                r.offset -= single;
            }
            r
        };
        self.additional_rows += single as i64;
        let read_end = if is_fge(&self.end) {
            let k = if it.end_key().cmp_key(&self.end.key).is_lt() {
                it.end_key().to_bytes()
            } else {
                self.end.key.clone()
            };
            self.end = fge(k);
            self.end.clone()
        } else if self.end.offset < 1 {
            self.additional_rows += 1 - self.end.offset as i64;
            fge(self.end.key.clone())
        } else {
            let mut r = self.end.clone();
            let s = Forward::count_uncached(it.clone(), &self.max_key, clear_limit);
            r.offset += s;
            self.additional_rows += s as i64;
            r
        };
        let mut read_begin = read_begin;
        if cmp_bytes(&read_begin.key, &read_end.key).is_gt() {
            read_begin.key = read_end.key.clone();
        }
        let offset = read_end.offset;
        self.native_read(read_begin, read_end, offset, true)
    }
}
