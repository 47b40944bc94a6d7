//! Storage servers: reads and watches (`fdbclient/include/fdbclient/StorageServerInterface.h`).
//!
//! Field lists here that look alike, within this file or across files, are separate FDB
//! wire definitions (each its C++ `serializer` call, see [`super`]): one changes without
//! the other, so they stay apart.

use alloc::vec::Vec;
use bytes::Bytes;

use super::common::ReplyPromise;
use super::network::{LocalityData, RequestStream};
use super::types::{
    KeyRange, KeySelector, KeyValue, SpanContext, TagSet, TenantInfo, Version, VersionVector,
};
use crate::error::ErrorCode;
use crate::serializer::{DecodeError, Fb, Layout, Reader, Result, Saved, Writer};
use crate::uid::Uid;

crate::serializer::fb_table! {
    /// A storage server as location replies carry it. Only `get_value` travels; every other
    /// stream is derived from its token (see [`StorageServerInterface::stream`]).
    pub struct StorageServerInterface {
        pub unique_id: Uid,
        pub locality: LocalityData,
        pub get_value: RequestStream,
        pub tss_pair_id: Option<Uid>,
        pub accepting_requests: bool,
    }
}

super::network::interface_streams! {
    StorageServerInterface, through get_value {
        GET_VALUE = 0, "getValue";
        GET_KEY = 1, "getKey";
        GET_KEY_VALUES = 2, "getKeyValues";
        GET_SHARD_STATE = 3, "getShardState";
        WAIT_METRICS = 4, "waitMetrics";
        SPLIT_METRICS = 5, "splitMetrics";
        GET_STORAGE_METRICS = 6, "getStorageMetrics";
        WAIT_FAILURE = 7, "waitFailure";
        GET_QUEUING_METRICS = 8, "getQueuingMetrics";
        GET_KEY_VALUE_STORE_TYPE = 9, "getKeyValueStoreType";
        WATCH_VALUE = 10, "watchValue";
        GET_READ_HOT_RANGES = 11, "getReadHotRanges";
        GET_RANGE_SPLIT_POINTS = 12, "getRangeSplitPoints";
        GET_KEY_VALUES_STREAM = 13, "getKeyValuesStream";
        GET_MAPPED_KEY_VALUES = 14, "getMappedKeyValues";
    }
}

crate::serializer::fb_table! {
    /// Per-read options (`ReadOptions` in `FDBTypes.h`). `read_type`: 0 eager, 1 fetch,
    /// 2 low, 3 normal, 4 high.
    pub struct ReadOptions {
        pub read_type: i32,
        pub cache_result: bool,
        pub debug_id: Option<Uid>,
        pub consistency_check_start_version: Option<Version>,
        pub lock_aware: bool,
    }
}

crate::serializer::fb_message! {
    /// Reads one key at a version.
    pub struct GetValueRequest = 8454530; {
        pub key: Bytes,
        pub version: Version,
        pub tags: Option<TagSet>,
        pub reply: ReplyPromise,
        pub span_context: SpanContext,
        pub tenant_info: TenantInfo,
        pub options: Option<ReadOptions>,
        pub ss_latest_commit_versions: VersionVector,
    }
}

crate::serializer::fb_message! {
    /// A value, or `error` set (e.g. `transaction_too_old`, `wrong_shard_server`): storage
    /// replies carry their errors inside a successful `ErrorOr` (`LoadBalancedReply`).
    pub struct GetValueReply = 1378929; {
        pub penalty: f64,
        pub error: Option<ErrorCode>,
        pub value: Option<Bytes>,
        pub cached: bool,
    }
}

crate::serializer::fb_message! {
    // Its fields after `sel` are GetValueRequest's: each request is its own table on the wire.
    /// Resolves a key selector at a version.
    pub struct GetKeyRequest = 10457870; {
        pub sel: KeySelector,
        pub version: Version,
        pub tags: Option<TagSet>,
        pub reply: ReplyPromise,
        pub span_context: SpanContext,
        pub tenant_info: TenantInfo,
        pub options: Option<ReadOptions>,
        pub ss_latest_commit_versions: VersionVector,
    }
}

