//! The one error type of the client API: FDB's own errors (from the cluster or from the
//! client's rules), and what can go wrong around them (no cluster file, the loop stopped).

use std::fmt;

use fdb_protocol::cluster_file::ClusterFileError;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::ClientError;

use crate::tls::TlsError;

/// Errors from the client.
#[derive(Debug)]
pub enum Error {
    /// No cluster file could be read.
    ClusterFileNotFound {
        /// The paths tried, in libfdb_c's order.
        tried: Vec<String>,
    },
    /// The cluster file is malformed.
    ClusterFile(ClusterFileError),
    /// The cluster answered with an FDB error, the client's rules refused the call, or a
    /// reply was malformed (`internal_error`).
    Client(ClientError),
    /// The driver's loop stopped: the runtime it ran on ended. (With the tokio driver, a
    /// database opened inside a multi-thread runtime runs its loop there; one opened outside
    /// any runtime, in a current-thread runtime, or with `LoopPlacement::OwnThread` has a
    /// thread of its own and outlives every runtime.)
    Shutdown,
    /// A blocking call did not complete within its time limit.
    TimedOut,
    /// The driver could not set up its IO.
    Io(std::io::Error),
    /// TLS is needed (a `:tls` coordinator) but cannot be set up: the driver lacks its `tls`
    /// feature, or the certificates, key, CA bundle or verify-peers rules are unusable.
    Tls(TlsError),
}

impl Error {
    /// The FDB error code, if this is an FDB error.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Client(e) => Some(e.code()),
            _ => None,
        }
    }

    /// A one-line description in this client's own words: for an FDB error a paraphrase
    /// from its error table (not libfdb_c's `fdb_get_error` text, which differs), otherwise
    /// the error's `Display`. For display only: match on [`Error::code`] (or on
    /// `ErrorCode::name`, FDB's `not_committed`-style name), never on this text.
    pub fn message(&self) -> String {
        match self.code().and_then(|c| c.description()) {
            Some(d) => d.to_string(),
            None => self.to_string(),
        }
    }

    /// Whether `on_error` would retry it (`fdb_error_predicate(RETRYABLE)`).
    pub fn is_retryable(&self) -> bool {
        self.code().is_some_and(|c| c.is_retryable())
    }

    /// Whether the transaction may have committed (`MAYBE_COMMITTED`): retrying is safe only
    /// for an idempotent transaction.
    pub fn is_maybe_committed(&self) -> bool {
        self.code().is_some_and(|c| c.is_maybe_committed())
    }

    /// Whether it certainly did not commit and may be retried (`RETRYABLE_NOT_COMMITTED`).
    pub fn is_retryable_not_committed(&self) -> bool {
        self.code().is_some_and(|c| c.is_retryable_not_committed())
    }
}

impl From<TlsError> for Error {
    fn from(e: TlsError) -> Self {
        Error::Tls(e)
    }
}

impl From<ClientError> for Error {
    fn from(e: ClientError) -> Self {
        Error::Client(e)
    }
}

impl From<ErrorCode> for Error {
    fn from(e: ErrorCode) -> Self {
        Error::Client(ClientError::Fdb(e))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ClusterFileNotFound { tried } => {
                write!(f, "no readable cluster file (tried {tried:?})")
            }
            Error::ClusterFile(e) => write!(f, "bad cluster file: {e}"),
            Error::Client(e) => write!(f, "{e}"),
            Error::Shutdown => write!(
                f,
                "the database's loop has stopped: the runtime it ran on ended (with the tokio \
                 driver, open the database outside any runtime, or inside \
                 fdb_driver_tokio::with_loop_placement(LoopPlacement::OwnThread, ..), so that \
                 its loop has a thread of its own)"
            ),
            Error::TimedOut => write!(f, "timed out"),
            Error::Io(e) => write!(f, "io: {e}"),
            Error::Tls(e) => write!(f, "tls: {e}"),
        }
    }
}

impl std::error::Error for Error {}
