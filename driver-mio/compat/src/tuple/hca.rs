//! The high-contention allocator (foundationdb-rs's `tuple::hca`), over fdb-api's, which
//! keeps the layout every binding uses (`(0, start)` counters, `(1, candidate)` marks).

use std::fmt;

use fdb_api::directory as api;

use crate::error::{FdbError, TransactError};
use crate::transaction::Transaction;
use crate::tuple::{PackError, Subspace};

/// The allocator's errors.
pub enum HcaError {
    /// The transaction failed.
    FdbError(FdbError),
    /// The allocated value did not unpack.
    PackError(PackError),
    /// The allocator's keys hold something no binding writes.
    InvalidDirectoryLayerMetadata,
    /// A lock was poisoned.
    PoisonError,
}

impl fmt::Debug for HcaError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            HcaError::FdbError(e) => e.fmt(f),
            HcaError::PackError(e) => e.fmt(f),
            HcaError::InvalidDirectoryLayerMetadata => {
                write!(f, "invalid directory layer metadata")
            }
            HcaError::PoisonError => write!(f, "mutex poisoned"),
        }
    }
}

crate::impls::from_variants!(HcaError {
    FdbError => FdbError,
    PackError => PackError,
});

impl<T> From<std::sync::PoisonError<T>> for HcaError {
    fn from(_: std::sync::PoisonError<T>) -> Self {
        HcaError::PoisonError
    }
}

impl TransactError for HcaError {
    fn try_into_fdb_error(self) -> Result<FdbError, Self> {
        match self {
            HcaError::FdbError(e) => Ok(e),
            other => Err(other),
        }
    }
}

/// Allocates integers unique under a subspace, short while few are allocated, without
/// making concurrent allocations conflict.
#[derive(Debug, Clone)]
pub struct HighContentionAllocator {
    inner: api::HighContentionAllocator,
}

impl HighContentionAllocator {
    /// The allocator whose state lives under `subspace`.
    pub fn new(subspace: Subspace) -> HighContentionAllocator {
        HighContentionAllocator {
            inner: api::HighContentionAllocator::new(&fdb_protocol::tuple::Subspace::from_bytes(
                subspace.bytes(),
            )),
        }
    }

    /// An integer no other allocation under this subspace gets.
    pub async fn allocate(&self, trx: &Transaction) -> Result<i64, HcaError> {
        let packed = self.inner.allocate(&trx.inner).await.map_err(|e| match e {
            api::DirectoryError::Fdb(e) => HcaError::FdbError(e.into()),
            _ => HcaError::InvalidDirectoryLayerMetadata,
        })?;
        Ok(crate::tuple::unpack::<i64>(&packed)?)
    }
}
