//! The forward walk (`getRangeValue`): rows from the begin selector on, and the storage read
//! for the first unknown stretch.

use super::walk::{Backward, Forward};
use super::{fge, is_fge, Flow, NativeRead, RangeRead};
use crate::ryw::ext_key::cmp_bytes;
use crate::ryw::iterator::{RywIter, Unreadable};

impl RangeRead {
    /// `getRangeValue`'s loop.
    pub(super) fn walk(
        &mut self,
        mut it: RywIter<'_>,
        it_end: RywIter<'_>,
    ) -> Result<Flow, Unreadable> {
        loop {
            let (begin, end) = (&self.begin, &self.end);
            // Keys compared with `cmp_bytes`, not `memcmp` (see there).
            let begin_ge_end = cmp_bytes(&begin.key, &end.key).is_ge();
            if self.rows.is_empty()
                && self.actual_begin_offset >= self.actual_end_offset
                && begin_ge_end
            {
                return Ok(Flow::Empty(false, false));
            }
            if end.offset <= 1 && end.key.is_empty() {
                return Ok(Flow::Empty(self.read_to_begin, self.read_through_end));
            }
            if (begin.offset >= end.offset && begin_ge_end)
                || (begin.offset >= 1 && cmp_bytes(&begin.key, &self.max_key).is_ge())
            {
                if is_fge(end) || self.rows.is_empty() {
                    return Ok(Flow::Finish);
                }
                return Ok(Flow::Key(end.clone(), false));
            }
            if it.is_known() && it.begin_key() > it_end.begin_key() {
                if is_fge(end) {
                    return Ok(Flow::Finish);
                }
                return Ok(Flow::Empty(self.read_to_begin, self.read_through_end));
            }
            if self.limits.is_reached() && self.items_past >= 1 - end.offset {
                return Ok(Flow::Finish);
            }
            if it.same(&it_end)
                && (it.is_known()
                    || (begin.offset > 0
                        && is_fge(end)
                        && it.begin_key().cmp_key(&end.key).is_eq()))
            {
                return Ok(Flow::Finish);
            }
            if it.is_unknown_range()? {
                if self.limits.has_byte_limit()
                    && self.limits.has_satisfied_min_rows()
                    && !self.rows.is_empty()
                    && self.items_past >= 1 - end.offset
                {
                    self.more = true;
                    return Ok(Flow::Finish);
                }
                return Ok(Flow::Native(self.read_forward(&it, &it_end)));
            } else if it.is_kv()? {
                let Some(first) = it.kv()? else {
                    it.advance();
                    continue;
                };
                let start = it.clone();
                let limit = if is_fge(&self.end) {
                    self.end.key.clone()
                } else {
                    self.max_key.clone()
                };
                it.skip_contiguous(&limit)?;
                if it.row_from_cache() {
                    let run = it.cached_rows_from(&start);
                    self.take(run, false);
                } else {
                    self.take(core::slice::from_ref(&first), false);
                }
                it.advance();
            } else {
                it.advance();
            }
        }
    }

    /// The storage read for the unknown stretch at `it` (forward).
    fn read_forward(&mut self, it: &RywIter<'_>, it_end: &RywIter<'_>) -> NativeRead {
        let mut uc_end = it.clone();
        let mut single = 0;
        let clear_limit = self.clear_limit();
        if it.begin_key() < it_end.begin_key() {
            single =
                Forward::skip_uncached(&mut uc_end, it_end, clear_limit + 100).min(clear_limit);
        }
        let end = &self.end;
        let read_end = if !uc_end.same(it_end) {
            if end.offset < 1 {
                self.additional_rows += 1 - end.offset as i64;
            }
            fge(uc_end.end_key().to_bytes())
        } else if end.offset < 1 {
            self.additional_rows += 1 - end.offset as i64;
            fge(end.key.clone())
        } else {
            let mut r = end.clone();
            if end.offset > 1 {
                single +=
                    Forward::count_uncached(uc_end.clone(), &self.max_key, clear_limit - single);
                r.offset += single;
            }
            r
        };
        self.additional_rows += single as i64;
        let read_begin = if is_fge(&self.begin) {
            let k = if it.begin_key().cmp_key(&self.begin.key).is_gt() {
                it.begin_key().to_bytes()
            } else {
                self.begin.key.clone()
            };
            self.begin = fge(k);
            self.begin.clone()
        } else if self.begin.offset > 1 {
            self.additional_rows += self.begin.offset as i64 - 1;
            fge(self.begin.key.clone())
        } else {
            let mut r = self.begin.clone();
            let s = Backward::count_uncached(it.clone(), &self.max_key, clear_limit);
            r.offset -= s;
            self.additional_rows += s as i64;
            r
        };
        let mut read_end = read_end;
        if read_end.key < read_begin.key {
            read_end.key = read_begin.key.clone();
        }
        let offset = 2 - read_begin.offset;
        self.native_read(read_begin, read_end, offset, false)
    }
}
