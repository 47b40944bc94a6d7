//! Cluster metrics a client asks the proxies for, behind the special keys
//! `\xff\xff/metrics/data_distribution_stats/` and `\xff\xff/metrics/health/`
//! (`fdbclient/include/fdbclient/CommitProxyInterface.h`, `FDBTypes.h`).
//!
//! * `GetDDMetricsRequest` goes to a commit proxy's `getDDMetrics` stream
//!   ([`CommitProxyInterface::GET_DD_METRICS`](super::coordination::CommitProxyInterface::GET_DD_METRICS)),
//!   which asks the data distributor (`dd_not_found` without one). It answers with one
//!   [`DDMetricsRef`] per shard whose begin key lies in `keys`, at most `shard_limit`.
//! * `GetHealthMetricsRequest` goes to a GRV proxy's `getHealthMetrics` stream
//!   ([`GrvProxyInterface::GET_HEALTH_METRICS`](super::coordination::GrvProxyInterface::GET_HEALTH_METRICS)).
//!   Its reply is not an ObjectSerializer table inside: the ratekeeper's [`HealthMetrics`]
//!   travel as a `BinaryWriter` blob (an 8-byte protocol version, then the fields in
//!   little-endian order), which [`HealthMetrics::decode`] reads.
//!
//! Field lists here that look alike, within this file or across files, are separate FDB
//! wire definitions (each its C++ `serializer` call, see [`super`]): one changes without
//! the other, so they stay apart.

use alloc::vec::Vec;
use bytes::Bytes;

use super::common::ReplyPromise;
use super::types::KeyRange;
use crate::serializer::DecodeError;
use crate::uid::Uid;

crate::serializer::fb_message! {
    /// Asks for the data distributor's metrics of the shards beginning in `keys`.
    pub struct GetDDMetricsRequest = 14536812; {
        pub keys: KeyRange,
        pub shard_limit: i32,
        pub reply: ReplyPromise,
    }
}

crate::serializer::fb_table! {
    /// One shard's metrics. The wire order puts `begin_key` between the two numbers.
    pub struct DDMetricsRef {
        pub shard_bytes: i64,
        pub begin_key: Bytes,
        pub shard_bytes_per_ksecond: i64,
    }
}

crate::serializer::fb_message! {
    /// The answer to [`GetDDMetricsRequest`], shards in key order.
    pub struct GetDDMetricsReply = 7277713; {
        pub storage_metrics_list: Vec<DDMetricsRef>,
    }
}

crate::serializer::fb_message! {
    /// Asks a GRV proxy for the cluster's health; `detailed` adds every storage server's and
    /// log's own figures.
    pub struct GetHealthMetricsRequest = 11403900; {
        pub reply: ReplyPromise,
        pub detailed: bool,
    }
}

crate::serializer::fb_message! {
    /// The answer to [`GetHealthMetricsRequest`]: [`HealthMetrics`] as a `BinaryWriter`
    /// blob (see [`HealthMetrics::decode`]).
    pub struct GetHealthMetricsReply = 11544290; {
        pub serialized: Bytes,
    }
}

/// One storage server's figures in [`HealthMetrics`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StorageStats {
    /// Bytes in its queue (not yet durable).
    pub storage_queue: i64,
    /// Versions between its newest and its durable version.
    pub storage_durability_lag: i64,
    /// Its disk busyness.
    pub disk_usage: f64,
    /// Its CPU use.
    pub cpu_usage: f64,
}

/// The ratekeeper's view of the cluster's health (`HealthMetrics`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HealthMetrics {
    /// The longest storage queue, in bytes.
    pub worst_storage_queue: i64,
    /// The storage queue the ratekeeper limits by.
    pub limiting_storage_queue: i64,
    /// The largest storage durability lag, in versions.
    pub worst_storage_durability_lag: i64,
    /// The durability lag the ratekeeper limits by.
    pub limiting_storage_durability_lag: i64,
    /// The longest log queue, in bytes.
    pub worst_tlog_queue: i64,
    /// The transaction rate the ratekeeper allows.
    pub tps_limit: f64,
    /// Whether batch-priority transactions are throttled.
    pub batch_limited: bool,
    /// By storage server id, in id order (a `std::map`).
    pub storage_stats: Vec<(Uid, StorageStats)>,
    /// Each log's queue bytes by log id, in id order.
    pub tlog_queue: Vec<(Uid, i64)>,
}

