//! [`Subspace`]: a key prefix under which tuples are packed (FDB's `Subspace` in every
//! binding), so that an application's keys live in one range of the database.

use alloc::vec::Vec;
use core::fmt;

use super::*;

/// A prefix, usually itself a packed tuple, that every key of the subspace starts with.
///
/// Like the Python binding, an incomplete versionstamp in the prefix is not tracked: the
/// prefix is plain bytes, and [`Subspace::pack_with_versionstamp`] looks for the stamp in the
/// packed tuple only.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Subspace {
    prefix: Vec<u8>,
}

impl Subspace {
    /// The subspace of every key (an empty prefix).
    pub fn all() -> Subspace {
        Subspace { prefix: Vec::new() }
    }

    /// A subspace with a raw byte prefix (`Subspace(rawPrefix=...)`).
    pub fn from_bytes(prefix: impl Into<Vec<u8>>) -> Subspace {
        Subspace {
            prefix: prefix.into(),
        }
    }

    /// A subspace whose prefix is `raw` followed by the packed tuple `t` (`Subspace(t, raw)`).
    pub fn from_tuple_with_prefix<T: TuplePack + ?Sized>(raw: &[u8], t: &T) -> Subspace {
        let mut prefix = raw.to_vec();
        pack_into(t, &mut prefix);
        Subspace { prefix }
    }

    /// The prefix.
    pub fn bytes(&self) -> &[u8] {
        &self.prefix
    }

    /// The prefix, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.prefix
    }

    /// The subspace below this one named by tuple `t`: its prefix is this key packed with `t`.
    pub fn subspace<T: TuplePack + ?Sized>(&self, t: &T) -> Subspace {
        Subspace {
            prefix: self.pack(t),
        }
    }

    /// The key of tuple `t` in this subspace: the prefix, then `t` packed.
    pub fn pack<T: TuplePack + ?Sized>(&self, t: &T) -> Vec<u8> {
        let mut key = self.prefix.clone();
        pack_into(t, &mut key);
        key
    }

    /// The key of `t` for `set_versionstamped_key` / `_value`: `t` must hold exactly one
    /// incomplete versionstamp, whose offset (counted from the start of the prefix) follows in
    /// 4 little-endian bytes.
    pub fn pack_with_versionstamp<T: TuplePack + ?Sized>(&self, t: &T) -> PackResult<Vec<u8>> {
        let mut key = self.prefix.clone();
        pack_into_with_versionstamp(t, &mut key)?;
        Ok(key)
    }

    /// The tuple of a key of this subspace; [`PackError::NotInSubspace`] for a key outside.
    pub fn unpack<'de, T: TupleUnpack<'de>>(&self, key: &'de [u8]) -> PackResult<T> {
        match key.strip_prefix(self.prefix.as_slice()) {
            Some(rest) => unpack(rest),
            None => Err(PackError::NotInSubspace),
        }
    }

    /// Whether `key` starts with the prefix.
    pub fn contains(&self, key: &[u8]) -> bool {
        key.starts_with(&self.prefix)
    }

    /// [`Subspace::contains`] under its foundationdb-rs name.
    pub fn is_start_of(&self, key: &[u8]) -> bool {
        self.contains(key)
    }

    /// The range of the keys of every tuple in this subspace, as FDB's bindings define it:
    /// `prefix + 0x00` (inclusive) to `prefix + 0xff` (exclusive). Neither the prefix itself
    /// nor keys continuing with 0xff are in it; for a prefix range use the prefix and its
    /// `strinc`. `self.subspace(t).range()` is the Python binding's `range(t)`.
    pub fn range(&self) -> (Vec<u8>, Vec<u8>) {
        let mut begin = Vec::with_capacity(self.prefix.len() + 1);
        begin.extend_from_slice(&self.prefix);
        let mut end = begin.clone();
        begin.push(0x00);
        end.push(0xff);
        (begin, end)
    }
}

impl<T: TuplePack> From<T> for Subspace {
    /// The subspace whose prefix is the packed tuple `t`.
    fn from(t: T) -> Subspace {
        Subspace { prefix: pack(&t) }
    }
}

impl fmt::Debug for Subspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Subspace({:?})", Bytes::from(self.prefix.as_slice()))
    }
}
