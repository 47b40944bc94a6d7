//! A transaction handle: its calls become requests on the driver's loop; its writes are
//! buffered and travel with the next call (one op and one wake-up instead of one per write;
//! the core sees them in the same order).

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{Bytes, BytesMut};
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::types::{KeySelector, KeyValue, Version};
use fdb_protocol::{
    check_conflict_range, Call, Client, Committed, ConflictRangeType, Instant, MutationType,
    Outcome, RangeCursor, RangeOptions, RangeResult, SpecialModule, TransactionId,
    TransactionOption,
};

use crate::driver::{apply, query, submit, Driver, Pending};
use crate::error::Error;
use crate::tenant_handle::{TenantCell, TenantInner};
use crate::versionstamp::{VersionstampFuture, VersionstampWaiters};

/// A write other than a set: run on the loop with the transaction's id.
type WriteFn = Box<dyn FnOnce(&mut Client, Instant, TransactionId) + Send>;

/// A buffered write, applied on the loop before this transaction's next call. Sets, the
/// common case, are plain data (no boxed closure per write).
enum PendingWrite {
    /// `key | 0x00 | value` in one buffer, and the key's length ([`Client::set_packed`]).
    Set(Bytes, usize),
    Other(WriteFn),
}

/// The core's transaction id, created on the loop on first use, and when the application
/// created the transaction (its `timeout` counts from then, as in libfdb_c).
struct TxCell {
    id: OnceLock<TransactionId>,
    created: Instant,
    /// The tenant the transaction belongs to.
    tenant: Option<Arc<TenantCell>>,
    /// Non-zero while an `on_error` or a commit of this transaction may still be running in
    /// the core (the number of the call that started it): writes then go to the loop at
    /// once instead of waiting for the next call (see [`Transaction::push_write`]).
    unbuffered: AtomicU64,
    /// The last number handed to such a call.
    calls: AtomicU64,
}

impl TxCell {
    fn id(&self, c: &mut Client, now: Instant) -> TransactionId {
        *self.id.get_or_init(|| match &self.tenant {
            Some(t) => {
                let h = t.handle(c, now);
                c.create_tenant_transaction_at(now, self.created, h)
            }
            None => c.create_transaction_at(now, self.created),
        })
    }
}

struct TxInner<D: Driver> {
    driver: D,
    cell: Arc<TxCell>,
    pending: Mutex<Writes>,
    stamps: VersionstampWaiters,
    /// A write went to the special key space: the commit first asks the core for the writes
    /// its tenant module must carry out.
    special: AtomicBool,
    /// Keeps the tenant handle open while the transaction lives (dropped after it).
    _tenant: Option<Arc<TenantInner<D>>>,
}

impl<D: Driver> TxInner<D> {
    fn take_pending(&self) -> Vec<PendingWrite> {
        let mut w = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut w.list)
    }
}

/// The writes buffered since the last call, and the buffer the sets are packed into.
#[derive(Default)]
struct Writes {
    list: Vec<PendingWrite>,
    /// Sets are cut from shared chunks (each set a slice of one): a transaction's sets
    /// cost a few allocations, not two each (a buffer and, when the core slices it, its
    /// shared header).
    arena: BytesMut,
    /// The size of the arena's current chunk (its `capacity` is only what is left of it).
    chunk: usize,
}

/// The first chunk of a transaction's set buffer; each further one doubles, up to
/// [`MAX_CHUNK`] (a larger set gets a chunk of its own size). Each chunk costs two
/// allocations (its buffer and, once sliced, its shared header), so the first is large
/// enough for a batch of fifty 100-byte sets; an 8 KB `malloc` costs no more than a 2 KB one.
const FIRST_CHUNK: usize = 8192;
const MAX_CHUNK: usize = 64 * 1024;

/// Room for this many buffered writes when the first one comes: the list is taken whole at
/// each call, and growing it from nothing by doubling would cost an allocation per power of
/// two in a batch of sets (64 writes are 3 KB: one allocation either way).
const FIRST_WRITES: usize = 64;

impl Writes {
    fn push(&mut self, w: PendingWrite) {
        if self.list.capacity() == 0 {
            self.list.reserve(FIRST_WRITES);
        }
        self.list.push(w);
    }

