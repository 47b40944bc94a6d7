//! The retry loop with the application's own errors: [`Database::transact`]. The closure
//! returns its own error type; an FDB error inside it goes through `on_error` (retried when
//! FDB says so), anything else ends the loop untouched.

use std::future::Future;
use std::time::Duration;

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
    /// The most retries (`retry_limit`); `None`: as many as `on_error` allows.
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

    fn apply<D: Driver>(&self, tx: &Transaction<D>) -> Result<(), Error> {
        if let Some(n) = self.retry_limit {
            tx.set_option(TransactionOption::RetryLimit(Some(n)))?;
        }
        if let Some(d) = self.time_out {
            tx.set_option(TransactionOption::Timeout(d))?;
        }
        if let Some(d) = self.max_retry_delay {
            tx.set_option(TransactionOption::MaxRetryDelay(d))?;
        }
        Ok(())
    }
}

impl<D: Driver> Database<D> {
    /// Runs `f` in a transaction and commits it, retrying on FDB's retryable errors through
    /// `on_error` (foundationdb-rs's `transact`). `f` returns the application's error type
    /// `E`: an FDB error in it is retried or returned as `on_error` decides; any other error
    /// ends the loop as it is. `f` learns whether an earlier attempt may have committed.
    pub async fn transact<T, E, F, Fut>(&self, options: TransactOption, mut f: F) -> Result<T, E>
    where
        E: TransactError,
        F: FnMut(Transaction<D>, MaybeCommitted) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let tx = self.create_transaction();
        options.apply(&tx)?;
        let mut maybe_committed = false;
        loop {
            let err = match f(tx.clone(), MaybeCommitted(maybe_committed)).await {
                Ok(v) => match tx.commit().await {
                    Ok(_) => return Ok(v),
                    Err(e) => e,
                },
                // The application's own error ends the loop as it is.
                Err(e) => e.try_into_fdb_error()?,
            };
            let Some(code) = err.code() else {
                return Err(E::from(err));
            };
            if err.is_maybe_committed() {
                if !options.is_idempotent {
                    return Err(E::from(err));
                }
                maybe_committed = true;
            }
            // `on_error` fails with the error itself when it must not retry.
            tx.on_error(code).await?;
        }
    }
}
