//! The retry loop's rule, apart from the handles that run it (`Database::run`, a tenant's
//! `run`, the directory layer's) so that drivers building their own loops (the blocking API)
//! take it from the `driver` module without reaching up to the database handle.

use crate::error::Error;

/// The retry loop's rule, shared by every driver's `run`: a result is final, or an FDB error
/// goes to `on_error` (which decides whether to retry).
pub struct RetryLoop;

/// What the retry loop does next.
pub enum Next<T> {
    /// Return this.
    Done(Result<T, Error>),
    /// Ask `on_error` about this code, then run again.
    OnError(fdb_protocol::error::ErrorCode),
}

impl RetryLoop {
    /// After an attempt (the closure and, if it succeeded, the commit).
    pub fn after<T>(result: Result<T, Error>) -> Next<T> {
        match result {
            Ok(v) => Next::Done(Ok(v)),
            Err(e) => match e.code() {
                Some(code) => Next::OnError(code),
                None => Next::Done(Err(e)),
            },
        }
    }
}