crate::serializer::fb_message! {
    /// The resolved selector. If the answer lies outside this server's shard, `sel` is a
    /// selector to continue from (offset not yet 0 / or_equal adjusted).
    pub struct GetKeyReply = 11226513; {
        pub penalty: f64,
        pub error: Option<ErrorCode>,
        pub sel: KeySelector,
        pub cached: bool,
    }
}

crate::serializer::fb_message! {
    /// Reads a range between two selectors, at most `limit` rows and about `limit_bytes`.
    /// A negative `limit` reads backwards.
    pub struct GetKeyValuesRequest = 6795746; {
        pub begin: KeySelector,
        pub end: KeySelector,
        pub version: Version,
        pub limit: i32,
        pub limit_bytes: i32,
        pub tags: Option<TagSet>,
        pub reply: ReplyPromise,
        pub span_context: SpanContext,
        pub tenant_info: TenantInfo,
        pub options: Option<ReadOptions>,
        pub ss_latest_commit_versions: VersionVector,
    }
}

/// Range rows as FDB sends them: not a flatbuffers vector but one string,
/// `u32 count | (u32 klen | key | u32 vlen | value)*` (`VecSerStrategy::String`), which is
/// much cheaper for thousands of rows. Keys and values are zero-copy slices.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyValueBlob(pub Vec<KeyValue>);

impl Fb for KeyValueBlob {
    const LAYOUT: Layout = Layout::Indirect;
    fn save(&self, w: &mut Writer) -> Saved {
        let size = 4 + self
            .0
            .iter()
            .map(|kv| 8 + kv.key.len() + kv.value.len())
            .sum::<usize>();
        let mut b = Vec::with_capacity(size);
        b.extend_from_slice(&(self.0.len() as u32).to_le_bytes());
        for kv in &self.0 {
            b.extend_from_slice(&(kv.key.len() as u32).to_le_bytes());
            b.extend_from_slice(&kv.key);
            b.extend_from_slice(&(kv.value.len() as u32).to_le_bytes());
            b.extend_from_slice(&kv.value);
        }
        w.save_bytes(&b)
    }
    fn load(r: Reader<'_>, pos: usize) -> Result<Self> {
        let blob = Bytes::load(r, pos)?;
        if blob.is_empty() {
            return Ok(KeyValueBlob::default());
        }
        let bad = DecodeError::InvalidValue("key-value string");
        let data: &[u8] = &blob;
        let n = match data.get(..4) {
            Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            None => return Err(bad),
        };
        // Every row takes at least 8 bytes: a hostile count cannot make us allocate much.
        if n as usize > blob.len() / 8 {
            return Err(DecodeError::LengthTooLarge { len: n });
        }
        let mut rows = Vec::with_capacity(n as usize);
        let mut i = 4;
        for _ in 0..n {
            // Offsets, then `slice`: `slice_ref` would check again that each part lies in
            // the blob, per key and per value.
            let (k, v) = match string_at(data, i).and_then(|k| Some((k, string_at(data, k.1)?))) {
                Some(kv) => kv,
                None => return Err(bad),
            };
            rows.push(KeyValue {
                key: blob.slice(k.0..k.1),
                value: blob.slice(v.0..v.1),
            });
            i = v.1;
        }
        if i != blob.len() {
            return Err(bad);
        }
        Ok(KeyValueBlob(rows))
    }
}

/// Where the string whose `u32` length is at `at` in `data` lies: `(start, end)`.
fn string_at(data: &[u8], at: usize) -> Option<(usize, usize)> {
    let b = data.get(at..at.checked_add(4)?)?;
    let start = at + 4;
    let end = start.checked_add(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)?;
    (end <= data.len()).then_some((start, end))
}

crate::serializer::fb_message! {
    /// Rows of a range read. `more` means the limit or the shard end stopped it.
    pub struct GetKeyValuesReply = 1783066; {
        pub penalty: f64,
        pub error: Option<ErrorCode>,
        pub data: KeyValueBlob,
        pub version: Version,
        pub more: bool,
        pub cached: bool,
    }
}

