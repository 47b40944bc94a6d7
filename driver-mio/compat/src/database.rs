//! foundationdb-rs's `Database` and its retry loops, over fdb-api's database on the mio
//! loop, whose thread this database owns (see `crate::net`).

use std::future::Future;
use std::marker::PhantomData;
use std::ops::Deref;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fdb_api::ErrorCode;
use fdb_driver_mio::AsyncDatabase;
use futures::FutureExt;

use crate::binding_error::FdbBindingError;
use crate::error::{FdbError, FdbResult, TransactError};
use crate::future::{FdbFuture, FdbSlice};
use crate::metrics::{MetricsReport, TransactionMetrics};
use crate::net::{DbHandle, LoopThread};
use crate::options::DatabaseOption;
use crate::transaction::{
    Transaction, TransactionCommitError, TransactionCommitted, TransactionResult,
};

/// Whether an earlier attempt of the retry loop may have committed.
pub struct MaybeCommitted(pub(crate) bool);

impl From<MaybeCommitted> for bool {
    fn from(m: MaybeCommitted) -> bool {
        m.0
    }
}

/// Callbacks of `Database::run_with_hooks` at each step of the retry loop.
pub trait RunnerHooks {
    /// A commit failed (before `on_error`).
    fn on_commit_error(
        &self,
        _err: &TransactionCommitError,
    ) -> impl Future<Output = FdbResult<()>> + Send {
        async { Ok(()) }
    }
    /// The closure failed with an FDB error.
    fn on_closure_error(&self, _err: &FdbError) {}
    /// `on_error` waited this long.
    fn on_error_duration(&self, _duration_ms: u64) {}
    /// The commit succeeded after this long.
    fn on_commit_success(&self, _committed: &TransactionCommitted, _commit_duration_ms: u64) {}
    /// Another attempt starts.
    fn on_retry(&self) {}
    /// The loop ended.
    fn on_complete(&self) {}
}

/// Hooks that do nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopHooks;

impl RunnerHooks for NoopHooks {}

struct InstrumentedHooks {
    metrics: TransactionMetrics,
    start: Instant,
}

impl RunnerHooks for InstrumentedHooks {
    async fn on_commit_error(&self, err: &TransactionCommitError) -> FdbResult<()> {
        if err.code() == 1020 {
            self.metrics.increment_conflict_count();
        }
        let keys = err.conflicting_keys().await?;
        if !keys.is_empty() {
            self.metrics.set_conflicting_keys(keys);
        }
        Ok(())
    }
    fn on_error_duration(&self, ms: u64) {
        self.metrics.add_error_time(ms);
    }
    fn on_commit_success(&self, committed: &TransactionCommitted, ms: u64) {
        self.metrics.record_commit_time(ms);
        if let Ok(v) = committed.committed_version() {
            self.metrics.set_commit_version(v);
        }
    }
    fn on_retry(&self) {
        self.metrics.reset_current();
    }
    fn on_complete(&self) {
        self.metrics
            .set_execution_time(self.start.elapsed().as_millis() as u64);
    }
}

