//! foundationdb-rs's directory layer API over fdb-api's directory layer (the same layout
//! as every binding's, so directories made by one are opened by the others).
//!
//! fdb-api is called in this file only, each operation through one function of `ops`: its
//! argument order differs from foundationdb-rs's (and may change), and that stays here.

use async_trait::async_trait;

use fdb_api::directory as api;

use crate::error::FdbError;
use crate::transaction::Transaction;
use crate::tuple::hca::HcaError;
use crate::tuple::{PackError, PackResult, Subspace, TuplePack, TupleUnpack};

/// The directory layer's errors, as foundationdb-rs names them.
#[derive(Debug)]
pub enum DirectoryError {
    /// The root directory cannot be removed.
    CannotModifyRootDirectory,
    /// The prefix asked for is in use.
    DirectoryPrefixInUse,
    /// The directory does not exist.
    DirectoryDoesNotExists,
    /// An empty path where one is needed.
    NoPathProvided,
    /// `create` of a directory that exists.
    DirAlreadyExists,
    /// The path does not exist.
    PathDoesNotExists,
    /// The parent of a move's destination does not exist.
    ParentDirDoesNotExists,
    /// The directory was created with another layer.
    IncompatibleLayer,
    /// The destination of a move exists.
    BadDestinationDirectory,
    /// The stored layout's version is not supported.
    Version(String),
    /// A prefix was given but the layer does not allow manual prefixes.
    PrefixNotAllowed,
    /// A prefix was given inside a partition.
    CannotPrefixInPartition,
    /// The root directory cannot be moved.
    CannotMoveRootDirectory,
    /// A move between partitions.
    CannotMoveBetweenPartition,
    /// A move into the directory's own subdirectory.
    CannotMoveBetweenSubdirectory,
    /// The database holds keys under the allocated prefix.
    PrefixNotEmpty,
    /// A sub-path cannot be created.
    CannotCreateSubpath,
    /// A partition has no key space of its own.
    CannotOpenDirectoryPartition,
    /// A partition has no key of its own.
    CannotGetKeyDirectoryPartition,
    /// A partition cannot pack keys.
    CannotPackDirectoryPartition,
    /// A partition cannot unpack keys.
    CannotUnpackDirectoryPartition,
    /// A partition has no range of its own.
    CannotRangeDirectoryPartition,
    /// An IO error.
    IoError(std::io::Error),
    /// The transaction failed.
    FdbError(FdbError),
    /// From the allocator.
    HcaError(HcaError),
    /// From the tuple layer.
    PackError(PackError),
    /// Anything else, described.
    Other(String),
}

crate::impls::from_variants!(DirectoryError {
    FdbError => FdbError,
    HcaError => HcaError,
    PackError => PackError,
});

impl From<api::DirectoryError> for DirectoryError {
    fn from(e: api::DirectoryError) -> Self {
        use api::DirectoryError as A;
        use DirectoryError as D;
        match e {
            A::Fdb(e) => D::FdbError(e.into()),
            A::CannotOpenRoot => D::NoPathProvided,
            A::CannotRemoveRoot => D::CannotModifyRootDirectory,
            A::CannotMoveRoot => D::CannotMoveRootDirectory,
            A::ManualPrefixesNotAllowed => D::PrefixNotAllowed,
            A::PrefixInPartition => D::CannotPrefixInPartition,
            A::AlreadyExists => D::DirAlreadyExists,
            A::DoesNotExist => D::DirectoryDoesNotExists,
            A::IncompatibleLayer => D::IncompatibleLayer,
            A::PrefixInUse => D::DirectoryPrefixInUse,
            A::PrefixNotEmpty(_) => D::PrefixNotEmpty,
            A::MoveIntoSubdirectory => D::CannotMoveBetweenSubdirectory,
            A::DestinationExists => D::BadDestinationDirectory,
            A::ParentDoesNotExist => D::ParentDirDoesNotExists,
            A::MoveBetweenPartitions => D::CannotMoveBetweenPartition,
            A::PartitionRoot => D::CannotOpenDirectoryPartition,
            e @ A::IncompatibleVersion { .. } => D::Version(e.to_string()),
            e => D::Other(e.to_string()),
        }
    }
}

