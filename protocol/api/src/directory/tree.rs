//! The operations on a [`DirectoryLayer`]'s tree by path (`relative.rs` gives them their
//! paths). Reads and writes happen in the order of the other bindings' layer, so the
//! conflict ranges match theirs.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use fdb_protocol::tuple::Subspace;

use super::layer::DirectoryLayer;
use super::output::{DirectoryOutput, DirectoryPartition, DirectorySubspace};
use super::{DirectoryError, Tr, LAYOUT_VERSION, PARTITION_LAYER};
use crate::driver::Driver;

/// The key under a node of its subdirectories: `(SUBDIRS, name) = prefix`.
const SUBDIRS: i64 = 0;

type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, DirectoryError>> + Send + 'a>>;

/// A directory found (or not) at the end of a lookup.
struct Node {
    /// The directory's node; `None` where the lookup found nothing.
    subspace: Option<Subspace>,
    /// The path of this node (the lookup stops early at a partition).
    path: Vec<String>,
    /// The path looked up.
    target: Vec<String>,
    /// The node's `layer` value, once read.
    layer: Option<Bytes>,
}

impl Node {
    fn exists(&self) -> bool {
        self.subspace.is_some()
    }

    fn is_partition(&self) -> bool {
        self.layer.as_deref() == Some(PARTITION_LAYER)
    }

    /// Whether the path continues inside the partition this node is (or, with
    /// `include_self`, whether this node is a partition at all).
    fn is_in_partition(&self, include_self: bool) -> bool {
        self.exists()
            && self.is_partition()
            && (include_self || self.target.len() > self.path.len())
    }

    /// The rest of the path, inside the partition.
    fn partition_subpath(&self) -> Vec<String> {
        self.target[self.path.len()..].to_vec()
    }

    fn layer_bytes(&self) -> Vec<u8> {
        self.layer.as_deref().unwrap_or_default().to_vec()
    }
}

impl DirectoryLayer {
    // The operations themselves (`relative.rs` gives them paths), on owned paths.

