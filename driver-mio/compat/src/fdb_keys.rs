//! Keys answered by `get_range_split_points` (foundationdb-rs's `fdb_keys`).

use std::fmt;

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

/// The keys, owned.
pub struct FdbKeysIter(std::vec::IntoIter<FdbKey>);

/// One key, owned.
#[derive(Clone, PartialEq, Eq)]
pub struct FdbRowKey(FdbKey);

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

crate::impls::item_list!(FdbKeys, keys, FdbKey, FdbKeysIter, FdbRowKey);
