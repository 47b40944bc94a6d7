//! The state of a range read and of a key selector's resolution: its limits (rows, bytes, the
//! streaming mode's batch sizes), the RYW or NativeAPI read behind it (the read itself is
//! `ops/range.rs`'s `ReadOp`), and the bindings' iteration of a whole range batch by batch ([`RangeCursor`]).

use alloc::sync::Arc;
use alloc::vec::Vec;
use bytes::Bytes;

use super::ops::native::{NativeKey, NativeRange, NativeStep};
use crate::event::RangeResult;
use crate::messages::storage::MappedKeyValue;
use crate::messages::types::{KeySelector, KeyValue};
use crate::ryw::range_read::{KeyRead, NativeResult, RangeLimits, RangeRead};
use crate::ryw::WriteMap;

pub use crate::ryw::range_read::REPLY_BYTE_LIMIT;
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
    /// Batches of at most 256 bytes.
    Small,
    /// Batches of at most 1,000 bytes.
    Medium,
    /// Batches of at most 4,096 bytes.
    Large,
    /// Batches of at most 80,000 bytes, for reading a whole range in order.
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
    /// How rows are batched.
    pub mode: StreamingMode,
    /// 1-based call count, for [`StreamingMode::Iterator`].
    pub iteration: u32,
    /// Rows from the end of the range backwards.
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
    /// The batches kept, in order; joined once by [`RangeCursor::into_rows`] (growing one
    /// `Vec` batch by batch would copy every row about twice and ask for twice its size).
    pub(super) batches: Vec<Vec<KeyValue>>,
    /// Rows handed out so far (kept or streamed).
    pub(super) taken: usize,
    pub(super) done: bool,
}

impl RangeCursor {
    /// A cursor over the rows between the keys `begin` and `end` resolve to, under `opts`.
    pub fn new(begin: KeySelector, end: KeySelector, mut opts: RangeOptions) -> Self {
        opts.iteration = opts.iteration.max(1);
        RangeCursor {
            begin,
            end,
            total: opts.limit,
            opts,
            batches: Vec::new(),
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
        if !rows.is_empty() {
            self.batches.push(rows);
        }
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
    pub fn into_rows(mut self) -> Vec<KeyValue> {
        if self.batches.len() <= 1 {
            return self.batches.pop().unwrap_or_default();
        }
        let mut rows = Vec::with_capacity(self.batches.iter().map(Vec::len).sum());
        for batch in self.batches {
            rows.extend(batch);
        }
        rows
    }
}

/// A NativeAPI read serving a transaction's read.
// One per read, held in the read's state: boxing the range would cost an allocation on every
// range read to save a few dozen bytes on key reads.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum NativeOp {
    Range(NativeRange),
    Key(NativeKey),
    /// `getRange` with a mapper: the same walk, `GetMappedKeyValuesRequest`s carrying
    /// `mapper`.
    Mapped {
        range: NativeRange<MappedKeyValue>,
        mapper: Bytes,
    },
}

impl NativeOp {
    pub(super) fn step(&mut self) -> NativeStep {
        match self {
            NativeOp::Range(r) => r.step(),
            NativeOp::Key(k) => k.step(),
            NativeOp::Mapped { range, .. } => range.step(),
        }
    }

    /// Forget the request in flight before it is sent again.
    pub(super) fn retry(&mut self) {
        match self {
            NativeOp::Range(r) => r.retry(),
            NativeOp::Mapped { range, .. } => range.retry(),
            NativeOp::Key(_) => {}
        }
    }

    /// Whether a `wrong_shard_server` to a range request now means falling back to
    /// resolving the selectors (`getRangeFallback`).
    pub(super) fn falls_back(&self) -> bool {
        match self {
            NativeOp::Range(r) => r.in_range_phase(),
            NativeOp::Mapped { range, .. } => range.in_range_phase(),
            NativeOp::Key(_) => false,
        }
    }

    /// Resolve the selectors first, then read the exact range.
    pub(super) fn fall_back(&mut self) {
        match self {
            NativeOp::Range(r) => r.fall_back(),
            NativeOp::Mapped { range, .. } => range.fall_back(),
            NativeOp::Key(_) => {}
        }
    }
}

/// What a `get_key` or `get_range` reads through.
#[derive(Debug)]
pub(super) enum ReadKind {
    /// `get_key` through RYW; `sel` as the caller gave it (for the conflict range); `writes`
    /// the write map as it was when the read was issued.
    RywKey {
        sel: KeySelector,
        read: KeyRead,
        writes: Arc<WriteMap>,
    },
    /// `get_range` through RYW; the selectors with `or_equal` removed; `writes` as for
    /// `RywKey`.
    RywRange {
        begin: KeySelector,
        end: KeySelector,
        reverse: bool,
        read: RangeRead,
        writes: Arc<WriteMap>,
    },
    /// `get_key` with read-your-writes disabled: NativeAPI's `getKey`, and its answer.
    NativeKey {
        sel: KeySelector,
        result: Option<Bytes>,
    },
    /// `get_range` with read-your-writes disabled: NativeAPI's `getRange`, after resolving
    /// a reverse read's end selector when it lies ahead (`readThrough`).
    NativeRange {
        begin: KeySelector,
        end: KeySelector,
        reverse: bool,
        limits: RangeLimits,
        /// The end selector is resolved (or needs no resolving).
        end_resolved: bool,
        result: Option<NativeResult>,
    },
    /// `get_mapped_range`: RYW's `readThrough` (NativeAPI's `getRange` with the mapper, as a
    /// snapshot read), then RYW's conflict ranges for the range and every mapped key or
    /// range, refusing what the transaction wrote (`addConflictRangeAndMustUnmodified`).
    Mapped {
        begin: KeySelector,
        end: KeySelector,
        mapper: Bytes,
        reverse: bool,
        limits: RangeLimits,
        /// The end selector is resolved (or needs no resolving).
        end_resolved: bool,
        result: Option<NativeResult<MappedKeyValue>>,
    },
}

/// The `GetRangeLimits` libfdb_c builds from `fdb_transaction_get_range`'s arguments: the
/// streaming mode bounds the bytes (`validate_and_update_parameters`).
pub(super) fn range_limits(opts: &RangeOptions) -> RangeLimits {
    let rows = if opts.limit == 0 {
        RangeLimits::UNLIMITED
    } else {
        opts.limit.min(i32::MAX as usize) as i32
    };
    let target = (opts.target_bytes > 0).then(|| opts.target_bytes.min(i32::MAX as usize));
    let bytes = match (target, opts.mode.byte_limit(opts.iteration)) {
        (None, Some(m)) => m as i32,
        (None, None) => RangeLimits::UNLIMITED,
        (Some(t), Some(m)) => t.min(m) as i32,
        (Some(t), None) => t as i32,
    };
    RangeLimits::new(rows, bytes)
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
