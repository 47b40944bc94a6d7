//! The directory extension (`directoryLayerTester.md`): a list of directories, layers and
//! subspaces per machine, and the `DIRECTORY_*` instructions over them. Every failure of a
//! directory instruction (the layer's refusals and FDB errors alike) pushes
//! `DIRECTORY_ERROR`, and an instruction that would have appended to the list appends a null.

use fdb_api::directory::{
    self, DirectoryError, DirectoryLayer, DirectoryOutput, Layer, ManualPrefix, ReadTransaction,
    Snapshot,
};
use fdb_api::driver::Driver;
use fdb_api::Transaction;
use fdb_protocol::tuple::{unpack, Element, Subspace};

use crate::machine::{Machine, Variant};
use crate::value::*;

/// One entry of the directory list.
#[derive(Clone)]
pub enum Dir {
    Null,
    Subspace(Subspace),
    Layer(DirectoryLayer),
    Directory(DirectoryOutput),
}

pub struct DirectoryState {
    list: Vec<Dir>,
    index: usize,
    error_index: usize,
}

impl Default for DirectoryState {
    fn default() -> Self {
        DirectoryState {
            list: vec![Dir::Layer(DirectoryLayer::default())],
            index: 0,
            error_index: 0,
        }
    }
}

/// Why a directory instruction failed: pushed as `DIRECTORY_ERROR`, or fatal.
enum Fail {
    Directory,
    Fatal(Fatal),
}

impl From<Fatal> for Fail {
    fn from(f: Fatal) -> Self {
        Fail::Fatal(f)
    }
}

impl From<DirectoryError> for Fail {
    fn from(e: DirectoryError) -> Self {
        match e {
            DirectoryError::Fdb(e) if e.code().is_none() => {
                Fail::Fatal(Fatal(format!("client failure: {e}")))
            }
            _ => Fail::Directory,
        }
    }
}

/// The instructions that append to the directory list (a null when they fail).
const CREATES: &[&str] = &[
    "DIRECTORY_CREATE_SUBSPACE",
    "DIRECTORY_CREATE_LAYER",
    "DIRECTORY_CREATE_OR_OPEN",
    "DIRECTORY_CREATE",
    "DIRECTORY_OPEN",
    "DIRECTORY_MOVE",
    "DIRECTORY_MOVE_TO",
    "DIRECTORY_OPEN_SUBSPACE",
];

/// A directory or a layer: what the directory operations act on.
#[derive(Clone)]
enum Node {
    Layer(DirectoryLayer),
    Directory(DirectoryOutput),
}

macro_rules! node_call {
    ($node:expr, $method:ident ( $($arg:expr),* )) => {
        match $node {
            Node::Layer(l) => l.$method($($arg),*).await,
            Node::Directory(d) => d.$method($($arg),*).await,
        }
    };
}

impl Node {
    async fn create_or_open<D: Driver>(
        &self,
        tx: &Transaction<D>,
        path: &[String],
        layer: Option<Layer<'_>>,
    ) -> Result<DirectoryOutput, DirectoryError> {
        node_call!(self, create_or_open(tx, path, None, layer))
    }

    async fn create<D: Driver>(
        &self,
        tx: &Transaction<D>,
        path: &[String],
        prefix: Option<ManualPrefix<'_>>,
        layer: Option<Layer<'_>>,
    ) -> Result<DirectoryOutput, DirectoryError> {
        node_call!(self, create(tx, path, prefix, layer))
    }

    async fn open<D: Driver, R: ReadTransaction<D> + Sync>(
        &self,
        tr: &R,
        path: &[String],
        layer: Option<Layer<'_>>,
    ) -> Result<DirectoryOutput, DirectoryError> {
        node_call!(self, open(tr, path, layer))
    }

    async fn exists<D: Driver, R: ReadTransaction<D> + Sync>(
        &self,
        tr: &R,
        path: &[String],
    ) -> Result<bool, DirectoryError> {
        node_call!(self, exists(tr, path))
    }

    async fn list<D: Driver, R: ReadTransaction<D> + Sync>(
        &self,
        tr: &R,
        path: &[String],
    ) -> Result<Vec<String>, DirectoryError> {
        node_call!(self, list(tr, path))
    }

    async fn move_to<D: Driver>(
        &self,
        tx: &Transaction<D>,
        old: &[String],
        new: &[String],
    ) -> Result<DirectoryOutput, DirectoryError> {
        node_call!(self, move_to(tx, old, new))
    }

    async fn move_directory<D: Driver>(
        &self,
        tx: &Transaction<D>,
        new: &[String],
    ) -> Result<DirectoryOutput, DirectoryError> {
        node_call!(self, move_directory(tx, new))
    }

