//! Property tests of every message in the registry: each request, and each reply both as
//! `ErrorOr::Ok(value)` and as `ErrorOr::Err(code)`, round-trips through
//! `AnyMessage::encode` / `decode_any`; replies also through `encode_reply` / `decode_reply`.
//!
//! The strategies respect the normalizations the format makes on purpose: key ranges have
//! `begin <= end` (an inverted range is a decode error; a single-key range `[k, k\0)` is
//! compressed on the wire and rebuilt), clear-range mutations likewise, mutation kinds stay
//! below 64 (the top two bits are checksum flags the decoder strips), tags are at most 255
//! bytes, and floats are finite.
//!
//! Besides the round trip: the encoding is padded to 8 and carries the message's file
//! identifier; any prefix of it either fails to decode or decodes to the same message (never
//! a panic); and flipping bytes never panics, and whatever decodes then re-encodes to a
//! fixpoint.

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::commit::{
    mutation_type, ClearIdxCost, ClientTrCommitCostEstimation, CommitID, CommitTransactionRef,
    CommitTransactionRequest, GetKeyServerLocationsReply, GetKeyServerLocationsRequest,
    MutationRef, ShardLocation, TagMapping, TssMapping,
};
use fdb_protocol::messages::coordination::{
    ClientDBInfo, ClientVersionRef, CommitProxyInterface, EncryptKeyProxyInterface,
    GetLeaderRequest, GrvProxyInterface, Hostname, LeaderInfo, LocalityData, LocalityEntry,
    OpenDatabaseCoordRequest, PingRequest, ProtocolInfoReply, ProtocolInfoRequest, StatusReply,
    StatusRequest, TenantMode, VersionHistory,
};
use fdb_protocol::messages::grv::{
    ClientTagThrottleLimits, GetReadVersionReply, GetReadVersionRequest, GlobalConfigRefreshReply,
    GlobalConfigRefreshRequest, RangeResult, TagCount, TagThrottleEntry,
};
use fdb_protocol::messages::registry::LEADER_REPLY_FILE_IDENTIFIER;
use fdb_protocol::messages::storage::{
    GetKeyReply, GetKeyRequest, GetKeyValuesReply, GetKeyValuesRequest, GetValueReply,
    GetValueRequest, KeyValueBlob, ReadOptions, SplitRangeReply, SplitRangeRequest, StorageMetrics,
    StorageServerInterface, WaitMetricsRequest, WatchValueReply, WatchValueRequest,
};
use fdb_protocol::messages::types::{
    KeyRange, KeySelector, KeyValue, SpanContext, Tag, TagSet, TenantInfo, VersionVector,
    WipedString,
};
use fdb_protocol::messages::{
    decode_any, decode_reply, encode_reply, fid, AnyMessage, Endpoint, EnsureTable, ErrorOr,
    IpAddress, NetworkAddress, NetworkAddressList, ReplyPromise, RequestStream, Void,
};
use fdb_protocol::serializer::{
    encode_with, file_identifier, DecodeError, Fb, Layout, Message, Reader, Saved, VtCollector,
    Writer,
};
use fdb_protocol::Uid;
use proptest::collection::vec;
use proptest::option::of;
use proptest::prelude::*;
use proptest::sample::Index;

// ---------------------------------------------------------------------------------------------
// Leaf strategies.
// ---------------------------------------------------------------------------------------------

fn uid() -> impl Strategy<Value = Uid> {
    any::<(u64, u64)>().prop_map(|(a, b)| Uid::new(a, b))
}

/// Arbitrary bytes, empty a third of the time.
fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    prop_oneof![
        1 => Just(Bytes::new()),
        2 => vec(any::<u8>(), 1..max).prop_map(Bytes::from),
    ]
}

/// Keys from a small alphabet, so that equal keys, prefixes and `k\0` successors are common.
fn key() -> impl Strategy<Value = Bytes> {
    let byte = prop_oneof![Just(0u8), Just(b'a'), Just(b'b'), Just(0xff), any::<u8>()];
    prop_oneof![
        1 => Just(Bytes::new()),
        4 => vec(byte, 1..8).prop_map(Bytes::from),
    ]
}

fn finite() -> impl Strategy<Value = f64> {
    use proptest::num::f64;
    f64::NORMAL | f64::SUBNORMAL | f64::ZERO | f64::POSITIVE | f64::NEGATIVE
}

fn version() -> impl Strategy<Value = i64> {
    prop_oneof![Just(-1i64), Just(-2i64), any::<i64>(), 0i64..1 << 50]
}

fn reply_promise() -> impl Strategy<Value = ReplyPromise> {
    uid().prop_map(|token| ReplyPromise { token })
}

fn error_code() -> impl Strategy<Value = ErrorCode> {
    any::<u16>().prop_map(ErrorCode)
}

/// `ErrorOr<T>`: a value, or an error code.
fn reply<S>(s: S) -> impl Strategy<Value = ErrorOr<S::Value>>
where
    S: Strategy,
    S::Value: Clone + std::fmt::Debug,
{
    prop_oneof![
        3 => s.prop_map(ErrorOr::Ok),
        1 => error_code().prop_map(ErrorOr::Err),
    ]
}

