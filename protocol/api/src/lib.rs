//! The FoundationDB client API, written once for every driver.
//!
//! A driver (`fdb-driver-tokio`, `fdb-driver-mio`) is only a runtime: it runs an
//! [`Engine`](driver::Engine) — the sans-IO core plus the requests the application waits for
//! — and does its IO. This crate is everything above that: [`Database`] and [`Transaction`]
//! (generic over the [`Driver`](driver::Driver)), the retry loop, write batching,
//! cancellation on drop, cluster files on disk, and the one [`Error`] type. Each driver names
//! these types for its runtime, so the two expose the same API.
//!
//! The root holds what applications use; what only a driver (or code generic over drivers)
//! needs is in [`driver`].

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod cluster_file;
mod database;
pub mod directory;
pub mod driver;
mod engine;
mod error;
mod global_config;
mod management_special_keys;
mod mapped;
pub mod network_env;
mod retry;
mod snapshot;
mod special_keys;
mod stream;
mod tenant;
mod tenant_handle;
pub mod tenant_management;
mod tenant_rows;
mod tenant_special_keys;
mod tls;
mod transact;
mod transaction;
mod versionstamp;

pub use cluster_file::{read_cluster_file, replace_cluster_file};
pub use database::Database;
pub use error::Error;
pub use snapshot::Snapshot;
pub use stream::{KeyValueStream, RangeStream};
pub use tenant::Tenant;
pub use tls::{PemSource, TlsConfig, TlsError, VerifyPeers};
pub use transact::{MaybeCommitted, TransactError, TransactOption};
pub use transaction::{Transaction, Watch};
pub use versionstamp::VersionstampFuture;

pub use fdb_protocol as protocol;
pub use fdb_protocol::cluster_file::ClusterFile;
pub use fdb_protocol::error::ErrorCode;
pub use fdb_protocol::messages::types::KeyRange;
pub use fdb_protocol::tuple::Subspace;
pub use fdb_protocol::{
    Committed, ConflictRangeType, DatabaseOption, GetRangeReqAndResult, GetValueReqAndResult,
    KeySelector, KeyValue, MappedKeyValue, MappedRangeResult, MappedReqAndResult, MutationType,
    Prefix, Priority, RangeCursor, RangeOption, RangeOptions, RangeResult, StreamingMode,
    TransactionOption, Version,
};
pub use futures_core::Stream;

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