crate::serializer::fb_message! {
    /// Fires when `key` no longer has `value` (absent `value` = the key is absent), at or
    /// after `version`.
    pub struct WatchValueRequest = 14747733; {
        pub key: Bytes,
        pub value: Option<Bytes>,
        pub version: Version,
        pub tags: Option<TagSet>,
        pub debug_id: Option<Uid>,
        pub reply: ReplyPromise,
        pub span_context: SpanContext,
        pub tenant_info: TenantInfo,
    }
}

crate::serializer::fb_message! {
    /// The version at which the watched value changed. Its file identifier really is 3.
    pub struct WatchValueReply = 3; {
        pub version: Version,
        pub cached: bool,
    }
}

crate::serializer::fb_message! {
    /// A storage server's estimate of a key range's load (`StorageMetrics` in
    /// `StorageServerInterface.h`): bytes from the byte sample, rates per thousand seconds.
    /// Also the reply to [`WaitMetricsRequest`] (a plain `ReplyPromise<StorageMetrics>`, so
    /// errors travel in the `ErrorOr`, not in a field).
    pub struct StorageMetrics = 13622226; {
        pub bytes: i64,
        pub bytes_written_per_ksecond: i64,
        pub ios_per_ksecond: i64,
        pub bytes_read_per_ksecond: i64,
        pub ops_read_per_ksecond: i64,
    }
}

crate::serializer::fb_message! {
    /// Answers with the range's metrics once any of them is below `min` or above `max`; a
    /// client wanting them at once sends `min.bytes = 0, max.bytes = -1`
    /// (`doGetStorageMetrics`). `min_version` only matters for tenant-aware requests.
    /// Sent to [`StorageServerInterface::WAIT_METRICS`].
    pub struct WaitMetricsRequest = 1795961; {
        pub keys: KeyRange,
        pub min: StorageMetrics,
        pub max: StorageMetrics,
        pub reply: ReplyPromise,
        pub tenant_info: TenantInfo,
        pub min_version: Version,
    }
}

crate::serializer::fb_message! {
    /// Asks where to cut `keys` into chunks of about `chunk_size` bytes (by the byte sample).
    /// Sent to [`StorageServerInterface::GET_RANGE_SPLIT_POINTS`].
    pub struct SplitRangeRequest = 10725174; {
        pub keys: KeyRange,
        pub chunk_size: i64,
        pub reply: ReplyPromise,
        pub tenant_info: TenantInfo,
    }
}

crate::serializer::fb_message! {
    /// The split points inside the requested range, ascending (empty when the range is
    /// smaller than a chunk). Errors travel in the `ErrorOr`.
    pub struct SplitRangeReply = 11813134; {
        pub split_points: Vec<Bytes>,
    }
}

crate::serializer::fb_message! {
    /// `getMappedKeyValues` (7.3): a range read whose storage server also reads, for each row
    /// it returns, the key or range `mapper` (a packed tuple) derives from the row's key and
    /// value tuples. The same members as [`GetKeyValuesRequest`], with `mapper` after `end`.
    pub struct GetMappedKeyValuesRequest = 6795747; {
        pub begin: KeySelector,
        pub end: KeySelector,
        pub mapper: Bytes,
        pub version: Version,
        pub limit: i32,
        pub limit_bytes: i32,
        pub tags: Option<TagSet>,
        pub reply: ReplyPromise,
        pub span_context: SpanContext,
        pub tenant_info: TenantInfo,
        pub options: Option<ReadOptions>,
        pub ss_latest_commit_versions: VersionVector,
    }
}

crate::serializer::fb_table! {
    /// `RangeResultRef` as a table (a mapped range's secondary rows): the rows as a
    /// flatbuffers vector of `KeyValueRef` tables, not the string form of range replies.
    pub struct RangeResultTable {
        pub data: Vec<KeyValue>,
        pub more: bool,
        pub read_through: Option<Bytes>,
        pub read_to_begin: bool,
        pub read_through_end: bool,
    }
}