    pub(super) fn create_or_open_in<'a, D: Driver>(
        &'a self,
        tr: Tr<'a, D>,
        path: Vec<String>,
        prefix: Option<&'a [u8]>,
        layer: Option<&'a [u8]>,
        allow_create: bool,
        allow_open: bool,
    ) -> Boxed<'a, DirectoryOutput> {
        Box::pin(async move {
            self.check_version(tr, false).await?;
            if prefix.is_some() && !self.allow_manual_prefixes {
                return Err(if self.path.is_empty() {
                    DirectoryError::ManualPrefixesNotAllowed
                } else {
                    DirectoryError::PrefixInPartition
                });
            }
            if path.is_empty() {
                return Err(DirectoryError::CannotOpenRoot);
            }
            let existing = self.find_with_layer(tr, &path).await?;
            if existing.exists() {
                if existing.is_in_partition(false) {
                    let inner = self.partition_layer(&existing)?;
                    let sub = existing.partition_subpath();
                    return inner
                        .create_or_open_in(tr, sub, prefix, layer, allow_create, allow_open)
                        .await;
                }
                if !allow_open {
                    return Err(DirectoryError::AlreadyExists);
                }
                if let Some(l) = layer.filter(|l| !l.is_empty()) {
                    if existing.layer.as_deref().unwrap_or_default() != l {
                        return Err(DirectoryError::IncompatibleLayer);
                    }
                }
                return self.contents(&existing);
            }
            if !allow_create {
                return Err(DirectoryError::DoesNotExist);
            }
            self.check_version(tr, true).await?;
            let prefix = match prefix {
                None => {
                    let mut p = self.content_subspace.bytes().to_vec();
                    p.extend_from_slice(&self.allocator.allocate_in(tr).await?);
                    let (begin, end) = (p.clone(), strinc(&p)?);
                    if !tr.range(&begin, &end, 1, false).await?.is_empty() {
                        return Err(DirectoryError::PrefixNotEmpty(p));
                    }
                    let snapshot = Tr {
                        snapshot: true,
                        ..tr
                    };
                    if !self.is_prefix_free(snapshot, &p).await? {
                        return Err(DirectoryError::AllocatorConflict(p));
                    }
                    p
                }
                Some(p) => {
                    if !self.is_prefix_free(tr, p).await? {
                        return Err(DirectoryError::PrefixInUse);
                    }
                    p.to_vec()
                }
            };
            let parent = if path.len() > 1 {
                let parent_path = path[..path.len() - 1].to_vec();
                let parent = self
                    .create_or_open_in(tr, parent_path, None, None, true, true)
                    .await?;
                self.node_with_prefix(parent.key()?)
            } else {
                self.root_node.clone()
            };
            let node = self.node_with_prefix(&prefix);
            let name = path.last().expect("non-empty");
            tr.tx.set(parent.pack(&(SUBDIRS, name.as_str())), &prefix);
            let layer = layer.unwrap_or_default();
            tr.tx.set(node.pack(&(&b"layer"[..],)), layer);
            Ok(self.output(path, prefix, layer.to_vec()))
        })
    }

    pub(super) fn exists_in<'a, D: Driver>(
        &'a self,
        tr: Tr<'a, D>,
        path: Vec<String>,
    ) -> Boxed<'a, bool> {
        Box::pin(async move {
            self.check_version(tr, false).await?;
            let node = self.find_with_layer(tr, &path).await?;
            if !node.exists() {
                return Ok(false);
            }
            if node.is_in_partition(false) {
                let inner = self.partition_layer(&node)?;
                return inner.exists_in(tr, node.partition_subpath()).await;
            }
            Ok(true)
        })
    }

    pub(super) fn list_in<'a, D: Driver>(
        &'a self,
        tr: Tr<'a, D>,
        path: Vec<String>,
    ) -> Boxed<'a, Vec<String>> {
        Box::pin(async move {
            self.check_version(tr, false).await?;
            let node = self.find_with_layer(tr, &path).await?;
            let Some(subspace) = &node.subspace else {
                return Err(DirectoryError::DoesNotExist);
            };
            if node.is_in_partition(true) {
                let inner = self.partition_layer(&node)?;
                return inner.list_in(tr, node.partition_subpath()).await;
            }
            let children = self.subdirs(tr, subspace).await?;
            Ok(children.into_iter().map(|(name, _)| name).collect())
        })
    }

    pub(super) fn move_in<'a, D: Driver>(
        &'a self,
        tr: Tr<'a, D>,
        old_path: Vec<String>,
        new_path: Vec<String>,
    ) -> Boxed<'a, DirectoryOutput> {
        Box::pin(async move {
            self.check_version(tr, true).await?;
            if new_path.starts_with(&old_path) {
                return Err(DirectoryError::MoveIntoSubdirectory);
            }
            let old_node = self.find_with_layer(tr, &old_path).await?;
            let new_node = self.find_with_layer(tr, &new_path).await?;
            let Some(old_subspace) = old_node.subspace.clone() else {
                return Err(DirectoryError::DoesNotExist);
            };
            if old_node.is_in_partition(false) || new_node.is_in_partition(false) {
                if !old_node.is_in_partition(false)
                    || !new_node.is_in_partition(false)
                    || old_node.path != new_node.path
                {
                    return Err(DirectoryError::MoveBetweenPartitions);
                }
                let inner = self.partition_layer(&new_node)?;
                return inner
                    .move_in(
                        tr,
                        old_node.partition_subpath(),
                        new_node.partition_subpath(),
                    )
                    .await;
            }
            if new_node.exists() {
                return Err(DirectoryError::DestinationExists);
            }
            let parent_path = &new_path[..new_path.len().saturating_sub(1)];
            let Some(parent) = self.find(tr, parent_path).await?.subspace else {
                return Err(DirectoryError::ParentDoesNotExist);
            };
            let prefix = self.prefix_of_node(&old_subspace)?;
            let name = new_path.last().expect("a path longer than the old one");
            tr.tx.set(parent.pack(&(SUBDIRS, name.as_str())), &prefix);
            self.remove_from_parent(tr, &old_path).await?;
            Ok(self.output(new_path, prefix, old_node.layer_bytes()))
        })
    }

    pub(super) fn remove_in<'a, D: Driver>(
        &'a self,
        tr: Tr<'a, D>,
        path: Vec<String>,
        must_exist: bool,
    ) -> Boxed<'a, bool> {
        Box::pin(async move {
            self.check_version(tr, true).await?;
            if path.is_empty() {
                return Err(DirectoryError::CannotRemoveRoot);
            }
            let node = self.find_with_layer(tr, &path).await?;
            let Some(subspace) = node.subspace.clone() else {
                return if must_exist {
                    Err(DirectoryError::DoesNotExist)
                } else {
                    Ok(false)
                };
            };
            if node.is_in_partition(false) {
                let inner = self.partition_layer(&node)?;
                return inner
                    .remove_in(tr, node.partition_subpath(), must_exist)
                    .await;
            }
            self.remove_recursive(tr, subspace).await?;
            self.remove_from_parent(tr, &path).await?;
            Ok(true)
        })
    }

    // ----- nodes -----

    /// Reads the layout version: newer major versions are refused, newer minor ones only
    /// for writing. A writer initializes the version of a fresh layer.
    async fn check_version<D: Driver>(
        &self,
        tr: Tr<'_, D>,
        write_access: bool,
    ) -> Result<(), DirectoryError> {
        let key = self.root_node.pack(&(&b"version"[..],));
        let Some(v) = tr.get(&key).await? else {
            if write_access {
                let mut v = Vec::with_capacity(12);
                for part in [LAYOUT_VERSION.0, LAYOUT_VERSION.1, LAYOUT_VERSION.2] {
                    v.extend_from_slice(&part.to_le_bytes());
                }
                tr.tx.set(&key, &v);
            }
            return Ok(());
        };
        if v.len() != 12 {
            return Err(DirectoryError::BadMetadata("the layout version"));
        }
        let part = |i: usize| u32::from_le_bytes(v[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
        let stored = (part(0), part(1), part(2));
        if stored.0 > LAYOUT_VERSION.0 {
            return Err(DirectoryError::IncompatibleVersion {
                stored,
                read_only: false,
            });
        }
        if stored.1 > LAYOUT_VERSION.1 && write_access {
            return Err(DirectoryError::IncompatibleVersion {
                stored,
                read_only: true,
            });
        }
        Ok(())
    }

    fn node_with_prefix(&self, prefix: &[u8]) -> Subspace {
        self.node_subspace.subspace(&(prefix,))
    }

    fn prefix_of_node(&self, node: &Subspace) -> Result<Vec<u8>, DirectoryError> {
        let (prefix,): (Vec<u8>,) = self
            .node_subspace
            .unpack(node.bytes())
            .map_err(|_| DirectoryError::BadMetadata("a node key"))?;
        Ok(prefix)
    }

    /// Follows `path` from the root, stopping where a directory is missing or at a
    /// partition (whose own layer knows the rest).
    async fn find<D: Driver>(
        &self,
        tr: Tr<'_, D>,
        path: &[String],
    ) -> Result<Node, DirectoryError> {
        let mut node = Node {
            subspace: Some(self.root_node.clone()),
            path: Vec::new(),
            target: path.to_vec(),
            layer: None,
        };
        for (i, name) in path.iter().enumerate() {
            let parent = node
                .subspace
                .as_ref()
                .expect("the walk stops at a missing node");
            let prefix = tr.get(&parent.pack(&(SUBDIRS, name.as_str()))).await?;
            node = Node {
                subspace: prefix.map(|p| self.node_with_prefix(&p)),
                path: path[..=i].to_vec(),
                target: path.to_vec(),
                layer: None,
            };
            let Some(s) = &node.subspace else {
                return Ok(node);
            };
            node.layer = tr.get(&s.pack(&(&b"layer"[..],))).await?;
            if node.is_partition() {
                return Ok(node);
            }
        }
        Ok(node)
    }

    /// [`DirectoryLayer::find`], then the found node's layer (read again, as the other
    /// bindings do, so the read conflict ranges match).
    async fn find_with_layer<D: Driver>(
        &self,
        tr: Tr<'_, D>,
        path: &[String],
    ) -> Result<Node, DirectoryError> {
        let mut node = self.find(tr, path).await?;
        if let Some(s) = &node.subspace {
            node.layer = tr.get(&s.pack(&(&b"layer"[..],))).await?;
        }
        Ok(node)
    }

    /// The subdirectories of `node`: names and nodes.
    async fn subdirs<D: Driver>(
        &self,
        tr: Tr<'_, D>,
        node: &Subspace,
    ) -> Result<Vec<(String, Subspace)>, DirectoryError> {
        let sd = node.subspace(&(SUBDIRS,));
        let (begin, end) = sd.range();
        let mut out = Vec::new();
        for kv in tr.range(&begin, &end, 0, false).await? {
            let (name,): (String,) = sd
                .unpack(&kv.key)
                .map_err(|_| DirectoryError::BadMetadata("a subdirectory name"))?;
            out.push((name, self.node_with_prefix(&kv.value)));
        }
        Ok(out)
    }

    async fn remove_from_parent<D: Driver>(
        &self,
        tr: Tr<'_, D>,
        path: &[String],
    ) -> Result<(), DirectoryError> {
        let parent = self.find(tr, &path[..path.len() - 1]).await?;
        if let (Some(parent), Some(name)) = (parent.subspace, path.last()) {
            tr.tx.clear(parent.pack(&(SUBDIRS, name.as_str())));
        }
        Ok(())
    }

    /// Clears a directory's subdirectories (depth first), its contents and its node.
    fn remove_recursive<'a, D: Driver>(&'a self, tr: Tr<'a, D>, node: Subspace) -> Boxed<'a, ()> {
        Box::pin(async move {
            for (_, child) in self.subdirs(tr, &node).await? {
                self.remove_recursive(tr, child).await?;
            }
            let prefix = self.prefix_of_node(&node)?;
            tr.tx.clear_range(&prefix, &strinc(&prefix)?);
            let (begin, end) = node.range();
            tr.tx.clear_range(&begin, &end);
            Ok(())
        })
    }

    /// Whether `prefix` neither lies inside nor contains any directory's prefix (or the
    /// layer's metadata).
    async fn is_prefix_free<D: Driver>(
        &self,
        tr: Tr<'_, D>,
        prefix: &[u8],
    ) -> Result<bool, DirectoryError> {
        if prefix.is_empty() {
            return Ok(false);
        }
        if self.node_containing_key(tr, prefix).await?.is_some() {
            return Ok(false);
        }
        let begin = self.node_subspace.pack(&(prefix,));
        let end = self.node_subspace.pack(&(strinc(prefix)?.as_slice(),));
        Ok(tr.range(&begin, &end, 1, false).await?.is_empty())
    }

    /// The node of the directory whose prefix `key` starts with, if any (the root's for a
    /// key in the node subspace).
    async fn node_containing_key<D: Driver>(
        &self,
        tr: Tr<'_, D>,
        key: &[u8],
    ) -> Result<Option<Subspace>, DirectoryError> {
        if key.starts_with(self.node_subspace.bytes()) {
            return Ok(Some(self.root_node.clone()));
        }
        let (begin, _) = self.node_subspace.range();
        let mut end = self.node_subspace.pack(&(key,));
        end.push(0);
        for kv in tr.range(&begin, &end, 1, true).await? {
            let first = fdb_protocol::tuple::unpack::<fdb_protocol::tuple::Element>(
                kv.key
                    .strip_prefix(self.node_subspace.bytes())
                    .unwrap_or_default(),
            )
            .map_err(|_| DirectoryError::BadMetadata("a node key"))?;
            let prev = first
                .as_tuple()
                .and_then(|t| t.first())
                .and_then(|e| e.as_bytes().map(|b| b.to_vec()))
                .ok_or(DirectoryError::BadMetadata("a node key"))?;
            if key.starts_with(&prev) {
                return Ok(Some(self.node_with_prefix(&prev)));
            }
        }
        Ok(None)
    }

    // ----- what the operations return -----

    /// The directory a found node is.
    fn contents(&self, node: &Node) -> Result<DirectoryOutput, DirectoryError> {
        let subspace = node.subspace.as_ref().ok_or(DirectoryError::DoesNotExist)?;
        let prefix = self.prefix_of_node(subspace)?;
        Ok(self.output(node.path.clone(), prefix, node.layer_bytes()))
    }

    /// The layer of the partition a found node is.
    fn partition_layer(&self, node: &Node) -> Result<DirectoryLayer, DirectoryError> {
        match self.contents(node)? {
            DirectoryOutput::Partition(p) => Ok(p.inner_layer().clone()),
            DirectoryOutput::Subspace(_) => Err(DirectoryError::BadMetadata("a partition")),
        }
    }

    /// The directory at `path` (relative to this layer) with `prefix` and `layer`.
    fn output(&self, path: Vec<String>, prefix: Vec<u8>, layer: Vec<u8>) -> DirectoryOutput {
        let mut full = self.path.clone();
        full.extend(path);
        if layer == PARTITION_LAYER {
            DirectoryOutput::Partition(DirectoryPartition::new(full, prefix, self.clone()))
        } else {
            DirectoryOutput::Subspace(DirectorySubspace::new(full, prefix, self.clone(), layer))
        }
    }
}

/// The first key after every key starting with `prefix` (FDB's `strinc`); a prefix of only
/// `0xff` bytes has none.
fn strinc(prefix: &[u8]) -> Result<Vec<u8>, DirectoryError> {
    let mut p = prefix.to_vec();
    while let Some(&last) = p.last() {
        if last == 0xff {
            p.pop();
        } else {
            *p.last_mut().expect("non-empty") += 1;
            return Ok(p);
        }
    }
    Err(DirectoryError::PrefixInUse)
}
