//! foundationdb-rs 0.11's API (the `foundationdb` crate) over the pure-Rust FoundationDB
//! client: no libfdb_c. A program written for foundationdb-rs builds and runs unchanged
//! with
//!
//! ```toml
//! foundationdb = { package = "fdb-compat", version = "0.1", features = ["fdb-7_3"] }
//! ```
//!
//! Everything here is a thin layer over `fdb-api` on the mio driver: each database's loop
//! is turned by a thread of its own, and the futures run on any executor. See the README
//! for what is supported and what differs.

// `unsafe` appears only in the signatures foundationdb-rs has (`boot`, `run`): no unsafe
// operation is done anywhere.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod api;
mod binding_error;
pub mod cluster;
mod convert;
mod database;
pub mod directory;
mod error;
mod error_messages;
pub mod fdb_keys;
pub mod future;
mod impls;
mod keyselector;
pub mod mapped_key_values;
pub mod metrics;
mod net;
pub mod options;
#[cfg(any(
    feature = "recipes-leader-election",
    feature = "recipes-ranked-register"
))]
pub mod recipes;
#[cfg(feature = "tenant-experimental")]
pub mod tenant;
pub mod timekeeper;
mod trace;
mod transaction;
pub mod tuple;

pub use crate::binding_error::FdbBindingError;
pub use crate::cluster::Cluster;
pub use crate::database::*;
pub use crate::error::{FdbError, FdbResult, TransactError, TransactionMetricsNotFound};
pub use crate::keyselector::KeySelector;
pub use crate::metrics::TransactionMetrics;
pub use crate::transaction::*;

/// Selects the API version and runs the network on a thread of its own until the returned
/// guard drops. Once per process, as in foundationdb-rs (a second call panics).
///
/// # Safety
/// Kept `unsafe` for foundationdb-rs's signature (the guard must be dropped before the
/// program exits); nothing here is unsafe.
#[allow(unsafe_code)]
pub unsafe fn boot() -> api::NetworkAutoStop {
    let network = api::FdbApiBuilder::default()
        .build()
        .expect("foundationdb API to be initialized");
    // SAFETY: nothing unsafe.
    unsafe { network.boot() }.expect("fdb network running")
}

/// The default cluster file's path.
#[cfg(target_os = "linux")]
pub fn default_config_path() -> &'static str {
    "/etc/foundationdb/fdb.cluster"
}

/// The default cluster file's path.
#[cfg(target_os = "macos")]
pub fn default_config_path() -> &'static str {
    "/usr/local/etc/foundationdb/fdb.cluster"
}

/// The default cluster file's path.
#[cfg(target_os = "windows")]
pub fn default_config_path() -> &'static str {
    "C:/ProgramData/foundationdb/fdb.cluster"
}
