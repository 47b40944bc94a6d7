//! Range reads as streams: one `fdb_transaction_get_range` batch at a time, the next one
//! asked for only when the application takes the previous one, so a reader that stops early
//! never pays for the rest of the range (and, in the `iterator` mode, batches grow as it goes
//! on, as in the other bindings).

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};

use fdb_protocol::{KeyValue, RangeCursor, RangeOption, RangeResult};
use futures_core::Stream;

use crate::driver::{Driver, Pending};
use crate::error::Error;
use crate::transaction::Transaction;

impl<D: Driver> Transaction<D> {
    /// A range read as a stream of batches, each fetched only when the previous one was
    /// taken (`fdb_transaction_get_range` called with increasing `iteration`, as the bindings'
    /// iterators do). Dropping the stream cancels the batch in flight.
    pub fn get_ranges(&self, range: impl Into<RangeOption>, snapshot: bool) -> RangeStream<D> {
        RangeStream::new(self.clone(), range.into(), snapshot)
    }

    /// [`Transaction::get_ranges`] row by row.
    pub fn get_ranges_keyvalues(
        &self,
        range: impl Into<RangeOption>,
        snapshot: bool,
    ) -> KeyValueStream<D> {
        KeyValueStream::new(self.get_ranges(range, snapshot))
    }

    /// Every row of a range read, collected.
    pub async fn get_range_all(
        &self,
        range: impl Into<RangeOption>,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>, Error> {
        self.get_ranges(range, snapshot).collect_rows().await
    }
}

/// The batches of a range read (see [`Transaction::get_ranges`]). Each item is one batch's
/// rows, cut to the read's limit; `more` says whether another batch may follow. Empty
/// batches are not yielded. Dropping the stream cancels the batch in flight.
#[must_use = "a range stream reads nothing until polled"]
pub struct RangeStream<D: Driver> {
    tx: Transaction<D>,
    cursor: RangeCursor,
    snapshot: bool,
    inflight: Option<Pending<D, RangeResult>>,
    /// An error ended the stream.
    failed: bool,
}

impl<D: Driver> RangeStream<D> {
    pub(crate) fn new(tx: Transaction<D>, range: RangeOption, snapshot: bool) -> Self {
        RangeStream {
            tx,
            cursor: range.cursor(),
            snapshot,
            inflight: None,
            failed: false,
        }
    }

    /// The next batch, or `None` once the read is complete (the same as `StreamExt::next`,
    /// without needing `futures`).
    pub async fn next(&mut self) -> Option<Result<RangeResult, Error>> {
        poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    /// Every remaining row, collected.
    pub async fn collect_rows(mut self) -> Result<Vec<KeyValue>, Error> {
        // Batches kept and joined once: no doubling series of ever larger copies.
        let mut batches = Vec::new();
        while let Some(batch) = self.next().await {
            batches.push(batch?.rows);
        }
        if batches.len() <= 1 {
            return Ok(batches.pop().unwrap_or_default());
        }
        let mut rows = Vec::with_capacity(batches.iter().map(Vec::len).sum());
        for batch in batches {
            rows.extend(batch);
        }
        Ok(rows)
    }
}

impl<D: Driver> Stream for RangeStream<D> {
    type Item = Result<RangeResult, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.failed {
                return Poll::Ready(None);
            }
            let pending = match &mut this.inflight {
                Some(p) => p,
                None => {
                    let Some((begin, end, opts)) = this.cursor.next_request() else {
                        return Poll::Ready(None);
                    };
                    let p = this.tx.get_range_batch(begin, end, opts, this.snapshot);
                    this.inflight.insert(p)
                }
            };
            let batch = match Pin::new(pending).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(r) => r,
            };
            this.inflight = None;
            match batch {
                Err(e) => {
                    this.failed = true;
                    return Poll::Ready(Some(Err(e)));
                }
                Ok(batch) => {
                    let rows = this.cursor.advance(batch);
                    if !rows.is_empty() {
                        let more = !this.cursor.is_done();
                        return Poll::Ready(Some(Ok(RangeResult { rows, more })));
                    }
                }
            }
        }
    }
}

/// The rows of a range read, one at a time (see [`Transaction::get_ranges_keyvalues`]);
/// batches are fetched as the rows run out.
#[must_use = "a range stream reads nothing until polled"]
pub struct KeyValueStream<D: Driver> {
    batches: RangeStream<D>,
    rows: VecDeque<KeyValue>,
}

impl<D: Driver> KeyValueStream<D> {
    pub(crate) fn new(batches: RangeStream<D>) -> Self {
        KeyValueStream {
            batches,
            rows: VecDeque::new(),
        }
    }

    /// The next row, or `None` once the read is complete.
    pub async fn next(&mut self) -> Option<Result<KeyValue, Error>> {
        poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }
}

impl<D: Driver> Stream for KeyValueStream<D> {
    type Item = Result<KeyValue, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(kv) = this.rows.pop_front() {
                return Poll::Ready(Some(Ok(kv)));
            }
            match Pin::new(&mut this.batches).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(batch))) => this.rows.extend(batch.rows),
            }
        }
    }
}
