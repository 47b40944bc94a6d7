//! [`DirectoryLayer`]: where a directory tree is stored (its node and content subspaces, the
//! partition it belongs to, its prefix allocator). The operations on the tree by path are in
//! `tree.rs`.

use fdb_protocol::tuple::Subspace;

use super::allocator::HighContentionAllocator;

/// A directory layer: the tree of directories whose metadata lives in `node_subspace` and
/// whose allocated prefixes start with `content_subspace`'s. [`DirectoryLayer::default`] is
/// the database's root layer (nodes under `\xfe`, contents anywhere), the one every binding
/// opens by default.
///
/// Paths are relative to the layer. Cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectoryLayer {
    pub(super) node_subspace: Subspace,
    pub(super) content_subspace: Subspace,
    pub(super) allow_manual_prefixes: bool,
    /// Where this layer sits: empty for a root layer, the partition's path for a
    /// partition's layer.
    pub(super) path: Vec<String>,
    /// The node of the root directory (its key is the node subspace's own prefix).
    pub(super) root_node: Subspace,
    pub(super) allocator: HighContentionAllocator,
}

impl Default for DirectoryLayer {
    fn default() -> Self {
        DirectoryLayer::new(Subspace::from_bytes(&b"\xfe"[..]), Subspace::all(), false)
    }
}

impl DirectoryLayer {
    /// A directory layer with its metadata in `node_subspace` and allocated prefixes in
    /// `content_subspace`; `allow_manual_prefixes` lets `create` take a prefix.
    pub fn new(
        node_subspace: Subspace,
        content_subspace: Subspace,
        allow_manual_prefixes: bool,
    ) -> DirectoryLayer {
        let root_node = node_subspace.subspace(&(node_subspace.bytes(),));
        let allocator = HighContentionAllocator::new(&root_node.subspace(&(&b"hca"[..],)));
        DirectoryLayer {
            node_subspace,
            content_subspace,
            allow_manual_prefixes,
            path: Vec::new(),
            root_node,
            allocator,
        }
    }

    /// The layer of the partition at `path` whose prefix is `prefix`.
    pub(super) fn for_partition(path: Vec<String>, prefix: &[u8]) -> DirectoryLayer {
        let mut nodes = prefix.to_vec();
        nodes.push(0xfe);
        let mut layer = DirectoryLayer::new(
            Subspace::from_bytes(nodes),
            Subspace::from_bytes(prefix),
            false,
        );
        layer.path = path;
        layer
    }

    /// Where this layer's metadata lives.
    pub fn node_subspace(&self) -> &Subspace {
        &self.node_subspace
    }

    /// The prefix of every prefix this layer allocates.
    pub fn content_subspace(&self) -> &Subspace {
        &self.content_subspace
    }

    /// The path of the partition this layer belongs to (empty for a root layer).
    pub fn path(&self) -> &[String] {
        &self.path
    }

    /// Whether `create` may take a prefix.
    pub fn allows_manual_prefixes(&self) -> bool {
        self.allow_manual_prefixes
    }
}
