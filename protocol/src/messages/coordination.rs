//! Talking to coordinators: opening the database (`ClientDBInfo`), the leader, protocol info
//! (`fdbclient/include/fdbclient/CoordinationInterface.h`, `CommitProxyInterface.h`,
//! `GrvProxyInterface.h`).
//!
//! Field lists here that look alike, within this file or across files, are separate FDB
//! wire definitions (each its C++ `serializer` call, see [`super`]): one changes without
//! the other, so they stay apart.

use alloc::vec::Vec;
use bytes::Bytes;

use super::commit::MutationRef;
use super::common::{ReplyPromise, Void};
pub use super::network::{LocalityData, LocalityEntry};
use super::network::{NetworkAddress, RequestStream};
use crate::uid::Uid;

crate::serializer::fb_table! {
    /// A client build: version, source hash, and protocol as a hex string (`ClientVersion.h`).
    pub struct ClientVersionRef {
        pub client_version: Bytes,
        pub source_version: Bytes,
        pub protocol_version: Bytes,
    }
}

crate::serializer::fb_table! {
    /// A coordinator given by name (`flow/include/flow/Hostname.h`); `service` is the port.
    pub struct Hostname {
        pub host: Bytes,
        pub service: Bytes,
        pub is_tls: bool,
    }
}

crate::serializer::fb_message! {
    /// Asks a coordinator for the cluster's proxies. It answers at once if its `ClientDBInfo`
    /// id differs from `known_client_info_id`, otherwise when the info next changes: the
    /// client keeps one of these outstanding to follow proxy changes.
    pub struct OpenDatabaseCoordRequest = 214728; {
        pub issues: Vec<Bytes>,
        pub supported_versions: Vec<ClientVersionRef>,
        pub trace_log_group: Bytes,
        pub known_client_info_id: Uid,
        pub cluster_key: Bytes,
        pub coordinators: Vec<NetworkAddress>,
        pub reply: ReplyPromise,
        pub hostnames: Vec<Hostname>,
        pub internal: bool,
    }
}

crate::serializer::fb_table! {
    /// A GRV proxy. Only the first stream travels; see [`GrvProxyInterface::stream`].
    pub struct GrvProxyInterface {
        pub process_id: Option<Bytes>,
        pub provisional: bool,
        pub get_consistent_read_version: RequestStream,
    }
}

super::network::interface_streams! {
    GrvProxyInterface, through get_consistent_read_version {
        GET_CONSISTENT_READ_VERSION = 0, "getConsistentReadVersion";
        WAIT_FAILURE = 1, "waitFailure";
        GET_HEALTH_METRICS = 2, "getHealthMetrics";
        REFRESH_GLOBAL_CONFIG = 3, "refreshGlobalConfig";
    }
}

crate::serializer::fb_table! {
    /// A commit proxy. Only `commit` travels; the rest are derived from its token.
    pub struct CommitProxyInterface {
        pub process_id: Option<Bytes>,
        pub provisional: bool,
        pub commit: RequestStream,
    }
}

super::network::interface_streams! {
    CommitProxyInterface, through commit {
        COMMIT = 0, "commit";
        GET_CONSISTENT_READ_VERSION = 1, "getConsistentReadVersion";
        GET_KEY_SERVERS_LOCATIONS = 2, "getKeyServersLocations";
        GET_STORAGE_SERVER_REJOIN_INFO = 3, "getStorageServerRejoinInfo";
        WAIT_FAILURE = 4, "waitFailure";
        TXN_STATE = 5, "txnState";
        GET_HEALTH_METRICS = 6, "getHealthMetrics";
        PROXY_SNAP_REQ = 7, "proxySnapReq";
        EXCLUSION_SAFETY_CHECK_REQ = 8, "exclusionSafetyCheckReq";
        GET_DD_METRICS = 9, "getDDMetrics";
        EXPIRE_IDEMPOTENCY_ID = 10, "expireIdempotencyId";
        GET_TENANT_ID = 11, "getTenantId";
        GET_BLOB_GRANULE_LOCATIONS = 12, "getBlobGranuleLocations";
    }
}

crate::serializer::fb_table! {
    /// Global configuration history entry (`fdbclient/GlobalConfig.h`).
    pub struct VersionHistory {
        pub mutations: Vec<MutationRef>,
        pub version: i64,
    }
}

crate::serializer::fb_table! {
    /// `TenantMode`: 0 disabled, 1 optional, 2 required.
    pub struct TenantMode {
        pub mode: u32,
    }
}

crate::serializer::fb_table! {
    /// The encryption key proxy (only its first stream travels).
    pub struct EncryptKeyProxyInterface {
        pub locality: LocalityData,
        pub my_id: Uid,
        pub wait_failure: RequestStream,
    }
}

crate::serializer::fb_message! {
    /// What a client needs to run transactions: the proxies, and `id`, which changes whenever
    /// anything else does. `forward` set means the cluster moved to other coordinators.
    pub struct ClientDBInfo = 5355080; {
        pub grv_proxies: Vec<GrvProxyInterface>,
        pub commit_proxies: Vec<CommitProxyInterface>,
        pub id: Uid,
        pub forward: Option<Bytes>,
        pub history: Vec<VersionHistory>,
        pub tenant_mode: TenantMode,
        pub encrypt_key_proxy: Option<EncryptKeyProxyInterface>,
        pub cluster_id: Uid,
        /// `ClusterType`: 0 standalone, 1 metacluster management, 2 metacluster data.
        pub cluster_type: u32,
        pub metacluster_name: Option<Bytes>,
    }
}