    async fn remove<D: Driver>(
        &self,
        tx: &Transaction<D>,
        path: &[String],
        must_exist: bool,
    ) -> Result<(), DirectoryError> {
        if must_exist {
            node_call!(self, remove(tx, path))
        } else {
            node_call!(self, remove_if_exists(tx, path)).map(|_| ())
        }
    }

    fn path(&self) -> Vec<String> {
        match self {
            Node::Layer(l) => l.path().to_vec(),
            Node::Directory(d) => d.path().to_vec(),
        }
    }

    fn layer(&self) -> Vec<u8> {
        match self {
            Node::Layer(_) => Vec::new(),
            Node::Directory(d) => d.layer().to_vec(),
        }
    }
}

/// Runs a read-only directory operation on the transaction, its snapshot, or the database.
macro_rules! read_op {
    ($self:ident, $variant:expr, [$($v:ident),*], |$tr:ident| $body:expr) => {
        match $variant {
            Variant::Database => {
                directory::run(&$self.shared.db, |tx| {
                    let $tr = tx;
                    $(let $v = $v.clone();)*
                    async move { $body }
                })
                .await
            }
            Variant::Snapshot => {
                let tx = $self.current_tx();
                let $tr = Snapshot(&tx);
                $body
            }
            Variant::Plain | Variant::Tenant => {
                let $tr = $self.current_tx();
                $body
            }
        }
    };
}

/// Runs a directory operation that writes, on the transaction or in a retry loop.
macro_rules! write_op {
    ($self:ident, $variant:expr, [$($v:ident),*], |$tr:ident| $body:expr) => {
        match $variant {
            Variant::Database => {
                directory::run(&$self.shared.db, |tx| {
                    let $tr = tx;
                    $(let $v = $v.clone();)*
                    async move { $body }
                })
                .await
            }
            _ => {
                let $tr = $self.current_tx();
                $body
            }
        }
    };
}

impl<D: Driver> Machine<D> {
    /// Runs one `DIRECTORY_*` instruction.
    pub async fn directory_op(
        &mut self,
        idx: usize,
        op: &str,
        variant: Variant,
    ) -> Result<(), Failure> {
        let result = match self.dirs.list.get(self.dirs.index).cloned() {
            Some(current) => self.directory_step(idx, op, variant, current).await,
            None => Err(Fail::Directory),
        };
        match result {
            Ok(()) => Ok(()),
            Err(Fail::Fatal(f)) => Err(f.into()),
            Err(Fail::Directory) => {
                if CREATES.contains(&op) {
                    self.dirs.list.push(Dir::Null);
                }
                self.stack
                    .push_value(idx, bytes(b"DIRECTORY_ERROR".to_vec()));
                Ok(())
            }
        }
    }

