//! Commits and key locations (`fdbclient/include/fdbclient/CommitTransaction.h`,
//! `CommitProxyInterface.h`).
//!
//! Field lists here that look alike, within this file or across files, are separate FDB
//! wire definitions (each its C++ `serializer` call, see [`super`]): one changes without
//! the other, so they stay apart.

use alloc::vec::Vec;
use bytes::Bytes;

use super::common::ReplyPromise;
use super::storage::StorageServerInterface;
use super::types::{
    expand_single_key, is_key_after, KeyRange, SpanContext, Tag, TagSet, TenantInfo, Version,
};
use crate::serializer::{Fb, Layout, Reader, Result, Saved, VtCollector, Writer};
use crate::uid::Uid;

pub use crate::keys::{mutation_type, MutationRef};

const MUTATION_LAYOUT: [Layout; 3] = [
    Layout::Inline { size: 1, align: 1 },
    Layout::Indirect,
    Layout::Indirect,
];

impl Fb for MutationRef {
    const LAYOUT: Layout = Layout::Indirect;
    /// A single-key clear is sent as `(param2, "")`, like a single-key range. libfdb_c 7.3
    /// leaves mutation checksums off (`ENABLE_MUTATION_CHECKSUM` defaults to false).
    fn save(&self, w: &mut Writer) -> Saved {
        let mut t = w.begin_table(&MUTATION_LAYOUT);
        t.push(self.kind.save(w));
        if self.kind == mutation_type::CLEAR_RANGE && is_key_after(&self.param1, &self.param2) {
            t.push(self.param2.save(w));
            t.push(w.save_bytes(&[]));
        } else {
            t.push(self.param1.save(w));
            t.push(self.param2.save(w));
        }
        Saved::Offset(w.end_table(t))
    }
    fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
        let mut t = r.table(pos)?;
        let mut kind: u8 = t.field()?;
        let param1: Bytes = t.field()?;
        let mut param2: Bytes = t.field()?;
        // Strip checksum trailers a server may add, newest first.
        if kind & mutation_type::CHECKSUM_FLAG != 0 {
            let extra = if kind & mutation_type::ACCUMULATIVE_CHECKSUM_INDEX_FLAG != 0 {
                6
            } else {
                4
            };
            if param2.len() < extra {
                return Err(crate::serializer::DecodeError::InvalidValue(
                    "mutation checksum",
                ));
            }
            param2.truncate(param2.len() - extra);
            kind &=
                !(mutation_type::CHECKSUM_FLAG | mutation_type::ACCUMULATIVE_CHECKSUM_INDEX_FLAG);
        }
        let (param1, param2) = if kind == mutation_type::CLEAR_RANGE {
            expand_single_key(param1, param2)?
        } else {
            (param1, param2)
        };
        Ok(MutationRef {
            kind,
            param1,
            param2,
        })
    }
    fn collect_vtables(c: &mut VtCollector) {
        c.add(&MUTATION_LAYOUT);
    }
}

crate::serializer::fb_table! {
    /// The body of a commit: conflict ranges, mutations, and the read version they were
    /// computed at.
    pub struct CommitTransactionRef {
        pub read_conflict_ranges: Vec<KeyRange>,
        pub write_conflict_ranges: Vec<KeyRange>,
        pub mutations: Vec<MutationRef>,
        pub read_snapshot: Version,
        pub report_conflicting_keys: bool,
        pub lock_aware: bool,
        pub span_context: Option<SpanContext>,
        pub tenant_ids: Option<Vec<i64>>,
    }
}

crate::serializer::fb_table! {
    /// A `(int, u64)` pair of [`ClientTrCommitCostEstimation::clear_idx_costs`].
    pub struct ClearIdxCost {
        pub index: i32,
        pub cost: u64,
    }
}

crate::serializer::fb_table! {
    /// Write cost estimate sent with tagged commits (`TagThrottle.actor.h`).
    pub struct ClientTrCommitCostEstimation {
        pub ops_count: i32,
        pub write_costs: u64,
        pub clear_idx_costs: Vec<ClearIdxCost>,
        pub expensive_cost_est_count: u32,
    }
}

crate::serializer::fb_message! {
    /// A commit, sent to a commit proxy's `commit` stream.
    pub struct CommitTransactionRequest = 93948; {
        pub transaction: CommitTransactionRef,
        pub reply: ReplyPromise,
        /// 1 lock-aware, 2 first in batch, 4 bypass storage quota.
        pub flags: u32,
        pub debug_id: Option<Uid>,
        pub commit_cost_estimation: Option<ClientTrCommitCostEstimation>,
        pub tag_set: Option<TagSet>,
        pub span_context: SpanContext,
        pub tenant_info: TenantInfo,
        /// Empty unless automatic idempotency is on; otherwise 16..255 bytes.
        pub idempotency_id: Bytes,
    }
}

impl CommitTransactionRequest {
    /// The commit may proceed while the database is locked (`lock_aware`).
    pub const FLAG_IS_LOCK_AWARE: u32 = 1;
    /// Put the transaction first in the proxy's next batch (the `first_in_batch` option).
    pub const FLAG_FIRST_IN_BATCH: u32 = 2;
    /// Not subject to storage quotas (`bypass_storage_quota`).
    pub const FLAG_BYPASS_STORAGE_QUOTA: u32 = 4;
}

crate::serializer::fb_message! {
    /// The commit's outcome: the commit version (`-1` is never sent; conflicts come back as
    /// the `not_committed` error) and the batch index used for versionstamps.
    pub struct CommitID = 14254927; {
        pub version: Version,
        pub txn_batch_id: u16,
        pub metadata_version: Option<Bytes>,
        pub conflicting_kr_indices: Option<Vec<i32>>,
    }
}