crate::serializer::fb_table! {
    /// `GetValueReqAndResultRef`: the key a mapper named and its value, if set.
    pub struct GetValueReqAndResult {
        pub key: Bytes,
        pub result: Option<Bytes>,
    }
}

crate::serializer::fb_table! {
    /// `GetRangeReqAndResultRef`: the range a mapper named (`{...}` last) and its rows.
    pub struct GetRangeReqAndResult {
        pub begin: KeySelector,
        pub end: KeySelector,
        pub result: RangeResultTable,
    }
}

/// `MappedReqAndResultRef`, a `std::variant` and so a union: tag 1 a point read, tag 2 a
/// range read.
#[derive(Clone, Debug, PartialEq)]
pub enum MappedReqAndResult {
    /// The mapper named one key.
    Value(GetValueReqAndResult),
    /// The mapper named a range.
    Range(GetRangeReqAndResult),
}

impl Default for MappedReqAndResult {
    fn default() -> Self {
        MappedReqAndResult::Value(GetValueReqAndResult::default())
    }
}

impl Fb for MappedReqAndResult {
    const LAYOUT: Layout = Layout::Union;
    fn save(&self, w: &mut Writer) -> Saved {
        let (tag, target) = match self {
            MappedReqAndResult::Value(v) => (1, w.save_alternative(v)),
            MappedReqAndResult::Range(r) => (2, w.save_alternative(r)),
        };
        Saved::Union {
            tag,
            target: Some(target),
        }
    }
    fn load(_r: Reader<'_>, _pos: usize) -> Result<Self> {
        Err(DecodeError::InvalidValue("union outside a table"))
    }
    fn load_field(t: &mut crate::serializer::TableReader<'_>) -> Result<Self> {
        use crate::serializer::{load_alternative, union_slots};
        match union_slots(t)? {
            (1, Some(p)) => Ok(MappedReqAndResult::Value(load_alternative(t.r, p)?)),
            (2, Some(p)) => Ok(MappedReqAndResult::Range(load_alternative(t.r, p)?)),
            // A variant always holds an alternative.
            (0, _) => Err(DecodeError::EmptyUnion),
            (tag, _) => Err(DecodeError::BadUnionTag { tag }),
        }
    }
    fn collect_vtables(c: &mut crate::serializer::VtCollector) {
        GetValueReqAndResult::collect_vtables(c);
        GetRangeReqAndResult::collect_vtables(c);
    }
}

crate::serializer::fb_table! {
    /// `MappedKeyValueRef`: a row of the primary range (its `KeyValueRef` base, a nested
    /// table) and what its mapper read.
    pub struct MappedKeyValue {
        pub kv: KeyValue,
        pub mapped: MappedReqAndResult,
    }
}

crate::serializer::fb_message! {
    /// The reply to [`GetMappedKeyValuesRequest`]: `LoadBalancedReply`'s members, then the
    /// rows as a flatbuffers vector (not the string form of [`GetKeyValuesReply`]).
    pub struct GetMappedKeyValuesReply = 1783067; {
        pub penalty: f64,
        pub error: Option<ErrorCode>,
        pub data: Vec<MappedKeyValue>,
        pub version: Version,
        pub more: bool,
        pub cached: bool,
    }
}

#[cfg(test)]
mod mapped_tests {
    use super::*;
    use crate::messages::{decode_reply, encode_reply, ErrorOr};
    use alloc::vec;

    fn b(s: &[u8]) -> Bytes {
        Bytes::copy_from_slice(s)
    }

    fn kv(k: &[u8], v: &[u8]) -> KeyValue {
        KeyValue {
            key: b(k),
            value: b(v),
        }
    }