/// The operations of a directory, on paths relative to it.
// foundationdb-rs 0.11's trait, spelled out: `create_or_open` and `create` (and the path
// methods) share their arguments there too.
#[async_trait]
pub trait Directory {
    /// Opens the directory at `path`, creating it (and missing parents) if needed.
    async fn create_or_open(
        &self,
        txn: &Transaction,
        path: &[String],
        prefix: Option<&[u8]>,
        layer: Option<&[u8]>,
    ) -> Result<DirectoryOutput, DirectoryError>;
    /// Creates the directory at `path`; an error if it exists.
    async fn create(
        &self,
        txn: &Transaction,
        path: &[String],
        prefix: Option<&[u8]>,
        layer: Option<&[u8]>,
    ) -> Result<DirectoryOutput, DirectoryError>;
    /// Opens the directory at `path`; an error if it does not exist.
    async fn open(
        &self,
        txn: &Transaction,
        path: &[String],
        layer: Option<&[u8]>,
    ) -> Result<DirectoryOutput, DirectoryError>;
    /// Whether the directory at `path` exists.
    async fn exists(&self, trx: &Transaction, path: &[String]) -> Result<bool, DirectoryError>;
    /// Moves this directory to `new_path` (from the root of its layer).
    async fn move_directory(
        &self,
        trx: &Transaction,
        new_path: &[String],
    ) -> Result<DirectoryOutput, DirectoryError>;
    /// Moves the directory at `old_path` to `new_path`.
    async fn move_to(
        &self,
        trx: &Transaction,
        old_path: &[String],
        new_path: &[String],
    ) -> Result<DirectoryOutput, DirectoryError>;
    /// Removes the directory at `path` and its contents; an error if it does not exist.
    async fn remove(&self, trx: &Transaction, path: &[String]) -> Result<bool, DirectoryError>;
    /// Removes the directory at `path` if it exists (whether it did).
    async fn remove_if_exists(
        &self,
        trx: &Transaction,
        path: &[String],
    ) -> Result<bool, DirectoryError>;
    /// The names of the directories below `path`.
    async fn list(&self, trx: &Transaction, path: &[String])
        -> Result<Vec<String>, DirectoryError>;
}

/// The root of a directory hierarchy: where its metadata lives and where its prefixes go.
#[derive(Clone, Debug, Default)]
pub struct DirectoryLayer {
    inner: api::DirectoryLayer,
}

impl DirectoryLayer {
    /// A layer with its metadata in `node_subspace` and its prefixes in `content_subspace`.
    pub fn new(
        node_subspace: Subspace,
        content_subspace: Subspace,
        allow_manual_prefixes: bool,
    ) -> Self {
        DirectoryLayer {
            inner: api::DirectoryLayer::new(
                core_subspace(&node_subspace),
                core_subspace(&content_subspace),
                allow_manual_prefixes,
            ),
        }
    }

    /// The layer's path (empty but inside a partition).
    pub fn get_path(&self) -> &[String] {
        self.inner.path()
    }
}

fn core_subspace(s: &Subspace) -> fdb_protocol::tuple::Subspace {
    fdb_protocol::tuple::Subspace::from_bytes(s.bytes())
}

/// A directory with a key space: its prefix, path and layer.
#[derive(Clone, Debug)]
pub struct DirectorySubspace {
    inner: api::DirectorySubspace,
    subspace: Subspace,
}

impl DirectorySubspace {
    /// The subspace of `t` inside the directory.
    pub fn subspace<T: TuplePack>(&self, t: &T) -> Subspace {
        self.subspace.subspace(t)
    }

    /// The directory's prefix.
    pub fn bytes(&self) -> &[u8] {
        self.subspace.bytes()
    }

    /// `t` packed after the prefix.
    pub fn pack<T: TuplePack>(&self, t: &T) -> Vec<u8> {
        self.subspace.pack(t)
    }

    /// A key of the directory unpacked.
    pub fn unpack<'de, T: TupleUnpack<'de>>(&self, key: &'de [u8]) -> PackResult<T> {
        self.subspace.unpack(key)
    }

    /// The directory's keys.
    pub fn range(&self) -> (Vec<u8>, Vec<u8>) {
        self.subspace.range()
    }

    /// The directory's path.
    pub fn get_path(&self) -> &[String] {
        self.inner.path()
    }

    /// The directory's layer.
    pub fn get_layer(&self) -> &[u8] {
        self.inner.layer()
    }

    /// Whether `key` is in the directory.
    pub fn is_start_of(&self, key: &[u8]) -> bool {
        self.subspace.is_start_of(key)
    }
}

/// A partition: a directory with its own directory layer inside its prefix.
#[derive(Clone, Debug)]
pub struct DirectoryPartition {
    inner: api::DirectoryPartition,
}

impl DirectoryPartition {
    /// The partition's path.
    pub fn get_path(&self) -> &[String] {
        self.inner.path()
    }

