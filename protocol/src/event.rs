//! What the core hands its driver: bytes to write ([`Transmit`]) and [`Event`]s — connections
//! to open or close, cluster news, and the completion of application requests.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt;
use core::marker::PhantomData;

use crate::cluster_file::ClusterFile;
use crate::connection::ConnectionError;
use crate::error::ErrorCode;
use crate::ids::{ConnectionId, RequestId};
use crate::messages::types::{KeyValue, Version};
use crate::messages::NetworkAddress;
use crate::serializer::DecodeError;

/// Bytes for the driver to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The connection to write on.
    pub conn: ConnectionId,
    /// The bytes, in order after what was transmitted before on `conn`.
    pub data: Bytes,
}

/// Why a request failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientError {
    /// The cluster answered with an FDB error.
    Fdb(ErrorCode),
    /// A reply could not be decoded.
    Decode(DecodeError),
}

impl ClientError {
    /// The FDB error code (an undecodable reply counts as `internal_error`).
    pub fn code(&self) -> ErrorCode {
        match self {
            ClientError::Fdb(e) => *e,
            ClientError::Decode(_) => ErrorCode::INTERNAL_ERROR,
        }
    }
}

impl From<ErrorCode> for ClientError {
    fn from(e: ErrorCode) -> Self {
        ClientError::Fdb(e)
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Fdb(e) => write!(f, "{e}"),
            ClientError::Decode(e) => write!(f, "undecodable reply: {e}"),
        }
    }
}

/// What the core tells the driver or the application.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// Open a connection to `addr` and report back with `handle_connected` /
    /// `handle_connect_failed`.
    Connect {
        /// The id the driver reports back with.
        conn: ConnectionId,
        /// Where to connect.
        addr: NetworkAddress,
    },
    /// Close this connection's socket; the core is done with it.
    Close {
        /// The connection to close.
        conn: ConnectionId,
        /// Why the core closed it.
        reason: ConnectionError,
    },
    /// Look up `host` (a coordinator named in the connection string) and report its addresses
    /// with [`Client::handle_resolved`](crate::Client::handle_resolved) (an empty list if the lookup failed).
    Resolve {
        /// The host name, as written in the connection string.
        host: String,
        /// The port that goes with it.
        port: u16,
    },
    /// The core now uses this connection string, and a coordinator in it answered: a driver
    /// that read a cluster file replaces it with [`ClusterFile::file_contents`] (libfdb_c
    /// persists a forwarded connection string at exactly this point).
    ClusterFileChanged {
        /// The cluster file as it should now read.
        cluster: ClusterFile,
    },
    /// A full round of coordinators failed. A driver that read a cluster file reads it again
    /// and, if it now names other coordinators (an operator changed them), hands them over
    /// with [`Client::set_cluster`](crate::Client::set_cluster).
    CoordinatorsUnreachable,
    /// The cluster's coordinators speak another supported protocol: every connection was
    /// closed and the core now speaks this one (see [`crate::version`]).
    ProtocolChanged {
        /// The protocol spoken from now on.
        protocol: crate::version::Protocol,
    },
    /// An application request finished: hand it to the [`Call`] that started it.
    Complete(Completion),
}

/// A finished request: its id, and what it returned, readable only as the type its [`Call`]
/// promised (the core decides the shape; a driver never matches on it).
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    req: RequestId,
    result: Result<Reply, ClientError>,
}

impl Completion {
    pub(crate) fn new(req: RequestId, result: Result<Reply, ClientError>) -> Completion {
        Completion { req, result }
    }

    /// The request that finished.
    pub fn request(&self) -> RequestId {
        self.req
    }

    /// The error it failed with, if it failed.
    pub fn error(&self) -> Option<&ClientError> {
        self.result.as_ref().err()
    }
}

/// A request the core started, whose [`Completion`] yields a `T`: the core's typed answer to
/// one application call. Drivers keep the [`Call::id`] to route the completion, and
/// [`Call::take`] turns it into the value.
#[must_use = "a call finishes with a completion that only it can read"]
#[derive(Debug, PartialEq, Eq)]
pub struct Call<T> {
    id: RequestId,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Call<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Call<T> {}

impl<T: Outcome> Call<T> {
    pub(crate) fn new(id: RequestId) -> Call<T> {
        Call {
            id,
            _t: PhantomData,
        }
    }