// ---------------------------------------------------------------------------------------------
// Nested types.
// ---------------------------------------------------------------------------------------------

fn ip() -> impl Strategy<Value = IpAddress> {
    prop_oneof![
        any::<u32>().prop_map(IpAddress::V4),
        any::<[u8; 16]>().prop_map(IpAddress::V6),
    ]
}

fn network_address() -> impl Strategy<Value = NetworkAddress> {
    (ip(), any::<u16>(), any::<u16>(), any::<bool>()).prop_map(
        |(ip, port, flags, from_hostname)| NetworkAddress {
            ip,
            port,
            flags,
            from_hostname,
        },
    )
}

fn endpoint() -> impl Strategy<Value = Endpoint> {
    (network_address(), of(network_address()), uid()).prop_map(
        |(address, secondary_address, token)| Endpoint {
            addresses: NetworkAddressList {
                address,
                secondary_address,
            },
            token,
        },
    )
}

fn request_stream() -> impl Strategy<Value = RequestStream> {
    endpoint().prop_map(|endpoint| RequestStream { endpoint })
}

fn span_context() -> impl Strategy<Value = SpanContext> {
    (uid(), any::<u64>(), any::<u8>()).prop_map(|(trace_id, span_id, flags)| SpanContext {
        trace_id,
        span_id,
        flags,
    })
}

fn tenant_info() -> impl Strategy<Value = TenantInfo> {
    prop_oneof![
        Just(TenantInfo::none()),
        (any::<i64>(), of(bytes(40))).prop_map(|(tenant_id, token)| TenantInfo {
            tenant_id,
            token: token.map(|value| WipedString { value }),
        }),
    ]
}

/// Tags are at most 255 bytes each (their length travels in one byte).
fn tag_set() -> impl Strategy<Value = TagSet> {
    let tag = prop_oneof![
        8 => bytes(20),
        1 => vec(any::<u8>(), 255).prop_map(Bytes::from),
    ];
    vec(tag, 0..4).prop_map(TagSet)
}

fn version_vector() -> impl Strategy<Value = VersionVector> {
    prop_oneof![
        version().prop_map(VersionVector::empty),
        vec(any::<u8>(), 16..64).prop_map(|v| VersionVector(Bytes::from(v))),
    ]
}

fn key_selector() -> impl Strategy<Value = KeySelector> {
    (key(), any::<bool>(), any::<i32>()).prop_map(|(key, or_equal, offset)| KeySelector {
        key,
        or_equal,
        offset,
    })
}

fn key_value() -> impl Strategy<Value = KeyValue> {
    (key(), bytes(40)).prop_map(|(key, value)| KeyValue { key, value })
}

/// `begin <= end`, with single-key ranges and empty ranges common.
fn key_range() -> impl Strategy<Value = KeyRange> {
    prop_oneof![
        (key(), key()).prop_map(|(a, b)| if a <= b {
            KeyRange::new(a, b)
        } else {
            KeyRange::new(b, a)
        }),
        key().prop_map(|k| KeyRange::single_key(&k)),
        key().prop_map(|k| KeyRange::new(k.clone(), k)),
    ]
}

/// Kinds below 64; a clear range is a valid range (`param1 <= param2`).
fn mutation() -> impl Strategy<Value = MutationRef> {
    let kind = prop_oneof![
        Just(mutation_type::CLEAR_RANGE),
        Just(mutation_type::SET_VALUE),
        0u8..64,
    ];
    (kind, key(), bytes(30), key_range()).prop_map(|(kind, p1, p2, range)| {
        if kind == mutation_type::CLEAR_RANGE {
            MutationRef::new(kind, range.begin, range.end)
        } else {
            MutationRef::new(kind, p1, p2)
        }
    })
}

fn locality() -> impl Strategy<Value = LocalityData> {
    vec(
        (bytes(12), of(bytes(12))).prop_map(|(key, value)| LocalityEntry { key, value }),
        0..4,
    )
    .prop_map(|data| LocalityData { data })
}

fn storage_server() -> impl Strategy<Value = StorageServerInterface> {
    (
        uid(),
        locality(),
        request_stream(),
        of(uid()),
        any::<bool>(),
    )
        .prop_map(
            |(unique_id, locality, get_value, tss_pair_id, accepting_requests)| {
                StorageServerInterface {
                    unique_id,
                    locality,
                    get_value,
                    tss_pair_id,
                    accepting_requests,
                }
            },
        )
}

fn read_options() -> impl Strategy<Value = ReadOptions> {
    (
        0i32..5,
        any::<bool>(),
        of(uid()),
        of(version()),
        any::<bool>(),
    )
        .prop_map(
            |(read_type, cache_result, debug_id, consistency_check_start_version, lock_aware)| {
                ReadOptions {
                    read_type,
                    cache_result,
                    debug_id,
                    consistency_check_start_version,
                    lock_aware,
                }
            },
        )
}