    /// Pops a tuple: its length, then its items.
    async fn pop_tuple(&mut self) -> Result<Vec<Element<'static>>, Fatal> {
        self.pop_counted().await
    }

    /// Pops a tuple that is a path: strings only.
    async fn pop_path(&mut self) -> Result<Result<Vec<String>, Fail>, Fatal> {
        let t = self.pop_tuple().await?;
        Ok(t.iter()
            .map(|e| e.as_str().map(str::to_string).ok_or(Fail::Directory))
            .collect())
    }

    /// The optional path of `LIST`, `EXISTS`, `REMOVE`: a count (0 or 1), then the path.
    async fn pop_optional_path(&mut self) -> Result<Result<Vec<String>, Fail>, Fatal> {
        let count = as_i64(&self.stack.pop().await?)?;
        if count == 0 {
            Ok(Ok(Vec::new()))
        } else {
            self.pop_path().await
        }
    }

    /// A nullable byte-string argument (`layer`, `prefix`).
    async fn pop_nullable_bytes(&mut self) -> Result<Result<Option<Vec<u8>>, Fail>, Fatal> {
        let v = self.stack.pop().await?;
        Ok(match &v {
            Element::Nil => Ok(None),
            Element::Bytes(b) => Ok(Some(b.0.to_vec())),
            _ => Err(Fail::Directory),
        })
    }

    fn append(&mut self, d: Dir) {
        self.dirs.list.push(d);
    }

    async fn directory_step(
        &mut self,
        idx: usize,
        op: &str,
        variant: Variant,
        current: Dir,
    ) -> Result<(), Fail> {
        let node = match &current {
            Dir::Layer(l) => Some(Node::Layer(l.clone())),
            Dir::Directory(d) => Some(Node::Directory(d.clone())),
            _ => None,
        };
        let subspace = match &current {
            Dir::Subspace(s) => Some(s.clone()),
            Dir::Directory(DirectoryOutput::Subspace(d)) => Some(d.subspace().clone()),
            _ => None,
        };
        match op {
            "DIRECTORY_CREATE_SUBSPACE" => {
                let path = self.pop_tuple().await?;
                let raw = as_bytes(&self.stack.pop().await?)?;
                self.append(Dir::Subspace(Subspace::from_bytes(pack_with_prefix(
                    &raw, &path,
                ))));
            }
            "DIRECTORY_CREATE_LAYER" => {
                let i1 = as_usize(&self.stack.pop().await?)?;
                let i2 = as_usize(&self.stack.pop().await?)?;
                let manual = as_i64(&self.stack.pop().await?)? == 1;
                let node = self.dirs.list.get(i1).cloned();
                let content = self.dirs.list.get(i2).cloned();
                let (Some(node), Some(content)) = (node, content) else {
                    return Err(Fail::Directory);
                };
                let as_subspace = |d: &Dir| match d {
                    Dir::Subspace(s) => Some(s.clone()),
                    Dir::Directory(DirectoryOutput::Subspace(d)) => Some(d.subspace().clone()),
                    _ => None,
                };
                match (&node, &content) {
                    (Dir::Null, _) | (_, Dir::Null) => self.append(Dir::Null),
                    _ => {
                        let (Some(n), Some(c)) = (as_subspace(&node), as_subspace(&content)) else {
                            return Err(Fail::Directory);
                        };
                        self.append(Dir::Layer(DirectoryLayer::new(n, c, manual)));
                    }
                }
            }
            "DIRECTORY_CHANGE" => {
                let i = as_usize(&self.stack.pop().await?)?;
                self.dirs.index = i;
                match self.dirs.list.get(i) {
                    Some(Dir::Null) => self.dirs.index = self.dirs.error_index,
                    Some(_) => {}
                    None => return Err(Fail::Directory),
                }
            }
            "DIRECTORY_SET_ERROR_INDEX" => {
                self.dirs.error_index = as_usize(&self.stack.pop().await?)?;
            }
            "DIRECTORY_CREATE_OR_OPEN" => {
                let path = self.pop_path().await?;
                let layer = self.pop_nullable_bytes().await?;
                let (path, layer, node) = (path?, layer?, node.ok_or(Fail::Directory)?);
                let d = write_op!(self, variant, [node, path, layer], |tx| {
                    node.create_or_open(&tx, &path, layer.as_deref().map(Layer))
                        .await
                })?;
                self.append(Dir::Directory(d));
            }
            "DIRECTORY_CREATE" => {
                let path = self.pop_path().await?;
                let layer = self.pop_nullable_bytes().await?;
                let prefix = self.pop_nullable_bytes().await?;
                let (path, layer, prefix) = (path?, layer?, prefix?);
                let node = node.ok_or(Fail::Directory)?;
                let d = write_op!(self, variant, [node, path, layer, prefix], |tx| {
                    let prefix = prefix.as_deref().map(ManualPrefix);
                    node.create(&tx, &path, prefix, layer.as_deref().map(Layer))
                        .await
                })?;
                self.append(Dir::Directory(d));
            }
            "DIRECTORY_OPEN" => {
                let path = self.pop_path().await?;
                let layer = self.pop_nullable_bytes().await?;
                let (path, layer, node) = (path?, layer?, node.ok_or(Fail::Directory)?);
                let d = read_op!(self, variant, [node, path, layer], |tr| {
                    node.open(&tr, &path, layer.as_deref().map(Layer)).await
                })?;
                self.append(Dir::Directory(d));
            }
            "DIRECTORY_MOVE" => {
                let old = self.pop_path().await?;
                let new = self.pop_path().await?;
                let (old, new, node) = (old?, new?, node.ok_or(Fail::Directory)?);
                let d = write_op!(self, variant, [node, old, new], |tx| {
                    node.move_to(&tx, &old, &new).await
                })?;
                self.append(Dir::Directory(d));
            }
            "DIRECTORY_MOVE_TO" => {
                let new = self.pop_path().await?;
                let (new, node) = (new?, node.ok_or(Fail::Directory)?);
                let d = write_op!(self, variant, [node, new], |tx| node
                    .move_directory(&tx, &new)
                    .await)?;
                self.append(Dir::Directory(d));
            }
            "DIRECTORY_REMOVE" | "DIRECTORY_REMOVE_IF_EXISTS" => {
                let must_exist = op == "DIRECTORY_REMOVE";
                let path = self.pop_optional_path().await?;
                let (path, node) = (path?, node.ok_or(Fail::Directory)?);
                write_op!(self, variant, [node, path], |tx| node
                    .remove(&tx, &path, must_exist)
                    .await)?;
            }
            "DIRECTORY_LIST" => {
                let path = self.pop_optional_path().await?;
                let (path, node) = (path?, node.ok_or(Fail::Directory)?);
                let names = read_op!(self, variant, [node, path], |tr| node
                    .list(&tr, &path)
                    .await)?;
                let items: Vec<_> = names.into_iter().map(string).collect();
                self.stack.push_value(idx, bytes(pack(&items)));
            }
            "DIRECTORY_EXISTS" => {
                let path = self.pop_optional_path().await?;
                let (path, node) = (path?, node.ok_or(Fail::Directory)?);
                let exists = read_op!(self, variant, [node, path], |tr| node
                    .exists(&tr, &path)
                    .await)?;
                self.stack.push_value(idx, Element::Int(exists as i64));
            }
            "DIRECTORY_PACK_KEY" => {
                let t = self.pop_tuple().await?;
                let s = subspace.ok_or(Fail::Directory)?;
                self.stack
                    .push_value(idx, bytes(pack_with_prefix(s.bytes(), &t)));
            }
            "DIRECTORY_UNPACK_KEY" => {
                let key = as_bytes(&self.stack.pop().await?)?;
                let s = subspace.ok_or(Fail::Directory)?;
                let rest = key.strip_prefix(s.bytes()).ok_or(Fail::Directory)?;
                let t = unpack::<Element>(rest)
                    .map_err(|_| Fail::Directory)?
                    .into_owned();
                for e in t.as_tuple().unwrap_or_default() {
                    self.stack.push_value(idx, e.clone());
                }
            }
            "DIRECTORY_RANGE" => {
                let t = self.pop_tuple().await?;
                let s = subspace.ok_or(Fail::Directory)?;
                let p = pack_with_prefix(s.bytes(), &t);
                let (mut begin, mut end) = (p.clone(), p);
                begin.push(0x00);
                end.push(0xff);
                self.stack.push_value(idx, bytes(begin));
                self.stack.push_value(idx, bytes(end));
            }
            "DIRECTORY_CONTAINS" => {
                let key = as_bytes(&self.stack.pop().await?)?;
                let s = subspace.ok_or(Fail::Directory)?;
                self.stack
                    .push_value(idx, Element::Int(key.starts_with(s.bytes()) as i64));
            }
            "DIRECTORY_OPEN_SUBSPACE" => {
                let t = self.pop_tuple().await?;
                let s = subspace.ok_or(Fail::Directory)?;
                self.append(Dir::Subspace(Subspace::from_bytes(pack_with_prefix(
                    s.bytes(),
                    &t,
                ))));
            }
            "DIRECTORY_LOG_SUBSPACE" => {
                let prefix = as_bytes(&self.stack.pop().await?)?;
                let s = subspace.ok_or(Fail::Directory)?;
                let key = pack_with_prefix(&prefix, &[Element::Int(self.dirs.index as i64)]);
                self.current_tx().set(&key, s.bytes());
            }
            "DIRECTORY_LOG_DIRECTORY" => {
                let prefix = as_bytes(&self.stack.pop().await?)?;
                let node = node.ok_or(Fail::Directory)?;
                let tx = self.current_tx();
                let exists = node.exists(&tx, &[]).await?;
                let children = if exists {
                    node.list(&tx, &[]).await?
                } else {
                    Vec::new()
                };
                let i = Element::Int(self.dirs.index as i64);
                let key = |name: &str| pack_with_prefix(&prefix, &[i.clone(), string(name)]);
                let path: Vec<_> = node.path().into_iter().map(string).collect();
                tx.set(key("path"), pack(&path));
                tx.set(key("layer"), pack(&[bytes(node.layer())]));
                tx.set(key("exists"), pack(&[Element::Int(exists as i64)]));
                let children: Vec<_> = children.into_iter().map(string).collect();
                tx.set(key("children"), pack(&children));
            }
            "DIRECTORY_STRIP_PREFIX" => {
                let b = as_bytes(&self.stack.pop().await?)?;
                let s = subspace.ok_or(Fail::Directory)?;
                let rest = b.strip_prefix(s.bytes()).ok_or(Fail::Directory)?;
                self.stack.push_value(idx, bytes(rest.to_vec()));
            }
            _ => return Err(Fatal(format!("unknown op {op}")).into()),
        }
        Ok(())
    }
}