    /// The request id its completion will carry.
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// The value (or error) of this call's completion. A completion of another request, or of
    /// another shape, is a client bug and reads as `internal_error`.
    pub fn take(self, c: Completion) -> Result<T, ClientError> {
        if c.req != self.id {
            return Err(ClientError::Fdb(ErrorCode::INTERNAL_ERROR));
        }
        T::from_completion(c)
    }
}

mod sealed {
    /// Only the core's own result types can be what a [`super::Call`] yields.
    #[allow(unreachable_pub)]
    pub trait Sealed {}
}

/// What a [`Call`] can yield: the result types of the core's requests.
pub trait Outcome: sealed::Sealed + Sized {
    /// Reads a completion as this type (`internal_error` if it holds something else).
    fn from_completion(c: Completion) -> Result<Self, ClientError>;
}

macro_rules! outcome {
    ($t:ty, $($pat:pat => $v:expr),+) => {
        impl sealed::Sealed for $t {}
        impl Outcome for $t {
            fn from_completion(c: Completion) -> Result<Self, ClientError> {
                match c.result? {
                    $($pat => Ok($v),)+
                    #[allow(unreachable_patterns)]
                    _ => Err(ClientError::Fdb(ErrorCode::INTERNAL_ERROR)),
                }
            }
        }
    };
}

outcome!(Version, Reply::Version(v) => v, Reply::WatchFired(v) => v, Reply::Size(v) => v);
outcome!(Option<Bytes>, Reply::Value(v) => v);
outcome!(Bytes, Reply::Key(k) => k);
outcome!(RangeResult, Reply::Range(r) => r);
outcome!(MappedRangeResult, Reply::Mapped(r) => r);
outcome!(Committed, Reply::Committed { version, versionstamp } => Committed { version, versionstamp });
outcome!((), Reply::Retry => ());
outcome!(Vec<Bytes>, Reply::Keys(k) => k);
outcome!(Vec<String>, Reply::Addresses(a) => a);
outcome!(bool, Reply::Reachable(r) => r, Reply::Safe(s) => s);

/// What a commit returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    /// The commit version (`-1` for a read-only transaction).
    pub version: Version,
    /// The transaction's versionstamp (none for a read-only transaction).
    pub versionstamp: Option<[u8; 10]>,
}

/// What a finished request returns (inside a [`Completion`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Reply {
    /// A read version ([`Client::get_read_version`](crate::Client::get_read_version), [`Client::tx_read_version`](crate::Client::tx_read_version)).
    Version(Version),
    /// A value ([`Client::get`](crate::Client::get)).
    Value(Option<Bytes>),
    /// A key ([`Client::get_key`](crate::Client::get_key)).
    Key(Bytes),
    /// Rows ([`Client::get_range`](crate::Client::get_range)).
    Range(RangeResult),
    /// Rows and what their mapper read ([`Client::get_mapped_range`](crate::Client::get_mapped_range)).
    Mapped(MappedRangeResult),
    /// A commit: its version (`-1` for a read-only transaction) and versionstamp.
    Committed {
        version: Version,
        versionstamp: Option<[u8; 10]>,
    },
    /// `on_error` decided to retry: the transaction is reset and may run again.
    Retry,
    /// A watch fired: the key changed at this version.
    WatchFired(Version),
    /// An estimated size in bytes ([`Client::get_estimated_range_size_bytes`](crate::Client::get_estimated_range_size_bytes)).
    Size(i64),
    /// Keys ([`Client::get_range_split_points`](crate::Client::get_range_split_points)).
    Keys(Vec<Bytes>),
    /// Storage server addresses ([`Client::get_addresses_for_key`](crate::Client::get_addresses_for_key)).
    Addresses(Vec<String>),
    /// Whether every new coordinator answered ([`Client::check_coordinators`](crate::Client::check_coordinators)).
    Reachable(bool),
    /// Whether servers can be marked failed ([`Client::check_safe_exclusions`](crate::Client::check_safe_exclusions)).
    Safe(bool),
}

/// One batch of a range read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RangeResult {
    /// The rows, in the order read (reversed for a reverse read).
    pub rows: Vec<KeyValue>,
    /// More rows may follow: call again from after the last row.
    pub more: bool,
}

/// One batch of a mapped range read (`MappedRangeResult`): each row of the range with what
/// the storage server read for it through the mapper. As fdbserver 7.3 sends them, a point
/// mapper's rows keep their own key and value only at the batch's first and last row (the
/// continuation); the others come with both empty.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MappedRangeResult {
    /// The rows, in the order read.
    pub rows: Vec<crate::messages::storage::MappedKeyValue>,
    /// More rows may follow: call again from after the last row.
    pub more: bool,
}

impl RangeResult {
    /// Whether more rows may follow this batch.
    pub fn more(&self) -> bool {
        self.more
    }
    /// The rows.
    pub fn key_values(&self) -> &[KeyValue] {
        &self.rows
    }
}

impl core::ops::Deref for RangeResult {
    type Target = [KeyValue];
    fn deref(&self) -> &[KeyValue] {
        &self.rows
    }
}

impl IntoIterator for RangeResult {
    type Item = KeyValue;
    type IntoIter = alloc::vec::IntoIter<KeyValue>;
    fn into_iter(self) -> Self::IntoIter {
        self.rows.into_iter()
    }
}

impl<'a> IntoIterator for &'a RangeResult {
    type Item = &'a KeyValue;
    type IntoIter = core::slice::Iter<'a, KeyValue>;
    fn into_iter(self) -> Self::IntoIter {
        self.rows.iter()
    }
}
