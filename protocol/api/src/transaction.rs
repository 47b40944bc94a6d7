//! A transaction handle: its calls become requests on the driver's loop; its writes are
//! buffered and travel with the next call (one op and one wake-up instead of one per write;
//! the core sees them in the same order).

use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::types::{KeySelector, KeyValue, Version};
use fdb_protocol::{
    check_conflict_range, Call, Client, Committed, ConflictRangeType, Instant, Outcome,
    RangeCursor, RangeOptions, RangeResult, TransactionId, TransactionOption,
};

use crate::driver::{apply, submit, Driver, Pending};
use crate::error::Error;

/// A buffered write, applied on the loop before this transaction's next call.
type PendingWrite = Box<dyn FnOnce(&mut Client, Instant, TransactionId) + Send>;

/// The core's transaction id, created on the loop on first use, and when the application
/// created the transaction (its `timeout` counts from then, as in libfdb_c).
struct TxCell {
    id: OnceLock<TransactionId>,
    created: Instant,
}

impl TxCell {
    fn id(&self, c: &mut Client, now: Instant) -> TransactionId {
        *self
            .id
            .get_or_init(|| c.create_transaction_at(now, self.created))
    }
}

struct TxInner<D: Driver> {
    driver: D,
    cell: Arc<TxCell>,
    pending: Mutex<Vec<PendingWrite>>,
}

