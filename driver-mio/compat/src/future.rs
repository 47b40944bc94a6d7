//! foundationdb-rs's future and result types. Results own their bytes here (libfdb_c's
//! borrow memory of the C future); the types and what they give are the same.

use std::ffi::{CStr, CString};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::KeyValue;

use crate::error::{FdbError, FdbResult};

type Boxed<T> = Pin<Box<dyn Future<Output = FdbResult<T>> + Send>>;

/// A request to the cluster: `Send + Sync + Unpin` as foundationdb-rs's futures are, on any
/// executor. Dropping it cancels the request.
#[must_use = "a request does nothing the application can see unless awaited"]
pub struct FdbFuture<T> {
    // The mutex only makes the future `Sync` without unsafe code; it is locked by `poll`
    // alone, which has `&mut self`.
    inner: Mutex<Boxed<T>>,
}

impl<T> FdbFuture<T> {
    pub(crate) fn new(f: impl Future<Output = FdbResult<T>> + Send + 'static) -> Self {
        FdbFuture {
            inner: Mutex::new(Box::pin(f)),
        }
    }

    pub(crate) fn ready(r: FdbResult<T>) -> Self
    where
        T: Send + 'static,
    {
        Self::new(std::future::ready(r))
    }
}

impl<T> Future for FdbFuture<T> {
    type Output = FdbResult<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<FdbResult<T>> {
        // After `stop_network` nothing turns the loop: a request would wait forever.
        if crate::net::stopped() {
            return Poll::Ready(Err(FdbError::of(ErrorCode::OPERATION_CANCELLED)));
        }
        let this = self.get_mut();
        let inner = this.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        inner.as_mut().poll(cx)
    }
}

impl<T> fmt::Debug for FdbFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FdbFuture")
    }
}

/// A value or key read.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct FdbSlice(pub(crate) Bytes);

crate::impls::view_as!(FdbSlice => [u8]);

impl fmt::Debug for FdbSlice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// The addresses of the storage servers holding a key.
#[derive(Clone, Debug)]
pub struct FdbAddresses(pub(crate) Vec<FdbAddress>);

crate::impls::view_as!(FdbAddresses => [FdbAddress]);

/// One address, `ip:port` (a C string, as libfdb_c gives it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FdbAddress(pub(crate) CString);

crate::impls::view_as!(FdbAddress => CStr);

/// One batch of a range read.
pub struct FdbValues {
    pub(crate) rows: Vec<FdbKeyValue>,
    pub(crate) more: bool,
}

impl FdbValues {
    /// Whether rows may follow this batch.
    pub fn more(&self) -> bool {
        self.more
    }

    pub(crate) fn new(rows: Vec<KeyValue>, more: bool) -> Self {
        FdbValues {
            rows: rows.into_iter().map(FdbKeyValue).collect(),
            more,
        }
    }
}

impl fmt::Debug for FdbValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FdbValues")
            .field("rows", &self.rows)
            .field("more", &self.more)
            .finish()
    }
}

/// The rows of a batch, owned.
pub struct FdbValuesIter(std::vec::IntoIter<FdbKeyValue>);

/// One row, owned.
#[derive(Clone, PartialEq, Eq)]
pub struct FdbValue(FdbKeyValue);

impl fmt::Debug for FdbValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One row of a batch.
#[derive(Clone)]
pub struct FdbKeyValue(pub(crate) KeyValue);

impl PartialEq for FdbKeyValue {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key() && self.value() == other.value()
    }
}

impl Eq for FdbKeyValue {}

impl FdbKeyValue {
    /// The key.
    pub fn key(&self) -> &[u8] {
        self.0.key()
    }

    /// The value.
    pub fn value(&self) -> &[u8] {
        self.0.value()
    }
}

impl fmt::Debug for FdbKeyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "({:?}, {:?})",
            Bytes::copy_from_slice(self.key()),
            Bytes::copy_from_slice(self.value())
        )
    }
}

crate::impls::item_list!(FdbValues, rows, FdbKeyValue, FdbValuesIter, FdbValue);
