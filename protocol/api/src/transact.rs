//! The retry loop with the application's own errors: [`Database::transact`]. The closure
//! returns its own error type; an FDB error inside it goes through `on_error` (retried when
//! FDB says so), anything else ends the loop untouched.

use std::future::Future;
use std::time::Duration;

use fdb_protocol::error::ErrorCode;
use fdb_protocol::TransactionOption;

use crate::database::Database;
use crate::driver::Driver;
use crate::error::Error;
use crate::transaction::Transaction;

/// An application error type the retry loop can see FDB errors through: it holds one
/// ([`From<Error>`]) and gives it back for `on_error` to judge.
pub trait TransactError: From<Error> {
    /// The FDB error this error is, or itself back if it is the application's own.
    fn try_into_fdb_error(self) -> Result<Error, Self>;
}

impl TransactError for Error {
    fn try_into_fdb_error(self) -> Result<Error, Self> {
        Ok(self)
    }
}

/// Whether an earlier attempt of this closure may have committed (its commit failed with an
/// error that leaves it unknown, `commit_unknown_result`). A non-idempotent closure checks
/// what it wrote before writing it again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MaybeCommitted(pub bool);

impl From<MaybeCommitted> for bool {
    fn from(m: MaybeCommitted) -> bool {
        m.0
    }
}

/// How [`Database::transact`] retries. The limits are the transaction options of the same
/// names, which survive `on_error`, so they bound the whole loop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransactOption {
    /// The most retries: `Some(n)` runs the closure at most `n + 1` times (`Some(0)`: once),
    /// then the loop ends with the last attempt's error. `None`: as many as `on_error` allows.
    ///
    /// This is libfdb_c's `retry_limit` transaction option, set on the loop's transaction: it
    /// counts `on_error` calls, and the `n + 1`-th fails with the error it was given
    /// (`RYWImpl::onError`). foundationdb-rs 0.11's `TransactOption::retry_limit` is a
    /// counter of its own that counts attempts instead: there `Some(n)` runs the closure at
    /// most `n` times (once for `Some(0)`), so a port that needs the same bound sets `n - 1`.
    pub retry_limit: Option<u32>,
    /// The whole loop fails with `transaction_timed_out` after this long (`timeout`).
    pub time_out: Option<Duration>,
    /// The cap of the backoff between attempts (`max_retry_delay`).
    pub max_retry_delay: Option<Duration>,
    /// The closure may run again after an attempt that may have committed (it is told so by
    /// [`MaybeCommitted`]). When `false`, such an error ends the loop instead.
    pub is_idempotent: bool,
}

impl TransactOption {
    /// Retries of any kind, also after an attempt that may have committed.
    pub fn idempotent() -> Self {
        TransactOption {
            is_idempotent: true,
            ..TransactOption::default()
        }
    }

    /// The transaction options these limits are, set once before the first attempt.
    pub fn transaction_options(&self) -> Vec<TransactionOption> {
        let mut opts = Vec::new();
        if let Some(n) = self.retry_limit {
            opts.push(TransactionOption::RetryLimit(Some(n)));
        }
        if let Some(d) = self.time_out {
            opts.push(TransactionOption::Timeout(d));
        }
        if let Some(d) = self.max_retry_delay {
            opts.push(TransactionOption::MaxRetryDelay(d));
        }
        opts
    }

    /// After a failed attempt (the closure's error, or the commit's as `E`): the FDB error
    /// code to hand `on_error`, or the error that ends the loop (the application's own, a
    /// non-FDB error, or one that may have committed when the closure is not idempotent).
    /// Marks `maybe_committed` for the next attempt. Both drivers' loops decide with it.
    pub fn after_failure<E: TransactError>(
        &self,
        err: E,
        maybe_committed: &mut bool,
    ) -> Result<ErrorCode, E> {
        let err = err.try_into_fdb_error()?;
        let Some(code) = err.code() else {
            return Err(E::from(err));
        };
        if err.is_maybe_committed() {
            if !self.is_idempotent {
                return Err(E::from(err));
            }
            *maybe_committed = true;
        }
        Ok(code)
    }
}

impl<D: Driver> Database<D> {
    /// Runs `f` in a transaction and commits it, retrying on FDB's retryable errors through
    /// `on_error` (foundationdb-rs's `transact`). `f` returns the application's error type
    /// `E`: an FDB error in it is retried or returned as `on_error` decides; any other error
    /// ends the loop as it is. `f` learns whether an earlier attempt may have committed.
    pub async fn transact<T, E, F, Fut>(&self, options: TransactOption, f: F) -> Result<T, E>
    where
        E: TransactError,
        F: FnMut(Transaction<D>, MaybeCommitted) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        transact_in(self.create_transaction(), options, f).await
    }
}

/// The retry loop with the application's errors on `tx`, shared by [`Database::transact`] and
/// a tenant's `transact`.
pub(crate) async fn transact_in<D, T, E, F, Fut>(
    tx: Transaction<D>,
    options: TransactOption,
    mut f: F,
) -> Result<T, E>
where
    D: Driver,
    E: TransactError,
    F: FnMut(Transaction<D>, MaybeCommitted) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    for opt in options.transaction_options() {
        tx.set_option(opt)?;
    }
    let mut maybe_committed = false;
    loop {
        let err = match f(tx.clone(), MaybeCommitted(maybe_committed)).await {
            Ok(v) => match tx.commit().await {
                Ok(_) => return Ok(v),
                Err(e) => E::from(e),
            },
            Err(e) => e,
        };
        let code = options.after_failure(err, &mut maybe_committed)?;
        // `on_error` fails with the error itself when it must not retry.
        tx.on_error(code).await?;
    }
}