    fn reply() -> GetMappedKeyValuesReply {
        GetMappedKeyValuesReply {
            penalty: 1.0,
            error: None,
            data: vec![
                MappedKeyValue {
                    kv: kv(b"idx/1", b""),
                    mapped: MappedReqAndResult::Range(GetRangeReqAndResult {
                        begin: KeySelector::first_greater_or_equal(b(b"rec/1/")),
                        end: KeySelector::first_greater_or_equal(b(b"rec/1/\xff")),
                        result: RangeResultTable {
                            data: vec![kv(b"rec/1/a", b"v1"), kv(b"rec/1/b", b"w1")],
                            more: false,
                            read_through: None,
                            read_to_begin: false,
                            read_through_end: false,
                        },
                    }),
                },
                MappedKeyValue {
                    kv: kv(b"idx/2", b"x"),
                    mapped: MappedReqAndResult::Value(GetValueReqAndResult {
                        key: b(b"rec/2"),
                        result: Some(b(b"v2")),
                    }),
                },
                MappedKeyValue {
                    kv: kv(b"idx/3", b""),
                    mapped: MappedReqAndResult::Value(GetValueReqAndResult {
                        key: b(b"rec/3"),
                        result: None,
                    }),
                },
            ],
            version: 42,
            more: true,
            cached: false,
        }
    }

    #[test]
    fn a_reply_with_both_alternatives_round_trips() {
        let r = reply();
        let bytes = Bytes::from(encode_reply(&ErrorOr::Ok(r.clone())));
        assert_eq!(
            decode_reply::<GetMappedKeyValuesReply>(&bytes).unwrap(),
            ErrorOr::Ok(r)
        );
        let e = Bytes::from(encode_reply::<GetMappedKeyValuesReply>(&ErrorOr::Err(
            ErrorCode::GET_MAPPED_KEY_VALUES_HAS_MORE,
        )));
        assert_eq!(
            decode_reply::<GetMappedKeyValuesReply>(&e).unwrap(),
            ErrorOr::Err(ErrorCode::GET_MAPPED_KEY_VALUES_HAS_MORE)
        );
    }

    #[test]
    fn every_truncation_is_a_typed_error() {
        let bytes = encode_reply(&ErrorOr::Ok(reply()));
        for n in 0..bytes.len() {
            let cut = Bytes::copy_from_slice(&bytes[..n]);
            // No panic; what decodes from a prefix (trailing padding) is still a reply.
            let _ = decode_reply::<GetMappedKeyValuesReply>(&cut);
        }
    }

    /// A union slot carrying what the test writes (a tag and, unless 0, a point result).
    #[derive(Clone, Debug, Default, PartialEq)]
    struct RawUnion(u8);

    impl Fb for RawUnion {
        const LAYOUT: Layout = Layout::Union;
        fn save(&self, w: &mut Writer) -> Saved {
            let target =
                (self.0 != 0).then(|| w.save_alternative(&GetValueReqAndResult::default()));
            Saved::Union {
                tag: self.0,
                target,
            }
        }
        fn load(_r: Reader<'_>, _pos: usize) -> Result<Self> {
            Err(DecodeError::InvalidValue("test only"))
        }
        fn collect_vtables(c: &mut crate::serializer::VtCollector) {
            GetValueReqAndResult::collect_vtables(c);
        }
    }

    crate::serializer::fb_table! {
        struct RawRow {
            kv: KeyValue,
            mapped: RawUnion,
        }
    }

    crate::serializer::fb_message! {
        struct RawReply = 1783067; {
            penalty: f64,
            error: Option<ErrorCode>,
            data: Vec<RawRow>,
            version: Version,
            more: bool,
            cached: bool,
        }
    }

    fn with_tag(tag: u8) -> core::result::Result<ErrorOr<GetMappedKeyValuesReply>, DecodeError> {
        let raw = RawReply {
            data: vec![RawRow {
                kv: kv(b"k", b""),
                mapped: RawUnion(tag),
            }],
            ..RawReply::default()
        };
        decode_reply::<GetMappedKeyValuesReply>(&Bytes::from(encode_reply(&ErrorOr::Ok(raw))))
    }

    #[test]
    fn a_row_without_a_known_alternative_is_refused() {
        assert!(matches!(with_tag(1), Ok(ErrorOr::Ok(_))));
        assert_eq!(with_tag(3), Err(DecodeError::BadUnionTag { tag: 3 }));
        assert_eq!(with_tag(0), Err(DecodeError::EmptyUnion));
    }
}
