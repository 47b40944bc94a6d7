//! What an operation waits for and the timers that wake it: plain values, below the
//! operations and the parts that park them (routing, tenants), so neither imports the other.

use crate::ids::{RequestId, TransactionId};

/// What a parked operation waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::transaction) enum Wait {
    /// Runnable.
    Ready,
    ReadVersion,
    /// Waiting for the transaction's tenant id.
    Tenant,
    Location,
    Reply,
    Timer,
    /// A watch waiting for its transaction to commit.
    Commit,
    /// Waiting for the cluster to name its commit proxies.
    Cluster,
    /// A commit whose outcome is unknown, waiting for its dummy transaction.
    Dummy,
}

/// A timer of the op table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(in crate::transaction) enum Timer {
    Op(RequestId),
    /// The location lookups' backoff ended: ask again.
    Locations,
    Deadline(TransactionId),
    /// Retry the dummy commit of this user commit.
    Dummy(RequestId),
    /// The replica consistency check of this read (its comparison `u32`) waited long enough.
    ReplicaCheck(RequestId, u32),
}