// ---------------------------------------------------------------------------------------------
// Coordination.
// ---------------------------------------------------------------------------------------------

fn open_database_coord_request() -> impl Strategy<Value = OpenDatabaseCoordRequest> {
    let version_ref = (bytes(10), bytes(10), bytes(10)).prop_map(|(c, s, p)| ClientVersionRef {
        client_version: c,
        source_version: s,
        protocol_version: p,
    });
    let hostname =
        (bytes(20), bytes(6), any::<bool>()).prop_map(|(host, service, is_tls)| Hostname {
            host,
            service,
            is_tls,
        });
    (
        vec(bytes(10), 0..4),
        vec(version_ref, 0..3),
        bytes(10),
        uid(),
        bytes(20),
        vec(network_address(), 0..4),
        reply_promise(),
        vec(hostname, 0..3),
        any::<bool>(),
    )
        .prop_map(
            |(
                issues,
                supported_versions,
                trace_log_group,
                known_client_info_id,
                cluster_key,
                coordinators,
                reply,
                hostnames,
                internal,
            )| OpenDatabaseCoordRequest {
                issues,
                supported_versions,
                trace_log_group,
                known_client_info_id,
                cluster_key,
                coordinators,
                reply,
                hostnames,
                internal,
            },
        )
}

fn get_leader_request() -> impl Strategy<Value = GetLeaderRequest> {
    (bytes(30), uid(), reply_promise()).prop_map(|(key, known_leader, reply)| GetLeaderRequest {
        key,
        known_leader,
        reply,
    })
}

fn client_db_info() -> impl Strategy<Value = ClientDBInfo> {
    let grv = (of(bytes(16)), any::<bool>(), request_stream()).prop_map(
        |(process_id, provisional, get_consistent_read_version)| GrvProxyInterface {
            process_id,
            provisional,
            get_consistent_read_version,
        },
    );
    let commit = (of(bytes(16)), any::<bool>(), request_stream()).prop_map(
        |(process_id, provisional, commit)| CommitProxyInterface {
            process_id,
            provisional,
            commit,
        },
    );
    let history = (vec(mutation(), 0..3), version())
        .prop_map(|(mutations, version)| VersionHistory { mutations, version });
    let ekp = (locality(), uid(), request_stream()).prop_map(|(locality, my_id, wait_failure)| {
        EncryptKeyProxyInterface {
            locality,
            my_id,
            wait_failure,
        }
    });
    (
        vec(grv, 0..3),
        vec(commit, 0..3),
        uid(),
        of(bytes(40)),
        vec(history, 0..3),
        0u32..3,
        of(ekp),
        uid(),
        0u32..3,
        of(bytes(16)),
    )
        .prop_map(
            |(
                grv_proxies,
                commit_proxies,
                id,
                forward,
                history,
                mode,
                encrypt_key_proxy,
                cluster_id,
                cluster_type,
                metacluster_name,
            )| ClientDBInfo {
                grv_proxies,
                commit_proxies,
                id,
                forward,
                history,
                tenant_mode: TenantMode { mode },
                encrypt_key_proxy,
                cluster_id,
                cluster_type,
                metacluster_name,
            },
        )
}

fn leader_reply() -> impl Strategy<Value = ErrorOr<EnsureTable<Option<LeaderInfo>>>> {
    let info =
        (uid(), bytes(200), any::<bool>()).prop_map(|(change_id, serialized_info, forward)| {
            LeaderInfo {
                change_id,
                serialized_info,
                forward,
            }
        });
    reply(of(info).prop_map(EnsureTable))
}

// ---------------------------------------------------------------------------------------------
// Read versions and global configuration.
// ---------------------------------------------------------------------------------------------

fn get_read_version_request() -> impl Strategy<Value = GetReadVersionRequest> {
    let tag = (bytes(16), any::<u32>()).prop_map(|(tag, count)| TagCount { tag, count });
    (
        any::<u32>(),
        any::<u32>(),
        vec(tag, 0..3),
        of(uid()),
        reply_promise(),
        span_context(),
        version(),
    )
        .prop_map(
            |(transaction_count, flags, tags, debug_id, reply, span_context, max_version)| {
                GetReadVersionRequest {
                    transaction_count,
                    flags,
                    tags,
                    debug_id,
                    reply,
                    span_context,
                    max_version,
                }
            },
        )
}