impl ClientDBInfo {
    /// Stream `index` of every commit proxy, with the proxy's address: one to pick.
    pub(crate) fn commit_proxy_streams(&self, index: u32) -> Vec<(NetworkAddress, Uid)> {
        streams(self.commit_proxies.iter().map(|p| &p.commit), index)
    }

    /// Stream `index` of every GRV proxy, with the proxy's address: one to pick.
    pub(crate) fn grv_proxy_streams(&self, index: u32) -> Vec<(NetworkAddress, Uid)> {
        let firsts = self.grv_proxies.iter();
        streams(firsts.map(|p| &p.get_consistent_read_version), index)
    }
}

/// Stream `index` of the interfaces whose first streams are `firsts`.
fn streams<'a>(
    firsts: impl Iterator<Item = &'a RequestStream>,
    index: u32,
) -> Vec<(NetworkAddress, Uid)> {
    let endpoints = firsts.map(|s| &s.endpoint);
    endpoints
        .map(|e| (e.address().clone(), e.token.adjusted(index)))
        .collect()
}

crate::serializer::fb_message! {
    /// Asks a coordinator who leads the cluster (used to reach the cluster controller).
    pub struct GetLeaderRequest = 214727; {
        pub key: Bytes,
        pub known_leader: Uid,
        pub reply: ReplyPromise,
    }
}

crate::serializer::fb_message! {
    /// Asks any process for its protocol version; works across versions.
    pub struct ProtocolInfoRequest = 13261233; {
        pub reply: ReplyPromise,
    }
}

crate::serializer::fb_message! {
    /// The answer to [`ProtocolInfoRequest`]: the version *with* its flag bits.
    pub struct ProtocolInfoReply = 7784298; {
        pub version: u64,
    }
}

crate::serializer::fb_message! {
    /// The connection monitor's ping, sent to the well-known `PING_PACKET` token; answered
    /// with `Void`.
    pub struct PingRequest = 4707015; {
        pub reply: ReplyPromise,
    }
}

crate::serializer::fb_message! {
    /// Who leads the cluster. `serialized_info` holds the cluster controller's client
    /// interface; `forward` means the coordinators moved (then it holds the new connection
    /// string).
    pub struct LeaderInfo = 8338794; {
        pub change_id: Uid,
        pub serialized_info: Bytes,
        pub forward: bool,
    }
}

crate::serializer::fb_message! {
    /// Asks the cluster controller for `\xff\xff/status/json`. `status_field` is new in 7.4
    /// (empty: the whole document); a 7.3 peer gets [`StatusRequestV7_3`]'s shape, and a 7.3
    /// request decodes with the field empty.
    pub struct StatusRequest = 14419140; {
        pub reply: ReplyPromise,
        pub status_field: Bytes,
    }
}

crate::serializer::fb_message! {
    /// [`StatusRequest`] as 7.3 writes it, before `statusField` existed: only for encoding
    /// to a 7.3 cluster (see [`crate::version::Protocol::status_request_has_field`]).
    pub struct StatusRequestV7_3 = 14419140; {
        pub reply: ReplyPromise,
    }
}

impl StatusRequest {
    /// The request as `protocol` writes it.
    pub fn encode_for(&self, protocol: crate::version::Protocol) -> alloc::vec::Vec<u8> {
        if protocol.status_request_has_field() {
            crate::serializer::encode(self)
        } else {
            crate::serializer::encode(&StatusRequestV7_3 {
                reply: self.reply.clone(),
            })
        }
    }
}

crate::serializer::fb_message! {
    /// The status document, as JSON text.
    pub struct StatusReply = 9980504; {
        pub status_str: Bytes,
    }
}

impl crate::serializer::Message for Void {
    /// `Void`'s identifier (`flow/include/flow/flow.h`).
    const FILE_IDENTIFIER: u32 = 2010442;
}

crate::serializer::fb_table! {
    /// The cluster controller's interface for clients (`ClusterInterface`), every stream
    /// serialized in full.
    pub struct ClusterInterface {
        pub open_database: RequestStream,
        pub failure_monitoring: RequestStream,
        pub database_status: RequestStream,
        pub ping: RequestStream,
        pub get_client_workers: RequestStream,
        pub force_recovery: RequestStream,
        pub move_shard: RequestStream,
        pub repair_system_data: RequestStream,
        pub split_shard: RequestStream,
        pub trigger_audit: RequestStream,
    }
}

crate::serializer::fb_message! {
    /// What `LeaderInfo::serialized_info` holds, after an 8-byte protocol version
    /// (`ObjectWriter` with `IncludeVersion`).
    pub struct ClusterControllerClientInterface = 14997695; {
        pub client_interface: ClusterInterface,
    }
}

impl ClusterControllerClientInterface {
    /// Decodes `LeaderInfo::serialized_info`: the protocol version, then the interface.
    pub fn from_serialized_info(
        info: &Bytes,
    ) -> core::result::Result<(u64, Self), crate::serializer::DecodeError> {
        let bad = crate::serializer::DecodeError::InvalidValue("serialized leader info");
        let version = info
            .get(..8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .ok_or(bad)?;
        let iface = crate::serializer::decode_root::<Self>(&info.slice(8..))?;
        Ok((version, iface))
    }
}
