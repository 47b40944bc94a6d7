//! The snapshot view of a transaction: the same reads, none of which adds a read conflict
//! range (libfdb_c's `snapshot` flag, the other bindings' `tr.snapshot`). Writes made in
//! the transaction are still seen.

use bytes::Bytes;
use fdb_protocol::{KeySelector, KeyValue, RangeOption, RangeOptions, RangeResult};

use crate::driver::{Driver, Pending};
use crate::error::Error;
use crate::stream::{KeyValueStream, RangeStream};
use crate::transaction::Transaction;

impl<D: Driver> Transaction<D> {
    /// A view of this transaction whose reads add no read conflict ranges (snapshot reads).
    pub fn snapshot(&self) -> Snapshot<D> {
        Snapshot::new(self.clone())
    }
}

/// Snapshot reads of a transaction (see [`Transaction::snapshot`]). Cheap to clone.
pub struct Snapshot<D: Driver> {
    tx: Transaction<D>,
}

impl<D: Driver> Clone for Snapshot<D> {
    fn clone(&self) -> Self {
        Snapshot {
            tx: self.tx.clone(),
        }
    }
}

impl<D: Driver> Snapshot<D> {
    pub(crate) fn new(tx: Transaction<D>) -> Self {
        Snapshot { tx }
    }

    /// The transaction this is a view of.
    pub fn transaction(&self) -> &Transaction<D> {
        &self.tx
    }

    /// Reads `key`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Pending<D, Option<Bytes>> {
        self.tx.get_with(key.as_ref(), true)
    }

    /// Resolves a key selector.
    pub fn get_key(&self, sel: KeySelector) -> Pending<D, Bytes> {
        self.tx.get_key(sel, true)
    }

    // The snapshot view repeats Transaction's read signatures, each calling it with snapshot set.
    /// Every row in `[begin, end)` (at most `limit` if non-zero).
    pub async fn get_range(
        &self,
        begin: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
        limit: usize,
    ) -> Result<Vec<KeyValue>, Error> {
        self.tx
            .get_range_between(begin.as_ref(), end.as_ref(), limit, true)
            .await
    }

    /// One batch of rows between two selectors.
    pub fn get_range_batch(
        &self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
    ) -> Pending<D, RangeResult> {
        self.tx.get_range_batch(begin, end, opts, true)
    }

    /// A range read as a stream of batches (see [`Transaction::get_ranges`]).
    pub fn get_ranges(&self, range: impl Into<RangeOption>) -> RangeStream<D> {
        self.tx.get_ranges(range, true)
    }

    /// A range read row by row.
    pub fn get_ranges_keyvalues(&self, range: impl Into<RangeOption>) -> KeyValueStream<D> {
        self.tx.get_ranges_keyvalues(range, true)
    }

    /// Every row of a range read, collected.
    pub async fn get_range_all(
        &self,
        range: impl Into<RangeOption>,
    ) -> Result<Vec<KeyValue>, Error> {
        self.tx.get_range_all(range, true).await
    }
}