fn get_read_version_reply() -> impl Strategy<Value = GetReadVersionReply> {
    let throttle =
        (bytes(16), finite(), finite()).prop_map(|(tag, tps_rate, duration)| TagThrottleEntry {
            tag,
            limits: ClientTagThrottleLimits { tps_rate, duration },
        });
    (
        any::<i32>(),
        version(),
        any::<bool>(),
        of(bytes(10)),
        vec(throttle, 0..3),
        any::<i64>(),
        any::<bool>(),
        any::<bool>(),
        version_vector(),
        uid(),
        finite(),
    )
        .prop_map(
            |(
                process_busy_time,
                version,
                locked,
                metadata_version,
                tag_throttle_info,
                mid_shard_size,
                rk_default_throttled,
                rk_batch_throttled,
                ss_version_vector_delta,
                proxy_id,
                proxy_tag_throttled_duration,
            )| GetReadVersionReply {
                process_busy_time,
                version,
                locked,
                metadata_version,
                tag_throttle_info,
                mid_shard_size,
                rk_default_throttled,
                rk_batch_throttled,
                ss_version_vector_delta,
                proxy_id,
                proxy_tag_throttled_duration,
            },
        )
}

fn global_config_refresh_request() -> impl Strategy<Value = GlobalConfigRefreshRequest> {
    (version(), reply_promise())
        .prop_map(|(last_known, reply)| GlobalConfigRefreshRequest { last_known, reply })
}

fn global_config_refresh_reply() -> impl Strategy<Value = GlobalConfigRefreshReply> {
    (
        vec(key_value(), 0..5),
        any::<bool>(),
        of(key()),
        any::<bool>(),
        any::<bool>(),
        version(),
    )
        .prop_map(
            |(data, more, read_through, read_to_begin, read_through_end, version)| {
                GlobalConfigRefreshReply {
                    result: RangeResult {
                        data,
                        more,
                        read_through,
                        read_to_begin,
                        read_through_end,
                    },
                    version,
                }
            },
        )
}

// ---------------------------------------------------------------------------------------------
// Commits and locations.
// ---------------------------------------------------------------------------------------------

fn commit_transaction_request() -> impl Strategy<Value = CommitTransactionRequest> {
    let transaction = (
        vec(key_range(), 0..4),
        vec(key_range(), 0..4),
        vec(mutation(), 0..6),
        version(),
        any::<bool>(),
        any::<bool>(),
        of(span_context()),
        of(vec(any::<i64>(), 0..3)),
    )
        .prop_map(
            |(
                read_conflict_ranges,
                write_conflict_ranges,
                mutations,
                read_snapshot,
                report_conflicting_keys,
                lock_aware,
                span_context,
                tenant_ids,
            )| CommitTransactionRef {
                read_conflict_ranges,
                write_conflict_ranges,
                mutations,
                read_snapshot,
                report_conflicting_keys,
                lock_aware,
                span_context,
                tenant_ids,
            },
        );
    let cost = (
        any::<i32>(),
        any::<u64>(),
        vec(
            (any::<i32>(), any::<u64>()).prop_map(|(index, cost)| ClearIdxCost { index, cost }),
            0..3,
        ),
        any::<u32>(),
    )
        .prop_map(
            |(ops_count, write_costs, clear_idx_costs, expensive_cost_est_count)| {
                ClientTrCommitCostEstimation {
                    ops_count,
                    write_costs,
                    clear_idx_costs,
                    expensive_cost_est_count,
                }
            },
        );
    (
        transaction,
        reply_promise(),
        0u32..8,
        of(uid()),
        of(cost),
        of(tag_set()),
        span_context(),
        tenant_info(),
        prop_oneof![
            Just(Bytes::new()),
            vec(any::<u8>(), 16..255).prop_map(Bytes::from)
        ],
    )
        .prop_map(
            |(
                transaction,
                reply,
                flags,
                debug_id,
                commit_cost_estimation,
                tag_set,
                span_context,
                tenant_info,
                idempotency_id,
            )| CommitTransactionRequest {
                transaction,
                reply,
                flags,
                debug_id,
                commit_cost_estimation,
                tag_set,
                span_context,
                tenant_info,
                idempotency_id,
            },
        )
}

fn commit_id() -> impl Strategy<Value = CommitID> {
    (
        version(),
        any::<u16>(),
        of(bytes(10)),
        of(vec(any::<i32>(), 0..4)),
    )
        .prop_map(
            |(version, txn_batch_id, metadata_version, conflicting_kr_indices)| CommitID {
                version,
                txn_batch_id,
                metadata_version,
                conflicting_kr_indices,
            },
        )
}

fn get_key_server_locations_request() -> impl Strategy<Value = GetKeyServerLocationsRequest> {
    (
        key(),
        of(key()),
        any::<i32>(),
        any::<bool>(),
        reply_promise(),
        span_context(),
        tenant_info(),
        version(),
    )
        .prop_map(
            |(begin, end, limit, reverse, reply, span_context, tenant, min_tenant_version)| {
                GetKeyServerLocationsRequest {
                    begin,
                    end,
                    limit,
                    reverse,
                    reply,
                    span_context,
                    tenant,
                    min_tenant_version,
                }
            },
        )
}

