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
    /// The same read asked again of another replica (`replica`), for operation `op`'s
    /// replica consistency check (`epoch`: which of its comparisons).
    ReplicaCheck {
        op: RequestId,
        epoch: u32,
        replica: crate::uid::Uid,
    },
    /// The commit of the transaction behind operation `RequestId`.
    Commit(RequestId),
    /// One shard's request of a metrics read (`epoch`: its pass).
    Metrics {
        op: RequestId,
        part: u32,
        epoch: u32,
    },
    /// The id lookup of a tenant handle.
    TenantId(crate::ids::TenantHandle),
    /// A request of one of the client's parts beside the transactions (`crate::part`): which
    /// part, and the part's own route, which the network carries without reading.
    Part(PartId, PartRoute),
}

/// One of the client's parts: its place in the client's list of them (`client::parts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PartId(pub(crate) u8);

/// A part's own route: the request it serves and which of that request's questions a reply
/// answers (`leg`, a number only the part reads; see `crate::part::Leg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PartRoute {
    pub(crate) op: RequestId,
    pub(crate) leg: u32,
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
