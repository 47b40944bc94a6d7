//! The directory layer: named, nestable directories, each owning a short key prefix the
//! layer allocates, so that applications address their data by path (`["app", "users"]`)
//! while keys stay short. Moving or renaming a directory changes only its metadata, never
//! its prefix or contents.
//!
//! The layout is the one every FDB binding uses (Python's `fdb.directory`, Java's
//! `DirectoryLayer`, Go's `directory`), so directories created by one are opened by the
//! others: the metadata lives under the node subspace (`\xfe` by default), one node per
//! directory keyed by its prefix, holding its `layer` and its subdirectories by name; the
//! root node also holds the layout `version` and the state of the
//! [`HighContentionAllocator`] that hands out prefixes. A *partition* (layer `partition`)
//! is a directory holding a directory layer of its own, inside its prefix.
//!
//! Every operation takes the transaction it runs in; the same [`DirectoryError`] reports both
//! the layer's refusals and FDB errors. [`run`] is the retry loop for such closures.
//!
//! The arguments come in foundationdb-rs's order — `create(tx, path, prefix, layer)`,
//! `move_to(tx, old_path, new_path)`, `move_directory(tx, new_path)` — and a layer or a
//! prefix is given as a [`Layer`] or a [`ManualPrefix`], never as bare bytes: both are byte
//! strings, and a call written for the other order would otherwise compile and record the
//! prefix as the layer. Such a call does not build:
//!
//! ```compile_fail,E0308
//! # use fdb_api::directory::DirectoryLayer;
//! # use fdb_api::Subspace;
//! # async fn f<D: fdb_api::driver::Driver>(tx: fdb_api::Transaction<D>) {
//! let root = DirectoryLayer::new(Subspace::from_bytes(&b"\xfe"[..]), Subspace::all(), true);
//! let prefix: &[u8] = b"MYPREFIX";
//! root.create(&tx, &["app"], Some(prefix), None).await;
//! # }
//! ```
//!
//! It is written so:
//!
//! ```no_run
//! # use fdb_api::directory::{DirectoryLayer, Layer, ManualPrefix};
//! # use fdb_api::Subspace;
//! # async fn f<D: fdb_api::driver::Driver>(tx: fdb_api::Transaction<D>) {
//! let root = DirectoryLayer::new(Subspace::from_bytes(&b"\xfe"[..]), Subspace::all(), true);
//! root.create(&tx, &["app"], Some(ManualPrefix(b"MYPREFIX")), Some(Layer(b"mylayer"))).await;
//! # }
//! ```
//!
//! ```no_run
//! use fdb_api::directory::{self, DirectoryLayer};
//! # async fn demo<D: fdb_api::driver::Driver>(db: fdb_api::Database<D>) -> Result<(), directory::DirectoryError> {
//! let root = DirectoryLayer::default();
//! // Opens (or creates, with its parents) the directory `app/users`.
//! let users = directory::run(&db, |tx| {
//!     let root = root.clone();
//!     async move { root.create_or_open(&tx, &["app", "users"], None, None).await }
//! })
//! .await?;
//! let users = users.subspace()?.clone(); // a partition would have no subspace of its own
//!
//! directory::run(&db, |tx| {
//!     let users = users.clone();
//!     async move {
//!         tx.set(&users.pack(&("alice", "email")), b"alice@example.com");
//!         Ok(())
//!     }
//! })
//! .await?;
//!
//! // `app` now lists `users`; another binding sees the same.
//! let names = directory::run(&db, |tx| {
//!     let root = root.clone();
//!     async move { root.list(&tx, &["app"]).await }
//! })
//! .await?;
//! assert_eq!(names, ["users"]);
//! # Ok(())
//! # }
//! ```
//! (`fdb_driver_tokio` and `fdb_driver_mio` re-export this module; the mio driver's blocking
//! `Database::block_on` runs these futures too.)

mod allocator;
mod layer;
mod output;
mod relative;
mod tree;

use std::fmt;
use std::future::Future;

use fdb_protocol::error::ErrorCode;
use fdb_protocol::tuple::PackError;

use crate::database::Database;
use crate::driver::Driver;
use crate::error::Error;
use crate::retry::{Next, RetryLoop};
use crate::transaction::Transaction;

pub use allocator::HighContentionAllocator;
pub use layer::DirectoryLayer;
pub use output::{DirectoryOutput, DirectoryPartition, DirectorySubspace};

/// The layer name that makes a directory a partition.
pub const PARTITION_LAYER: &[u8] = b"partition";

/// A directory's layer: application-defined bytes recorded when the directory is created and
/// checked when it is opened ([`Layer::PARTITION`] makes a partition). A type of its own so
/// that it cannot be passed where a [`ManualPrefix`] is expected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layer<'a>(pub &'a [u8]);

impl Layer<'static> {
    /// The layer that makes a directory a partition.
    pub const PARTITION: Layer<'static> = Layer(PARTITION_LAYER);
}

