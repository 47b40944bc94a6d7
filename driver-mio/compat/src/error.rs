//! foundationdb-rs's error types: `FdbError` is a bare FDB error code, as libfdb_c's
//! `fdb_error_t` is, so every error of the client below is mapped to the code libfdb_c
//! would report for it.

use std::fmt;

use fdb_protocol::error::ErrorCode;

use crate::directory::DirectoryError;
use crate::tuple::hca::HcaError;
use crate::tuple::PackError;

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

/// The errors of `Database::run` and the layers: FDB's, and the application's own.
pub enum FdbBindingError {
    /// An FDB error `on_error` would not retry.
    NonRetryableFdbError(FdbError),
    /// From the high-contention allocator.
    HcaError(HcaError),
    /// From the directory layer.
    DirectoryError(DirectoryError),
    /// From the tuple layer.
    PackError(PackError),
    /// The closure kept the transaction, so the loop cannot commit or retry it.
    ReferenceToTransactionKept,
    /// The application's own error.
    CustomError(Box<dyn std::error::Error + Send + Sync>),
    /// Metrics asked of a transaction without them.
    TransactionMetricsNotFound,
    /// From the leader election recipe.
    #[cfg(feature = "recipes-leader-election")]
    LeaderElectionError(crate::recipes::leader_election::LeaderElectionError),
}

impl FdbBindingError {
    /// The FDB error inside, if any: the retry loop retries on it.
    pub fn get_fdb_error(&self) -> Option<FdbError> {
        match self {
            Self::NonRetryableFdbError(e)
            | Self::DirectoryError(DirectoryError::FdbError(e))
            | Self::HcaError(HcaError::FdbError(e)) => Some(*e),
            Self::CustomError(e) => {
                if let Some(e) = e.downcast_ref::<FdbError>() {
                    Some(*e)
                } else {
                    e.downcast_ref::<FdbBindingError>()
                        .and_then(FdbBindingError::get_fdb_error)
                }
            }
            #[cfg(feature = "recipes-leader-election")]
            Self::LeaderElectionError(
                crate::recipes::leader_election::LeaderElectionError::Fdb(e),
            ) => Some(*e),
            _ => None,
        }
    }

    /// Wraps an application error.
    pub fn new_custom_error(e: Box<dyn std::error::Error + Send + Sync>) -> Self {
        Self::CustomError(e)
    }
}

crate::impls::from_variants!(FdbBindingError {
    FdbError => NonRetryableFdbError,
    HcaError => HcaError,
    DirectoryError => DirectoryError,
    PackError => PackError,
});

#[cfg(feature = "recipes-leader-election")]
impl From<crate::recipes::leader_election::LeaderElectionError> for FdbBindingError {
    fn from(e: crate::recipes::leader_election::LeaderElectionError) -> Self {
        Self::LeaderElectionError(e)
    }
}

impl From<TransactionMetricsNotFound> for FdbBindingError {
    fn from(_: TransactionMetricsNotFound) -> Self {
        Self::TransactionMetricsNotFound
    }
}

impl fmt::Debug for FdbBindingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NonRetryableFdbError(e) => write!(f, "{e:?}"),
            Self::HcaError(e) => write!(f, "{e:?}"),
            Self::DirectoryError(e) => write!(f, "{e:?}"),
            Self::PackError(e) => write!(f, "{e:?}"),
            Self::ReferenceToTransactionKept => write!(f, "Reference to transaction kept"),
            Self::CustomError(e) => write!(f, "{e:?}"),
            Self::TransactionMetricsNotFound => write!(f, "Transaction metrics not found"),
            #[cfg(feature = "recipes-leader-election")]
            Self::LeaderElectionError(e) => write!(f, "{e:?}"),
        }
    }
}

impl fmt::Display for FdbBindingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for FdbBindingError {}
