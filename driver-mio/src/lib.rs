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
//! # Layers
//!
//! The tuple encoding, subspaces and the directory layer are the other bindings' (Python's
//! `fdb.tuple`, `fdb.Subspace`, `fdb.directory`), byte for byte, so data written through one
//! is read through the others.
//!
//! Tuples ([`protocol::tuple`]) pack to keys that sort as the tuples do:
//!
//! ```
//! use fdb_driver_mio::protocol::tuple::{pack, unpack};
//!
//! let key = pack(&("users", 42i64, true));
//! assert_eq!(key, b"\x02users\x00\x15\x2a\x27");
//! let (table, id, active): (String, i64, bool) = unpack(&key).unwrap();
//! assert_eq!((table.as_str(), id, active), ("users", 42, true));
//! assert!(pack(&("users", 42i64)) < pack(&("users", 43i64)));
//! ```
//!
//! A [`Subspace`] is a prefix with the tuple encoding after it:
//!
//! ```
//! use fdb_driver_mio::Subspace;
//!
//! let users = Subspace::from_bytes(&b"app"[..]).subspace(&("users",));
//! let key = users.pack(&(7i64, "email"));
//! let (id, field): (i64, String) = users.unpack(&key).unwrap();
//! assert_eq!((id, field.as_str()), (7, "email"));
//! let (begin, end) = users.range();
//! assert!(begin.as_slice() < key.as_slice() && key.as_slice() < end.as_slice());
//! ```
//!
//! The [`directory`] layer's operations are futures; the blocking [`Database::block_on`]
//! runs them on the loop (here in the layer's retry loop, [`directory::run`]):
//!
//! ```no_run
//! use std::time::Duration;
//! use fdb_driver_mio::directory::{self, DirectoryLayer};
//!
//! let db = fdb_driver_mio::Database::open(None).unwrap();
//! let root = DirectoryLayer::default();
//! let users = db
//!     .block_on(
//!         directory::run(db.async_db(), |tx| {
//!             let root = root.clone();
//!             async move { root.create_or_open(&tx, &["app", "users"], None, None).await }
//!         }),
//!         Duration::from_secs(10),
//!     )
//!     .unwrap()
//!     .unwrap();
//! let users = users.subspace().unwrap().clone();
//! db.run(|tx| {
//!     tx.set(&users.pack(&(7i64, "email")), b"ann@example.com");
//!     Ok(())
//! })
//! .unwrap();
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
mod waited;

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
