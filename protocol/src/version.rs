//! The FDB protocol versions this client speaks, and everything that differs between them.
//!
//! One build speaks every version in [`Protocol::SUPPORTED`]. The client starts with
//! [`ClientConfig::protocol`](crate::ClientConfig) (7.3 unless told otherwise) and learns the
//! cluster's version from its coordinators, as libfdb_c's multi-version client does
//! (`getClusterProtocolImpl` in `NativeAPI.actor.cpp`): a coordinator whose ConnectPacket is
//! incompatible with ours is asked, on the same connection, for its version at the well-known
//! `WLTOKEN_PROTOCOL_INFO` endpoint (`ProtocolInfoRequest`, which every peer with stable
//! interfaces answers whatever the protocol of the asker); the version in its ConnectPacket is
//! the fallback when no answer comes. A supported version different from ours switches every
//! connection to it; any other version fails the database's requests with
//! `incompatible_client` (2125), libfdb_c's error for "no client library matches the cluster".
//!
//! What differs between the versions (flow/ProtocolVersions.cmake, the interfaces' headers
//! at tags 7.3.77 and 7.4.6) is listed on [`Protocol`]'s methods; every codec or interface that
//! differs asks the [`Protocol`] it speaks. Wire messages that are the same in both are not
//! mentioned here.
//!
//! # Adding a version (8.0, say)
//!
//! 1. Add the variant (`V8_0`) with its value from `FDB_PV_DEFAULT_VERSION` of that release to
//!    [`Protocol`], [`Protocol::SUPPORTED`] and [`Protocol::version`].
//! 2. Diff that release's client-visible interfaces (`fdbclient/include/fdbclient/*.h`,
//!    `fdbrpc`) against the newest version here, and answer each difference with a method
//!    on [`Protocol`] (an endpoint count, whether a field is sent); the codecs ask it.
//! 3. Record a capture against that release's fdbserver into `tests/data/` and replay it.
//!
//! No module is copied per version: the messages stay one type each, versioned here.

use core::fmt;

use crate::framing::ProtocolVersion;

/// A protocol version this client can speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Protocol {
    /// FDB 7.3 (`0x0FDB00B073000000`).
    #[default]
    V7_3,
    /// FDB 7.4 (`0x0FDB00B074000000`).
    V7_4,
}

impl Protocol {
    /// Every version this client speaks, oldest first.
    pub const SUPPORTED: [Protocol; 2] = [Protocol::V7_3, Protocol::V7_4];

    /// The newest version this client speaks.
    pub const NEWEST: Protocol = Protocol::V7_4;

    /// The version's `FDB_PV_DEFAULT_VERSION`, without flags.
    pub const fn version(self) -> ProtocolVersion {
        match self {
            Protocol::V7_3 => ProtocolVersion::V7_3,
            Protocol::V7_4 => ProtocolVersion::V7_4,
        }
    }

    /// The supported version a peer announcing `v` speaks (FDB's `isCompatible`: equal under
    /// `compatibleProtocolVersionMask`), if any.
    pub fn of(v: ProtocolVersion) -> Option<Protocol> {
        Self::SUPPORTED
            .into_iter()
            .find(|p| p.version().is_compatible(v))
    }

    /// Adjusted endpoints a `CommitProxyInterface` has after its `commit` stream (the highest
    /// index given to `getAdjustedEndpoint`): 7.4 appends `setThrottledShard` as index 13.
    /// Only the interface's base token travels (the others are derived from it), so appended
    /// streams change no token a client asks; a server registers them all.
    pub const fn commit_proxy_adjusted_endpoints(self) -> u32 {
        match self {
            Protocol::V7_3 => 12,
            Protocol::V7_4 => 13,
        }
    }

    /// Adjusted endpoints a `StorageServerInterface` has after its `getValue` stream: 7.4
    /// appends `bulkdump` as index 26.
    pub const fn storage_adjusted_endpoints(self) -> u32 {
        match self {
            Protocol::V7_3 => 25,
            Protocol::V7_4 => 26,
        }
    }

    /// Whether `StatusRequest` carries `statusField` after its reply promise (new in 7.4; an
    /// empty field asks for the whole document).
    pub const fn status_request_has_field(self) -> bool {
        matches!(self, Protocol::V7_4)
    }

    /// Whether `GetStorageMetricsReply` ends with `ongoingBulkLoadTaskCount` (new in 7.4; a
    /// reply this client never asks for, recorded so that whoever adds it versions it).
    pub const fn storage_metrics_has_bulk_load_count(self) -> bool {
        matches!(self, Protocol::V7_4)
    }

    /// Whether a tenant's key in `\xff/tenant/tenantGroup/tenantIndex/` is
    /// `(group, name, id)` (7.4) rather than `(group, id)` (7.3): a system-key layout the
    /// tenant management writes as libfdb_c's `TenantAPI` does.
    pub const fn tenant_group_index_has_name(self) -> bool {
        matches!(self, Protocol::V7_4)
    }

    /// The release libfdb_c of this version announces to coordinators in
    /// `OpenDatabaseCoordRequest`'s `supportedVersions`.
    pub const fn release(self) -> &'static str {
        match self {
            Protocol::V7_3 => "7.3.77",
            Protocol::V7_4 => "7.4.6",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Protocol::V7_3 => f.write_str("7.3"),
            Protocol::V7_4 => f.write_str("7.4"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_the_releases_defaults() {
        assert_eq!(Protocol::V7_3.version().0, 0x0FDB_00B0_7300_0000);
        assert_eq!(Protocol::V7_4.version().0, 0x0FDB_00B0_7400_0000);
    }

    #[test]
    fn of_uses_the_compatible_mask() {
        // Flags and the low 16 bits do not matter; the rest must match.
        assert_eq!(
            Protocol::of(ProtocolVersion(0x1FDB_00B0_7400_0001)),
            Some(Protocol::V7_4)
        );
        assert_eq!(
            Protocol::of(ProtocolVersion(0x0FDB_00B0_7300_FFFF)),
            Some(Protocol::V7_3)
        );
        assert_eq!(Protocol::of(ProtocolVersion(0x0FDB_00B0_7200_0000)), None);
        assert_eq!(Protocol::of(ProtocolVersion(0x0FDB_00B0_8000_0000)), None);
        assert_eq!(Protocol::of(ProtocolVersion(0x0FDB_00B0_7401_0000)), None);
    }

    #[test]
    fn newer_versions_only_append_endpoints() {
        for w in Protocol::SUPPORTED.windows(2) {
            assert!(w[0] < w[1]);
            assert!(
                w[0].commit_proxy_adjusted_endpoints() <= w[1].commit_proxy_adjusted_endpoints()
            );
            assert!(w[0].storage_adjusted_endpoints() <= w[1].storage_adjusted_endpoints());
        }
        assert_eq!(*Protocol::SUPPORTED.last().unwrap(), Protocol::NEWEST);
    }
}
