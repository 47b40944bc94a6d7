//! The directory operations, written once for every place paths start from — a
//! [`DirectoryLayer`] (its root), a [`DirectorySubspace`], a [`DirectoryPartition`], a
//! [`DirectoryOutput`] (whichever it is) — each path relative to that place and handed to the
//! layer that acts on it (`tree.rs`).

use super::layer::DirectoryLayer;
use super::output::{either, DirectoryOutput, DirectoryPartition, DirectorySubspace};
use super::{owned_path, raw, DirectoryError, Layer, ManualPrefix, ReadTransaction, Tr};
use crate::driver::Driver;
use crate::transaction::Transaction;

impl DirectoryLayer {
    fn at(&self) -> At<'_> {
        At {
            path: self.path(),
            layer: self,
            parent: None,
        }
    }
}

impl DirectorySubspace {
    fn at(&self) -> At<'_> {
        At {
            path: self.path(),
            layer: self.directory_layer(),
            parent: None,
        }
    }
}

impl DirectoryPartition {
    fn at(&self) -> At<'_> {
        At {
            path: self.path(),
            layer: self.inner_layer(),
            parent: Some(self.parent_layer()),
        }
    }
}

/// A directory as the place relative paths start from: its path, the layer it acts
/// through, and for a partition the layer it lives in (which acts on the partition itself).
/// A layer is its own root: its path is the layer's.
struct At<'a> {
    path: &'a [String],
    layer: &'a DirectoryLayer,
    parent: Option<&'a DirectoryLayer>,
}

impl DirectoryOutput {
    fn at(&self) -> At<'_> {
        either!(self, d => d.at())
    }
}

impl<'a> At<'a> {
    /// Creates the directory at `path` below this one, or (`allow_open`) opens it if it
    /// exists.
    async fn create<D: Driver>(
        &self,
        tx: &Transaction<D>,
        path: &[impl AsRef<str>],
        prefix: Option<ManualPrefix<'_>>,
        layer: Option<Layer<'_>>,
        allow_open: bool,
    ) -> Result<DirectoryOutput, DirectoryError> {
        let (tr, path) = (Tr::new(tx), self.below(path));
        let (prefix, layer) = (raw(prefix), raw(layer));
        self.layer
            .create_or_open_in(tr, path, prefix, layer, true, allow_open)
            .await
    }

    /// The layer for an operation on `path`: a partition itself lives in its parent layer.
    fn layer_for(&self, path: &[String]) -> &'a DirectoryLayer {
        match self.parent {
            Some(parent) if path.is_empty() => parent,
            _ => self.layer,
        }
    }

    /// `path` below this directory, relative to `layer`.
    fn subpath(&self, path: &[String], layer: &DirectoryLayer) -> Vec<String> {
        let mut p = self
            .path
            .get(layer.path().len()..)
            .unwrap_or_default()
            .to_vec();
        p.extend_from_slice(path);
        p
    }

    /// `path` below this directory, relative to the layer acting below it.
    fn below(&self, path: &[impl AsRef<str>]) -> Vec<String> {
        self.subpath(&owned_path(path), self.layer)
    }

    /// The layer for an operation on `path` (this directory itself included), and `path`
    /// relative to it.
    fn resolve(&self, path: &[impl AsRef<str>]) -> (&'a DirectoryLayer, Vec<String>) {
        let path = owned_path(path);
        let layer = self.layer_for(&path);
        (layer, self.subpath(&path, layer))
    }
}

