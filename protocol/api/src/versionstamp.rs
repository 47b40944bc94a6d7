//! The versionstamp as a future (`fdb_transaction_get_versionstamp`): asked for before the
//! commit — inside a retry loop's closure, say — and ready once that commit is done, so the
//! closure can hand it out with its result.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use fdb_protocol::error::ErrorCode;
use fdb_protocol::Committed;
use futures_channel::oneshot;

use crate::error::Error;

type Sender = oneshot::Sender<Result<[u8; 10], Error>>;

/// The versionstamp of the transaction's next commit (see
/// [`crate::Transaction::get_versionstamp`]). Fails with `transaction_invalid_version` if
/// the commit fails, with `no_commit_version` if the commit wrote nothing, and with `broken_promise` if the
/// transaction is reset, retried or dropped before it commits (as libfdb_c 7.3.77 does).
#[must_use = "a versionstamp future does nothing unless awaited"]
pub struct VersionstampFuture {
    rx: oneshot::Receiver<Result<[u8; 10], Error>>,
}

impl Future for VersionstampFuture {
    type Output = Result<[u8; 10], Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx).poll(cx).map(|r| match r {
            Ok(r) => r,
            Err(_) => Err(ErrorCode::BROKEN_PROMISE.into()),
        })
    }
}

/// The waiters for the next commit's versionstamp.
#[derive(Default)]
pub(crate) struct VersionstampWaiters(Mutex<Vec<Sender>>);

impl VersionstampWaiters {
    fn take(&self) -> Vec<Sender> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A new waiter.
    pub(crate) fn wait(&self) -> VersionstampFuture {
        let (tx, rx) = oneshot::channel();
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(tx);
        VersionstampFuture { rx }
    }

    /// The commit finished: every waiter learns how.
    pub(crate) fn commit_done(&self, r: &Result<Committed, Error>) {
        for w in self.take() {
            let _ = w.send(match r {
                Ok(Committed {
                    versionstamp: Some(s),
                    ..
                }) => Ok(*s),
                Ok(_) => Err(ErrorCode::NO_COMMIT_VERSION.into()),
                // Whatever failed the commit (NativeAPI's `commitAndWatch`).
                Err(_) => Err(ErrorCode::TRANSACTION_INVALID_VERSION.into()),
            });
        }
    }

    /// The transaction starts over (reset, `on_error`): the waiters' commit will not come.
    pub(crate) fn abandon(&self) {
        drop(self.take());
    }
}
