//! foundationdb-rs's `FdbBindingError`: the error of `Database::run` and of the layers
//! above the transaction (the directory layer, the tuple layer's allocator, the recipes),
//! each wrapped whole. It sits above those layers, apart from `FdbError` (`error.rs`), which
//! they all use.

use std::fmt;

use crate::directory::DirectoryError;
use crate::error::{FdbError, TransactionMetricsNotFound};
use crate::tuple::hca::HcaError;
use crate::tuple::PackError;

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