    /// `key | 0x00 | value`, cut from the arena.
    fn pack(&mut self, key: &[u8], value: &[u8]) -> Bytes {
        let need = key.len() + 1 + value.len();
        if self.arena.capacity() - self.arena.len() < need {
            self.chunk = (self.chunk * 2).clamp(FIRST_CHUNK, MAX_CHUNK).max(need);
            self.arena = BytesMut::with_capacity(self.chunk);
        }
        self.arena.extend_from_slice(key);
        self.arena.extend_from_slice(&[0]);
        self.arena.extend_from_slice(value);
        self.arena.split().freeze()
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
        match w {
            PendingWrite::Set(packed, key_len) => {
                let _ = c.set_packed(id, packed, key_len);
            }
            PendingWrite::Other(f) => f(c, now, id),
        }
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
        Self::new_in(driver, None)
    }

    pub(crate) fn new_in(driver: D, tenant: Option<Arc<TenantInner<D>>>) -> Self {
        let created = driver.now();
        Transaction {
            inner: Arc::new(TxInner {
                driver,
                cell: Arc::new(TxCell {
                    id: OnceLock::new(),
                    created,
                    tenant: tenant.as_ref().map(|t| t.cell.clone()),
                    unbuffered: AtomicU64::new(0),
                    calls: AtomicU64::new(0),
                }),
                pending: Mutex::new(Writes::default()),
                stamps: VersionstampWaiters::default(),
                special: AtomicBool::new(false),
                _tenant: tenant,
            }),
        }
    }

    /// The driver handle (for driver-specific calls).
    pub fn driver(&self) -> &D {
        &self.inner.driver
    }

    /// A call into the core on this transaction, with the buffered writes before it.
    pub(crate) fn call<T, F>(&self, f: F) -> Pending<D, T>
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

    /// Whether the transaction belongs to a tenant.
    pub(crate) fn in_tenant(&self) -> bool {
        self.inner.cell.tenant.is_some()
    }