fn millis(since: Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

/// [`Database::transact`]'s loop from its first transaction (a tenant's too).
pub(crate) async fn transact_loop<F>(
    mut tx: Transaction,
    mut f: F,
    options: TransactOption,
) -> Result<F::Item, F::Error>
where
    F: DatabaseTransact,
{
    let idempotent = options.is_idempotent;
    let deadline = options.time_out.map(|d| Instant::now() + d);
    let limit = options.retry_limit;
    let mut tries: u32 = 0;
    let mut can_retry = move || {
        tries += 1;
        limit.is_none_or(|l| tries < l) && deadline.is_none_or(|t| Instant::now() < t)
    };
    loop {
        let (f2, t, r) = f.transact(tx).await;
        f = f2;
        tx = match r {
            Ok(item) => match t.commit().await {
                Ok(_) => return Ok(item),
                Err(e) => {
                    if (idempotent || !e.is_maybe_committed()) && can_retry() {
                        e.on_error().await?
                    } else {
                        return Err(F::Error::from(e.into()));
                    }
                }
            },
            Err(user) => match user.try_into_fdb_error() {
                Ok(e) => {
                    if (idempotent || !e.is_maybe_committed()) && can_retry() {
                        t.on_error(e).await?
                    } else {
                        return Err(F::Error::from(e));
                    }
                }
                Err(user) => return Err(user),
            },
        };
    }
}

pub(crate) async fn run_loop<F, Fut, T, H: RunnerHooks>(
    mut tx: RetryableTransaction,
    hooks: &H,
    closure: F,
) -> Result<T, FdbBindingError>
where
    F: Fn(RetryableTransaction, MaybeCommitted) -> Fut,
    Fut: Future<Output = Result<T, FdbBindingError>>,
{
    let mut maybe_committed = false;
    #[cfg(feature = "trace")]
    let mut iteration: u64 = 0;
    loop {
        #[cfg(feature = "trace")]
        {
            iteration += 1;
        }
        let result = closure(tx.clone(), MaybeCommitted(maybe_committed)).await;
        if let Err(e) = result {
            let Some(err) = e.get_fdb_error() else {
                return Err(e);
            };
            maybe_committed = err.is_maybe_committed();
            hooks.on_closure_error(&err);
            let started = Instant::now();
            match tx.on_error(err).await? {
                Ok(t) => {
                    #[cfg(feature = "trace")]
                    tracing::warn!(iteration, error_code = err.code(), "restarting transaction");
                    hooks.on_error_duration(millis(started));
                    hooks.on_retry();
                    tx = t;
                    continue;
                }
                Err(e) => return Err(FdbBindingError::from(e)),
            }
        }
        let started = Instant::now();
        let commit = tx.commit().await?;
        let took = millis(started);
        match commit {
            Ok(committed) => {
                hooks.on_commit_success(&committed, took);
                return result;
            }
            Err(commit_error) => {
                #[cfg(feature = "trace")]
                let error_code = commit_error.code();
                maybe_committed = commit_error.is_maybe_committed();
                let _ = hooks.on_commit_error(&commit_error).await;
                let started = Instant::now();
                match commit_error.on_error().await {
                    Ok(t) => {
                        #[cfg(feature = "trace")]
                        tracing::warn!(iteration, error_code, "restarting transaction");
                        hooks.on_error_duration(millis(started));
                        hooks.on_retry();
                        tx = RetryableTransaction::new(t);
                    }
                    Err(e) => return Err(FdbBindingError::from(e)),
                }
            }
        }
    }
}

/// A database (`FDBDatabase`): `Send + Sync`, share it behind an `Arc`.
pub struct Database {
    pub(crate) inner: Arc<DbHandle>,
}

impl Database {
    /// Opens the database of a cluster file (`None`: libfdb_c's lookup, `FDB_CLUSTER_FILE`
    /// then `fdb.cluster` then the default path). The network must be set up
    /// (`network_not_setup` otherwise, as in libfdb_c).
    pub fn new(path: Option<&str>) -> FdbResult<Database> {
        if crate::net::phase() == crate::net::Phase::Unset {
            return Err(FdbError::of(ErrorCode::NETWORK_NOT_SETUP));
        }
        let path = path.map(Path::new);
        let tls = crate::net::tls_config().unwrap_or_default();
        let db = AsyncDatabase::open_with(path, tls, crate::net::knobs())?;
        // Before the loop turns: the database's own events (its first connections) follow.
        if crate::trace::enabled() {
            // The file the database read, read again for its name and connection string.
            if let Ok((file, cluster)) = fdb_api::read_cluster_file(path) {
                let file = file.to_string_lossy();
                crate::trace::database_opened(&file, &cluster, crate::api::api_version());
            }
        }
        let loop_thread = LoopThread::start(db.driver())?;
        Ok(Database {
            inner: Arc::new(DbHandle { db, loop_thread }),
        })
    }

    /// [`Database::new`] with a path.
    pub fn from_path(path: &str) -> FdbResult<Database> {
        Self::new(Some(path))
    }

    /// [`Database::new`] with the default lookup.
    #[allow(clippy::should_implement_trait)]
    pub fn default() -> FdbResult<Database> {
        Self::new(None)
    }

    /// [`Database::new`], async (foundationdb-rs's form for every API version).
    pub async fn new_compat(path: Option<&str>) -> FdbResult<Database> {
        Self::new(path)
    }

    /// Sets a database option.
    pub fn set_option(&self, opt: DatabaseOption) -> FdbResult<()> {
        let raw = opt.raw_value();
        let opt = fdb_protocol::DatabaseOption::from_code(opt.code(), raw.as_deref())
            .map_err(FdbError::of)?;
        Ok(self.inner.db.set_option(opt)?)
    }

    /// A new transaction.
    pub fn create_trx(&self) -> FdbResult<Transaction> {
        Ok(Transaction::new(
            self.inner.db.create_transaction(),
            self.inner.clone(),
            None,
        ))
    }

    /// A new transaction recording into `metrics`.
    pub fn create_instrumented_trx(
        &self,
        metrics: TransactionMetrics,
    ) -> Result<Transaction, FdbBindingError> {
        Ok(Transaction::new(
            self.inner.db.create_transaction(),
            self.inner.clone(),
            Some(metrics),
        ))
    }

    /// A new retryable transaction recording into `metrics`.
    pub fn create_intrumented_retryable_trx(
        &self,
        metrics: TransactionMetrics,
    ) -> Result<RetryableTransaction, FdbBindingError> {
        Ok(RetryableTransaction::new(
            self.create_instrumented_trx(metrics)?,
        ))
    }

    /// The retry loop over a [`DatabaseTransact`], with a retry limit, a time limit and
    /// idempotence as `options` say.
    pub async fn transact<F>(&self, f: F, options: TransactOption) -> Result<F::Item, F::Error>
    where
        F: DatabaseTransact,
    {
        transact_loop(self.create_trx()?, f, options).await
    }

    /// [`Database::transact`] with a boxed `Send` closure and its data.
    pub fn transact_boxed<'trx, F, D, T, E>(
        &'trx self,
        data: D,
        f: F,
        options: TransactOption,
    ) -> impl Future<Output = Result<T, E>> + Send + 'trx
    where
        for<'a> F: FnMut(
            &'a Transaction,
            &'a mut D,
        ) -> Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'a>>,
        E: TransactError,
        F: Send + 'trx,
        T: Send + 'trx,
        E: Send + 'trx,
        D: Send + 'trx,
    {
        self.transact(
            boxed::FnMutBoxed {
                f,
                d: data,
                m: PhantomData,
            },
            options,
        )
    }

    /// [`Database::transact`] with a boxed closure and its data, not `Send`.
    pub fn transact_boxed_local<'trx, F, D, T, E>(
        &'trx self,
        data: D,
        f: F,
        options: TransactOption,
    ) -> impl Future<Output = Result<T, E>> + 'trx
    where
        for<'a> F:
            FnMut(&'a Transaction, &'a mut D) -> Pin<Box<dyn Future<Output = Result<T, E>> + 'a>>,
        E: TransactError,
        F: 'trx,
        T: 'trx,
        E: 'trx,
        D: 'trx,
    {
        self.transact(
            boxed_local::FnMutBoxedLocal {
                f,
                d: data,
                m: PhantomData,
            },
            options,
        )
    }

    /// The retry loop: runs `closure`, commits, and on an FDB error retries as `on_error`
    /// allows. The closure must not keep its transaction
    /// ([`FdbBindingError::ReferenceToTransactionKept`]).
    pub async fn run<F, Fut, T>(&self, closure: F) -> Result<T, FdbBindingError>
    where
        F: Fn(RetryableTransaction, MaybeCommitted) -> Fut,
        Fut: Future<Output = Result<T, FdbBindingError>>,
    {
        let tx = RetryableTransaction::new(self.create_trx()?);
        run_loop(tx, &NoopHooks, closure).await
    }

    // The bounds are run_loop's, which this forwards to.
    /// [`Database::run`] with hooks at each step.
    pub async fn run_with_hooks<F, Fut, T, H: RunnerHooks>(
        &self,
        hooks: &H,
        closure: F,
    ) -> Result<T, FdbBindingError>
    where
        F: Fn(RetryableTransaction, MaybeCommitted) -> Fut,
        Fut: Future<Output = Result<T, FdbBindingError>>,
    {
        let tx = RetryableTransaction::new(self.create_trx()?);
        run_loop(tx, hooks, closure).await
    }

    /// [`Database::run`] with metrics of every attempt.
    pub async fn instrumented_run<F, Fut, T>(
        &self,
        closure: F,
    ) -> Result<(T, MetricsReport), (FdbBindingError, MetricsReport)>
    where
        F: Fn(RetryableTransaction, MaybeCommitted) -> Fut,
        Fut: Future<Output = Result<T, FdbBindingError>>,
    {
        let metrics = TransactionMetrics::new();
        let hooks = InstrumentedHooks {
            metrics: metrics.clone(),
            start: Instant::now(),
        };
        let result = match self.create_intrumented_retryable_trx(metrics.clone()) {
            Ok(tx) => run_loop(tx, &hooks, closure).await,
            Err(e) => Err(e),
        };
        hooks.on_complete();
        match result {
            Ok(v) => Ok((v, metrics.get_metrics_data())),
            Err(e) => Err((e, metrics.get_metrics_data())),
        }
    }

    /// A request that needs nothing from the cluster: a read version set, then read back.
    pub async fn perform_no_op(&self) -> FdbResult<()> {
        let tx = self.create_trx()?;
        tx.set_read_version(42);
        tx.get_read_version().await?;
        Ok(())
    }

    /// How busy the thread doing this database's network work is, from 0 to 1: the share of
    /// wall time its loop thread spent on a CPU since the last call (libfdb_c measures its
    /// network thread's run loop). Linux only; elsewhere `unsupported_operation`.
    pub async fn get_main_thread_busyness(&self) -> FdbResult<f64> {
        self.inner.loop_thread.busyness()
    }

    /// libfdb_c's client status document (JSON), built by the core from what the database
    /// knows of its cluster and connections.
    pub fn get_client_status(&self) -> FdbFuture<FdbSlice> {
        let inner = self.inner.clone();
        FdbFuture::new(async move {
            let status = inner.db.get_client_status().await?;
            Ok(FdbSlice(bytes::Bytes::from(status.to_json())))
        })
    }
}