/// Reads a `BinaryWriter` blob front to back.
struct Binary<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Binary<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        let out = self
            .pos
            .checked_add(len)
            .and_then(|end| self.buf.get(self.pos..end))
            .ok_or(DecodeError::OutOfBounds { pos: self.pos, len })?;
        self.pos += len;
        Ok(out)
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(self.u64()? as i64)
    }
    fn f64(&mut self) -> Result<f64, DecodeError> {
        Ok(f64::from_bits(self.u64()?))
    }
    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.take(1)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::InvalidValue("HealthMetrics::batchLimited")),
        }
    }
    fn uid(&mut self) -> Result<Uid, DecodeError> {
        Ok(Uid::new(self.u64()?, self.u64()?))
    }
    /// A `std::map`'s size (an `int`), checked against what is left: each entry takes at
    /// least `entry` bytes.
    fn count(&mut self, entry: usize) -> Result<usize, DecodeError> {
        let b = self.take(4)?;
        let n = i32::from_le_bytes(b.try_into().expect("4 bytes"));
        let left = self.buf.len() - self.pos;
        match usize::try_from(n) {
            Ok(n) if n.saturating_mul(entry) <= left => Ok(n),
            _ => Err(DecodeError::LengthTooLarge { len: n as u32 }),
        }
    }
}

/// The first protocol version a `BinaryWriter` blob can carry (`ProtocolVersion::isValid`:
/// at least `minValidProtocolVersion`, 6.2's `0x0FDB00A200060001`).
const MIN_VALID_PROTOCOL_VERSION: u64 = 0x0FDB_00A2_0006_0001;

impl HealthMetrics {
    /// Decodes the `serialized` blob of a [`GetHealthMetricsReply`]: the protocol version
    /// (`IncludeVersion`), then `worstStorageQueue`, `worstStorageDurabilityLag`,
    /// `worstTLogQueue`, `tpsLimit`, `batchLimited`, the storage map, the log map,
    /// `limitingStorageQueue`, `limitingStorageDurabilityLag`. A map is an `int` count, then
    /// its pairs. Bytes after the last field are ignored, as `BinaryReader` does.
    pub fn decode(blob: &[u8]) -> Result<HealthMetrics, DecodeError> {
        let mut r = Binary { buf: blob, pos: 0 };
        // `ProtocolVersion::version()`: the flag bits in the top nibble do not count.
        if r.u64()? & 0x0FFF_FFFF_FFFF_FFFF < MIN_VALID_PROTOCOL_VERSION {
            return Err(DecodeError::InvalidValue("HealthMetrics protocol version"));
        }
        let mut m = HealthMetrics {
            worst_storage_queue: r.i64()?,
            worst_storage_durability_lag: r.i64()?,
            worst_tlog_queue: r.i64()?,
            tps_limit: r.f64()?,
            batch_limited: r.bool()?,
            ..HealthMetrics::default()
        };
        let n = r.count(48)?;
        for _ in 0..n {
            let id = r.uid()?;
            let stats = StorageStats {
                storage_queue: r.i64()?,
                storage_durability_lag: r.i64()?,
                disk_usage: r.f64()?,
                cpu_usage: r.f64()?,
            };
            m.storage_stats.push((id, stats));
        }
        let n = r.count(24)?;
        for _ in 0..n {
            let id = r.uid()?;
            m.tlog_queue.push((id, r.i64()?));
        }
        m.limiting_storage_queue = r.i64()?;
        m.limiting_storage_durability_lag = r.i64()?;
        Ok(m)
    }

    /// The blob [`HealthMetrics::decode`] reads, under protocol version `version` (what a
    /// GRV proxy sends; the test cluster answers with it).
    pub fn encode(&self, version: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            61 + 48 * self.storage_stats.len() + 24 * self.tlog_queue.len() + 16,
        );
        let u64s = |out: &mut Vec<u8>, vs: &[u64]| {
            for v in vs {
                out.extend_from_slice(&v.to_le_bytes());
            }
        };
        u64s(
            &mut out,
            &[
                version,
                self.worst_storage_queue as u64,
                self.worst_storage_durability_lag as u64,
                self.worst_tlog_queue as u64,
                self.tps_limit.to_bits(),
            ],
        );
        out.push(u8::from(self.batch_limited));
        out.extend_from_slice(&(self.storage_stats.len() as i32).to_le_bytes());
        for (id, s) in &self.storage_stats {
            u64s(
                &mut out,
                &[
                    id.first,
                    id.second,
                    s.storage_queue as u64,
                    s.storage_durability_lag as u64,
                    s.disk_usage.to_bits(),
                    s.cpu_usage.to_bits(),
                ],
            );
        }
        out.extend_from_slice(&(self.tlog_queue.len() as i32).to_le_bytes());
        for (id, q) in &self.tlog_queue {
            u64s(&mut out, &[id.first, id.second, *q as u64]);
        }
        u64s(
            &mut out,
            &[
                self.limiting_storage_queue as u64,
                self.limiting_storage_durability_lag as u64,
            ],
        );
        out
    }
}