fn get_key_server_locations_reply() -> impl Strategy<Value = GetKeyServerLocationsReply> {
    let shard = (key_range(), vec(storage_server(), 0..3))
        .prop_map(|(range, servers)| ShardLocation { range, servers });
    let tss = (uid(), storage_server()).prop_map(|(ss_id, tss)| TssMapping { ss_id, tss });
    let tag = (uid(), any::<i8>(), any::<u16>()).prop_map(|(ss_id, locality, id)| TagMapping {
        ss_id,
        tag: Tag { locality, id },
    });
    (vec(shard, 0..3), vec(tss, 0..2), vec(tag, 0..3)).prop_map(
        |(results, results_tss_mapping, results_tag_mapping)| GetKeyServerLocationsReply {
            results,
            results_tss_mapping,
            results_tag_mapping,
        },
    )
}

// ---------------------------------------------------------------------------------------------
// Storage.
// ---------------------------------------------------------------------------------------------

/// The members every read request shares after its own.
#[allow(clippy::type_complexity)]
fn read_common() -> impl Strategy<
    Value = (
        Option<TagSet>,
        ReplyPromise,
        SpanContext,
        TenantInfo,
        Option<ReadOptions>,
        VersionVector,
    ),
> {
    (
        of(tag_set()),
        reply_promise(),
        span_context(),
        tenant_info(),
        of(read_options()),
        version_vector(),
    )
}

fn get_value_request() -> impl Strategy<Value = GetValueRequest> {
    (key(), version(), read_common()).prop_map(
        |(key, version, (tags, reply, span_context, tenant_info, options, ss))| GetValueRequest {
            key,
            version,
            tags,
            reply,
            span_context,
            tenant_info,
            options,
            ss_latest_commit_versions: ss,
        },
    )
}

fn get_value_reply() -> impl Strategy<Value = GetValueReply> {
    (finite(), of(error_code()), of(bytes(100)), any::<bool>()).prop_map(
        |(penalty, error, value, cached)| GetValueReply {
            penalty,
            error,
            value,
            cached,
        },
    )
}

fn get_key_request() -> impl Strategy<Value = GetKeyRequest> {
    (key_selector(), version(), read_common()).prop_map(
        |(sel, version, (tags, reply, span_context, tenant_info, options, ss))| GetKeyRequest {
            sel,
            version,
            tags,
            reply,
            span_context,
            tenant_info,
            options,
            ss_latest_commit_versions: ss,
        },
    )
}

fn get_key_reply() -> impl Strategy<Value = GetKeyReply> {
    (finite(), of(error_code()), key_selector(), any::<bool>()).prop_map(
        |(penalty, error, sel, cached)| GetKeyReply {
            penalty,
            error,
            sel,
            cached,
        },
    )
}

fn get_key_values_request() -> impl Strategy<Value = GetKeyValuesRequest> {
    (
        key_selector(),
        key_selector(),
        version(),
        any::<i32>(),
        any::<i32>(),
        read_common(),
    )
        .prop_map(
            |(
                begin,
                end,
                version,
                limit,
                limit_bytes,
                (tags, reply, span_context, tenant_info, options, ss),
            )| GetKeyValuesRequest {
                begin,
                end,
                version,
                limit,
                limit_bytes,
                tags,
                reply,
                span_context,
                tenant_info,
                options,
                ss_latest_commit_versions: ss,
            },
        )
}

