//! A metrics read's plan (`metrics.rs`'s `MetricsOp` holds it): the shards that cover its
//! range, and for each shard's part of the range the request in flight, its replica attempts
//! and its answer.

use alloc::vec::Vec;
use bytes::Bytes;

use crate::location::LocationCache;
use crate::messages::storage::StorageServerInterface;
use crate::time::Instant;
use crate::uid::Uid;

/// `CLIENT_KNOBS->TOO_MANY`: the shard limit of the split points' location lookup (the
/// estimate asks for `INT_MAX`).
pub(super) const TOO_MANY: i32 = 1_000_000;

/// What a metrics read asks the storage servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Metric {
    /// `getEstimatedRangeSizeBytes`.
    Size,
    /// `getRangeSplitPoints` with this chunk size.
    SplitPoints(i64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PartState {
    /// To be sent (again) to a replica.
    Unsent,
    InFlight,
    Done,
    /// Given up for a fresh location lookup of its range.
    Retired,
}

/// The request for one shard's part of the range.
#[derive(Debug)]
pub(super) struct Part {
    pub(super) begin: Bytes,
    pub(super) end: Bytes,
    pub(super) servers: Vec<StorageServerInterface>,
    pub(super) state: PartState,
    /// Replicas tried so far.
    pub(super) attempt: usize,
    /// The replica asked and when.
    pub(super) sent: Option<(Uid, Instant)>,
    /// Its split points, once answered.
    pub(super) points: Vec<Bytes>,
}

/// Splits `[a, b)` by the cached shards, or `None` if some of it is not cached.
pub(super) fn cover(
    cache: &LocationCache,
    a: &Bytes,
    b: &Bytes,
) -> Option<Vec<(Bytes, Bytes, Vec<StorageServerInterface>)>> {
    let mut out = Vec::new();
    let mut cur = a.clone();
    while cur < *b {
        let s = cache.lookup(&cur)?;
        let e = if s.end < *b { s.end.clone() } else { b.clone() };
        out.push((cur, e.clone(), s.servers.clone()));
        cur = e;
    }
    Some(out)
}
