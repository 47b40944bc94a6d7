//! Mapped range reads (`fdb_transaction_get_mapped_range`): a range read whose storage
//! servers also read, for every row, the key or range a mapper (a packed tuple such as
//! `("data", "{K[2]}", "{...}")`) derives from the row's key and value. The core runs it as
//! libfdb_c does: serializable reads only, refused where the transaction wrote, with read
//! conflict ranges on the range and on every mapped key and range.

use bytes::Bytes;
use fdb_protocol::{KeySelector, MappedKeyValue, MappedRangeResult, RangeOption, RangeOptions};

use crate::driver::{Driver, Pending};
use crate::error::Error;
use crate::transaction::Transaction;

impl<D: Driver> Transaction<D> {
    /// One batch of a mapped range read (`fdb_transaction_get_mapped_range`), with the
    /// limits, mode and iteration of `opts`. Snapshot reads and transactions with
    /// read-your-writes disabled fail with `unsupported_operation`; a read meeting the
    /// transaction's own writes (in the range or in a mapped key or range) fails with
    /// `get_mapped_range_reads_your_writes`. The mapper's errors are fdbserver's
    /// (`mapper_bad_index`, `mapper_bad_range_decriptor`, `mapper_not_tuple`,
    /// `key_not_tuple`, `value_not_tuple`).
    pub fn get_mapped_range_batch(
        &self,
        begin: KeySelector,
        end: KeySelector,
        mapper: impl AsRef<[u8]>,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Pending<D, MappedRangeResult> {
        let mapper = Bytes::copy_from_slice(mapper.as_ref());
        self.call(move |c, now, id| c.get_mapped_range(now, id, begin, end, mapper, opts, snapshot))
    }

    /// Every row of a mapped range read, batch after batch as the bindings iterate (each
    /// batch continues after the last row, `iteration` grows, the range's limit bounds the
    /// total).
    pub async fn get_mapped_range(
        &self,
        range: impl Into<RangeOption>,
        mapper: impl AsRef<[u8]>,
        snapshot: bool,
    ) -> Result<Vec<MappedKeyValue>, Error> {
        let mut range = range.into();
        let mapper = Bytes::copy_from_slice(mapper.as_ref());
        let mut rows = Vec::new();
        let mut iteration = 1;
        loop {
            let opts = range.batch(iteration);
            let batch = self
                .get_mapped_range_batch(
                    range.begin.clone(),
                    range.end.clone(),
                    mapper.clone(),
                    opts,
                    snapshot,
                )
                .await?;
            let last = batch.rows.last().map(|m| m.kv.key.clone());
            let n = batch.rows.len();
            rows.extend(batch.rows);
            let Some(last) = last.filter(|_| batch.more) else {
                return Ok(rows);
            };
            if let Some(limit) = range.limit.as_mut() {
                *limit = limit.saturating_sub(n);
                if *limit == 0 {
                    return Ok(rows);
                }
            }
            if range.reverse {
                range.end = KeySelector::first_greater_or_equal(last);
            } else {
                range.begin = KeySelector::first_greater_than(last);
            }
            iteration += 1;
        }
    }
}
