//! Keys answered by `get_range_split_points` (foundationdb-rs's `fdb_keys`).

use std::fmt;
use std::ops::Deref;

use bytes::Bytes;

/// A list of keys.
#[derive(Clone, Debug)]
pub struct FdbKeys {
    keys: Vec<FdbKey>,
}

impl FdbKeys {
    pub(crate) fn new(keys: Vec<impl AsRef<[u8]>>) -> Self {
        FdbKeys {
            keys: keys
                .into_iter()
                .map(|k| FdbKey(Bytes::copy_from_slice(k.as_ref())))
                .collect(),
        }
    }
}

impl Deref for FdbKeys {
    type Target = [FdbKey];
    fn deref(&self) -> &[FdbKey] {
        &self.keys
    }
}

impl AsRef<[FdbKey]> for FdbKeys {
    fn as_ref(&self) -> &[FdbKey] {
        &self.keys
    }
}

impl<'a> IntoIterator for &'a FdbKeys {
    type Item = &'a FdbKey;
    type IntoIter = std::slice::Iter<'a, FdbKey>;
    fn into_iter(self) -> Self::IntoIter {
        self.keys.iter()
    }
}

impl IntoIterator for FdbKeys {
    type Item = FdbRowKey;
    type IntoIter = FdbKeysIter;
    fn into_iter(self) -> FdbKeysIter {
        FdbKeysIter(self.keys.into_iter())
    }
}

/// The keys, owned.
pub struct FdbKeysIter(std::vec::IntoIter<FdbKey>);

impl Iterator for FdbKeysIter {
    type Item = FdbRowKey;
    fn next(&mut self) -> Option<FdbRowKey> {
        self.0.next().map(FdbRowKey)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for FdbKeysIter {}

impl DoubleEndedIterator for FdbKeysIter {
    fn next_back(&mut self) -> Option<FdbRowKey> {
        self.0.next_back().map(FdbRowKey)
    }
}

/// One key, owned.
#[derive(Clone, PartialEq, Eq)]
pub struct FdbRowKey(FdbKey);

impl Deref for FdbRowKey {
    type Target = FdbKey;
    fn deref(&self) -> &FdbKey {
        &self.0
    }
}

impl AsRef<FdbKey> for FdbRowKey {
    fn as_ref(&self) -> &FdbKey {
        &self.0
    }
}

impl fmt::Debug for FdbRowKey {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One key.
#[derive(Clone, PartialEq, Eq)]
pub struct FdbKey(Bytes);

impl FdbKey {
    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for FdbKey {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}
