//! The blocking API: `fdb-api`'s calls, each waited for by turning the loop on the calling
//! thread (at most [`CALL_LIMIT`] per call). Handles are cheap to clone and may be used from
//! any thread; the threads share one loop and one set of connections.
//!
//! Each method is its async twin waited for, so the signatures repeat `fdb-api`'s (and the
//! snapshot view's, `snapshot.rs`) on purpose. The plain ones are listed in [`waited!`]: the
//! signature and its docs written out, the body (wait for the twin's future) written once.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use fdb_api::driver::{Census, Next, RetryLoop};
use fdb_api::{
    ClusterFile, Committed, ConflictRangeType, DatabaseOption, Error, ErrorCode, KeyRange,
    KeySelector, KeyValue, MappedKeyValue, MappedRangeResult, MaybeCommitted, MutationType,
    Priority, RangeOption, RangeOptions, RangeResult, TlsConfig, TransactError, TransactOption,
    TransactionOption, Version,
};

use crate::event_loop::MioDriver;
use crate::range_iter::{KeyValueIter, RangeIter};
use crate::snapshot::Snapshot;
use crate::waited::waited;

pub use crate::event_loop::CALL_LIMIT;

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

    /// [`Database::open`] with TLS settings (what is unset still comes from `FDB_TLS_*`).
    pub fn open_with_tls(cluster_file: Option<&Path>, tls: TlsConfig) -> Result<Database, Error> {
        fdb_api::Database::open_with_tls(cluster_file, tls).map(|inner| Database { inner })
    }

    /// [`Database::open`] with TLS settings and the knobs to use (the environment's
    /// `FDB_NETWORK_OPTION_KNOB` is not read).
    pub fn open_with(
        cluster_file: Option<&Path>,
        tls: TlsConfig,
        knobs: fdb_api::protocol::knobs::Knobs,
    ) -> Result<Database, Error> {
        fdb_api::Database::open_with(cluster_file, tls, knobs).map(|inner| Database { inner })
    }

    /// [`Database::from_cluster_file`] with TLS settings.
    pub fn from_cluster_file_with_tls(
        cluster: ClusterFile,
        seed: u64,
        tls: TlsConfig,
    ) -> Result<Database, Error> {
        fdb_api::Database::from_cluster_file_with_tls(cluster, seed, tls)
            .map(|inner| Database { inner })
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
    /// An option this client does not implement is refused with `unsupported_operation`.
    pub fn set_transaction_defaults(&self, defaults: Vec<TransactionOption>) -> Result<(), Error> {
        self.inner.set_transaction_defaults(defaults)
    }

    /// Sets a database option; one this client does not implement fails with
    /// `unsupported_operation`.
    pub fn set_option(&self, opt: DatabaseOption) -> Result<(), Error> {
        self.inner.set_option(opt)
    }

    /// `\xff\xff/status/json`: the cluster's status document.
    pub fn status_json(&self) -> Result<String, Error> {
        self.wait(self.inner.status_json())
    }

    /// What the client holds right now (see [`fdb_api::Database::census`]).
    pub fn census(&self) -> Result<(Census, usize), Error> {
        self.wait(self.inner.census())
    }

    /// Opens a tenant (`fdb_database_open_tenant`); nothing is checked until it is used: a
    /// missing tenant fails its transactions with `tenant_not_found` (2131).
    pub fn open_tenant(&self, name: impl AsRef<[u8]>) -> Tenant {
        Tenant {
            inner: self.inner.open_tenant(name),
        }
    }

    /// Waits for a watch to fire, at most `limit`.
    pub fn wait_watch(&self, w: Watch, limit: Duration) -> Result<Version, Error> {
        self.block_on(w.0, limit)?
    }

    /// Waits for a versionstamp future (see [`Transaction::get_versionstamp`]).
    pub fn wait_versionstamp(&self, f: fdb_api::VersionstampFuture) -> Result<[u8; 10], Error> {
        self.wait(f)
    }

    /// Cancels a watch (dropping it does too).
    pub fn cancel_watch(&self, w: Watch) {
        drop(w);
    }
}

/// What a database and a tenant both do: create transactions (a tenant's keys are the
/// tenant's) and run closures in them with the retry loops.
macro_rules! transactions {
    ($t:ty) => {
        impl $t {
            /// A new transaction (in a tenant: its keys are the tenant's).
            pub fn create_transaction(&self) -> Transaction {
                Transaction {
                    inner: self.inner.create_transaction(),
                }
            }

            /// Runs `f` in a transaction and commits it, retrying as `on_error` allows (the
            /// standard FDB retry loop). `f` may run several times: keep side effects inside
            /// the transaction.
            pub fn run<T>(
                &self,
                f: impl FnMut(&Transaction) -> Result<T, Error>,
            ) -> Result<T, Error> {
                run_loop(self.create_transaction(), f)
            }

            /// Runs `f` in a transaction and commits it, retrying FDB's retryable errors
            /// through `on_error`; `f`'s own errors (`E` not holding an FDB error) end the
            /// loop as they are (see [`fdb_api::Database::transact`]).
            pub fn transact<T, E: TransactError>(
                &self,
                options: TransactOption,
                f: impl FnMut(&Transaction, MaybeCommitted) -> Result<T, E>,
            ) -> Result<T, E> {
                transact_loop(self.create_transaction(), options, f)
            }
        }
    };
}