    /// `b"partition"`.
    pub fn get_layer(&self) -> &[u8] {
        b"partition"
    }
}

/// A directory opened or created.
#[derive(Clone, Debug)]
pub enum DirectoryOutput {
    /// A directory with a key space.
    DirectorySubspace(DirectorySubspace),
    /// A partition.
    DirectoryPartition(DirectoryPartition),
}

impl From<api::DirectoryOutput> for DirectoryOutput {
    fn from(o: api::DirectoryOutput) -> Self {
        match o {
            api::DirectoryOutput::Subspace(s) => {
                let subspace = Subspace::from_bytes(s.subspace().bytes().to_vec());
                DirectoryOutput::DirectorySubspace(DirectorySubspace { inner: s, subspace })
            }
            api::DirectoryOutput::Partition(p) => {
                DirectoryOutput::DirectoryPartition(DirectoryPartition { inner: p })
            }
        }
    }
}

impl DirectoryOutput {
    /// The subspace of `t` inside the directory (not for a partition).
    pub fn subspace<T: TuplePack>(&self, t: &T) -> Result<Subspace, DirectoryError> {
        match self {
            DirectoryOutput::DirectorySubspace(d) => Ok(d.subspace(t)),
            DirectoryOutput::DirectoryPartition(_) => {
                Err(DirectoryError::CannotOpenDirectoryPartition)
            }
        }
    }

    /// The directory's prefix (not for a partition).
    pub fn bytes(&self) -> Result<&[u8], DirectoryError> {
        match self {
            DirectoryOutput::DirectorySubspace(d) => Ok(d.bytes()),
            DirectoryOutput::DirectoryPartition(_) => {
                Err(DirectoryError::CannotOpenDirectoryPartition)
            }
        }
    }

    /// `t` packed after the prefix (not for a partition).
    pub fn pack<T: TuplePack>(&self, t: &T) -> Result<Vec<u8>, DirectoryError> {
        match self {
            DirectoryOutput::DirectorySubspace(d) => Ok(d.pack(t)),
            DirectoryOutput::DirectoryPartition(_) => {
                Err(DirectoryError::CannotPackDirectoryPartition)
            }
        }
    }

    /// A key of the directory unpacked (not for a partition).
    pub fn unpack<'de, T: TupleUnpack<'de>>(
        &self,
        key: &'de [u8],
    ) -> Result<PackResult<T>, DirectoryError> {
        match self {
            DirectoryOutput::DirectorySubspace(d) => Ok(d.unpack(key)),
            DirectoryOutput::DirectoryPartition(_) => {
                Err(DirectoryError::CannotPackDirectoryPartition)
            }
        }
    }

    /// The directory's keys (not for a partition).
    pub fn range(&self) -> Result<(Vec<u8>, Vec<u8>), DirectoryError> {
        match self {
            DirectoryOutput::DirectorySubspace(d) => Ok(d.range()),
            DirectoryOutput::DirectoryPartition(_) => {
                Err(DirectoryError::CannotRangeDirectoryPartition)
            }
        }
    }

    /// The directory's path.
    pub fn get_path(&self) -> &[String] {
        match self {
            DirectoryOutput::DirectorySubspace(d) => d.get_path(),
            DirectoryOutput::DirectoryPartition(d) => d.get_path(),
        }
    }

    /// The directory's layer.
    pub fn get_layer(&self) -> &[u8] {
        match self {
            DirectoryOutput::DirectorySubspace(d) => d.get_layer(),
            DirectoryOutput::DirectoryPartition(d) => d.get_layer(),
        }
    }
}

