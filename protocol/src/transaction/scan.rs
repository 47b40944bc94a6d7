//! The state of a range read and of a key selector's resolution: the scan over resolved keys,
//! its limits (rows, bytes, the streaming mode's batch sizes), and the bindings' iteration of
//! a whole range batch by batch ([`RangeCursor`]).

use alloc::vec::Vec;
use bytes::Bytes;

use crate::event::RangeResult;
use crate::messages::types::{KeySelector, KeyValue};
use crate::ryw::key_after;

/// `REPLY_BYTE_LIMIT`: the most a storage server returns per range request.
pub const REPLY_BYTE_LIMIT: i32 = 80_000;
/// Byte limits of the `iterator` streaming mode, by iteration (`fdb_c.cpp`).
pub(super) const ITERATION_PROGRESSION: [i32; 10] = [
    4096, 6144, 9216, 13824, 20736, 31104, 46656, 69984, 80000, 120000,
];

/// How eagerly a range read fetches (`FDBStreamingMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StreamingMode {
    /// The caller wants the whole range. libfdb_c still fetches it in `Serial`-sized
    /// batches (`fdb_c.cpp` maps `WANT_ALL` to `SERIAL`), so no single reply is unbounded.
    WantAll,
    /// Growing batches as the caller iterates (the default).
    #[default]
    Iterator,
    /// Exactly `limit` rows in one batch.
    Exact,
    Small,
    Medium,
    Large,
    Serial,
}

impl StreamingMode {
    /// The byte limit of one batch (`None`: unlimited).
    pub fn byte_limit(self, iteration: u32) -> Option<usize> {
        match self {
            StreamingMode::Exact => None,
            StreamingMode::Iterator => {
                let i = (iteration.max(1) as usize).min(ITERATION_PROGRESSION.len());
                Some(ITERATION_PROGRESSION[i - 1] as usize)
            }
            StreamingMode::Small => Some(256),
            StreamingMode::Medium => Some(1000),
            StreamingMode::Large => Some(4096),
            StreamingMode::Serial | StreamingMode::WantAll => Some(80000),
        }
    }
}

/// Limits of one `get_range` call (`fdb_transaction_get_range`'s arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeOptions {
    /// Most rows; 0 = no limit.
    pub limit: usize,
    /// Most bytes; 0 = no limit.
    pub target_bytes: usize,
    pub mode: StreamingMode,
    /// 1-based call count, for [`StreamingMode::Iterator`].
    pub iteration: u32,
    pub reverse: bool,
}

impl Default for RangeOptions {
    fn default() -> Self {
        RangeOptions {
            limit: 0,
            target_bytes: 0,
            mode: StreamingMode::Iterator,
            iteration: 1,
            reverse: false,
        }
    }
}

/// A whole range read done batch by batch, as the bindings' range iterators call
/// `fdb_transaction_get_range`: each batch continues after the last row (before it when
/// reading in reverse), the `iterator` mode's iteration count grows, and `limit` bounds the
/// total. A driver loops on [`RangeCursor::next_request`] / [`RangeCursor::feed`].
#[derive(Clone, Debug)]
pub struct RangeCursor {
    pub(super) begin: KeySelector,
    pub(super) end: KeySelector,
    pub(super) opts: RangeOptions,
    /// The caller's limit on all rows (0: none).
    pub(super) total: usize,
    pub(super) rows: Vec<KeyValue>,
    /// Rows handed out so far (kept or streamed).
    pub(super) taken: usize,
    pub(super) done: bool,
}

impl RangeCursor {
    pub fn new(begin: KeySelector, end: KeySelector, mut opts: RangeOptions) -> Self {
        opts.iteration = opts.iteration.max(1);
        RangeCursor {
            begin,
            end,
            total: opts.limit,
            opts,
            rows: Vec::new(),
            taken: 0,
            done: false,
        }
    }

    /// The arguments of the next `get_range` batch, or `None` when the read is complete.
    pub fn next_request(&self) -> Option<(KeySelector, KeySelector, RangeOptions)> {
        (!self.done).then(|| (self.begin.clone(), self.end.clone(), self.opts))
    }