transactions!(Database);
transactions!(Tenant);

/// The standard retry loop on `tx`.
fn run_loop<T>(
    tx: Transaction,
    mut f: impl FnMut(&Transaction) -> Result<T, Error>,
) -> Result<T, Error> {
    loop {
        let result = f(&tx).and_then(|v| tx.commit().map(|_| v));
        match RetryLoop::after(result) {
            Next::Done(r) => return r,
            Next::OnError(code) => tx.on_error(code)?,
        }
    }
}

/// The `transact` loop on `tx`.
fn transact_loop<T, E: TransactError>(
    tx: Transaction,
    options: TransactOption,
    mut f: impl FnMut(&Transaction, MaybeCommitted) -> Result<T, E>,
) -> Result<T, E> {
    for opt in options.transaction_options() {
        tx.set_option(opt)?;
    }
    let mut maybe_committed = false;
    loop {
        let err = match f(&tx, MaybeCommitted(maybe_committed)) {
            Ok(v) => match tx.commit() {
                Ok(_) => return Ok(v),
                Err(e) => E::from(e),
            },
            Err(e) => e,
        };
        let code = options.after_failure(err, &mut maybe_committed)?;
        tx.on_error(code)?;
    }
}

/// A tenant whose calls block (see [`fdb_api::Tenant`]): its id is looked up once, when it
/// is opened, and kept; after the tenant is deleted (even if one of the same name is created
/// again) its transactions fail with `tenant_not_found`. Cheap to clone.
#[derive(Clone)]
pub struct Tenant {
    inner: fdb_api::Tenant<MioDriver>,
}

impl Tenant {
    /// The tenant's name.
    pub fn name(&self) -> &[u8] {
        self.inner.name()
    }

    /// The async form of this tenant (same loop).
    pub fn async_tenant(&self) -> &fdb_api::Tenant<MioDriver> {
        &self.inner
    }
}

/// Tenant management, blocking (see [`fdb_api::tenant_management`]): the same calls, each
/// waited for on the loop.
pub mod tenant_management {
    use fdb_api::protocol::Uid;
    use fdb_api::tenant_management as tm;
    use fdb_api::Error;

    pub use fdb_api::tenant_management::{TenantConfig, TenantEntry, TenantLockState, TenantRow};

    use super::{Database, Transaction, CALL_LIMIT};