fn get_key_values_reply() -> impl Strategy<Value = GetKeyValuesReply> {
    (
        finite(),
        of(error_code()),
        vec(key_value(), 0..8),
        version(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(penalty, error, rows, version, more, cached)| GetKeyValuesReply {
                penalty,
                error,
                data: KeyValueBlob(rows),
                version,
                more,
                cached,
            },
        )
}

fn watch_value_request() -> impl Strategy<Value = WatchValueRequest> {
    (
        key(),
        of(bytes(30)),
        version(),
        of(tag_set()),
        of(uid()),
        reply_promise(),
        span_context(),
        tenant_info(),
    )
        .prop_map(
            |(key, value, version, tags, debug_id, reply, span_context, tenant_info)| {
                WatchValueRequest {
                    key,
                    value,
                    version,
                    tags,
                    debug_id,
                    reply,
                    span_context,
                    tenant_info,
                }
            },
        )
}

fn watch_value_reply() -> impl Strategy<Value = WatchValueReply> {
    (version(), any::<bool>()).prop_map(|(version, cached)| WatchValueReply { version, cached })
}

fn storage_metrics() -> impl Strategy<Value = StorageMetrics> {
    any::<[i64; 5]>().prop_map(|m| StorageMetrics {
        bytes: m[0],
        bytes_written_per_ksecond: m[1],
        ios_per_ksecond: m[2],
        bytes_read_per_ksecond: m[3],
        ops_read_per_ksecond: m[4],
    })
}

fn wait_metrics_request() -> impl Strategy<Value = WaitMetricsRequest> {
    (
        key_range(),
        storage_metrics(),
        storage_metrics(),
        reply_promise(),
        tenant_info(),
        version(),
    )
        .prop_map(
            |(keys, min, max, reply, tenant_info, min_version)| WaitMetricsRequest {
                keys,
                min,
                max,
                reply,
                tenant_info,
                min_version,
            },
        )
}

fn split_range_request() -> impl Strategy<Value = SplitRangeRequest> {
    (key_range(), any::<i64>(), reply_promise(), tenant_info()).prop_map(
        |(keys, chunk_size, reply, tenant_info)| SplitRangeRequest {
            keys,
            chunk_size,
            reply,
            tenant_info,
        },
    )
}

fn split_range_reply() -> impl Strategy<Value = SplitRangeReply> {
    vec(key(), 0..8).prop_map(|split_points| SplitRangeReply { split_points })
}

// ---------------------------------------------------------------------------------------------
// Properties.
// ---------------------------------------------------------------------------------------------

/// Round trip, padding, file identifier, truncations and byte flips of one message.
fn check(m: AnyMessage, cuts: &[Index], flips: &[(Index, u8)]) -> Result<(), TestCaseError> {
    let enc = m.encode();
    prop_assert_eq!(enc.len() % 8, 0, "{} is not padded to 8", m.name());
    prop_assert_eq!(file_identifier(&enc), Ok(m.file_identifier()));
    prop_assert_eq!(u32::from_le_bytes(enc[0..4].try_into().unwrap()) % 4, 0);
    let back = decode_any(&Bytes::from(enc.clone()))
        .map_err(|e| TestCaseError::fail(format!("{}: decode: {e}", m.name())))?;
    prop_assert_eq!(&back, &m);
    prop_assert_eq!(
        back.encode(),
        enc.clone(),
        "{} re-encodes differently",
        m.name()
    );

    for cut in cuts.iter().map(|i| i.index(enc.len())).chain(0..9) {
        if let Ok(v) = decode_any(&Bytes::copy_from_slice(&enc[..cut])) {
            prop_assert_eq!(&v, &m, "a {}-byte prefix decoded differently", cut);
        }
    }

    for &(ref at, mask) in flips {
        let mut bad = enc.clone();
        let i = at.index(bad.len());
        bad[i] ^= mask.max(1);
        if let Ok(v) = decode_any(&Bytes::from(bad)) {
            let again = v.encode();
            let w = decode_any(&Bytes::from(again.clone())).map_err(|e| {
                TestCaseError::fail(format!("{} after a flip at {i}: re-decode: {e}", v.name()))
            })?;
            prop_assert_eq!(
                w.encode(),
                again,
                "{} after a flip at {} is no fixpoint",
                v.name(),
                i
            );
        }
    }
    Ok(())
}

/// What `encode_reply` / `decode_reply` do agrees with the registry.
fn check_typed_reply<T: Message + Clone + PartialEq + std::fmt::Debug>(
    r: &ErrorOr<T>,
    any: &AnyMessage,
) -> Result<(), TestCaseError> {
    let enc = encode_reply(r);
    prop_assert_eq!(&enc, &any.encode());
    prop_assert_eq!(file_identifier(&enc), Ok(fid::reply(T::FILE_IDENTIFIER)));
    prop_assert_eq!(decode_reply::<T>(&Bytes::from(enc)), Ok(r.clone()));
    Ok(())
}

fn cuts() -> impl Strategy<Value = Vec<Index>> {
    vec(any::<Index>(), 24)
}

fn flips() -> impl Strategy<Value = Vec<(Index, u8)>> {
    vec(any::<(Index, u8)>(), 12)
}

macro_rules! request_tests {
    ($($test:ident: $variant:ident <- $strategy:expr;)*) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            $(
                #[test]
                fn $test(m in $strategy, cuts in cuts(), flips in flips()) {
                    check(AnyMessage::$variant(m), &cuts, &flips)?;
                }
            )*
        }
    };
}

macro_rules! reply_tests {
    ($($test:ident: $variant:ident <- $strategy:expr;)*) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            $(
                #[test]
                fn $test(r in reply($strategy), cuts in cuts(), flips in flips()) {
                    let any = AnyMessage::$variant(r.clone());
                    check_typed_reply(&r, &any)?;
                    check(any, &cuts, &flips)?;
                }
            )*
        }
    };
}

request_tests! {
    open_database_coord_request_roundtrips: OpenDatabaseCoordRequest <- open_database_coord_request();
    get_leader_request_roundtrips: GetLeaderRequest <- get_leader_request();
    protocol_info_request_roundtrips: ProtocolInfoRequest <- reply_promise().prop_map(|reply| ProtocolInfoRequest { reply });
    ping_request_roundtrips: PingRequest <- reply_promise().prop_map(|reply| PingRequest { reply });
    status_request_roundtrips: StatusRequest <- (reply_promise(), bytes(16)).prop_map(|(reply, status_field)| StatusRequest { reply, status_field });
    global_config_refresh_request_roundtrips: GlobalConfigRefreshRequest <- global_config_refresh_request();
    get_read_version_request_roundtrips: GetReadVersionRequest <- get_read_version_request();
    commit_transaction_request_roundtrips: CommitTransactionRequest <- commit_transaction_request();
    get_key_server_locations_request_roundtrips: GetKeyServerLocationsRequest <- get_key_server_locations_request();
    get_value_request_roundtrips: GetValueRequest <- get_value_request();
    get_key_request_roundtrips: GetKeyRequest <- get_key_request();
    get_key_values_request_roundtrips: GetKeyValuesRequest <- get_key_values_request();
    watch_value_request_roundtrips: WatchValueRequest <- watch_value_request();
    wait_metrics_request_roundtrips: WaitMetricsRequest <- wait_metrics_request();
    split_range_request_roundtrips: SplitRangeRequest <- split_range_request();
    leader_reply_roundtrips: Leader <- leader_reply();
}

