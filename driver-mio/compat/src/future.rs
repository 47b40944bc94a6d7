//! foundationdb-rs's future and result types. Results own their bytes here (libfdb_c's
//! borrow memory of the C future); the types and what they give are the same.

use std::ffi::{CStr, CString};
use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::KeyValue;

use crate::{FdbError, FdbResult};

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

impl Deref for FdbSlice {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for FdbSlice {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for FdbSlice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// The addresses of the storage servers holding a key.
#[derive(Clone, Debug)]
pub struct FdbAddresses(pub(crate) Vec<FdbAddress>);

impl Deref for FdbAddresses {
    type Target = [FdbAddress];
    fn deref(&self) -> &[FdbAddress] {
        &self.0
    }
}

impl AsRef<[FdbAddress]> for FdbAddresses {
    fn as_ref(&self) -> &[FdbAddress] {
        &self.0
    }
}

/// One address, `ip:port` (a C string, as libfdb_c gives it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FdbAddress(pub(crate) CString);

impl Deref for FdbAddress {
    type Target = CStr;
    fn deref(&self) -> &CStr {
        &self.0
    }
}

impl AsRef<CStr> for FdbAddress {
    fn as_ref(&self) -> &CStr {
        &self.0
    }
}

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

impl Deref for FdbValues {
    type Target = [FdbKeyValue];
    fn deref(&self) -> &[FdbKeyValue] {
        &self.rows
    }
}

impl AsRef<[FdbKeyValue]> for FdbValues {
    fn as_ref(&self) -> &[FdbKeyValue] {
        &self.rows
    }
}

impl<'a> IntoIterator for &'a FdbValues {
    type Item = &'a FdbKeyValue;
    type IntoIter = std::slice::Iter<'a, FdbKeyValue>;
    fn into_iter(self) -> Self::IntoIter {
        self.rows.iter()
    }
}

impl IntoIterator for FdbValues {
    type Item = FdbValue;
    type IntoIter = FdbValuesIter;
    fn into_iter(self) -> FdbValuesIter {
        FdbValuesIter(self.rows.into_iter())
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

impl Iterator for FdbValuesIter {
    type Item = FdbValue;
    fn next(&mut self) -> Option<FdbValue> {
        self.0.next().map(FdbValue)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
    fn nth(&mut self, n: usize) -> Option<FdbValue> {
        self.0.nth(n).map(FdbValue)
    }
}

impl ExactSizeIterator for FdbValuesIter {}

impl DoubleEndedIterator for FdbValuesIter {
    fn next_back(&mut self) -> Option<FdbValue> {
        self.0.next_back().map(FdbValue)
    }
}

/// One row, owned.
#[derive(Clone, PartialEq, Eq)]
pub struct FdbValue(FdbKeyValue);

impl Deref for FdbValue {
    type Target = FdbKeyValue;
    fn deref(&self) -> &FdbKeyValue {
        &self.0
    }
}

impl AsRef<FdbKeyValue> for FdbValue {
    fn as_ref(&self) -> &FdbKeyValue {
        &self.0
    }
}

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
