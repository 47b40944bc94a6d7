//! The mio driver for the sans-IO FoundationDB client: one event loop, run by whichever
//! thread is waiting on it, serving every transaction of a database on one set of
//! connections.
//!
//! The API is `fdb-api`'s, the same for every driver. Its async form runs here as it runs on
//! tokio ([`AsyncDatabase`], [`MioDriver::block_on`], [`Executor`] for many transactions on one
//! thread); the blocking form ([`Database`], [`Transaction`]) waits for each call by turning
//! the loop until it completes.
//!
//! ```no_run
//! let db = fdb_driver_mio::Database::open(None).unwrap();
//! let n = db
//!     .run(|tx| {
//!         let n = tx.get(b"counter")?.map_or(0, |v| v[0]) + 1;
//!         tx.set(b"counter", &[n]);
//!         Ok(n)
//!     })
//!     .unwrap();
//! println!("counter is now {n}");
//! ```
//!
//! The loop only moves bytes and time: it opens the sockets the core asks for, resolves host
//! names (std's blocking `ToSocketAddrs`), rewrites the cluster file when the coordinators
//! moved, writes the core's transmits, feeds it what arrives, and lets time pass.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod blocking;
mod event_loop;
mod executor;
mod range_iter;
mod snapshot;
mod socket;

pub use blocking::{tenant_management, Database, Tenant, Transaction, Watch, CALL_LIMIT};
pub use event_loop::MioDriver;
pub use executor::{Executor, JoinHandle, Spawner};
pub use fdb_api::*;
pub use range_iter::{KeyValueIter, RangeIter};
pub use snapshot::Snapshot;

/// The async API on the mio loop (what [`Database`] blocks on).
pub type AsyncDatabase = fdb_api::Database<MioDriver>;
/// An async transaction on the mio loop.
pub type AsyncTransaction = fdb_api::Transaction<MioDriver>;

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