/// Health metrics as a 7.3 cluster reported them, for the tests of their decoding and of
/// the special keys that show them.
#[cfg(test)]
pub(crate) fn sample_health() -> HealthMetrics {
    HealthMetrics {
        worst_storage_queue: 2018,
        limiting_storage_queue: 2000,
        worst_storage_durability_lag: 5_000_000,
        limiting_storage_durability_lag: 4_000_000,
        worst_tlog_queue: 258,
        tps_limit: 507561.17099314946,
        batch_limited: true,
        storage_stats: alloc::vec![(
            Uid::new(0x3532_35af_d43f_c358, 0x3d50_fa4b_7ca9_8773),
            StorageStats {
                storage_queue: 2020,
                storage_durability_lag: 5_000_000,
                disk_usage: 0.559_985_714_323_170_8,
                cpu_usage: 2.2116835782091884,
            },
        )],
        tlog_queue: alloc::vec![(Uid::new(1, 2), 258), (Uid::new(3, 4), 4804)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{decode_reply, encode_reply, ErrorOr};
    use crate::serializer::{decode_root, encode_with, Message};

    const V73: u64 = 0x0FDB_00B0_7300_0000;

    #[test]
    fn health_metrics_round_trip_through_the_reply() {
        let m = sample_health();
        let reply = GetHealthMetricsReply {
            serialized: Bytes::from(m.encode(V73)),
        };
        let wire = Bytes::from(encode_reply(&ErrorOr::Ok(reply)));
        let Ok(ErrorOr::Ok(back)) = decode_reply::<GetHealthMetricsReply>(&wire) else {
            panic!("the reply decodes");
        };
        assert_eq!(HealthMetrics::decode(&back.serialized), Ok(m));
    }

    #[test]
    fn health_metrics_blob_layout() {
        let m = HealthMetrics {
            worst_storage_queue: 1,
            batch_limited: true,
            limiting_storage_durability_lag: 9,
            ..HealthMetrics::default()
        };
        let blob = m.encode(V73);
        // version, 3 × i64, f64, bool, 2 × empty map, 2 × i64.
        assert_eq!(blob.len(), 8 + 24 + 8 + 1 + 4 + 4 + 16);
        assert_eq!(&blob[..8], &V73.to_le_bytes());
        assert_eq!(&blob[8..16], &1i64.to_le_bytes());
        assert_eq!(blob[40], 1);
        assert_eq!(&blob[blob.len() - 8..], &9i64.to_le_bytes());
    }

    #[test]
    fn bad_health_blobs_are_typed_errors() {
        let blob = sample_health().encode(V73);
        for cut in 0..blob.len() {
            assert!(
                matches!(
                    HealthMetrics::decode(&blob[..cut]),
                    Err(DecodeError::OutOfBounds { .. } | DecodeError::LengthTooLarge { .. })
                ),
                "cut at {cut}"
            );
        }
        let mut bad = blob.clone();
        bad[40] = 7;
        assert_eq!(
            HealthMetrics::decode(&bad),
            Err(DecodeError::InvalidValue("HealthMetrics::batchLimited"))
        );
        let mut huge = blob.clone();
        huge[41..45].copy_from_slice(&i32::MAX.to_le_bytes());
        assert!(matches!(
            HealthMetrics::decode(&huge),
            Err(DecodeError::LengthTooLarge { .. })
        ));
        let mut negative = blob.clone();
        negative[41..45].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(HealthMetrics::decode(&negative).is_err());
        let mut old = blob;
        old[..8].copy_from_slice(&1u64.to_le_bytes());
        assert!(matches!(
            HealthMetrics::decode(&old),
            Err(DecodeError::InvalidValue(_))
        ));
    }

    #[test]
    fn dd_metrics_round_trip() {
        let req = GetDDMetricsRequest {
            keys: KeyRange::new(Bytes::new(), Bytes::from_static(b"\xff\xff")),
            shard_limit: 1_000_000,
            reply: ReplyPromise {
                token: Uid::new(5, 6),
            },
        };
        let wire = Bytes::from(encode_with(&req, GetDDMetricsRequest::FILE_IDENTIFIER));
        assert_eq!(decode_root::<GetDDMetricsRequest>(&wire), Ok(req));
        let reply = GetDDMetricsReply {
            storage_metrics_list: alloc::vec![
                DDMetricsRef {
                    shard_bytes: 10,
                    begin_key: Bytes::new(),
                    shard_bytes_per_ksecond: 3,
                },
                DDMetricsRef {
                    shard_bytes: 0,
                    begin_key: Bytes::from_static(b"m"),
                    shard_bytes_per_ksecond: 0,
                },
            ],
        };
        let wire = Bytes::from(encode_reply(&ErrorOr::Ok(reply.clone())));
        assert_eq!(
            decode_reply::<GetDDMetricsReply>(&wire),
            Ok(ErrorOr::Ok(reply))
        );
    }

    #[test]
    fn health_request_round_trip() {
        let req = GetHealthMetricsRequest {
            reply: ReplyPromise {
                token: Uid::new(7, 8),
            },
            detailed: true,
        };
        let wire = Bytes::from(encode_with(&req, GetHealthMetricsRequest::FILE_IDENTIFIER));
        assert_eq!(decode_root::<GetHealthMetricsRequest>(&wire), Ok(req));
    }
}
