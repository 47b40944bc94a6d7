//! foundationdb-rs's error types: `FdbError` is a bare FDB error code, as libfdb_c's
//! `fdb_error_t` is, so every error of the client below is mapped to the code libfdb_c
//! would report for it.

use std::fmt;

use fdb_protocol::error::ErrorCode;

/// An FDB error code (`fdb_error_t`).
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub struct FdbError {
    error_code: i32,
}

/// The result of an FDB call.
pub type FdbResult<T = ()> = Result<T, FdbError>;

impl FdbError {
    /// The error with this code.
    pub fn from_code(error_code: i32) -> Self {
        FdbError { error_code }
    }

    /// libfdb_c's description of the error (`fdb_get_error`), word for word.
    pub fn message(self) -> &'static str {
        crate::error_messages::message(self.error_code)
    }

    /// Whether the transaction may have committed (`FDB_ERROR_PREDICATE_MAYBE_COMMITTED`).
    pub fn is_maybe_committed(self) -> bool {
        self.known().is_some_and(|c| c.is_maybe_committed())
    }

    /// Whether `on_error` would retry (`FDB_ERROR_PREDICATE_RETRYABLE`).
    pub fn is_retryable(self) -> bool {
        self.known().is_some_and(|c| c.is_retryable())
    }

    /// Retryable and certainly not committed (`FDB_ERROR_PREDICATE_RETRYABLE_NOT_COMMITTED`).
    pub fn is_retryable_not_committed(self) -> bool {
        self.known().is_some_and(|c| c.is_retryable_not_committed())
    }

    /// The code.
    pub fn code(self) -> i32 {
        self.error_code
    }

    fn known(self) -> Option<ErrorCode> {
        u16::try_from(self.error_code).ok().map(ErrorCode)
    }

    pub(crate) fn of(code: ErrorCode) -> Self {
        FdbError::from_code(i32::from(code.0))
    }
}

impl fmt::Display for FdbError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        fmt::Display::fmt(self.message(), f)
    }
}

impl std::error::Error for FdbError {}

/// The client's errors as libfdb_c's codes: what is not an FDB error below has one code in
/// libfdb_c for the same failure.
impl From<fdb_api::Error> for FdbError {
    fn from(e: fdb_api::Error) -> Self {
        use fdb_api::Error as E;
        FdbError::of(match e {
            E::Client(c) => c.code(),
            E::ClusterFileNotFound { .. } => ErrorCode::NO_CLUSTER_FILE_FOUND,
            E::ClusterFile(_) => ErrorCode::CONNECTION_STRING_INVALID,
            // The loop stopped under the request: libfdb_c cancels what the network ran.
            E::Shutdown => ErrorCode::OPERATION_CANCELLED,
            E::TimedOut => ErrorCode::TIMED_OUT,
            E::Io(_) => ErrorCode::IO_ERROR,
            E::Tls(_) => ErrorCode::TLS_ERROR,
        })
    }
}

impl From<ErrorCode> for FdbError {
    fn from(c: ErrorCode) -> Self {
        FdbError::of(c)
    }
}

/// A transaction built for metrics was asked for metrics it does not have.
#[derive(Debug)]
pub struct TransactionMetricsNotFound;

impl fmt::Display for TransactionMetricsNotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Transaction metrics not found")
    }
}

impl std::error::Error for TransactionMetricsNotFound {}

/// An application error the retry loop can look into for an FDB error to retry.
pub trait TransactError: From<FdbError> {
    /// The FDB error, or the application's error back.
    fn try_into_fdb_error(self) -> Result<FdbError, Self>;
}

impl<T> TransactError for T
where
    T: From<FdbError> + TryInto<FdbError, Error = T>,
{
    fn try_into_fdb_error(self) -> Result<FdbError, Self> {
        self.try_into()
    }
}

impl TransactError for FdbError {
    fn try_into_fdb_error(self) -> Result<FdbError, Self> {
        Ok(self)
    }
}
