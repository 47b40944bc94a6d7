//! The blocking snapshot view of a transaction: reads that add no read conflict ranges.

use bytes::Bytes;
use fdb_api::{Error, KeySelector, KeyValue, RangeOption, RangeOptions, RangeResult};

use crate::event_loop::MioDriver;
use crate::event_loop::CALL_LIMIT;
use crate::range_iter::{KeyValueIter, RangeIter};
use crate::waited::waited;

/// Snapshot reads of a transaction (see [`crate::Transaction::snapshot`]).
#[derive(Clone)]
pub struct Snapshot {
    inner: fdb_api::Snapshot<MioDriver>,
}

impl Snapshot {
    pub(crate) fn new(inner: fdb_api::Snapshot<MioDriver>) -> Self {
        Snapshot { inner }
    }

    fn driver(&self) -> &MioDriver {
        self.inner.transaction().driver()
    }

    fn wait<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        self.driver().block_on(fut, CALL_LIMIT)?
    }

    // The blocking transaction's reads without the snapshot flag: their signatures repeat.
    waited! {
        /// Reads `key`.
        pub fn get(&self, key: impl AsRef<[u8]>) -> Option<Bytes>;
        /// Resolves a key selector.
        pub fn get_key(&self, sel: KeySelector) -> Bytes;
        /// Every row in `[begin, end)` (at most `limit` if non-zero).
        pub fn get_range(
            &self,
            begin: impl AsRef<[u8]>,
            end: impl AsRef<[u8]>,
            limit: usize,
        ) -> Vec<KeyValue>;
        /// One batch of rows between two selectors.
        pub fn get_range_batch(
            &self,
            begin: KeySelector,
            end: KeySelector,
            opts: RangeOptions,
        ) -> RangeResult;
    }

    /// A range read batch by batch.
    pub fn get_ranges(&self, range: impl Into<RangeOption>) -> RangeIter {
        RangeIter::new(self.inner.get_ranges(range), self.driver().clone())
    }

    /// A range read row by row.
    pub fn get_ranges_keyvalues(&self, range: impl Into<RangeOption>) -> KeyValueIter {
        KeyValueIter::new(self.get_ranges(range))
    }

    /// Every row of a range read, collected.
    pub fn get_range_all(&self, range: impl Into<RangeOption>) -> Result<Vec<KeyValue>, Error> {
        self.wait(self.inner.get_range_all(range))
    }
}