/// A key prefix chosen by the application for a new directory, instead of one the allocator
/// hands out (only where the [`DirectoryLayer`] allows manual prefixes, never in a
/// partition). A type of its own so that it cannot be passed where a [`Layer`] is expected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ManualPrefix<'a>(pub &'a [u8]);

/// The bytes of an optional [`Layer`] or [`ManualPrefix`].
fn raw<'a, T: Into<&'a [u8]>>(v: Option<T>) -> Option<&'a [u8]> {
    v.map(Into::into)
}

impl<'a> From<Layer<'a>> for &'a [u8] {
    fn from(l: Layer<'a>) -> &'a [u8] {
        l.0
    }
}

impl<'a> From<ManualPrefix<'a>> for &'a [u8] {
    fn from(p: ManualPrefix<'a>) -> &'a [u8] {
        p.0
    }
}

/// The layout version this layer writes (`major.minor.patch`) and reads up to.
pub const LAYOUT_VERSION: (u32, u32, u32) = (1, 0, 0);

/// Why a directory operation failed.
// Unit variants with a doc line each, as in any error list: alike in shape only.
#[derive(Debug)]
#[non_exhaustive]
pub enum DirectoryError {
    /// The transaction failed (retryable errors are retried by [`run`]).
    Fdb(Error),
    /// The root directory holds the layer's metadata: it cannot be opened or created.
    CannotOpenRoot,
    /// The root directory cannot be removed.
    CannotRemoveRoot,
    /// The root directory cannot be moved.
    CannotMoveRoot,
    /// A prefix was given but this layer does not allow manual prefixes.
    ManualPrefixesNotAllowed,
    /// A prefix was given inside a partition (partitions allocate every prefix).
    PrefixInPartition,
    /// `create` of a directory that exists.
    AlreadyExists,
    /// The directory does not exist.
    DoesNotExist,
    /// The directory was created with another layer than the one asked for.
    IncompatibleLayer,
    /// The prefix asked for overlaps a directory's prefix or the layer's metadata.
    PrefixInUse,
    /// The database holds keys under the prefix the allocator chose.
    PrefixNotEmpty(Vec<u8>),
    /// A manually chosen prefix overlaps the prefix the allocator chose.
    AllocatorConflict(Vec<u8>),
    /// The destination of a move is inside the directory being moved.
    MoveIntoSubdirectory,
    /// The destination of a move exists.
    DestinationExists,
    /// The parent of a move's destination does not exist.
    ParentDoesNotExist,
    /// A move between partitions (a directory's prefix belongs to its partition).
    MoveBetweenPartitions,
    /// The stored layout is newer than [`LAYOUT_VERSION`] (`read_only`: only its minor
    /// version is, so reading is allowed but writing is not).
    IncompatibleVersion {
        /// The stored version.
        stored: (u32, u32, u32),
        /// Whether reads may proceed.
        read_only: bool,
    },
    /// The root of a partition has no key space of its own (its prefix holds the
    /// partition's directory layer).
    PartitionRoot,
    /// A key outside the directory, or one that is no packed tuple.
    Tuple(PackError),
    /// The layer's metadata holds something no binding writes.
    BadMetadata(&'static str),
}

impl DirectoryError {
    /// The FDB error code, if the transaction failed.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            DirectoryError::Fdb(e) => e.code(),
            _ => None,
        }
    }
}

impl From<Error> for DirectoryError {
    fn from(e: Error) -> Self {
        DirectoryError::Fdb(e)
    }
}

impl From<fdb_protocol::ClientError> for DirectoryError {
    fn from(e: fdb_protocol::ClientError) -> Self {
        DirectoryError::Fdb(Error::Client(e))
    }
}

impl From<PackError> for DirectoryError {
    fn from(e: PackError) -> Self {
        DirectoryError::Tuple(e)
    }
}

impl fmt::Display for DirectoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DirectoryError::*;
        match self {
            Fdb(e) => write!(f, "{e}"),
            CannotOpenRoot => write!(f, "the root directory cannot be opened"),
            CannotRemoveRoot => write!(f, "the root directory cannot be removed"),
            CannotMoveRoot => write!(f, "the root directory cannot be moved"),
            ManualPrefixesNotAllowed => {
                write!(f, "a prefix needs a directory layer with manual prefixes")
            }
            PrefixInPartition => write!(f, "a prefix cannot be given in a partition"),
            AlreadyExists => write!(f, "the directory already exists"),
            DoesNotExist => write!(f, "the directory does not exist"),
            IncompatibleLayer => write!(f, "the directory was created with another layer"),
            PrefixInUse => write!(f, "the prefix is already in use"),
            PrefixNotEmpty(p) => write!(f, "keys exist under the allocated prefix {p:02x?}"),
            AllocatorConflict(p) => write!(
                f,
                "a manual prefix conflicts with the allocated prefix {p:02x?}"
            ),
            MoveIntoSubdirectory => {
                write!(f, "a directory cannot move into its own subdirectory")
            }
            DestinationExists => write!(f, "the destination directory exists"),
            ParentDoesNotExist => write!(f, "the destination's parent does not exist"),
            MoveBetweenPartitions => write!(f, "directories cannot move between partitions"),
            IncompatibleVersion { stored, read_only } => write!(
                f,
                "the directory layout {}.{}.{} is newer than {}.{}.{}{}",
                stored.0,
                stored.1,
                stored.2,
                LAYOUT_VERSION.0,
                LAYOUT_VERSION.1,
                LAYOUT_VERSION.2,
                if *read_only { " (read-only)" } else { "" }
            ),
            PartitionRoot => write!(f, "the root of a partition has no key space"),
            Tuple(e) => write!(f, "{e}"),
            BadMetadata(what) => write!(f, "malformed directory metadata: {what}"),
        }
    }
}

