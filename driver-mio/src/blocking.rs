//! The blocking API: `fdb-api`'s calls, each waited for by turning the loop on the calling
//! thread (at most [`CALL_LIMIT`] per call). Handles are cheap to clone and may be used from
//! any thread; the threads share one loop and one set of connections.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use fdb_api::{
    ClusterFile, Committed, ConflictRangeType, Error, ErrorCode, KeySelector, KeyValue, Next,
    Priority, RangeOptions, RangeResult, RetryLoop, TransactionOption, Version,
};

use crate::event_loop::MioDriver;

/// How long a blocking call waits by default.
pub const CALL_LIMIT: Duration = Duration::from_secs(30);

/// A database handle whose calls block.
#[derive(Clone)]
pub struct Database {
    inner: fdb_api::Database<MioDriver>,
}

impl Database {
    /// Opens the database named by a cluster file, searched for as libfdb_c does.
    pub fn open(cluster_file: Option<&Path>) -> Result<Database, Error> {
        fdb_api::Database::open(cluster_file).map(|inner| Database { inner })
    }

    /// Opens the database named by the cluster file at `path` with an explicit seed; the file
    /// is rewritten if the coordinators forward the client elsewhere.
    pub fn open_file_with_seed(path: &Path, seed: u64) -> Result<Database, Error> {
        fdb_api::Database::open_file_with_seed(path, seed).map(|inner| Database { inner })
    }

    /// A database from a parsed connection string, with an explicit seed.
    pub fn from_cluster_file(cluster: ClusterFile, seed: u64) -> Result<Database, Error> {
        fdb_api::Database::from_cluster_file(cluster, seed).map(|inner| Database { inner })
    }

    /// The async form of this database (same loop).
    pub fn async_db(&self) -> &fdb_api::Database<MioDriver> {
        &self.inner
    }

    /// The loop.
    pub fn driver(&self) -> &MioDriver {
        self.inner.driver()
    }

    /// Waits for `fut` by turning the loop, at most `limit`.
    pub fn block_on<F: Future>(&self, fut: F, limit: Duration) -> Result<F::Output, Error> {
        self.driver().block_on(fut, limit)
    }

    fn wait<T>(&self, fut: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
        self.block_on(fut, CALL_LIMIT)?
    }

    /// The connection string in use (it changes when the coordinators forward the client).
    pub fn cluster(&self) -> Result<ClusterFile, Error> {
        self.wait(self.inner.cluster())
    }

    /// A read version at default priority.
    pub fn read_version(&self) -> Result<Version, Error> {
        self.read_version_with(Priority::Default, CALL_LIMIT)
    }

    /// A read version at `priority`, waiting at most `limit`.
    pub fn read_version_with(&self, priority: Priority, limit: Duration) -> Result<Version, Error> {
        self.block_on(self.inner.read_version_with(priority), limit)?
    }

    /// Options every transaction created from now on starts with (and returns to on reset),
    /// like libfdb_c's `transaction_*` database options.
    pub fn set_transaction_defaults(&self, defaults: Vec<TransactionOption>) {
        self.inner.set_transaction_defaults(defaults);
    }

    /// A new transaction.
    pub fn create_transaction(&self) -> Transaction {
        Transaction {
            inner: self.inner.create_transaction(),
        }
    }

    /// Runs `f` in a transaction and commits it, retrying as `on_error` allows (the standard
    /// FDB retry loop). `f` may run several times: keep side effects inside the transaction.
    pub fn run<T>(&self, mut f: impl FnMut(&Transaction) -> Result<T, Error>) -> Result<T, Error> {
        let tx = self.create_transaction();
        loop {
            let result = f(&tx).and_then(|v| tx.commit().map(|_| v));
            match RetryLoop::after(result) {
                Next::Done(r) => return r,
                Next::OnError(code) => tx.on_error(code)?,
            }
        }
    }

    /// Waits for a watch to fire, at most `limit`.
    pub fn wait_watch(&self, w: Watch, limit: Duration) -> Result<Version, Error> {
        self.block_on(w.0, limit)?
    }

    /// Cancels a watch (dropping it does too).
    pub fn cancel_watch(&self, w: Watch) {
        drop(w);
    }
}

/// A pending watch (see [`Transaction::watch`]); dropping it cancels the watch.
pub struct Watch(fdb_api::Watch<MioDriver>);

/// A versionstamp on its way (see [`Transaction::get_versionstamp`]).
pub struct VersionstampFuture {
    fut: std::pin::Pin<Box<dyn Future<Output = Result<[u8; 10], Error>> + Send>>,
    driver: MioDriver,
}

impl VersionstampFuture {
    /// Waits for the transaction's commit (at most `limit`) and returns its versionstamp.
    pub fn wait(self, limit: Duration) -> Result<[u8; 10], Error> {
        self.driver.block_on(self.fut, limit)?
    }
}

/// A transaction whose calls block. Cheap to clone (clones share the transaction).
#[derive(Clone)]
pub struct Transaction {
    inner: fdb_api::Transaction<MioDriver>,
}

impl Transaction {
    fn wait<T>(&self, fut: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
        self.inner.driver().block_on(fut, CALL_LIMIT)?
    }

    /// The async form of this transaction.
    pub fn async_tx(&self) -> &fdb_api::Transaction<MioDriver> {
        &self.inner
    }