reply_tests! {
    client_db_info_roundtrips: ClientDBInfo <- client_db_info();
    protocol_info_reply_roundtrips: ProtocolInfoReply <- any::<u64>().prop_map(|version| ProtocolInfoReply { version });
    status_reply_roundtrips: StatusReply <- bytes(2000).prop_map(|status_str| StatusReply { status_str });
    void_roundtrips: Void <- Just(Void {});
    global_config_refresh_reply_roundtrips: GlobalConfigRefreshReply <- global_config_refresh_reply();
    get_read_version_reply_roundtrips: GetReadVersionReply <- get_read_version_reply();
    commit_id_roundtrips: CommitID <- commit_id();
    get_key_server_locations_reply_roundtrips: GetKeyServerLocationsReply <- get_key_server_locations_reply();
    get_value_reply_roundtrips: GetValueReply <- get_value_reply();
    get_key_reply_roundtrips: GetKeyReply <- get_key_reply();
    get_key_values_reply_roundtrips: GetKeyValuesReply <- get_key_values_reply();
    watch_value_reply_roundtrips: WatchValueReply <- watch_value_reply();
    storage_metrics_roundtrips: StorageMetrics <- storage_metrics();
    split_range_reply_roundtrips: SplitRangeReply <- split_range_reply();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The normalizations themselves: a single-key range and a single-key clear are
    /// compressed on the wire, and come back whole.
    #[test]
    fn single_key_ranges_and_clears_roundtrip(k in key(), rest in vec(key_range(), 0..3)) {
        let mut ranges = vec![KeyRange::single_key(&k)];
        ranges.extend(rest);
        let clear = MutationRef::new(mutation_type::CLEAR_RANGE, k.clone(), KeyRange::single_key(&k).end);
        let m = CommitTransactionRequest {
            transaction: CommitTransactionRef {
                read_conflict_ranges: ranges.clone(),
                write_conflict_ranges: ranges,
                mutations: vec![clear],
                ..Default::default()
            },
            ..Default::default()
        };
        check(AnyMessage::CommitTransactionRequest(m), &[], &[])?;
    }

    /// Hostile bytes under every known file identifier never panic.
    #[test]
    fn arbitrary_bytes_under_known_identifiers_never_panic(
        which in 0usize..31,
        mut buf in vec(any::<u8>(), 8..400),
    ) {
        let ids = known_identifiers();
        buf[4..8].copy_from_slice(&ids[which % ids.len()].to_le_bytes());
        let _ = decode_any(&Bytes::from(buf));
    }
}

fn known_identifiers() -> Vec<u32> {
    let mut v = vec![
        OpenDatabaseCoordRequest::FILE_IDENTIFIER,
        GetLeaderRequest::FILE_IDENTIFIER,
        ProtocolInfoRequest::FILE_IDENTIFIER,
        PingRequest::FILE_IDENTIFIER,
        StatusRequest::FILE_IDENTIFIER,
        GlobalConfigRefreshRequest::FILE_IDENTIFIER,
        GetReadVersionRequest::FILE_IDENTIFIER,
        CommitTransactionRequest::FILE_IDENTIFIER,
        GetKeyServerLocationsRequest::FILE_IDENTIFIER,
        GetValueRequest::FILE_IDENTIFIER,
        GetKeyRequest::FILE_IDENTIFIER,
        GetKeyValuesRequest::FILE_IDENTIFIER,
        WatchValueRequest::FILE_IDENTIFIER,
        WaitMetricsRequest::FILE_IDENTIFIER,
        SplitRangeRequest::FILE_IDENTIFIER,
        LEADER_REPLY_FILE_IDENTIFIER,
    ];
    v.extend(
        [
            ClientDBInfo::FILE_IDENTIFIER,
            ProtocolInfoReply::FILE_IDENTIFIER,
            StatusReply::FILE_IDENTIFIER,
            <Void as Message>::FILE_IDENTIFIER,
            GlobalConfigRefreshReply::FILE_IDENTIFIER,
            GetReadVersionReply::FILE_IDENTIFIER,
            CommitID::FILE_IDENTIFIER,
            GetKeyServerLocationsReply::FILE_IDENTIFIER,
            GetValueReply::FILE_IDENTIFIER,
            GetKeyReply::FILE_IDENTIFIER,
            GetKeyValuesReply::FILE_IDENTIFIER,
            WatchValueReply::FILE_IDENTIFIER,
            StorageMetrics::FILE_IDENTIFIER,
            SplitRangeReply::FILE_IDENTIFIER,
        ]
        .map(fid::reply),
    );
    v
}