    /// A function for the loop that applies the buffered writes and yields the core's id.
    pub(crate) fn flushed_id(
        &self,
    ) -> impl FnOnce(&mut Client, Instant) -> TransactionId + Send + 'static {
        let cell = self.inner.cell.clone();
        let writes = self.inner.take_pending();
        move |c, now| flush(&cell, writes, c, now)
    }

    /// Notes a write into the special key space (see [`TxInner::special`]).
    fn note_special(&self, key: &[u8]) {
        if key.starts_with(b"\xff\xff") {
            self.inner.special.store(true, Ordering::Relaxed);
        }
    }

    fn write<F>(&self, f: F)
    where
        F: FnOnce(&mut Client, Instant, TransactionId) + Send + 'static,
    {
        self.push_write(PendingWrite::Other(Box::new(f)));
    }

    /// Buffers a write for the next call. While an `on_error` or a commit may be running,
    /// it goes to the loop at once instead, with what is buffered before it: libfdb_c puts
    /// a write into RYW's write map when it is made, so one made while `on_error` sleeps is
    /// dropped by the reset that ends the sleep, and one made while the commit is in flight
    /// (or after a failed one, while `on_error` sleeps) fails them at once with
    /// `used_during_commit`, with no later call needed. Once the core has neither running,
    /// writes are buffered again.
    fn push_write(&self, w: PendingWrite) {
        let mut pending = self.inner.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.push(w);
        let call = self.inner.cell.unbuffered.load(Ordering::Acquire);
        if call == 0 {
            return;
        }
        let writes = std::mem::take(&mut pending.list);
        let cell = self.inner.cell.clone();
        // Sent with the lock held: writes reach the loop in the order they were made.
        apply(&self.inner.driver, move |c, now| {
            let id = flush(&cell, writes, c, now);
            if !c.commit_or_backoff_pending(id) {
                let _ =
                    cell.unbuffered
                        .compare_exchange(call, 0, Ordering::AcqRel, Ordering::Relaxed);
            }
        });
        drop(pending);
    }

    /// Notes that an `on_error` or a commit starts (see [`Transaction::push_write`]).
    fn unbuffer_writes(&self) {
        let cell = &self.inner.cell;
        let call = cell.calls.fetch_add(1, Ordering::AcqRel) + 1;
        cell.unbuffered.store(call, Ordering::Release);
    }

    /// Sets a transaction option. An option this client does not implement fails here with
    /// `unsupported_operation` (never silently ignored); one the transaction refuses in its
    /// state (`read_your_writes_disable` after a read, a `size_limit` out of range) fails the
    /// next read or the commit, as `fdb_transaction_set_option` defers it.
    pub fn set_option(&self, opt: TransactionOption) -> Result<(), Error> {
        opt.check_supported()?;
        self.write(move |c, now, id| {
            let _ = c.set_option(now, id, opt);
        });
        Ok(())
    }

    /// [`Transaction::set_option`] of each of `options` in turn, stopping at the first
    /// refused (the management functions' lists of options, as libfdb_c sets them).
    pub(crate) fn set_options(
        &self,
        options: impl IntoIterator<Item = TransactionOption>,
    ) -> Result<(), Error> {
        options.into_iter().try_for_each(|o| self.set_option(o))
    }

    /// The transaction's read version. Like every read here, the request is made when this
    /// is called (as libfdb_c's calls are), not when the future is first polled.
    pub fn get_read_version(&self) -> Pending<D, Version> {
        self.call(|c, now, id| c.tx_read_version(now, id))
    }

    /// Uses `version` as the read version instead of asking a GRV proxy.
    pub fn set_read_version(&self, version: Version) {
        self.write(move |c, _, id| {
            let _ = c.set_read_version(id, version);
        });
    }

    /// Reads `key` (adds a read conflict range). The read starts now: it sees the writes
    /// made before this call, not those made before the future is awaited.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Pending<D, Option<Bytes>> {
        self.get_with(key.as_ref(), false)
    }

    /// Reads `key` without a read conflict range.
    pub fn snapshot_get(&self, key: impl AsRef<[u8]>) -> Pending<D, Option<Bytes>> {
        self.get_with(key.as_ref(), true)
    }

    /// A point read, routed once (`fdb_protocol::route_special_key`): the special-key
    /// modules that need reads of the database first are served by this crate, the rest by
    /// the core.
    pub(crate) fn get_with(&self, key: &[u8], snapshot: bool) -> Pending<D, Option<Bytes>> {
        let module = fdb_protocol::route_special_key(key);
        match module {
            Some(SpecialModule::Tenants) => self.tenant_get(key),
            Some(SpecialModule::Management) => self.management_get(key),
            _ => {
                let key = key.to_vec();
                self.call(move |c, now, id| c.get_routed(now, id, &key, snapshot, module))
            }
        }
    }

    /// Resolves a key selector.
    pub fn get_key(&self, sel: KeySelector, snapshot: bool) -> Pending<D, Bytes> {
        self.call(move |c, now, id| c.get_key(now, id, sel, snapshot))
    }

    /// About how many bytes the commit would carry so far
    /// (`fdb_transaction_get_approximate_size`). Fails with the error of a failed write, as
    /// libfdb_c checks the deferred error first.
    pub async fn get_approximate_size(&self) -> Result<usize, Error> {
        let cell = self.inner.cell.clone();
        let writes = self.inner.take_pending();
        let size = query(&self.inner.driver, move |c, now| {
            let id = flush(&cell, writes, c, now);
            c.get_approximate_size(id)
        })
        .await?
        .map_err(Error::Client)?;
        Ok(usize::try_from(size).unwrap_or(0))
    }

    /// `fdb_transaction_get_committed_version`: the version this transaction committed at;
    /// `-1` if it has not committed (yet), or committed without writing.
    pub async fn get_committed_version(&self) -> Result<Version, Error> {
        let cell = self.inner.cell.clone();
        let writes = self.inner.take_pending();
        query(&self.inner.driver, move |c, now| {
            let id = flush(&cell, writes, c, now);
            c.committed_version(id).unwrap_or(-1)
        })
        .await
    }

    /// The storage servers' estimate of the bytes in `[begin, end)`.
    pub async fn get_estimated_range_size_bytes(
        &self,
        begin: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<i64, Error> {
        let (begin, end) = (begin.as_ref().to_vec(), end.as_ref().to_vec());
        self.call(move |c, now, id| c.get_estimated_range_size_bytes(now, id, &begin, &end))
            .await
    }

    /// The addresses of the storage servers holding `key` (`fdb_transaction_get_addresses_for_key`):
    /// `ip:port`, with `:tls` for a TLS address; empty for a key at or past `\xff\xff`. Like
    /// libfdb_c, it first gets the transaction its read version (and tenant).
    pub async fn get_addresses_for_key(&self, key: impl AsRef<[u8]>) -> Result<Vec<String>, Error> {
        let key = key.as_ref().to_vec();
        self.call(move |c, now, id| c.get_addresses_for_key(now, id, &key))
            .await
    }

    /// Keys cutting `[begin, end)` into chunks of about `chunk_size` bytes.
    pub async fn get_range_split_points(
        &self,
        begin: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
        chunk_size: i64,
    ) -> Result<Vec<Bytes>, Error> {
        let (begin, end) = (begin.as_ref().to_vec(), end.as_ref().to_vec());
        self.call(move |c, now, id| c.get_range_split_points(now, id, &begin, &end, chunk_size))
            .await
    }

    /// One batch of rows between two selectors (`fdb_transaction_get_range`). Like every
    /// read here the request is made when this is called, so it sees the writes made before
    /// the call and none made while it is pending (libfdb_c reads a snapshot of its write map
    /// taken when the read starts). Special-key reads are routed once, as a point read's
    /// key is (`fdb_protocol::route_special_range`).
    pub fn get_range_batch(
        &self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Pending<D, RangeResult> {
        let module = fdb_protocol::route_special_range(&begin, &end);
        match module {
            Some(SpecialModule::Tenants) => self.tenant_range(begin, end, opts),
            Some(SpecialModule::Management) => self.management_range(begin, end, opts),
            _ => self.call(move |c, now, id| {
                c.get_range_routed(now, id, begin, end, opts, snapshot, module)
            }),
        }
    }

    /// Every row in `[begin, end)` (at most `limit` if non-zero), fetched in batches as the
    /// bindings' range iterators do.
    pub async fn get_range(
        &self,
        begin: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
        limit: usize,
    ) -> Result<Vec<KeyValue>, Error> {
        self.get_range_between(begin.as_ref(), end.as_ref(), limit, false)
            .await
    }

    /// [`Transaction::get_range`] with `snapshot` (the snapshot view's too).
    pub(crate) async fn get_range_between(
        &self,
        begin: &[u8],
        end: &[u8],
        limit: usize,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>, Error> {
        let opts = RangeOptions {
            limit,
            ..RangeOptions::default()
        };
        let (b, e) = (
            KeySelector::first_greater_or_equal(begin),
            KeySelector::first_greater_or_equal(end),
        );
        self.get_range_with(b, e, opts, snapshot).await
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
    pub fn set(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.note_special(key);
        let mut w = self.inner.pending.lock().unwrap_or_else(|e| e.into_inner());
        let packed = w.pack(key, value);
        if self.inner.cell.unbuffered.load(Ordering::Acquire) == 0 {
            w.push(PendingWrite::Set(packed, key.len()));
        } else {
            drop(w);
            self.push_write(PendingWrite::Set(packed, key.len()));
        }
    }

    /// Removes a key.
    pub fn clear(&self, key: impl AsRef<[u8]>) {
        let k = key.as_ref().to_vec();
        self.note_special(&k);
        self.write(move |c, _, id| {
            let _ = c.clear(id, &k);
        });
    }

    /// Removes every key in `[begin, end)`.
    pub fn clear_range(&self, begin: impl AsRef<[u8]>, end: impl AsRef<[u8]>) {
        let (b, e) = (begin.as_ref().to_vec(), end.as_ref().to_vec());
        self.note_special(&b);
        self.write(move |c, _, id| {
            let _ = c.clear_range(id, &b, &e);
        });
    }

    /// An atomic operation on `key` with operand `param`.
    pub fn atomic_op(&self, key: impl AsRef<[u8]>, param: impl AsRef<[u8]>, op: MutationType) {
        let (k, p) = (key.as_ref().to_vec(), param.as_ref().to_vec());
        self.write(move |c, _, id| {
            let _ = c.atomic_op(id, &k, &p, op);
        });
    }

    /// An atomic operation by its raw `fdb.options` code (for replaying another client's
    /// calls): a code that is no atomic op fails the next read or the commit with
    /// `invalid_mutation_type`, as in libfdb_c.
    pub fn atomic_op_code(&self, key: impl AsRef<[u8]>, param: impl AsRef<[u8]>, code: u8) {
        let (k, p) = (key.as_ref().to_vec(), param.as_ref().to_vec());
        self.write(move |c, _, id| {
            let _ = c.atomic_op_code(id, &k, &p, code);
        });
    }

    /// Adds a read or write conflict range. An inverted range is refused here, like
    /// `fdb_transaction_add_conflict_range`'s return code; other errors fail the next read
    /// or the commit.
    pub fn add_conflict_range(
        &self,
        begin: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
        kind: ConflictRangeType,
    ) -> Result<(), Error> {
        let (b, e) = (begin.as_ref().to_vec(), end.as_ref().to_vec());
        check_conflict_range(&b, &e)?;
        self.write(move |c, _, id| {
            let _ = c.add_conflict_range(id, &b, &e, kind);
        });
        Ok(())
    }

    /// Commits; returns the commit version (`-1` when nothing was written). The commit
    /// starts now, so a write made after this call fails with `used_during_commit`.
    pub fn commit(&self) -> impl Future<Output = Result<Version, Error>> + Send + 'static {
        let committed = self.commit_with_versionstamp();
        async move { committed.await.map(|c| c.version) }
    }

    /// Commits; returns the commit version and the versionstamp. After writes into the
    /// special key space's tenant module, the commit first carries them out in this
    /// transaction (as libfdb_c's commit runs `SpecialKeySpace::commit` first), so it starts
    /// once that is done.
    pub fn commit_with_versionstamp(
        &self,
    ) -> impl Future<Output = Result<Committed, Error>> + Send + 'static {
        let special = self.inner.special.load(Ordering::Relaxed);
        self.unbuffer_writes();
        let (pending, tx) = if special {
            (None, Some(self.clone()))
        } else {
            (Some(self.call(|c, now, id| c.commit(now, id))), None)
        };
        let inner = self.inner.clone();
        async move {
            let r = match (pending, tx) {
                (Some(p), _) => p.await,
                (None, Some(tx)) => tx.commit_after_special_writes().await,
                (None, None) => unreachable!("one of the two is set"),
            };
            inner.stamps.commit_done(&r);
            r
        }
    }

    /// The versionstamp the next commit gets, as a future ready once that commit is done
    /// (`fdb_transaction_get_versionstamp`): ask for it inside a retry loop's closure and
    /// await it after the loop.
    pub fn get_versionstamp(&self) -> VersionstampFuture {
        self.inner.stamps.wait()
    }

    /// The versionstamp of the committed transaction.
    pub async fn versionstamp(&self) -> Result<Option<[u8; 10]>, Error> {
        let cell = self.inner.cell.clone();
        crate::driver::query(&self.inner.driver, move |c, _| {
            cell.id.get().and_then(|id| c.versionstamp(*id))
        })
        .await
    }

    /// `on_error`: waits the backoff and resets the transaction if `code` is retryable;
    /// otherwise fails with it. It starts now (as `fdb_transaction_on_error`), not when
    /// awaited: calls made meanwhile run during its backoff.
    pub fn on_error(&self, code: ErrorCode) -> Pending<D, ()> {
        self.inner.stamps.abandon();
        self.unbuffer_writes();
        self.call(move |c, now, id| c.on_error(now, id, code))
    }

    /// `fdb_transaction_cancel`: requests in flight fail with `transaction_cancelled`, and
    /// so does every call after, until [`Transaction::reset`] (or `on_error`, which refuses
    /// to retry it).
    pub fn cancel(&self) {
        let cell = self.inner.cell.clone();
        let writes = self.inner.take_pending();
        apply(&self.inner.driver, move |c, now| {
            let id = flush(&cell, writes, c, now);
            c.cancel_transaction(now, id);
        });
    }

    /// Resets the transaction (options too).
    pub fn reset(&self) {
        self.inner.stamps.abandon();
        let cell = self.inner.cell.clone();
        let writes = self.inner.take_pending();
        apply(&self.inner.driver, move |c, now| {
            let id = flush(&cell, writes, c, now);
            c.reset_transaction(now, id);
        });
    }

    /// Watches a key. The watch starts when the transaction commits and resolves when the
    /// key's value changes; dropping the future cancels it.
    pub fn watch(&self, key: impl AsRef<[u8]>) -> Watch<D> {
        let key = key.as_ref().to_vec();
        self.call(move |c, now, id| c.watch(now, id, &key))
    }
}
