//! What opening a directory yields: a [`DirectorySubspace`] (a directory whose prefix holds
//! the application's keys) or a [`DirectoryPartition`] (a directory whose prefix holds a
//! directory layer of its own); `relative.rs` has what they do to the directories below them
//! by relative path.

use std::ops::Deref;

use fdb_protocol::tuple::Subspace;

use super::layer::DirectoryLayer;
use super::{DirectoryError, PARTITION_LAYER};

/// A directory: its path, its layer, and the subspace of its prefix (it derefs to it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectorySubspace {
    subspace: Subspace,
    path: Vec<String>,
    layer: Vec<u8>,
    /// The layer it was opened through (its paths are relative to that layer's).
    directory_layer: DirectoryLayer,
}

/// A partition: a directory holding a directory layer of its own inside its prefix, so
/// that everything below it shares the prefix. Its root has no key space of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectoryPartition {
    prefix: Vec<u8>,
    path: Vec<String>,
    /// The partition's own layer (nodes at `prefix + \xfe`, contents in `prefix`).
    inner: DirectoryLayer,
    /// The layer the partition itself lives in.
    parent: DirectoryLayer,
}

/// A directory opened or created: a plain one or a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DirectoryOutput {
    /// A directory with a key space.
    Subspace(DirectorySubspace),
    /// A partition.
    Partition(DirectoryPartition),
}

impl DirectorySubspace {
    pub(super) fn new(
        path: Vec<String>,
        prefix: Vec<u8>,
        directory_layer: DirectoryLayer,
        layer: Vec<u8>,
    ) -> DirectorySubspace {
        DirectorySubspace {
            subspace: Subspace::from_bytes(prefix),
            path,
            layer,
            directory_layer,
        }
    }

    /// The subspace of the directory's prefix.
    pub fn subspace(&self) -> &Subspace {
        &self.subspace
    }

    /// The absolute path.
    pub fn path(&self) -> &[String] {
        &self.path
    }

    /// The layer it was created with (empty: none).
    pub fn layer(&self) -> &[u8] {
        &self.layer
    }

    /// The directory layer it belongs to.
    pub fn directory_layer(&self) -> &DirectoryLayer {
        &self.directory_layer
    }
}

impl Deref for DirectorySubspace {
    type Target = Subspace;
    fn deref(&self) -> &Subspace {
        &self.subspace
    }
}

impl DirectoryPartition {
    pub(super) fn new(path: Vec<String>, prefix: Vec<u8>, parent: DirectoryLayer) -> Self {
        DirectoryPartition {
            inner: DirectoryLayer::for_partition(path.clone(), &prefix),
            prefix,
            path,
            parent,
        }
    }

    /// The absolute path.
    pub fn path(&self) -> &[String] {
        &self.path
    }

    /// The partition's own directory layer.
    pub fn inner_layer(&self) -> &DirectoryLayer {
        &self.inner
    }

    /// The layer the partition lives in.
    pub fn parent_layer(&self) -> &DirectoryLayer {
        &self.parent
    }

    /// The prefix everything in the partition shares (not a key space to write in: the
    /// partition's metadata lives there).
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }
}

/// Forwards a directory operation to whichever kind of directory this is.
macro_rules! either {
    ($self:ident, $d:ident => $e:expr) => {
        match $self {
            DirectoryOutput::Subspace($d) => $e,
            DirectoryOutput::Partition($d) => $e,
        }
    };
}
pub(super) use either;

impl DirectoryOutput {
    /// The absolute path.
    pub fn path(&self) -> &[String] {
        either!(self, d => d.path())
    }

    /// The layer the directory was created with (`partition` for a partition).
    pub fn layer(&self) -> &[u8] {
        match self {
            DirectoryOutput::Subspace(d) => d.layer(),
            DirectoryOutput::Partition(_) => PARTITION_LAYER,
        }
    }

    /// The directory's key space; [`DirectoryError::PartitionRoot`] for a partition.
    pub fn subspace(&self) -> Result<&Subspace, DirectoryError> {
        match self {
            DirectoryOutput::Subspace(d) => Ok(d.subspace()),
            DirectoryOutput::Partition(_) => Err(DirectoryError::PartitionRoot),
        }
    }

    /// The directory's prefix; [`DirectoryError::PartitionRoot`] for a partition.
    pub fn key(&self) -> Result<&[u8], DirectoryError> {
        self.subspace().map(|s| s.bytes())
    }
}
