//! A metrics read's plan: the shards that cover its range, and for each shard's part of the
//! range the request in flight, its replica attempts and its answer.

use alloc::vec::Vec;
use bytes::Bytes;

use crate::location::LocationCache;
use crate::messages::storage::StorageServerInterface;
use crate::time::Instant;
use crate::uid::Uid;

/// `CLIENT_KNOBS->TOO_MANY`: the shard limit of the split points' location lookup (the
/// estimate asks for `INT_MAX`).
pub(in crate::transaction) const TOO_MANY: i32 = 1_000_000;

/// What a metrics read asks the storage servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Metric {
    /// `getEstimatedRangeSizeBytes`.
    Size,
    /// `getRangeSplitPoints` with this chunk size.
    SplitPoints(i64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::transaction) enum PartState {
    /// To be sent (again) to a replica.
    Unsent,
    InFlight,
    Done,
    /// Given up for a fresh location lookup of its range.
    Retired,
}

/// The request for one shard's part of the range.
#[derive(Debug)]
pub(in crate::transaction) struct Part {
    pub(in crate::transaction) begin: Bytes,
    pub(in crate::transaction) end: Bytes,
    pub(in crate::transaction) servers: Vec<StorageServerInterface>,
    pub(in crate::transaction) state: PartState,
    /// Replicas tried so far.
    pub(in crate::transaction) attempt: usize,
    /// The replica asked and when.
    pub(in crate::transaction) sent: Option<(Uid, Instant)>,
    /// Its split points, once answered.
    pub(in crate::transaction) points: Vec<Bytes>,
}

/// The state of one metrics read.
#[derive(Debug)]
pub(crate) struct MetricsOp {
    pub(in crate::transaction) metric: Metric,
    pub(in crate::transaction) begin: Bytes,
    pub(in crate::transaction) end: Bytes,
    /// Ranges still to locate, each not before its instant.
    pub(in crate::transaction) todo: Vec<(Bytes, Bytes, Instant)>,
    /// Requests sent, in key order within one location pass.
    pub(in crate::transaction) parts: Vec<Part>,
    /// Bumped when split points start over: replies of earlier passes are stale.
    pub(in crate::transaction) epoch: u32,
    /// The bytes answered so far (estimate).
    pub(in crate::transaction) bytes: i64,
    /// Spreads first choices of replica across ops.
    pub(in crate::transaction) seed: usize,
    /// The wake-up already armed.
    pub(in crate::transaction) timer: Option<Instant>,
    /// Whether the transaction has started (in a tenant: its tenant id and read version
    /// are known, and `todo` holds the prefixed ranges).
    pub(in crate::transaction) started: bool,
    /// The tenant's prefix, in a tenant: parts are located by their prefixed keys and asked
    /// for with the tenant's keys and its `TenantInfo`.
    pub(in crate::transaction) prefix: Option<Bytes>,
    /// The read version the requests carry (`latestVersion` outside a tenant).
    pub(in crate::transaction) version: i64,
}

/// Splits `[a, b)` by the cached shards, or `None` if some of it is not cached.
pub(in crate::transaction) fn cover(
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