#[test]
fn inverted_key_range_is_a_decode_error() {
    // Not a strategy normalization but the documented behaviour the strategies avoid.
    let m = AnyMessage::CommitTransactionRequest(CommitTransactionRequest {
        transaction: CommitTransactionRef {
            read_conflict_ranges: vec![KeyRange::new(&b"b"[..], &b"a"[..])],
            ..Default::default()
        },
        ..Default::default()
    });
    assert!(decode_any(&Bytes::from(m.encode())).is_err());
}

// ---------------------------------------------------------------------------------------------
// Hostile input: tables shared by many vector elements.
// ---------------------------------------------------------------------------------------------

/// A member that saves as an offset to a table already written: lets one message point many
/// vector elements at the same subtable, as a hostile peer can.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Shared(u32);

impl Fb for Shared {
    const LAYOUT: Layout = Layout::Indirect;
    fn save(&self, _w: &mut Writer) -> Saved {
        Saved::Offset(self.0)
    }
    fn load(_r: Reader<'_>, _pos: usize) -> fdb_protocol::serializer::Result<Self> {
        Err(DecodeError::InvalidValue("encode-only test type"))
    }
}

fdb_protocol::fb_table! {
    /// `LocalityData` with its entries shared.
    struct LocalityMirror { data: Vec<Shared> }
}

fdb_protocol::fb_table! {
    /// `StorageServerInterface` with its locality shared.
    struct ServerMirror {
        unique_id: Uid,
        locality: Shared,
        get_value: RequestStream,
        tss_pair_id: Option<Uid>,
        accepting_requests: bool,
    }
}

fdb_protocol::fb_table! {
    /// `ShardLocation` with its servers shared.
    struct ShardMirror { range: KeyRange, servers: Vec<Shared> }
}

fdb_protocol::fb_table! {
    /// `GetKeyServerLocationsReply` with its shards shared.
    struct ReplyMirror { results: Vec<Shared>, tss: Vec<Shared>, tags: Vec<Shared> }
}

/// One locality entry, referenced `n` times by one locality, referenced by one server,
/// referenced `n` times by one shard, referenced `n` times by the reply.
#[derive(Clone, Debug, Default, PartialEq)]
struct Amplified(usize);

impl Fb for Amplified {
    const LAYOUT: Layout = Layout::Indirect;
    fn save(&self, w: &mut Writer) -> Saved {
        let n = self.0;
        let at = |s: Saved| match s {
            Saved::Offset(o) => Shared(o),
            _ => unreachable!("tables are saved out of line"),
        };
        let entry = at(LocalityEntry {
            key: Bytes::from_static(b"zoneid"),
            value: None,
        }
        .save(w));
        let locality = at(LocalityMirror {
            data: vec![entry; n],
        }
        .save(w));
        let server = at(ServerMirror {
            locality,
            ..Default::default()
        }
        .save(w));
        let shard = at(ShardMirror {
            range: KeyRange::default(),
            servers: vec![server; n],
        }
        .save(w));
        ReplyMirror {
            results: vec![shard; n],
            ..Default::default()
        }
        .save(w)
    }
    fn load(_r: Reader<'_>, _pos: usize) -> fdb_protocol::serializer::Result<Self> {
        Err(DecodeError::InvalidValue("encode-only test type"))
    }
    fn collect_vtables(c: &mut VtCollector) {
        // The mirrors have exactly the shapes of the real types.
        GetKeyServerLocationsReply::collect_vtables(c);
    }
}

/// Decoding must cost work and memory in proportion to the message. A 1,096-byte reply
/// whose vectors all point at one shared subtable would decode into 64^3 = 262,144
/// `LocalityEntry` values (16 MB of structs alone, ~15,000x); a 64 KB message would reach
/// ~10^11. Every offset is in bounds, so only a decode budget can refuse it. (FDB's C++
/// decoder amplifies the same way.)
#[test]
fn shared_subtables_do_not_amplify_decoding() {
    let n = 64;
    let msg = encode_with(
        &ErrorOr::Ok(Amplified(n)),
        fid::reply(GetKeyServerLocationsReply::FILE_IDENTIFIER),
    );
    // The decoder's budget (one unit per table, string or element, as many units as the
    // message has bytes) refuses it instead of allocating n^3 values.
    assert_eq!(
        decode_reply::<GetKeyServerLocationsReply>(&Bytes::from(msg.clone())),
        Err(DecodeError::TooComplex),
        "{} message bytes must not decode into {} locality entries",
        msg.len(),
        n * n * n
    );
    // A small n stays within budget and decodes normally: the budget does not refuse honest
    // sharing-free messages of the same shape.
    let small = encode_with(
        &ErrorOr::Ok(Amplified(1)),
        fid::reply(GetKeyServerLocationsReply::FILE_IDENTIFIER),
    );
    assert!(decode_reply::<GetKeyServerLocationsReply>(&Bytes::from(small)).is_ok());
}