impl<D: Driver> TxInner<D> {
    fn take_pending(&self) -> Vec<PendingWrite> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl<D: Driver> Drop for TxInner<D> {
    fn drop(&mut self) {
        let cell = self.cell.clone();
        apply(&self.driver, move |c, now| {
            if let Some(id) = cell.id.get() {
                c.destroy_transaction(now, *id);
            }
        });
    }
}

/// Runs the buffered writes, then yields the transaction id.
fn flush(cell: &TxCell, writes: Vec<PendingWrite>, c: &mut Client, now: Instant) -> TransactionId {
    let id = cell.id(c, now);
    for w in writes {
        w(c, now, id);
    }
    id
}

/// A transaction. Cheap to clone (clones share the transaction); dropped with its last clone.
///
/// Writes (`set`, `clear`, atomic ops) never wait: an invalid write (a key too large, say)
/// fails the next read or the commit, as in libfdb_c.
pub struct Transaction<D: Driver> {
    inner: Arc<TxInner<D>>,
}

impl<D: Driver> Clone for Transaction<D> {
    fn clone(&self) -> Self {
        Transaction {
            inner: self.inner.clone(),
        }
    }
}

/// A watch in flight: resolves to the version at which the key changed. Dropping it cancels
/// the watch.
pub type Watch<D> = Pending<D, Version>;

impl<D: Driver> Transaction<D> {
    pub(crate) fn new(driver: D) -> Self {
        let created = driver.now();
        Transaction {
            inner: Arc::new(TxInner {
                driver,
                cell: Arc::new(TxCell {
                    id: OnceLock::new(),
                    created,
                }),
                pending: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The driver handle (for driver-specific calls).
    pub fn driver(&self) -> &D {
        &self.inner.driver
    }

    /// A call into the core on this transaction, with the buffered writes before it.
    fn call<T, F>(&self, f: F) -> Pending<D, T>
    where
        T: Outcome,
        F: FnOnce(&mut Client, Instant, TransactionId) -> Call<T> + Send + 'static,
    {
        let cell = self.inner.cell.clone();
        let writes = self.inner.take_pending();
        submit(&self.inner.driver, move |c, now| {
            let id = flush(&cell, writes, c, now);
            f(c, now, id)
        })
    }

    fn write<F>(&self, f: F)
    where
        F: FnOnce(&mut Client, Instant, TransactionId) + Send + 'static,
    {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(f));
    }

    /// Sets a transaction option. One the transaction refuses (`read_your_writes_disable`
    /// after a read, say) fails the next read or the commit, as
    /// `fdb_transaction_set_option` defers it.
    pub fn set_option(&self, opt: TransactionOption) {
        self.write(move |c, now, id| {
            let _ = c.set_option(now, id, opt);
        });
    }

    /// The transaction's read version.
    pub fn get_read_version(&self) -> Pending<D, Version> {
        self.call(|c, now, id| c.tx_read_version(now, id))
    }

    /// Uses `version` as the read version instead of asking a GRV proxy.
    pub fn set_read_version(&self, version: Version) {
        self.write(move |c, _, id| {
            let _ = c.set_read_version(id, version);
        });
    }

    /// Reads `key` (adds a read conflict range). Like every request, it starts when called,
    /// not when awaited: it sees the transaction as it is now.
    pub fn get(&self, key: &[u8]) -> Pending<D, Option<Bytes>> {
        self.get_with(key, false)
    }

    /// Reads `key` without a read conflict range.
    pub fn snapshot_get(&self, key: &[u8]) -> Pending<D, Option<Bytes>> {
        self.get_with(key, true)
    }

    fn get_with(&self, key: &[u8], snapshot: bool) -> Pending<D, Option<Bytes>> {
        let key = key.to_vec();
        self.call(move |c, now, id| c.get(now, id, &key, snapshot))
    }

    /// Resolves a key selector.
    pub fn get_key(&self, sel: KeySelector, snapshot: bool) -> Pending<D, Bytes> {
        self.call(move |c, now, id| c.get_key(now, id, sel, snapshot))
    }

    /// The storage servers' estimate of the bytes in `[begin, end)`.
    pub fn get_estimated_range_size_bytes(&self, begin: &[u8], end: &[u8]) -> Pending<D, i64> {
        let (begin, end) = (begin.to_vec(), end.to_vec());
        self.call(move |c, now, id| c.get_estimated_range_size_bytes(now, id, &begin, &end))
    }

    /// Keys cutting `[begin, end)` into chunks of about `chunk_size` bytes.
    pub fn get_range_split_points(
        &self,
        begin: &[u8],
        end: &[u8],
        chunk_size: i64,
    ) -> Pending<D, Vec<Bytes>> {
        let (begin, end) = (begin.to_vec(), end.to_vec());
        self.call(move |c, now, id| c.get_range_split_points(now, id, &begin, &end, chunk_size))
    }

    /// One batch of rows between two selectors (`fdb_transaction_get_range`).
    pub fn get_range_batch(
        &self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Pending<D, RangeResult> {
        self.call(move |c, now, id| c.get_range(now, id, begin, end, opts, snapshot))
    }

    /// Every row in `[begin, end)` (at most `limit` if non-zero), fetched in batches as the
    /// bindings' range iterators do.
    pub async fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<KeyValue>, Error> {
        self.get_range_with(
            KeySelector::first_greater_or_equal(Bytes::copy_from_slice(begin)),
            KeySelector::first_greater_or_equal(Bytes::copy_from_slice(end)),
            RangeOptions {
                limit,
                ..RangeOptions::default()
            },
            false,
        )
        .await
    }

    /// Every row between two selectors, batch after batch (reverse, snapshot and streaming
    /// mode as in `opts`; `opts.limit` bounds the total).
    pub async fn get_range_with(
        &self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>, Error> {
        let mut cursor = RangeCursor::new(begin, end, opts);
        while let Some((b, e, o)) = cursor.next_request() {
            cursor.feed(self.get_range_batch(b, e, o, snapshot).await?);
        }
        Ok(cursor.into_rows())
    }

    /// Sets a key.
    pub fn set(&self, key: &[u8], value: &[u8]) {
        let (k, v) = (Bytes::copy_from_slice(key), Bytes::copy_from_slice(value));
        self.write(move |c, _, id| {
            let _ = c.set_bytes(id, k, v);
        });
    }

    /// Removes a key.
    pub fn clear(&self, key: &[u8]) {
        let k = key.to_vec();
        self.write(move |c, _, id| {
            let _ = c.clear(id, &k);
        });
    }

    /// Removes every key in `[begin, end)`.
    pub fn clear_range(&self, begin: &[u8], end: &[u8]) {
        let (b, e) = (begin.to_vec(), end.to_vec());
        self.write(move |c, _, id| {
            let _ = c.clear_range(id, &b, &e);
        });
    }

    /// An atomic operation (`fdb_protocol::messages::commit::mutation_type`).
    pub fn atomic_op(&self, key: &[u8], param: &[u8], kind: u8) {
        let (k, p) = (key.to_vec(), param.to_vec());
        self.write(move |c, _, id| {
            let _ = c.atomic_op(id, &k, &p, kind);
        });
    }

    /// Adds a read or write conflict range. An inverted range is refused here, like
    /// `fdb_transaction_add_conflict_range`'s return code; other errors fail the next read
    /// or the commit.
    pub fn add_conflict_range(
        &self,
        begin: &[u8],
        end: &[u8],
        kind: ConflictRangeType,
    ) -> Result<(), Error> {
        check_conflict_range(begin, end)?;
        let (b, e) = (begin.to_vec(), end.to_vec());
        self.write(move |c, _, id| {
            let _ = c.add_conflict_range(id, &b, &e, kind);
        });
        Ok(())
    }

    /// Commits; returns the commit version (`-1` when nothing was written). The commit
    /// starts when this is called; the future only waits for it.
    pub fn commit(&self) -> impl Future<Output = Result<Version, Error>> + Send + 'static {
        let committing = self.commit_with_versionstamp();
        async move { committing.await.map(|c| c.version) }
    }

    /// Commits; returns the commit version and the versionstamp.
    pub fn commit_with_versionstamp(&self) -> Pending<D, Committed> {
        self.call(|c, now, id| c.commit(now, id))
    }

    /// The versionstamp of the committed transaction (`None` before it committed, or when
    /// it wrote nothing).
    pub async fn versionstamp(&self) -> Result<Option<[u8; 10]>, Error> {
        self.inspect(|c, id| c.versionstamp(id)).await
    }

    /// `fdb_transaction_get_versionstamp`: resolves to the versionstamp once this
    /// transaction commits, so it is asked for before the commit — inside the retry loop's
    /// closure, and awaited after the loop returns. Fails with `no_commit_version` (2021) if
    /// the commit wrote nothing, `transaction_invalid_version` (2020) if it failed,
    /// `transaction_cancelled` (1025) if the transaction is reset (a retry) or dropped first,
    /// and `used_during_commit` (2017) if asked once the commit started.
    pub fn get_versionstamp(
        &self,
    ) -> impl Future<Output = Result<[u8; 10], Error>> + Send + 'static {
        let stamp = self.call(|c, now, id| c.get_versionstamp(now, id));
        async move {
            let b = stamp.await?;
            <[u8; 10]>::try_from(b.as_ref()).map_err(|_| Error::from(ErrorCode::INTERNAL_ERROR))
        }
    }

    /// `fdb_transaction_get_committed_version`: the version this transaction committed at;
    /// `-1` if it has not committed (yet), or committed without writing.
    pub async fn get_committed_version(&self) -> Result<Version, Error> {
        self.inspect(|c, id| c.committed_version(id).unwrap_or(-1))
            .await
    }

    /// `fdb_transaction_get_approximate_size`: about how many bytes the commit would carry
    /// (the writes so far count). Fails with the error of a failed write.
    pub async fn get_approximate_size(&self) -> Result<i64, Error> {
        self.inspect(|c, id| c.get_approximate_size(id))
            .await?
            .map_err(Error::Client)
    }

    /// `fdb_transaction_cancel`: the transaction's requests in flight fail with
    /// `transaction_cancelled` (1025), and so does every later read, commit and `on_error`
    /// until [`Transaction::reset`].
    pub fn cancel(&self) {
        let cell = self.inner.cell.clone();
        let writes = self.inner.take_pending();
        apply(&self.inner.driver, move |c, now| {
            let id = flush(&cell, writes, c, now);
            c.cancel_transaction(now, id);
        });
    }

    /// Runs `f` on the loop on this transaction, after its buffered writes.
    async fn inspect<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client, TransactionId) -> R + Send + 'static,
    ) -> Result<R, Error> {
        let cell = self.inner.cell.clone();
        let writes = self.inner.take_pending();
        crate::driver::query(&self.inner.driver, move |c, now| {
            let id = flush(&cell, writes, c, now);
            f(c, id)
        })
        .await
    }

    /// `on_error`: waits the backoff and resets the transaction if `code` is retryable;
    /// otherwise fails with it.
    pub fn on_error(&self, code: ErrorCode) -> Pending<D, ()> {
        self.call(move |c, now, id| c.on_error(now, id, code))
    }

    /// Resets the transaction (options too).
    pub fn reset(&self) {
        let cell = self.inner.cell.clone();
        let writes = self.inner.take_pending();
        apply(&self.inner.driver, move |c, now| {
            let id = flush(&cell, writes, c, now);
            c.reset_transaction(now, id);
        });
    }

    /// Watches a key. The watch starts when the transaction commits and resolves when the
    /// key's value changes; dropping the future cancels it.
    pub fn watch(&self, key: &[u8]) -> Watch<D> {
        let key = key.to_vec();
        self.call(move |c, now, id| c.watch(now, id, &key))
    }
}
