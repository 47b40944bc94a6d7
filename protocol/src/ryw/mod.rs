//! Read-your-writes (`fdbclient/ReadYourWrites.actor.cpp`): a transaction's own writes and
//! what it already read, merged into what it reads.
//!
//! The [`WriteMap`] holds the writes as FDB's RYW layer holds them (key segments with
//! operation stacks and cleared / conflict / unreadable flags); the [`SnapshotCache`] holds the
//! known ranges of storage at the read version; [`RywIter`](iterator::RywIter) walks both at
//! once, segment by segment, the way every RYW read does ([`PointView`] is a point read's
//! answer, fixed when the read is issued); [`range_read`] is RYW's range read and selector
//! resolution over that view, asking storage only for what it does not know.

mod ext_key;
mod iterator;
pub(crate) mod range_read;
mod range_set;
mod snapshot_cache;
mod write_map;

use alloc::vec::Vec;
use bytes::Bytes;

pub(crate) use ext_key::cmp_bytes;
pub(crate) use iterator::{PointAnswer, PointView, Unreadable};
pub(crate) use range_set::RangeSet;
pub(crate) use snapshot_cache::SnapshotCache;
pub(crate) use write_map::{Lookup, WriteMap, ALL_KEYS_END, MUTATION_OVERHEAD, RANGE_OVERHEAD};

/// A key or value from a literal, for the RYW modules' tests.
#[cfg(test)]
pub(crate) fn b(s: &'static [u8]) -> Bytes {
    Bytes::from_static(s)
}

/// The smallest key after `key`.
pub(crate) fn key_after(key: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(key.len() + 1);
    v.extend_from_slice(key);
    v.push(0);
    Bytes::from(v)
}
