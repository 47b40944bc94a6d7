//! foundationdb-rs's `Transaction` over fdb-api's transaction on the mio loop.

use std::fmt;
use std::ops::{Deref, Range, RangeInclusive};
use std::sync::Arc;

use fdb_api::ErrorCode;
use fdb_driver_mio::AsyncTransaction;
use futures::future::Either;
use futures::{stream, Future, FutureExt, Stream, TryStreamExt};

use crate::error::{FdbError, FdbResult, TransactionMetricsNotFound};
use crate::fdb_keys::FdbKeys;
use crate::future::{FdbAddress, FdbAddresses, FdbFuture, FdbSlice, FdbValue, FdbValues};
use crate::keyselector::KeySelector;
use crate::mapped_key_values::{FdbMappedKeyValue, MappedKeyValues};
pub use crate::metrics::ConflictingKeyRange;
use crate::metrics::{FdbCommand, TransactionMetrics};
use crate::net::DbHandle;
use crate::options;

const METADATA_VERSION_KEY: &[u8] = b"\xff/metadataVersion";
const CONFLICTING_KEYS: &[u8] = b"\xff\xff/transaction/conflicting_keys/";
const CONFLICTING_KEYS_END: &[u8] = b"\xff\xff/transaction/conflicting_keys/\xff\xff";

/// foundationdb-rs's commit outcomes (each holding its transaction in `tr`) give the
/// transaction back reset, as `reset` and, for some, `From`: written once for the three.
macro_rules! gives_back_reset {
    ($t:ident) => {
        impl $t {
            /// The transaction, reset for reuse.
            pub fn reset(mut self) -> Transaction {
                self.tr.reset();
                self.tr
            }
        }
    };
    ($t:ident, and From) => {
        gives_back_reset!($t);

        impl From<$t> for Transaction {
            fn from(outcome: $t) -> Transaction {
                outcome.reset()
            }
        }
    };
}

/// A transaction that committed.
#[derive(Debug)]
pub struct TransactionCommitted {
    tr: Transaction,
    version: i64,
}

impl TransactionCommitted {
    /// The version it committed at (-1 for a transaction without writes, as in libfdb_c).
    pub fn committed_version(&self) -> FdbResult<i64> {
        Ok(self.version)
    }
}

gives_back_reset!(TransactionCommitted, and From);

/// A commit that failed, with its transaction for `on_error`.
pub struct TransactionCommitError {
    tr: Transaction,
    err: FdbError,
}

impl TransactionCommitError {
    /// `on_error` for the commit's error: the transaction back, reset after FDB's backoff, if
    /// the error is retryable.
    pub fn on_error(self) -> impl Future<Output = FdbResult<Transaction>> {
        let TransactionCommitError { tr, err } = self;
        tr.on_error(err)
    }

    /// The read ranges that conflicted (with `report_conflicting_keys`).
    pub async fn conflicting_keys(&self) -> FdbResult<Vec<ConflictingKeyRange>> {
        self.tr.conflicting_keys().await
    }
}

gives_back_reset!(TransactionCommitError);

impl Deref for TransactionCommitError {
    type Target = FdbError;
    fn deref(&self) -> &FdbError {
        &self.err
    }
}

impl From<TransactionCommitError> for FdbError {
    fn from(e: TransactionCommitError) -> FdbError {
        e.err
    }
}

impl fmt::Debug for TransactionCommitError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "TransactionCommitError({})", self.err)
    }
}

impl fmt::Display for TransactionCommitError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        fmt::Display::fmt(&self.err, f)
    }
}

impl std::error::Error for TransactionCommitError {}

/// What `commit` gives.
pub type TransactionResult = Result<TransactionCommitted, TransactionCommitError>;

/// A cancelled transaction.
#[derive(Debug)]
pub struct TransactionCancelled {
    tr: Transaction,
}

gives_back_reset!(TransactionCancelled, and From);