impl std::error::Error for DirectoryError {}

/// What a read-only directory operation (`open`, `exists`, `list`) reads through: a
/// [`Transaction`], or a [`Snapshot`] of one (reads without read conflict ranges).
pub trait ReadTransaction<D: Driver> {
    /// The transaction.
    fn transaction(&self) -> &Transaction<D>;
    /// Whether reads are snapshot reads.
    fn is_snapshot(&self) -> bool;
}

impl<D: Driver> ReadTransaction<D> for Transaction<D> {
    fn transaction(&self) -> &Transaction<D> {
        self
    }
    fn is_snapshot(&self) -> bool {
        false
    }
}

/// Snapshot reads of a transaction, for the read-only directory operations.
pub struct Snapshot<'a, D: Driver>(pub &'a Transaction<D>);

impl<D: Driver> ReadTransaction<D> for Snapshot<'_, D> {
    fn transaction(&self) -> &Transaction<D> {
        self.0
    }
    fn is_snapshot(&self) -> bool {
        true
    }
}

/// How the layer reads: a transaction and whether its reads are snapshot reads.
pub(crate) struct Tr<'a, D: Driver> {
    tx: &'a Transaction<D>,
    snapshot: bool,
}

impl<D: Driver> Clone for Tr<'_, D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D: Driver> Copy for Tr<'_, D> {}

impl<'a, D: Driver> Tr<'a, D> {
    fn new(tx: &'a Transaction<D>) -> Self {
        Tr {
            tx,
            snapshot: false,
        }
    }

    fn of<R: ReadTransaction<D> + ?Sized>(r: &'a R) -> Self {
        Tr {
            tx: r.transaction(),
            snapshot: r.is_snapshot(),
        }
    }

    async fn get(&self, key: &[u8]) -> Result<Option<bytes::Bytes>, Error> {
        if self.snapshot {
            self.tx.snapshot_get(key).await
        } else {
            self.tx.get(key).await
        }
    }

    /// The rows of `[begin, end)` (at most `limit` if non-zero), first to last or last to
    /// first.
    async fn range(
        &self,
        begin: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<fdb_protocol::messages::types::KeyValue>, Error> {
        use bytes::Bytes;
        use fdb_protocol::messages::types::KeySelector;
        self.tx
            .get_range_with(
                KeySelector::first_greater_or_equal(Bytes::copy_from_slice(begin)),
                KeySelector::first_greater_or_equal(Bytes::copy_from_slice(end)),
                fdb_protocol::RangeOptions {
                    limit,
                    reverse,
                    ..fdb_protocol::RangeOptions::default()
                },
                self.snapshot,
            )
            .await
    }
}

/// The retry loop for directory operations: runs `f` in a transaction and commits it,
/// retrying FDB errors as `on_error` allows (like [`Database::run`]); the layer's own errors
/// end the loop.
pub async fn run<D, T, F, Fut>(db: &Database<D>, mut f: F) -> Result<T, DirectoryError>
where
    D: Driver,
    F: FnMut(Transaction<D>) -> Fut,
    Fut: Future<Output = Result<T, DirectoryError>>,
{
    let tx = db.create_transaction();
    loop {
        let result = match f(tx.clone()).await {
            Ok(v) => tx.commit().await.map(|_| v).map_err(DirectoryError::Fdb),
            Err(e) => Err(e),
        };
        let code = match result {
            Ok(v) => return Ok(v),
            Err(DirectoryError::Fdb(e)) => match RetryLoop::after::<T>(Err(e)) {
                Next::OnError(code) => code,
                Next::Done(r) => return r.map_err(DirectoryError::Fdb),
            },
            Err(e) => return Err(e),
        };
        tx.on_error(code).await?;
    }
}

/// A path given as any string slices, owned.
fn owned_path(path: &[impl AsRef<str>]) -> Vec<String> {
    path.iter().map(|p| p.as_ref().to_string()).collect()
}
