//! Where a reply goes: every request the core sends carries a reply token, and the network
//! remembers the token's [`Route`] until the reply or the loss comes back. The route names the
//! part of the core that waits and what it waits for, so the network delivers replies without
//! knowing what any request means.

use bytes::Bytes;

use crate::ids::RequestId;

/// What a reply token is waiting for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// The cluster monitor's `OpenDatabaseCoordRequest` (its long poll).
    OpenDatabase,
    /// One batch of the read-version batcher.
    Grv(u64),
    /// A watch's check that the committed version reached the version it fired at.
    CommittedVersion(RequestId),
    /// A key-location lookup for `key` (keys before it when `reverse`).
    Locations { key: Bytes, reverse: bool },
    /// A storage read or watch of operation `RequestId`.
    Storage(RequestId),
    /// The commit of the transaction behind operation `RequestId`.
    Commit(RequestId),
    /// One shard's request of a metrics read (`epoch`: its pass).
    Metrics {
        op: RequestId,
        part: u32,
        epoch: u32,
    },
    /// Part of a `\xff\xff/status/json` read.
    Status { op: RequestId, part: StatusPart },
    /// Coordinator `part` of a coordinators change's reachability check.
    QuorumCheck { op: RequestId, part: usize },
    /// A safety check before servers are marked failed: the commit proxy's answer (`part`
    /// `None`), or coordinator `part`'s.
    ExclusionCheck { op: RequestId, part: Option<usize> },
    /// The id lookup of a tenant handle.
    TenantId(crate::ids::TenantHandle),
    /// Part `part` of a special-key read of a module filled from the cluster (the metrics,
    /// the worker interfaces); `leader`: the coordinators' leader info it asked first.
    ClusterModule {
        op: RequestId,
        part: usize,
        leader: bool,
    },
    /// The refresh of the global configuration view.
    GlobalConfig,
}

/// Which part of a status read a reply belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StatusPart {
    /// The leader info asked of coordinator `usize`.
    Leader(usize),
    /// The protocol version asked of coordinator `usize`.
    Protocol(usize),
    /// The cluster controller's status document.
    Status,
}

/// Why a request gets no reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loss {
    /// The connection failed (FDB: the request may have been delivered).
    Disconnected,
    /// The process does not know the endpoint (FDB: `endpointNotFound`, then
    /// `request_maybe_delivered` for the waiting request).
    EndpointNotFound,
    /// The endpoint answered `broken_promise`: its role ended (same handling).
    BrokenPromise,
    /// New proxies replaced the ones the request went to (`onProxiesChanged`).
    ProxiesChanged,
    /// The cluster now speaks another protocol and every connection was closed
    /// (`cluster_version_changed` for what may have been committed).
    ProtocolChanged,
}