/// A retry loop's body for [`Database::transact`].
pub trait DatabaseTransact: Sized {
    /// What it gives.
    type Item;
    /// Its error.
    type Error: TransactError;
    /// Its future: the body and the transaction back, with the result.
    type Future: Future<Output = (Self, Transaction, Result<Self::Item, Self::Error>)>;
    /// Runs the body once.
    fn transact(self, trx: Transaction) -> Self::Future;
}

/// foundationdb-rs's two boxed bodies, alike but for `Send`: `FnMutBoxed` (its future and
/// data `Send`, for `transact_boxed`) and `FnMutBoxedLocal` (for `transact_boxed_local`).
macro_rules! boxed_body {
    ($module:ident, $name:ident, $boxed:ident, $doc:literal $(, $send:ident)?) => {
        #[allow(clippy::needless_lifetimes, clippy::type_complexity)]
        mod $module {
            use super::*;

            async fn run<'t, F, T, E, D>(
                mut f: $name<'t, F, D>,
                trx: Transaction,
            ) -> ($name<'t, F, D>, Transaction, Result<T, E>)
            where
                F: for<'a> FnMut(
                    &'a Transaction,
                    &'a mut D,
                ) -> Pin<Box<dyn Future<Output = Result<T, E>> $(+ $send)? + 'a>>,
                E: TransactError,
            {
                let r = (f.f)(&trx, &mut f.d).await;
                (f, trx, r)
            }

            #[doc = $doc]
            pub struct $name<'t, F, D> {
                pub f: F,
                pub d: D,
                pub m: PhantomData<&'t ()>,
            }

            impl<'t, F, T, E, D> DatabaseTransact for $name<'t, F, D>
            where
                F: for<'a> FnMut(
                    &'a Transaction,
                    &'a mut D,
                ) -> Pin<Box<dyn Future<Output = Result<T, E>> $(+ $send)? + 'a>>,
                F: 't $(+ $send)?,
                T: 't,
                E: 't,
                D: 't $(+ $send)?,
                E: TransactError,
            {
                type Item = T;
                type Error = E;
                type Future = Pin<
                    Box<dyn Future<Output = (Self, Transaction, Result<T, E>)> $(+ $send)? + 't>,
                >;

                fn transact(self, trx: Transaction) -> Self::Future {
                    run(self, trx).$boxed()
                }
            }
        }
    };
}