    /// Each call is `fdb_api::tenant_management`'s on the database's async handle, waited
    /// for: listed with its signature and `Ok` type, the body written once.
    macro_rules! waited_on_db {
        ($($(#[$doc:meta])* pub fn $name:ident(db: &Database $(, $arg:ident: $ty:ty)* $(,)?) -> $ok:ty;)*) => {
            $(
                $(#[$doc])*
                pub fn $name(db: &Database $(, $arg: $ty)*) -> Result<$ok, Error> {
                    db.wait(tm::$name(&db.inner $(, $arg)*))
                }
            )*
        };
    }

    waited_on_db! {
        /// Creates a tenant: `tenant_already_exists` (2132) if the name is taken,
        /// `invalid_tenant_name` (2134) for a name starting with `\xff`, `tenants_disabled`
        /// (2136) when the cluster's `tenant_mode` is disabled.
        pub fn create_tenant(db: &Database, name: impl AsRef<[u8]>) -> ();
        /// Deletes an empty tenant: `tenant_not_found` (2131) if there is none of that name,
        /// `tenant_not_empty` (2133) if it holds keys.
        pub fn delete_tenant(db: &Database, name: impl AsRef<[u8]>) -> ();
        /// Creates a tenant with a configuration (a tenant group).
        pub fn create_tenant_with(
            db: &Database,
            name: impl AsRef<[u8]>,
            config: &TenantConfig,
        ) -> ();
        /// Sets a tenant's configuration: `tenant_not_found` (2131) if there is none of that
        /// name, `invalid_tenant_group_name` (2139) for a group starting with `\xff`.
        pub fn configure_tenant(db: &Database, name: impl AsRef<[u8]>, config: &TenantConfig) -> ();
        /// Locks a tenant under `lock_id` (`tenant_locked`, 2144, if another id holds it).
        pub fn lock_tenant(
            db: &Database,
            name: impl AsRef<[u8]>,
            state: TenantLockState,
            lock_id: Uid,
        ) -> ();
        /// Unlocks a tenant locked under `lock_id`.
        pub fn unlock_tenant(db: &Database, name: impl AsRef<[u8]>, lock_id: Uid) -> ();
        /// Tenants with names in `[begin, end)`, at most `limit` (0: all), in name order, as
        /// libfdb_c's `\xff\xff/management/tenant/map/` rows (the value is the tenant's JSON).
        pub fn list_tenants(
            db: &Database,
            begin: impl AsRef<[u8]>,
            end: impl AsRef<[u8]>,
            limit: usize,
        ) -> Vec<TenantRow>;
        /// Tenant `name`, `None` if there is none.
        pub fn get_tenant(db: &Database, name: impl AsRef<[u8]>) -> Option<TenantEntry>;
    }

    /// Creates a tenant in `tx`; `false` if the name is taken (nothing written).
    pub fn create_tenant_in(tx: &Transaction, name: &[u8]) -> Result<bool, Error> {
        tx.inner
            .driver()
            .block_on(tm::create_tenant_in(&tx.inner, name), CALL_LIMIT)?
    }

    /// Deletes a tenant in `tx`; `false` if there is none of that name.
    pub fn delete_tenant_in(tx: &Transaction, name: &[u8]) -> Result<bool, Error> {
        tx.inner
            .driver()
            .block_on(tm::delete_tenant_in(&tx.inner, name), CALL_LIMIT)?
    }
}

/// A pending watch (see [`Transaction::watch`]); dropping it cancels the watch.
pub struct Watch(fdb_api::Watch<MioDriver>);

/// A transaction whose calls block. Cheap to clone (clones share the transaction).
#[derive(Clone)]
pub struct Transaction {
    inner: fdb_api::Transaction<MioDriver>,
}

// Each method is fdb_api::Transaction's signature with its future waited on: the blocking API
// mirrors it one for one (and Snapshot mirrors fdb_api::Snapshot), so the signatures repeat.
impl Transaction {
    fn wait<T>(&self, fut: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
        self.inner.driver().block_on(fut, CALL_LIMIT)?
    }

    /// The async form of this transaction.
    pub fn async_tx(&self) -> &fdb_api::Transaction<MioDriver> {
        &self.inner
    }

    /// Sets an option. One this client does not implement fails here with
    /// `unsupported_operation`; one the transaction refuses in its state
    /// (`read_your_writes_disable` after a read, say) fails the next read or the commit, as
    /// `fdb_transaction_set_option` defers it.
    pub fn set_option(&self, opt: TransactionOption) -> Result<(), Error> {
        self.inner.set_option(opt)
    }

    /// The snapshot view: the same reads without read conflict ranges.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.inner.snapshot())
    }

    waited! {
        /// About how many bytes the commit would carry so far.
        pub fn get_approximate_size(&self) -> usize;
        /// The version this transaction committed at; `-1` if it has not committed, or
        /// committed without writing.
        pub fn get_committed_version(&self) -> Version;
        /// The read conflict ranges that made the last commit fail (needs
        /// `report_conflicting_keys`); read it before `on_error`.
        pub fn conflicting_keys(&self) -> Vec<KeyRange>;
        /// Every row of a range read, collected.
        pub fn get_range_all(&self, range: impl Into<RangeOption>, snapshot: bool) -> Vec<KeyValue>;
        /// The transaction's read version.
        pub fn get_read_version(&self) -> Version;
        /// Reads `key`.
        pub fn get(&self, key: impl AsRef<[u8]>) -> Option<Bytes>;
        /// Reads `key` without a read conflict range.
        pub fn snapshot_get(&self, key: impl AsRef<[u8]>) -> Option<Bytes>;
        /// Resolves a key selector.
        pub fn get_key(&self, sel: KeySelector, snapshot: bool) -> Bytes;
        /// The storage servers' estimate of the bytes in `[begin, end)`.
        pub fn get_estimated_range_size_bytes(
            &self,
            begin: impl AsRef<[u8]>,
            end: impl AsRef<[u8]>,
        ) -> i64;
        /// The addresses of the storage servers holding `key` (see
        /// [`fdb_api::Transaction::get_addresses_for_key`]).
        pub fn get_addresses_for_key(&self, key: impl AsRef<[u8]>) -> Vec<String>;
        /// Keys cutting `[begin, end)` into chunks of about `chunk_size` bytes.
        pub fn get_range_split_points(
            &self,
            begin: impl AsRef<[u8]>,
            end: impl AsRef<[u8]>,
            chunk_size: i64,
        ) -> Vec<Bytes>;
        /// One batch of rows between two selectors.
        pub fn get_range_batch(
            &self,
            begin: KeySelector,
            end: KeySelector,
            opts: RangeOptions,
            snapshot: bool,
        ) -> RangeResult;
        /// Every row in `[begin, end)` (at most `limit` if non-zero).
        pub fn get_range(
            &self,
            begin: impl AsRef<[u8]>,
            end: impl AsRef<[u8]>,
            limit: usize,
        ) -> Vec<KeyValue>;
        /// One batch of a mapped range read (see
        /// [`fdb_api::Transaction::get_mapped_range_batch`]).
        pub fn get_mapped_range_batch(
            &self,
            begin: KeySelector,
            end: KeySelector,
            mapper: impl AsRef<[u8]>,
            opts: RangeOptions,
            snapshot: bool,
        ) -> MappedRangeResult;
        /// Every row of a mapped range read, batch after batch (see
        /// [`fdb_api::Transaction::get_mapped_range`]).
        pub fn get_mapped_range(
            &self,
            range: impl Into<RangeOption>,
            mapper: impl AsRef<[u8]>,
            snapshot: bool,
        ) -> Vec<MappedKeyValue>;
        /// Every row between two selectors, batch after batch.
        pub fn get_range_with(
            &self,
            begin: KeySelector,
            end: KeySelector,
            opts: RangeOptions,
            snapshot: bool,
        ) -> Vec<KeyValue>;
        /// Commits; returns the commit version (`-1` when nothing was written).
        pub fn commit(&self) -> Version;
        /// Commits; returns the commit version and the versionstamp.
        pub fn commit_with_versionstamp(&self) -> Committed;
        /// Waits the backoff and resets the transaction if `code` is retryable, else fails.
        pub fn on_error(&self, code: ErrorCode) -> ();
    }

    /// Cancels the transaction: calls in flight and after fail with `transaction_cancelled`
    /// until [`Transaction::reset`].
    pub fn cancel(&self) {
        self.inner.cancel();
    }

    /// A range read batch by batch, each fetched when the iterator needs it.
    pub fn get_ranges(&self, range: impl Into<RangeOption>, snapshot: bool) -> RangeIter {
        RangeIter::new(
            self.inner.get_ranges(range, snapshot),
            self.inner.driver().clone(),
        )
    }

    /// A range read row by row.
    pub fn get_ranges_keyvalues(
        &self,
        range: impl Into<RangeOption>,
        snapshot: bool,
    ) -> KeyValueIter {
        KeyValueIter::new(self.get_ranges(range, snapshot))
    }

    /// Uses `version` as the read version.
    pub fn set_read_version(&self, version: Version) {
        self.inner.set_read_version(version);
    }

    /// Sets a key.
    pub fn set(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.inner.set(key, value);
    }

    /// Removes a key.
    pub fn clear(&self, key: impl AsRef<[u8]>) {
        self.inner.clear(key);
    }

    /// Removes every key in `[begin, end)`.
    pub fn clear_range(&self, begin: impl AsRef<[u8]>, end: impl AsRef<[u8]>) {
        self.inner.clear_range(begin, end);
    }

    /// An atomic operation on `key` with operand `param`.
    pub fn atomic_op(&self, key: impl AsRef<[u8]>, param: impl AsRef<[u8]>, op: MutationType) {
        self.inner.atomic_op(key, param, op);
    }

    /// An atomic operation by its raw `fdb.options` code; a code that is no atomic op fails
    /// the next read or the commit with `invalid_mutation_type`.
    pub fn atomic_op_code(&self, key: impl AsRef<[u8]>, param: impl AsRef<[u8]>, code: u8) {
        self.inner.atomic_op_code(key, param, code);
    }

    /// Adds a read or write conflict range; an inverted range is refused here.
    pub fn add_conflict_range(
        &self,
        begin: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
        kind: ConflictRangeType,
    ) -> Result<(), Error> {
        self.inner.add_conflict_range(begin, end, kind)
    }

    /// The versionstamp of the committed transaction.
    pub fn versionstamp(&self) -> Option<[u8; 10]> {
        self.wait(self.inner.versionstamp()).ok().flatten()
    }

    /// The versionstamp the next commit gets: wait for it with [`Database::wait_versionstamp`]
    /// once the commit is done (for instance after [`Database::transact`] returned it).
    pub fn get_versionstamp(&self) -> fdb_api::VersionstampFuture {
        self.inner.get_versionstamp()
    }

    /// Resets the transaction (options too).
    pub fn reset(&self) {
        self.inner.reset();
    }

    /// Watches a key: fires once its value changes after this transaction commits.
    pub fn watch(&self, key: impl AsRef<[u8]>) -> Watch {
        Watch(self.inner.watch(key))
    }
}