impl CommitID {
    /// The 10-byte versionstamp of this commit: version (big-endian) then batch id.
    pub fn versionstamp(&self) -> [u8; 10] {
        let mut v = [0u8; 10];
        v[..8].copy_from_slice(&self.version.to_be_bytes());
        v[8..].copy_from_slice(&self.txn_batch_id.to_be_bytes());
        v
    }
}

crate::serializer::fb_message! {
    /// Which storage servers hold the keys from `begin` (to `end`, or `limit` shards), sent
    /// to a commit proxy's `getKeyServersLocations` stream (index 2).
    pub struct GetKeyServerLocationsRequest = 9144680; {
        pub begin: Bytes,
        pub end: Option<Bytes>,
        pub limit: i32,
        pub reverse: bool,
        pub reply: ReplyPromise,
        pub span_context: SpanContext,
        pub tenant: TenantInfo,
        pub min_tenant_version: Version,
    }
}

crate::serializer::fb_table! {
    /// One shard of a location reply: its range and the servers holding it.
    pub struct ShardLocation {
        pub range: KeyRange,
        pub servers: Vec<StorageServerInterface>,
    }
}

crate::serializer::fb_table! {
    /// A storage server and its testing shadow (TSS).
    pub struct TssMapping {
        pub ss_id: Uid,
        pub tss: StorageServerInterface,
    }
}

crate::serializer::fb_table! {
    /// A storage server id and its tag.
    pub struct TagMapping {
        pub ss_id: Uid,
        pub tag: Tag,
    }
}

crate::serializer::fb_message! {
    /// Where keys live.
    pub struct GetKeyServerLocationsReply = 10636023; {
        pub results: Vec<ShardLocation>,
        pub results_tss_mapping: Vec<TssMapping>,
        pub results_tag_mapping: Vec<TagMapping>,
    }
}

crate::serializer::fb_message! {
    /// Tells the commit proxy that the client learnt the outcome of an `automatic_idempotency`
    /// commit, sent to its `expireIdempotencyId` stream (index 10) with no reply: once every id
    /// of the commit's row (`\xff\x02/idmp/` + version + the batch index's high byte) is
    /// expired so, the proxy clears the row in its next batch.
    pub struct ExpireIdempotencyIdRequest = 1900933; {
        pub commit_version: Version,
        pub batch_index_high_byte: u8,
        pub tenant: TenantInfo,
    }
}

crate::serializer::fb_message! {
    /// The value at `\xff\x02/idmpExpiredVersion` (an ObjectSerializer value, unversioned):
    /// the rows of commits at or below `expired` may have been purged, so an id not found
    /// there proves nothing.
    pub struct IdempotencyIdsExpiredVersion = 3746945; {
        pub expired: Version,
        pub expired_time: i64,
    }
}

crate::serializer::fb_message! {
    /// Which id a tenant name has, sent to a commit proxy's `getTenantId` stream (index 11)
    /// (`CommitProxyInterface.h`). `min_tenant_version` is the metadata version the proxy must
    /// have seen before it may answer `tenant_not_found`; libfdb_c sends `latestVersion` (-2).
    pub struct GetTenantIdRequest = 11299717; {
        pub reply: ReplyPromise,
        pub tenant_name: Bytes,
        pub min_tenant_version: Version,
    }
}

crate::serializer::fb_message! {
    /// The tenant's id (its key prefix is the id as 8 big-endian bytes).
    pub struct GetTenantIdReply = 11441284; {
        pub tenant_id: i64,
    }
}

crate::serializer::fb_message! {
    /// A tenant's entry in the tenant map `\xff/tenant/map/<id>` (`fdbclient/Tenant.h`),
    /// stored as an ObjectWriter value with the protocol version in front
    /// ([`TenantMapEntry::encode_value`]). `lock_state`: 0 unlocked, 1 read-only, 2 locked.
    pub struct TenantMapEntry = 7054389; {
        pub id: i64,
        pub tenant_name: Bytes,
        pub lock_state: u8,
        pub lock_id: Option<crate::uid::Uid>,
        pub tenant_group: Option<Bytes>,
        pub configuration_sequence_num: i64,
    }
}

impl TenantMapEntry {
    /// The value as the tenant map stores it (`ObjectWriter::toValue(.., IncludeVersion())`):
    /// the 7.3 protocol version, little-endian, then the message.
    pub fn encode_value(&self) -> alloc::vec::Vec<u8> {
        crate::serializer::encode_value(self, crate::framing::ProtocolVersion::V7_3.0)
    }

    /// Reads a tenant map value (the protocol version in front is skipped, not checked).
    pub fn decode_value(value: &[u8]) -> crate::serializer::Result<Self> {
        crate::serializer::decode_value(value)
    }
}

crate::serializer::fb_message! {
    /// A tenant group's entry in `\xff/tenant/tenantGroup/map/` (7.3 gives it no fields).
    pub struct TenantGroupEntry = 10764222; {}
}

impl TenantGroupEntry {
    /// The value as the group map stores it: the 7.3 protocol version, then the message.
    pub fn encode_value(&self) -> alloc::vec::Vec<u8> {
        crate::serializer::encode_value(self, crate::framing::ProtocolVersion::V7_3.0)
    }

    /// Reads a group map value (the protocol version in front is skipped, not checked).
    pub fn decode_value(value: &[u8]) -> crate::serializer::Result<Self> {
        crate::serializer::decode_value(value)
    }
}