/// A range read's parameters (`fdb_transaction_get_range`'s).
#[derive(Debug, Clone)]
pub struct RangeOption<'a> {
    /// The first key selected.
    pub begin: KeySelector<'a>,
    /// The key after the last selected.
    pub end: KeySelector<'a>,
    /// Most rows in all (`None`: no limit).
    pub limit: Option<usize>,
    /// Most bytes per batch (0: no limit).
    pub target_bytes: usize,
    /// How rows are batched.
    pub mode: options::StreamingMode,
    /// From the end backwards.
    pub reverse: bool,
    #[doc(hidden)]
    pub __non_exhaustive: std::marker::PhantomData<()>,
}

impl RangeOption<'_> {
    /// The same range, read in the other direction.
    pub fn rev(mut self) -> Self {
        self.reverse = !self.reverse;
        self
    }

    /// The rest of the range after the batch `kvs` (`None` when it was the last).
    pub fn next_range(self, kvs: &FdbValues) -> Option<Self> {
        self.after_batch(kvs.more(), kvs.last().map(|kv| kv.key()), kvs.len())
    }

    /// The rest of the range after a mapped batch (continuing after its last row).
    pub(crate) fn next_mapped_range(self, kvs: &MappedKeyValues) -> Option<Self> {
        self.after_batch(kvs.more(), kvs.last().map(|kv| kv.parent_key()), kvs.len())
    }

    /// The rest of the range after a batch of `rows` rows ending at `last` (`more`: the
    /// batch did not reach the range's end).
    fn after_batch(mut self, more: bool, last: Option<&[u8]>, rows: usize) -> Option<Self> {
        if !more {
            return None;
        }
        let last = last?;
        if let Some(limit) = self.limit.as_mut() {
            *limit = limit.saturating_sub(rows);
            if *limit == 0 {
                return None;
            }
        }
        if self.reverse {
            self.end.make_first_greater_or_equal(last);
        } else {
            self.begin.make_first_greater_than(last);
        }
        Some(self)
    }

    fn core_options(&self, iteration: usize) -> FdbResult<fdb_protocol::RangeOptions> {
        Ok(fdb_protocol::RangeOptions {
            limit: self.limit.unwrap_or(0),
            target_bytes: self.target_bytes,
            mode: crate::convert::streaming_mode(self.mode),
            // Past i32::MAX libfdb_c refuses the iteration (client_invalid_operation).
            iteration: u32::try_from(iteration)
                .ok()
                .filter(|&i| i32::try_from(i).is_ok())
                .ok_or(FdbError::of(ErrorCode::CLIENT_INVALID_OPERATION))?,
            reverse: self.reverse,
        })
    }
}

impl Default for RangeOption<'_> {
    fn default() -> Self {
        RangeOption {
            begin: KeySelector::first_greater_or_equal(&[][..]),
            end: KeySelector::first_greater_or_equal(&[][..]),
            limit: None,
            target_bytes: 0,
            mode: options::StreamingMode::Iterator,
            reverse: false,
            __non_exhaustive: std::marker::PhantomData,
        }
    }
}

impl<'a> From<(KeySelector<'a>, KeySelector<'a>)> for RangeOption<'a> {
    fn from((begin, end): (KeySelector<'a>, KeySelector<'a>)) -> Self {
        RangeOption {
            begin,
            end,
            ..RangeOption::default()
        }
    }
}

impl From<(Vec<u8>, Vec<u8>)> for RangeOption<'static> {
    fn from((begin, end): (Vec<u8>, Vec<u8>)) -> Self {
        (
            KeySelector::first_greater_or_equal(begin),
            KeySelector::first_greater_or_equal(end),
        )
            .into()
    }
}

impl<'a> From<(&'a [u8], &'a [u8])> for RangeOption<'a> {
    fn from((begin, end): (&'a [u8], &'a [u8])) -> Self {
        (
            KeySelector::first_greater_or_equal(begin),
            KeySelector::first_greater_or_equal(end),
        )
            .into()
    }
}

impl<'a> From<Range<KeySelector<'a>>> for RangeOption<'a> {
    fn from(r: Range<KeySelector<'a>>) -> Self {
        (r.start, r.end).into()
    }
}

impl<'a> From<Range<&'a [u8]>> for RangeOption<'a> {
    fn from(r: Range<&'a [u8]>) -> Self {
        (r.start, r.end).into()
    }
}

