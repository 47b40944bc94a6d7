//! Range reads as iterators: the async API's range streams, each batch waited for by turning
//! the loop when the iterator needs it (so a reader that stops early fetches no more).
//! Dropping an iterator cancels the batch in flight.

use fdb_api::{Error, KeyValue, RangeResult};

use crate::event_loop::MioDriver;
use crate::event_loop::CALL_LIMIT;

/// The batches of a range read (see [`crate::Transaction::get_ranges`]).
pub struct RangeIter {
    stream: fdb_api::RangeStream<MioDriver>,
    driver: MioDriver,
    done: bool,
}

impl RangeIter {
    pub(crate) fn new(stream: fdb_api::RangeStream<MioDriver>, driver: MioDriver) -> Self {
        RangeIter {
            stream,
            driver,
            done: false,
        }
    }
}

impl Iterator for RangeIter {
    type Item = Result<RangeResult, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = match self.driver.block_on(self.stream.next(), CALL_LIMIT) {
            Ok(next) => next,
            Err(e) => Some(Err(e)),
        };
        if !matches!(next, Some(Ok(_))) {
            self.done = true;
        }
        next
    }
}

/// The rows of a range read (see [`crate::Transaction::get_ranges_keyvalues`]).
pub struct KeyValueIter {
    batches: RangeIter,
    rows: std::vec::IntoIter<KeyValue>,
}

impl KeyValueIter {
    pub(crate) fn new(batches: RangeIter) -> Self {
        KeyValueIter {
            batches,
            rows: Vec::new().into_iter(),
        }
    }
}

impl Iterator for KeyValueIter {
    type Item = Result<KeyValue, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(kv) = self.rows.next() {
                return Some(Ok(kv));
            }
            match self.batches.next()? {
                Ok(batch) => self.rows = batch.rows.into_iter(),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}