    /// Takes one batch's result.
    pub fn feed(&mut self, batch: RangeResult) {
        let rows = self.advance(batch);
        self.rows.extend(rows);
    }

    /// Takes one batch's result and hands its rows back (cut to the caller's limit) instead
    /// of keeping them, for a reader that streams the range.
    pub fn advance(&mut self, mut batch: RangeResult) -> Vec<KeyValue> {
        let last = batch.rows.last().map(|kv| kv.key.clone());
        self.taken += batch.rows.len();
        if self.total > 0 && self.taken >= self.total {
            let over = self.taken - self.total;
            batch.rows.truncate(batch.rows.len() - over);
            self.taken = self.total;
            self.done = true;
            return batch.rows;
        }
        let Some(last) = last.filter(|_| batch.more) else {
            self.done = true;
            return batch.rows;
        };
        if self.opts.reverse {
            self.end = KeySelector::first_greater_or_equal(last);
        } else {
            self.begin = KeySelector::first_greater_than(last);
        }
        if self.total > 0 {
            self.opts.limit = self.total - self.taken;
        }
        self.opts.iteration += 1;
        batch.rows
    }

    /// Whether the read is complete.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Every row read.
    pub fn into_rows(self) -> Vec<KeyValue> {
        self.rows
    }
}

/// A range scan over resolved keys `[lo, hi)`, merged with the transaction's writes.
#[derive(Debug)]
pub(super) struct Scan {
    pub(super) lo: Bytes,
    pub(super) hi: Bytes,
    pub(super) reverse: bool,
    /// Rows still wanted (`None`: no limit).
    pub(super) rows_left: Option<usize>,
    /// Bytes still wanted (`None`: no limit).
    pub(super) bytes_left: Option<usize>,
    /// Forward: next key to read; reverse: end of what is left.
    pub(super) cursor: Bytes,
    pub(super) out: Vec<KeyValue>,
    pub(super) more: bool,
    /// The chunk `[a, b)` of the request in flight.
    pub(super) chunk: Option<(Bytes, Bytes)>,
    /// The read reached this far (for conflict ranges).
    pub(super) read_to: Bytes,
    /// Set once the scan is over.
    pub(super) done: bool,
    /// With a byte limit, a batch ends at the first reply that brought rows
    /// (`GetRangeLimits::hasSatisfiedMinRows`).
    pub(super) byte_limited: bool,
    /// The scan was cut short where the transaction's writes become unreadable: reaching
    /// that end with rows still wanted is `accessed_unreadable`.
    pub(super) cut_at_unreadable: bool,
}

impl Scan {
    pub(super) fn new(
        lo: Bytes,
        hi: Bytes,
        reverse: bool,
        rows: Option<usize>,
        bytes: Option<usize>,
    ) -> Scan {
        let cursor = if reverse { hi.clone() } else { lo.clone() };
        Scan {
            read_to: cursor.clone(),
            lo,
            hi,
            reverse,
            rows_left: rows,
            bytes_left: bytes,
            cursor,
            out: Vec::new(),
            more: false,
            chunk: None,
            done: false,
            byte_limited: bytes.is_some(),
            cut_at_unreadable: false,
        }
    }

    pub(super) fn limits_reached(&self) -> bool {
        self.rows_left == Some(0) || (self.bytes_left == Some(0) && !self.out.is_empty())
    }

    /// Takes merged rows of chunk `[a, b)` (in scan order), stopping at the limits. Only rows
    /// that came with a storage reply can end a byte-limited batch early.
    pub(super) fn take(&mut self, rows: Vec<KeyValue>, a: &Bytes, b: &Bytes, from_storage: bool) {
        self.out.reserve(rows.len());
        let mut took = false;
        for kv in rows {
            if self.limits_reached() {
                self.more = true;
                break;
            }
            if let Some(r) = &mut self.rows_left {
                *r -= 1;
            }
            if let Some(bl) = &mut self.bytes_left {
                // `GetRangeLimits::decrement`: key + value + 8 per row.
                *bl = bl.saturating_sub(kv.key.len() + kv.value.len() + 8);
            }
            self.out.push(kv);
            took = true;
        }
        // Read up to the last row taken (its key, or just past it going forward): made once,
        // not per row.
        if let Some(last) = self.out.last().filter(|_| took) {
            self.read_to = if self.reverse {
                last.key.clone()
            } else {
                key_after(&last.key)
            };
        }
        if !self.more {
            self.read_to = if self.reverse { a.clone() } else { b.clone() };
            self.cursor = self.read_to.clone();
            if self.limits_reached() && !self.at_end() {
                self.more = true;
            }
        }
        if self.byte_limited && !self.out.is_empty() && from_storage {
            if !self.more && !self.at_end() {
                self.more = true;
            }
            self.done = true;
        }
        if self.more || self.at_end() {
            self.done = true;
        }
    }