impl From<Range<Vec<u8>>> for RangeOption<'static> {
    fn from(r: Range<Vec<u8>>) -> Self {
        (r.start, r.end).into()
    }
}

impl<'a> From<RangeInclusive<&'a [u8]>> for RangeOption<'a> {
    fn from(r: RangeInclusive<&'a [u8]>) -> Self {
        let (start, end) = r.into_inner();
        (
            KeySelector::first_greater_or_equal(start),
            KeySelector::first_greater_than(end),
        )
            .into()
    }
}

impl From<RangeInclusive<Vec<u8>>> for RangeOption<'static> {
    fn from(r: RangeInclusive<Vec<u8>>) -> Self {
        let (start, end) = r.into_inner();
        (
            KeySelector::first_greater_or_equal(start),
            KeySelector::first_greater_than(end),
        )
            .into()
    }
}

impl From<&crate::tuple::Subspace> for RangeOption<'static> {
    fn from(s: &crate::tuple::Subspace) -> Self {
        s.range().into()
    }
}

/// A transaction. Its calls queue requests on the database's loop at once (the order of
/// calls is the order the cluster sees), and the futures they return complete on any
/// executor.
pub struct Transaction {
    pub(crate) inner: AsyncTransaction,
    /// Keeps the database's loop thread alive while the transaction lives (never read).
    _db: Arc<DbHandle>,
    pub(crate) metrics: Option<TransactionMetrics>,
}

impl fmt::Debug for Transaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Transaction")
    }
}

fn fdb<T>(r: Result<T, fdb_api::Error>) -> FdbResult<T> {
    r.map_err(FdbError::from)
}

impl Transaction {
    pub(crate) fn new(
        inner: AsyncTransaction,
        db: Arc<DbHandle>,
        metrics: Option<TransactionMetrics>,
    ) -> Self {
        Transaction {
            inner,
            _db: db,
            metrics,
        }
    }

    /// Sets an option (`fdb_transaction_set_option`).
    pub fn set_option(&self, opt: options::TransactionOption) -> FdbResult<()> {
        let raw = opt.raw_value();
        self.set_raw_option(opt.code(), raw)
    }

    /// Sets an option by its C API code and raw parameter.
    pub fn set_raw_option(&self, code: i32, data: Option<Vec<u8>>) -> FdbResult<()> {
        let opt = fdb_protocol::TransactionOption::from_code(code, data.as_deref())
            .map_err(FdbError::of)?;
        fdb(self.inner.set_option(opt))
    }

    /// Sets `key` to `value`.
    pub fn set(&self, key: &[u8], value: &[u8]) {
        if let Some(m) = &self.metrics {
            m.report_metrics(FdbCommand::Set((key.len() + value.len()) as u64));
        }
        self.inner.set(key, value);
    }

    /// Clears `key`.
    pub fn clear(&self, key: &[u8]) {
        if let Some(m) = &self.metrics {
            m.report_metrics(FdbCommand::Clear);
        }
        self.inner.clear(key);
    }

    /// Reads `key`.
    pub fn get(&self, key: &[u8], snapshot: bool) -> FdbFuture<Option<FdbSlice>> {
        let read = if snapshot {
            self.inner.snapshot_get(key)
        } else {
            self.inner.get(key)
        };
        let metrics = self.metrics.clone();
        let key_len = key.len();
        FdbFuture::new(async move {
            let v = fdb(read.await)?;
            if let Some(m) = &metrics {
                let (bytes, rows) = v.as_ref().map_or((key_len, 0), |v| (key_len + v.len(), 1));
                m.report_metrics(FdbCommand::Get(bytes as u64, rows));
            }
            Ok(v.map(FdbSlice))
        })
    }

    /// An atomic operation on `key`.
    pub fn atomic_op(&self, key: &[u8], param: &[u8], op_type: options::MutationType) {
        if let Some(m) = &self.metrics {
            m.report_metrics(FdbCommand::Atomic);
        }
        // The code goes down as is: one the core does not know fails the commit, as in
        // libfdb_c.
        self.inner
            .atomic_op_code(key, param, u8::try_from(op_type.code()).unwrap_or(u8::MAX));
    }