/// The place fdb-api's directory operations start from: a layer's root or a directory.
#[derive(Clone, Copy)]
enum At<'a> {
    Root(&'a api::DirectoryLayer),
    Sub(&'a api::DirectorySubspace),
    Partition(&'a api::DirectoryPartition),
}

/// The same call on whichever of fdb-api's three directory types `at` holds (`$d` names
/// it): they share their methods but no trait, so each operation's three-way match is
/// written here once.
macro_rules! on {
    ($at:expr, $d:ident => $call:expr) => {
        match $at {
            At::Root($d) => $call,
            At::Sub($d) => $call,
            At::Partition($d) => $call,
        }
    };
}

/// Each operation of the trait, on fdb-api, in foundationdb-rs's argument order.
mod ops {
    use super::*;
    use api::{Layer, ManualPrefix};

    type R<T> = Result<T, DirectoryError>;

    fn out(r: Result<api::DirectoryOutput, api::DirectoryError>) -> R<DirectoryOutput> {
        Ok(r?.into())
    }

    pub(super) async fn open(
        at: At<'_>,
        tx: &Transaction,
        path: &[String],
        layer: Option<&[u8]>,
    ) -> R<DirectoryOutput> {
        let t = &tx.inner;
        out(on!(at, d => d.open(t, path, layer.map(Layer)).await))
    }

    pub(super) async fn create(
        at: At<'_>,
        tx: &Transaction,
        path: &[String],
        prefix: Option<&[u8]>,
        layer: Option<&[u8]>,
    ) -> R<DirectoryOutput> {
        let t = &tx.inner;
        let (prefix, layer) = (prefix.map(ManualPrefix), layer.map(Layer));
        out(on!(at, d => d.create(t, path, prefix, layer).await))
    }

    pub(super) async fn create_or_open(
        at: At<'_>,
        tx: &Transaction,
        path: &[String],
        prefix: Option<&[u8]>,
        layer: Option<&[u8]>,
    ) -> R<DirectoryOutput> {
        let t = &tx.inner;
        let (prefix, layer) = (prefix.map(ManualPrefix), layer.map(Layer));
        out(on!(at, d => d.create_or_open(t, path, prefix, layer).await))
    }

    pub(super) async fn exists(at: At<'_>, tx: &Transaction, path: &[String]) -> R<bool> {
        Ok(on!(at, d => d.exists(&tx.inner, path).await)?)
    }

    pub(super) async fn list(at: At<'_>, tx: &Transaction, path: &[String]) -> R<Vec<String>> {
        Ok(on!(at, d => d.list(&tx.inner, path).await)?)
    }

    /// Moves the directory `at` itself.
    pub(super) async fn move_directory(
        at: At<'_>,
        tx: &Transaction,
        new_path: &[String],
    ) -> R<DirectoryOutput> {
        out(on!(at, d => d.move_directory(&tx.inner, new_path).await))
    }

    /// Moves a directory below `at`.
    pub(super) async fn move_to(
        at: At<'_>,
        tx: &Transaction,
        old_path: &[String],
        new_path: &[String],
    ) -> R<DirectoryOutput> {
        out(on!(at, d => d.move_to(&tx.inner, old_path, new_path).await))
    }

    pub(super) async fn remove(at: At<'_>, tx: &Transaction, path: &[String]) -> R<bool> {
        on!(at, d => d.remove(&tx.inner, path).await)?;
        Ok(true)
    }

    pub(super) async fn remove_if_exists(at: At<'_>, tx: &Transaction, path: &[String]) -> R<bool> {
        Ok(on!(at, d => d.remove_if_exists(&tx.inner, path).await)?)
    }
}

/// The trait for each kind of directory, through `ops`: each method is listed with the
/// arguments after the transaction and its `Ok` type, forwarding to the `ops` call of its
/// name, so foundationdb-rs's signatures are written once for the four types.
macro_rules! directory_impl {
    ($t:ty, $self:ident => $at:expr) => {
        directory_impl! {
            @methods $t, $self => $at;
            create_or_open(path: &[String], prefix: Option<&[u8]>, layer: Option<&[u8]>)
                -> DirectoryOutput;
            create(path: &[String], prefix: Option<&[u8]>, layer: Option<&[u8]>)
                -> DirectoryOutput;
            open(path: &[String], layer: Option<&[u8]>) -> DirectoryOutput;
            exists(path: &[String]) -> bool;
            move_directory(new_path: &[String]) -> DirectoryOutput;
            move_to(old_path: &[String], new_path: &[String]) -> DirectoryOutput;
            remove(path: &[String]) -> bool;
            remove_if_exists(path: &[String]) -> bool;
            list(path: &[String]) -> Vec<String>;
        }
    };
    (@methods $t:ty, $self:ident => $at:expr; $($m:ident($($a:ident: $ty:ty),*) -> $ok:ty;)*) => {
        #[async_trait]
        impl Directory for $t {
            $(
                async fn $m(
                    &$self,
                    trx: &Transaction,
                    $($a: $ty),*
                ) -> Result<$ok, DirectoryError> {
                    ops::$m($at, trx, $($a),*).await
                }
            )*
        }
    };
}
directory_impl!(DirectoryLayer, self => At::Root(&self.inner));
directory_impl!(DirectorySubspace, self => At::Sub(&self.inner));
directory_impl!(DirectoryPartition, self => At::Partition(&self.inner));
directory_impl!(DirectoryOutput, self => match self {
    DirectoryOutput::DirectorySubspace(d) => At::Sub(&d.inner),
    DirectoryOutput::DirectoryPartition(p) => At::Partition(&p.inner),
});