    pub(super) fn at_end(&self) -> bool {
        if self.reverse {
            self.cursor <= self.lo
        } else {
            self.cursor >= self.hi
        }
    }

    /// The read conflict range this scan covered.
    pub(super) fn conflict(&self) -> (Bytes, Bytes) {
        if self.reverse {
            (self.read_to.clone(), self.hi.clone())
        } else {
            (self.lo.clone(), self.read_to.clone())
        }
    }
}

/// What a `get_key` resolves: a selector against the merged view.
#[derive(Debug)]
pub(super) struct KeyResolve {
    pub(super) sel: KeySelector,
    pub(super) scan: Scan,
}

/// `KeySelectorRef::removeOrEqual`: `or_equal` folded into the key.
pub(super) fn normalize(sel: &KeySelector) -> (Bytes, i32) {
    if sel.or_equal {
        (key_after(&sel.key), sel.offset)
    } else {
        (sel.key.clone(), sel.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    pub(super) fn kv(k: &'static [u8]) -> KeyValue {
        KeyValue {
            key: Bytes::from_static(k),
            value: Bytes::new(),
        }
    }

    #[test]
    pub(super) fn range_cursor_continues_after_the_last_row_and_counts_the_limit() {
        let begin = KeySelector::first_greater_or_equal(Bytes::from_static(b"a"));
        let end = KeySelector::first_greater_or_equal(Bytes::from_static(b"z"));
        let opts = RangeOptions {
            limit: 3,
            iteration: 0,
            ..RangeOptions::default()
        };
        let mut c = RangeCursor::new(begin.clone(), end.clone(), opts);
        let (b, e, o) = c.next_request().unwrap();
        assert_eq!((b, e, o.limit, o.iteration), (begin, end.clone(), 3, 1));
        c.feed(RangeResult {
            rows: vec![kv(b"b"), kv(b"c")],
            more: true,
        });
        let (b, e, o) = c.next_request().unwrap();
        assert_eq!(b, KeySelector::first_greater_than(Bytes::from_static(b"c")));
        assert_eq!((e, o.limit, o.iteration), (end, 1, 2));
        c.feed(RangeResult {
            rows: vec![kv(b"d"), kv(b"e")],
            more: true,
        });
        assert!(c.next_request().is_none(), "the limit is reached");
        assert_eq!(c.into_rows(), vec![kv(b"b"), kv(b"c"), kv(b"d")]);
    }

    #[test]
    pub(super) fn range_cursor_in_reverse_moves_the_end_and_stops_without_more() {
        let begin = KeySelector::first_greater_or_equal(Bytes::from_static(b"a"));
        let end = KeySelector::first_greater_or_equal(Bytes::from_static(b"z"));
        let opts = RangeOptions {
            reverse: true,
            ..RangeOptions::default()
        };
        let mut c = RangeCursor::new(begin.clone(), end, opts);
        c.feed(RangeResult {
            rows: vec![kv(b"y"), kv(b"x")],
            more: true,
        });
        let (b, e, o) = c.next_request().unwrap();
        assert_eq!(b, begin);
        assert_eq!(
            e,
            KeySelector::first_greater_or_equal(Bytes::from_static(b"x"))
        );
        assert_eq!((o.limit, o.iteration), (0, 2));
        c.feed(RangeResult {
            rows: vec![kv(b"b")],
            more: false,
        });
        assert!(c.next_request().is_none());
        assert_eq!(c.into_rows(), vec![kv(b"y"), kv(b"x"), kv(b"b")]);
    }
}