    /// The key a selector selects.
    pub fn get_key(&self, selector: &KeySelector, snapshot: bool) -> FdbFuture<FdbSlice> {
        let read = self.inner.get_key(selector.to_core(), snapshot);
        FdbFuture::new(async move { Ok(FdbSlice(fdb(read.await)?)) })
    }

    /// The whole range, batch by batch.
    pub fn get_ranges<'a>(
        &'a self,
        opt: RangeOption<'a>,
        snapshot: bool,
    ) -> impl Stream<Item = FdbResult<FdbValues>> + Send + Sync + Unpin + 'a {
        stream::unfold((1usize, Some(opt)), move |(iteration, opt)| match opt {
            None => Either::Left(futures::future::ready(None)),
            Some(opt) => {
                Either::Right(self.get_range(&opt, iteration, snapshot).map(move |batch| {
                    let next = match &batch {
                        Ok(values) => opt.next_range(values),
                        Err(_) => None,
                    };
                    Some((batch, (iteration + 1, next)))
                }))
            }
        })
    }

    /// The whole range, row by row.
    pub fn get_ranges_keyvalues<'a>(
        &'a self,
        opt: RangeOption<'a>,
        snapshot: bool,
    ) -> impl Stream<Item = FdbResult<FdbValue>> + Unpin + 'a {
        self.get_ranges(opt, snapshot)
            .map_ok(|values| stream::iter(values.into_iter().map(Ok)))
            .try_flatten()
    }

    /// One batch of a range read (`iteration` counts from 1, for the `Iterator` mode).
    pub fn get_range(
        &self,
        opt: &RangeOption,
        iteration: usize,
        snapshot: bool,
    ) -> FdbFuture<FdbValues> {
        let opts = match opt.core_options(iteration) {
            Ok(o) => o,
            Err(e) => return FdbFuture::ready(Err(e)),
        };
        let read =
            self.inner
                .get_range_batch(opt.begin.to_core(), opt.end.to_core(), opts, snapshot);
        let metrics = self.metrics.clone();
        FdbFuture::new(async move {
            let r = fdb(read.await)?;
            if let Some(m) = &metrics {
                let bytes: usize = r
                    .rows
                    .iter()
                    .map(|kv| kv.key().len() + kv.value().len())
                    .sum();
                m.report_metrics(FdbCommand::GetRange(bytes as u64, r.rows.len() as u64));
            }
            Ok(FdbValues::new(r.rows, r.more))
        })
    }

    /// A range read whose rows each select more rows through `mapper`
    /// (`fdb_transaction_get_mapped_range`): the storage servers apply the mapper, as for
    /// libfdb_c, with its rules (no snapshot reads, no reads of the transaction's own writes:
    /// `get_mapped_range_reads_your_writes`; conflict ranges on every mapped key and range).
    pub fn get_mapped_range(
        &self,
        opt: &RangeOption,
        mapper: &[u8],
        iteration: usize,
        snapshot: bool,
    ) -> FdbFuture<MappedKeyValues> {
        let opts = match opt.core_options(iteration) {
            Ok(o) => o,
            Err(e) => return FdbFuture::ready(Err(e)),
        };
        let read = self.inner.get_mapped_range_batch(
            opt.begin.to_core(),
            opt.end.to_core(),
            mapper,
            opts,
            snapshot,
        );
        FdbFuture::new(async move {
            let r = fdb(read.await)?;
            Ok(MappedKeyValues {
                rows: r
                    .rows
                    .into_iter()
                    .map(FdbMappedKeyValue::from_core)
                    .collect(),
                more: r.more,
            })
        })
    }

    /// [`Transaction::get_mapped_range`] batch after batch.
    pub fn get_mapped_ranges<'a>(
        &'a self,
        opt: RangeOption<'a>,
        mapper: &'a [u8],
        snapshot: bool,
    ) -> impl Stream<Item = FdbResult<MappedKeyValues>> + Send + Sync + Unpin + 'a {
        stream::unfold((1usize, Some(opt)), move |(iteration, opt)| match opt {
            None => Either::Left(futures::future::ready(None)),
            Some(opt) => Either::Right(
                self.get_mapped_range(&opt, mapper, iteration, snapshot)
                    .map(move |batch| {
                        let next = match &batch {
                            Ok(values) => opt.next_mapped_range(values),
                            Err(_) => None,
                        };
                        Some((batch, (iteration + 1, next)))
                    }),
            ),
        })
    }

    /// Clears `[begin, end)`.
    pub fn clear_range(&self, begin: &[u8], end: &[u8]) {
        if let Some(m) = &self.metrics {
            m.report_metrics(FdbCommand::ClearRange);
        }
        self.inner.clear_range(begin, end);
    }

    /// Clears a subspace's keys.
    pub fn clear_subspace_range(&self, subspace: &crate::tuple::Subspace) {
        let (begin, end) = subspace.range();
        self.clear_range(&begin, &end)
    }

    /// The storage servers' estimate of the bytes in `[begin, end)`.
    pub fn get_estimated_range_size_bytes(&self, begin: &[u8], end: &[u8]) -> FdbFuture<i64> {
        let tx = self.inner.clone();
        let (b, e) = (begin.to_vec(), end.to_vec());
        FdbFuture::new(async move { fdb(tx.get_estimated_range_size_bytes(b, e).await) })
    }

    /// Commits.
    pub fn commit(self) -> impl Future<Output = TransactionResult> + Send + Sync + Unpin {
        let commit = self.inner.commit();
        FdbFuture::new(async move { fdb(commit.await) }).map(move |r| match r {
            Ok(version) => Ok(TransactionCommitted { tr: self, version }),
            Err(err) => Err(TransactionCommitError { tr: self, err }),
        })
    }

    /// FDB's retry rule for `err`: the transaction back, reset after the backoff, if it is
    /// retryable; the error otherwise.
    pub fn on_error(
        self,
        err: FdbError,
    ) -> impl Future<Output = FdbResult<Transaction>> + Send + Sync + Unpin {
        let code = u16::try_from(err.code())
            .map(ErrorCode)
            .unwrap_or(ErrorCode::UNKNOWN_ERROR);
        let wait = self.inner.on_error(code);
        FdbFuture::new(async move { fdb(wait.await) }).map(move |r| r.map(|()| self))
    }

    /// Cancels what the transaction has in flight.
    pub fn cancel(self) -> TransactionCancelled {
        self.inner.cancel();
        TransactionCancelled { tr: self }
    }

    // foundationdb-rs's two custom-metric methods, each its own call on the metrics.
    /// Sets a custom metric (only on an instrumented transaction).
    pub fn set_custom_metric(
        &self,
        name: &str,
        value: u64,
        labels: &[(&str, &str)],
    ) -> Result<(), TransactionMetricsNotFound> {
        let m = self.metrics.as_ref().ok_or(TransactionMetricsNotFound)?;
        m.set_custom(name, value, labels);
        Ok(())
    }

    /// Adds to a custom metric (only on an instrumented transaction).
    pub fn increment_custom_metric(
        &self,
        name: &str,
        amount: u64,
        labels: &[(&str, &str)],
    ) -> Result<(), TransactionMetricsNotFound> {
        let m = self.metrics.as_ref().ok_or(TransactionMetricsNotFound)?;
        m.increment_custom(name, amount, labels);
        Ok(())
    }

    /// The addresses of the storage servers holding `key`.
    pub fn get_addresses_for_key(&self, key: &[u8]) -> FdbFuture<FdbAddresses> {
        let tx = self.inner.clone();
        let key = key.to_vec();
        FdbFuture::new(async move {
            let list = fdb(tx.get_addresses_for_key(key).await)?;
            Ok(FdbAddresses(
                list.into_iter()
                    .filter_map(|a| std::ffi::CString::new(a).ok())
                    .map(FdbAddress)
                    .collect(),
            ))
        })
    }

    /// Completes when `key`'s value changes after this transaction commits.
    pub fn watch(&self, key: &[u8]) -> FdbFuture<()> {
        let w = self.inner.watch(key);
        FdbFuture::new(async move { fdb(w.await).map(|_| ()) })
    }

    /// The size of the transaction's mutations and conflict ranges so far.
    pub fn get_approximate_size(&self) -> FdbFuture<i64> {
        let tx = self.inner.clone();
        FdbFuture::new(async move {
            Ok(i64::try_from(fdb(tx.get_approximate_size().await)?).unwrap_or(i64::MAX))
        })
    }

    /// Keys splitting `[begin, end)` into chunks of about `chunk_size` bytes.
    pub fn get_range_split_points(
        &self,
        begin: &[u8],
        end: &[u8],
        chunk_size: i64,
    ) -> FdbFuture<FdbKeys> {
        let tx = self.inner.clone();
        let (b, e) = (begin.to_vec(), end.to_vec());
        FdbFuture::new(async move {
            let keys = fdb(tx.get_range_split_points(b, e, chunk_size).await)?;
            Ok(FdbKeys::new(keys))
        })
    }

    /// The versionstamp this transaction commits with (after a successful commit).
    pub fn get_versionstamp(&self) -> FdbFuture<FdbSlice> {
        let stamp = self.inner.get_versionstamp();
        FdbFuture::new(async move {
            let s = fdb(stamp.await)?;
            Ok(FdbSlice(bytes::Bytes::copy_from_slice(&s)))
        })
    }

    /// The read version.
    pub fn get_read_version(&self) -> FdbFuture<i64> {
        let v = self.inner.get_read_version();
        FdbFuture::new(async move { fdb(v.await) })
    }

    /// Sets the read version.
    pub fn set_read_version(&self, version: i64) {
        self.inner.set_read_version(version);
    }

    /// The cluster's metadata version: the commit version (the first 8 bytes, big-endian,
    /// of the versionstamp) of the last `update_metadata_version`: `\xff/metadataVersion`,
    /// which the core answers from the read version's reply, as libfdb_c does (no
    /// `read_system_keys` needed).
    pub async fn get_metadata_version(&self, snapshot: bool) -> FdbResult<Option<i64>> {
        let value = self.get(METADATA_VERSION_KEY, snapshot).await?;
        Ok(value
            .filter(|v| v.len() >= 8)
            .map(|v| i64::from_be_bytes(v[..8].try_into().expect("8 bytes"))))
    }

    /// Bumps the metadata version (a versionstamped write of `\xff/metadataVersion`).
    pub fn update_metadata_version(&self) {
        self.atomic_op(
            METADATA_VERSION_KEY,
            &[0u8; 14],
            options::MutationType::SetVersionstampedValue,
        );
    }

    /// Resets the transaction for reuse.
    pub fn reset(&mut self) {
        self.inner.reset();
    }

    /// The read ranges that conflicted, after a commit failed with `not_committed` and
    /// `report_conflicting_keys` was set.
    pub async fn conflicting_keys(&self) -> FdbResult<Vec<ConflictingKeyRange>> {
        let rows = fdb(self
            .inner
            .get_range_with(
                fdb_protocol::KeySelector::first_greater_or_equal(CONFLICTING_KEYS),
                fdb_protocol::KeySelector::first_greater_or_equal(CONFLICTING_KEYS_END),
                fdb_protocol::RangeOptions::default(),
                false,
            )
            .await)?;
        // Rows alternate: a range's begin has the value "1", its end "0".
        let mut out = Vec::new();
        let mut begin: Option<Vec<u8>> = None;
        for kv in rows {
            let key = kv.key()[CONFLICTING_KEYS.len().min(kv.key().len())..].to_vec();
            match (kv.value(), begin.take()) {
                (b"1", _) => begin = Some(key),
                (_, Some(b)) => out.push(ConflictingKeyRange { begin: b, end: key }),
                (_, None) => {}
            }
        }
        Ok(out)
    }

    /// Adds a read or write conflict range.
    pub fn add_conflict_range(
        &self,
        begin: &[u8],
        end: &[u8],
        ty: options::ConflictRangeType,
    ) -> FdbResult<()> {
        let ty = match ty {
            options::ConflictRangeType::Read => fdb_protocol::ConflictRangeType::Read,
            _ => fdb_protocol::ConflictRangeType::Write,
        };
        fdb(self.inner.add_conflict_range(begin, end, ty))
    }
}