boxed_body!(
    boxed,
    FnMutBoxed,
    boxed,
    "A boxed `Send` closure with its data.",
    Send
);
boxed_body!(
    boxed_local,
    FnMutBoxedLocal,
    boxed_local,
    "A boxed closure with its data."
);

// foundationdb-rs 0.11's struct (no max_retry_delay); fdb_api::TransactOption stays apart.
/// [`Database::transact`]'s limits.
#[derive(Default, Clone)]
pub struct TransactOption {
    /// Most attempts.
    pub retry_limit: Option<u32>,
    /// Time limit of the whole loop.
    pub time_out: Option<Duration>,
    /// The body may run twice: retry even when a commit may have succeeded.
    pub is_idempotent: bool,
}

impl TransactOption {
    /// Options for an idempotent body.
    pub fn idempotent() -> Self {
        TransactOption {
            is_idempotent: true,
            ..TransactOption::default()
        }
    }
}

/// The transaction `Database::run` hands its closure: shared, so the closure may keep a
/// clone while it runs, but not past it (the loop then cannot commit).
#[derive(Clone)]
pub struct RetryableTransaction {
    inner: Arc<Transaction>,
}

impl Deref for RetryableTransaction {
    type Target = Transaction;
    fn deref(&self) -> &Transaction {
        &self.inner
    }
}

impl RetryableTransaction {
    pub(crate) fn new(t: Transaction) -> RetryableTransaction {
        RetryableTransaction { inner: Arc::new(t) }
    }

    pub(crate) fn take(self) -> Result<Transaction, FdbBindingError> {
        if Arc::weak_count(&self.inner) != 0 {
            return Err(FdbBindingError::ReferenceToTransactionKept);
        }
        Arc::try_unwrap(self.inner).map_err(|_| FdbBindingError::ReferenceToTransactionKept)
    }

    pub(crate) async fn on_error(
        self,
        err: FdbError,
    ) -> Result<Result<RetryableTransaction, FdbError>, FdbBindingError> {
        Ok(self
            .take()?
            .on_error(err)
            .await
            .map(RetryableTransaction::new))
    }

    pub(crate) async fn commit(self) -> Result<TransactionResult, FdbBindingError> {
        Ok(self.take()?.commit().await)
    }
}