    /// Sets an option. One the transaction refuses (`read_your_writes_disable` after a read,
    /// say) fails the next read or the commit, as `fdb_transaction_set_option` defers it.
    pub fn set_option(&self, opt: TransactionOption) {
        self.inner.set_option(opt);
    }

    /// The transaction's read version.
    pub fn get_read_version(&self) -> Result<Version, Error> {
        self.wait(self.inner.get_read_version())
    }

    /// Uses `version` as the read version.
    pub fn set_read_version(&self, version: Version) {
        self.inner.set_read_version(version);
    }

    /// Reads `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>, Error> {
        self.wait(self.inner.get(key))
    }

    /// Reads `key` without a read conflict range.
    pub fn snapshot_get(&self, key: &[u8]) -> Result<Option<Bytes>, Error> {
        self.wait(self.inner.snapshot_get(key))
    }

    /// Resolves a key selector.
    pub fn get_key(&self, sel: KeySelector, snapshot: bool) -> Result<Bytes, Error> {
        self.wait(self.inner.get_key(sel, snapshot))
    }

    /// The storage servers' estimate of the bytes in `[begin, end)`.
    pub fn get_estimated_range_size_bytes(&self, begin: &[u8], end: &[u8]) -> Result<i64, Error> {
        self.wait(self.inner.get_estimated_range_size_bytes(begin, end))
    }

    /// Keys cutting `[begin, end)` into chunks of about `chunk_size` bytes.
    pub fn get_range_split_points(
        &self,
        begin: &[u8],
        end: &[u8],
        chunk_size: i64,
    ) -> Result<Vec<Bytes>, Error> {
        self.wait(self.inner.get_range_split_points(begin, end, chunk_size))
    }

    /// One batch of rows between two selectors.
    pub fn get_range_batch(
        &self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Result<RangeResult, Error> {
        self.wait(self.inner.get_range_batch(begin, end, opts, snapshot))
    }

    /// Every row in `[begin, end)` (at most `limit` if non-zero).
    pub fn get_range(
        &self,
        begin: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<KeyValue>, Error> {
        self.wait(self.inner.get_range(begin, end, limit))
    }

    /// Every row between two selectors, batch after batch.
    pub fn get_range_with(
        &self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>, Error> {
        self.wait(self.inner.get_range_with(begin, end, opts, snapshot))
    }

    /// Sets a key.
    pub fn set(&self, key: &[u8], value: &[u8]) {
        self.inner.set(key, value);
    }

    /// Removes a key.
    pub fn clear(&self, key: &[u8]) {
        self.inner.clear(key);
    }

    /// Removes every key in `[begin, end)`.
    pub fn clear_range(&self, begin: &[u8], end: &[u8]) {
        self.inner.clear_range(begin, end);
    }

    /// An atomic operation (`fdb_protocol::messages::commit::mutation_type`).
    pub fn atomic_op(&self, key: &[u8], param: &[u8], kind: u8) {
        self.inner.atomic_op(key, param, kind);
    }

    /// Adds a read or write conflict range; an inverted range is refused here.
    pub fn add_conflict_range(
        &self,
        begin: &[u8],
        end: &[u8],
        kind: ConflictRangeType,
    ) -> Result<(), Error> {
        self.inner.add_conflict_range(begin, end, kind)
    }

    /// Commits; returns the commit version (`-1` when nothing was written).
    pub fn commit(&self) -> Result<Version, Error> {
        self.wait(self.inner.commit())
    }

    /// Commits; returns the commit version and the versionstamp.
    pub fn commit_with_versionstamp(&self) -> Result<Committed, Error> {
        self.wait(self.inner.commit_with_versionstamp())
    }

    /// The versionstamp of the committed transaction.
    pub fn versionstamp(&self) -> Option<[u8; 10]> {
        self.wait(self.inner.versionstamp()).ok().flatten()
    }

    /// The version this transaction committed at; `-1` if it has not committed, or
    /// committed without writing.
    pub fn get_committed_version(&self) -> Result<Version, Error> {
        self.wait(self.inner.get_committed_version())
    }

    /// About how many bytes the commit would carry; fails with the error of a failed write.
    pub fn get_approximate_size(&self) -> Result<i64, Error> {
        self.wait(self.inner.get_approximate_size())
    }

    /// The versionstamp this transaction will commit with: ask before committing, wait
    /// after (see `fdb_api::Transaction::get_versionstamp`).
    pub fn get_versionstamp(&self) -> VersionstampFuture {
        VersionstampFuture {
            fut: Box::pin(self.inner.get_versionstamp()),
            driver: self.inner.driver().clone(),
        }
    }

    /// Cancels the transaction: requests in flight and every later read, commit and
    /// `on_error` fail with `transaction_cancelled` until it is reset.
    pub fn cancel(&self) {
        self.inner.cancel();
    }

    /// Waits the backoff and resets the transaction if `code` is retryable, else fails.
    pub fn on_error(&self, code: ErrorCode) -> Result<(), Error> {
        self.wait(self.inner.on_error(code))
    }

    /// Resets the transaction (options too).
    pub fn reset(&self) {
        self.inner.reset();
    }

    /// Watches a key: fires once its value changes after this transaction commits.
    pub fn watch(&self, key: &[u8]) -> Watch {
        Watch(self.inner.watch(key))
    }
}