/// The operations of a directory on the directories below it, paths relative to it.
// `create_or_open` and `create` are two public names over one `create` (its last argument
// says whether opening is allowed), as in the other bindings.
macro_rules! directory_ops {
    ($t:ty) => {
        impl $t {
            /// Opens the directory at `path` below this one, creating it (and its missing
            /// parents) if it does not exist. A `layer` is checked against an existing
            /// directory's, or recorded for a new one (`None` or empty: any, resp. none). A
            /// `prefix` is used only if the directory is created (see `create`).
            pub async fn create_or_open<D: Driver>(
                &self,
                tx: &Transaction<D>,
                path: &[impl AsRef<str>],
                prefix: Option<ManualPrefix<'_>>,
                layer: Option<Layer<'_>>,
            ) -> Result<DirectoryOutput, DirectoryError> {
                self.at().create(tx, path, prefix, layer, true).await
            }

            // create_or_open and create differ only in the flag they pass: two public methods.
            /// Creates the directory at `path` below this one (and its missing parents);
            /// fails if it exists. With `prefix`, the directory gets that prefix (if the
            /// layer allows manual prefixes and the prefix is free); otherwise one is
            /// allocated.
            pub async fn create<D: Driver>(
                &self,
                tx: &Transaction<D>,
                path: &[impl AsRef<str>],
                prefix: Option<ManualPrefix<'_>>,
                layer: Option<Layer<'_>>,
            ) -> Result<DirectoryOutput, DirectoryError> {
                self.at().create(tx, path, prefix, layer, false).await
            }

            /// Opens the existing directory at `path` below this one; with a non-empty
            /// `layer`, it must be the directory's.
            pub async fn open<D: Driver, R: ReadTransaction<D> + Sync>(
                &self,
                tr: &R,
                path: &[impl AsRef<str>],
                layer: Option<Layer<'_>>,
            ) -> Result<DirectoryOutput, DirectoryError> {
                let at = self.at();
                at.layer
                    .create_or_open_in(Tr::of(tr), at.below(path), None, raw(layer), false, true)
                    .await
            }

            /// Whether the directory at `path` below this one (`[]`: this one; a layer's
            /// root always exists) exists.
            pub async fn exists<D: Driver, R: ReadTransaction<D> + Sync>(
                &self,
                tr: &R,
                path: &[impl AsRef<str>],
            ) -> Result<bool, DirectoryError> {
                let (layer, sub) = self.at().resolve(path);
                layer.exists_in(Tr::of(tr), sub).await
            }

            /// The names of the subdirectories of the directory at `path` below this one
            /// (`[]`: this one), in key order.
            pub async fn list<D: Driver, R: ReadTransaction<D> + Sync>(
                &self,
                tr: &R,
                path: &[impl AsRef<str>],
            ) -> Result<Vec<String>, DirectoryError> {
                let at = self.at();
                at.layer.list_in(Tr::of(tr), at.below(path)).await
            }

            /// Moves the directory at `old_path` below this one to `new_path` below it
            /// (whose parent must exist). Its prefix and contents stay; handles opened
            /// before keep working. (Python's and Java's `move`; the name and order are
            /// foundationdb-rs's.)
            pub async fn move_to<D: Driver>(
                &self,
                tx: &Transaction<D>,
                old_path: &[impl AsRef<str>],
                new_path: &[impl AsRef<str>],
            ) -> Result<DirectoryOutput, DirectoryError> {
                let at = self.at();
                at.layer
                    .move_in(Tr::new(tx), at.below(old_path), at.below(new_path))
                    .await
            }

            /// Moves this directory to the absolute `new_path` (in the same partition).
            /// (Python's and Java's `move_to`; the name is foundationdb-rs's.) The root of a
            /// layer cannot be moved: [`DirectoryError::CannotMoveRoot`].
            pub async fn move_directory<D: Driver>(
                &self,
                tx: &Transaction<D>,
                new_path: &[impl AsRef<str>],
            ) -> Result<DirectoryOutput, DirectoryError> {
                let at = self.at();
                let layer = at.layer_for(&[]);
                let n = layer.path().len();
                let old = at.path.get(n..).unwrap_or_default().to_vec();
                if old.is_empty() {
                    return Err(DirectoryError::CannotMoveRoot);
                }
                let new_path = owned_path(new_path);
                if new_path.get(..n) != Some(layer.path()) {
                    return Err(DirectoryError::MoveBetweenPartitions);
                }
                layer
                    .move_in(Tr::new(tx), old, new_path[n..].to_vec())
                    .await
            }

            /// Removes the directory at `path` below this one (`[]`: this one), its
            /// subdirectories and all their contents; fails if it does not exist.
            pub async fn remove<D: Driver>(
                &self,
                tx: &Transaction<D>,
                path: &[impl AsRef<str>],
            ) -> Result<(), DirectoryError> {
                let (layer, sub) = self.at().resolve(path);
                layer.remove_in(Tr::new(tx), sub, true).await.map(|_| ())
            }

            /// `remove` of a directory that may not exist: whether it did.
            pub async fn remove_if_exists<D: Driver>(
                &self,
                tx: &Transaction<D>,
                path: &[impl AsRef<str>],
            ) -> Result<bool, DirectoryError> {
                let (layer, sub) = self.at().resolve(path);
                layer.remove_in(Tr::new(tx), sub, false).await
            }
        }
    };
}

directory_ops!(DirectoryLayer);
directory_ops!(DirectorySubspace);
directory_ops!(DirectoryPartition);
directory_ops!(DirectoryOutput);
