//! The workloads (one transaction each), their key space, and the wire sizes the `floor` arm
//! replays.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use fdb_protocol::framing::encode_packet;
use fdb_protocol::messages::commit::{
    mutation_type, CommitID, CommitTransactionRef, CommitTransactionRequest, MutationRef,
};
use fdb_protocol::messages::grv::{GetReadVersionReply, GetReadVersionRequest};
use fdb_protocol::messages::storage::{
    GetKeyValuesReply, GetKeyValuesRequest, GetValueReply, GetValueRequest, KeyValueBlob,
};
use fdb_protocol::messages::types::{KeyRange, KeySelector, KeyValue, VersionVector};
use fdb_protocol::messages::{encode_reply, ErrorOr, ReplyPromise};
use fdb_protocol::serializer::encode;
use fdb_protocol::Uid;

/// One benchmark workload; each iteration is one transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Workload {
    /// A read version only.
    Grv,
    /// One get of a key holding a 100-byte value.
    Get100,
    /// One get of a key holding a 1000-byte value.
    Get1000,
    /// One get_range of 100 keys with 100-byte values.
    Range100,
    /// Read version, one set of a 100-byte value, commit.
    Set100,
    /// Read version, 50 sets of 100-byte values, one commit.
    BatchSet50,
    /// Read version, 50 sets of 1000-byte values, one commit.
    BatchSet50x1000,
    /// Cost growth: one get_range of this many rows (100-byte values), `rangeN`.
    RangeRows(u32),
    /// Cost growth: read version, this many sets of 100-byte values, one commit, `batchsetN`.
    BatchSets(u32),
}

/// What a workload does, in terms every arm can implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Grv,
    Get { value_len: usize },
    Range { rows: usize, value_len: usize },
    Sets { count: usize, value_len: usize },
}

impl Workload {
    pub const ALL: [Workload; 7] = [
        Workload::Grv,
        Workload::Get100,
        Workload::Get1000,
        Workload::Range100,
        Workload::Set100,
        Workload::BatchSet50,
        Workload::BatchSet50x1000,
    ];

    pub fn name(self) -> String {
        match self {
            Workload::RangeRows(n) => format!("range{n}"),
            Workload::BatchSets(n) => format!("batchset{n}"),
            w => w.fixed_name().to_string(),
        }
    }

    fn fixed_name(self) -> &'static str {
        match self {
            Workload::RangeRows(_) | Workload::BatchSets(_) => "",
            Workload::Grv => "grv",
            Workload::Get100 => "get100",
            Workload::Get1000 => "get1000",
            Workload::Range100 => "range100",
            Workload::Set100 => "set100",
            Workload::BatchSet50 => "batchset50",
            Workload::BatchSet50x1000 => "batchset50x1000",
        }
    }

    /// One of [`Workload::ALL`] by name, or a cost-growth size: `rangeN` (1 ≤ N ≤
    /// [`MAX_RANGE_ROWS`]) or `batchsetN` (1 ≤ N ≤ [`WRITE_KEYS_PER_WORKER`]).
    pub fn parse(s: &str) -> Option<Workload> {
        if let Some(w) = Workload::ALL.into_iter().find(|w| w.name() == s) {
            return Some(w);
        }
        let num = |rest: &str| -> Option<u32> {
            (!rest.starts_with('0'))
                .then(|| rest.parse().ok())
                .flatten()
        };
        if let Some(n) = s.strip_prefix("range").and_then(num) {
            return (1..=MAX_RANGE_ROWS as u32)
                .contains(&n)
                .then_some(Workload::RangeRows(n));
        }
        if let Some(n) = s.strip_prefix("batchset").and_then(num) {
            return (1..=WRITE_KEYS_PER_WORKER as u32)
                .contains(&n)
                .then_some(Workload::BatchSets(n));
        }
        None
    }

    /// A number for seeding: the position in [`Workload::ALL`] for those (as before the
    /// sized workloads existed), a distinct number for each size.
    pub fn seed_id(self) -> u64 {
        match self {
            Workload::RangeRows(n) => 1_000_000 + u64::from(n),
            Workload::BatchSets(n) => 2_000_000 + u64::from(n),
            w => Workload::ALL.iter().position(|&x| x == w).unwrap_or(0) as u64,
        }
    }

    /// Rows of the range key space this workload reads (0 for the others).
    pub fn range_rows(self) -> usize {
        match self.op() {
            Op::Range { rows, .. } => rows,
            _ => 0,
        }
    }

    pub fn op(self) -> Op {
        match self {
            Workload::Grv => Op::Grv,
            Workload::Get100 => Op::Get { value_len: 100 },
            Workload::Get1000 => Op::Get { value_len: 1000 },
            Workload::Range100 => Op::Range {
                rows: RANGE_ROWS,
                value_len: 100,
            },
            Workload::Set100 => Op::Sets {
                count: 1,
                value_len: 100,
            },
            Workload::BatchSet50 => Op::Sets {
                count: 50,
                value_len: 100,
            },
            Workload::BatchSet50x1000 => Op::Sets {
                count: 50,
                value_len: 1000,
            },
            Workload::RangeRows(n) => Op::Range {
                rows: n as usize,
                value_len: 100,
            },
            Workload::BatchSets(n) => Op::Sets {
                count: n as usize,
                value_len: 100,
            },
        }
    }

    /// Whether the workload needs data on the cluster (everything but `grv`).
    pub fn needs_data(self) -> bool {
        self != Workload::Grv
    }
}

/// Keys per read key space (`get100`, `get1000`).
pub const READ_KEYS: usize = 1000;
/// Rows of the `range100` key space (the whole space is read each time).
pub const RANGE_ROWS: usize = 100;
/// The largest `rangeN`.
pub const MAX_RANGE_ROWS: usize = 10_000;
/// Distinct keys each worker cycles through when writing.
pub const WRITE_KEYS_PER_WORKER: usize = 1000;

/// Every key and value the workloads touch, built once so that no transaction allocates in
/// the harness itself.
pub struct KeySet {
    pub read100: Vec<Vec<u8>>,
    pub read1000: Vec<Vec<u8>>,
    pub range_keys: Vec<Vec<u8>>,
    pub range_begin: Vec<u8>,
    pub range_end: Vec<u8>,
    pub value100: Vec<u8>,
    pub value1000: Vec<u8>,
    /// `write[worker][i]`.
    pub write: Vec<Vec<Vec<u8>>>,
}

impl KeySet {
    /// Every key the benchmark reads or writes is in `[begin, end)`.
    pub const PREFIX_RANGE: (&'static [u8], &'static [u8]) = (b"fdb-bench/", b"fdb-bench0");

    /// Keys for `max_workers` writers and a range space of `range_rows` rows (at least
    /// [`RANGE_ROWS`]; a `rangeN` read takes the first N).
    pub fn new(max_workers: usize, range_rows: usize) -> Arc<KeySet> {
        let read = |space: &str| -> Vec<Vec<u8>> {
            (0..READ_KEYS)
                .map(|i| format!("fdb-bench/{space}/{i:06}").into_bytes())
                .collect()
        };
        let range_keys = (0..range_rows.max(RANGE_ROWS))
            .map(|i| format!("fdb-bench/range/{i:06}").into_bytes())
            .collect();
        let write = (0..max_workers)
            .map(|w| {
                (0..WRITE_KEYS_PER_WORKER)
                    .map(|i| format!("fdb-bench/write/{w:03}/{i:06}").into_bytes())
                    .collect()
            })
            .collect();
        let value = |n: usize| -> Vec<u8> { (0..n).map(|i| b'a' + (i % 26) as u8).collect() };
        Arc::new(KeySet {
            read100: read("v100"),
            read1000: read("v1000"),
            range_keys,
            range_begin: b"fdb-bench/range/".to_vec(),
            range_end: b"fdb-bench/range0".to_vec(),
            value100: value(100),
            value1000: value(1000),
            write,
        })
    }

    /// The read keys of a `get` workload with values of `value_len` bytes.
    pub fn read_keys(&self, value_len: usize) -> &[Vec<u8>] {
        if value_len >= 1000 {
            &self.read1000
        } else {
            &self.read100
        }
    }

    pub fn value(&self, value_len: usize) -> &[u8] {
        if value_len >= 1000 {
            &self.value1000
        } else {
            &self.value100
        }
    }

    /// Every `(key, value)` the read workloads expect to find.
    pub fn population(&self) -> Vec<(&[u8], &[u8])> {
        let mut v: Vec<(&[u8], &[u8])> = Vec::new();
        v.extend(self.read100.iter().map(|k| (&k[..], &self.value100[..])));
        v.extend(self.read1000.iter().map(|k| (&k[..], &self.value1000[..])));
        v.extend(self.range_keys.iter().map(|k| (&k[..], &self.value100[..])));
        v
    }

    /// The `count` keys worker `worker` writes in its `seq`-th transaction.
    pub fn write_keys(&self, worker: usize, seq: u64, count: usize) -> impl Iterator<Item = &[u8]> {
        let keys = &self.write[worker % self.write.len()];
        let start = (seq as usize).wrapping_mul(count);
        (0..count).map(move |j| &keys[(start + j) % keys.len()][..])
    }
}

/// A small deterministic RNG (SplitMix64) for key choice and the bootstrap.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// One request/reply exchange of the floor arm: bytes sent, bytes received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    pub request: usize,
    pub reply: usize,
}

fn packet(token: Uid, message: &[u8]) -> usize {
    let mut b = BytesMut::new();
    encode_packet(&mut b, token, message, true);
    b.len()
}

/// The steady-state wire exchanges of one transaction of `w`, measured by encoding the real
/// FDB 7.3 messages this client sends and the replies it gets (packet framing and checksum
/// included). Location lookups are cached after warmup and so are not part of it.
pub fn wire_exchanges(w: Workload, keys: &KeySet) -> Vec<Exchange> {
    let token = Uid::new(0x0123_4567_89ab_cdef, 0x0fed_cba9_8765_4321);
    let reply = ReplyPromise { token };
    let grv = Exchange {
        request: packet(
            token,
            &encode(&GetReadVersionRequest {
                transaction_count: 1,
                flags: GetReadVersionRequest::PRIORITY_DEFAULT,
                reply: reply.clone(),
                max_version: -1,
                ..Default::default()
            }),
        ),
        reply: packet(
            token,
            &encode_reply(&ErrorOr::Ok(GetReadVersionReply {
                version: 1_234_567_890,
                ss_version_vector_delta: VersionVector::empty(-1),
                proxy_id: token,
                ..Default::default()
            })),
        ),
    };
    let version = 1_234_567_890;
    match w.op() {
        Op::Grv => vec![grv],
        Op::Get { value_len } => {
            let key = Bytes::copy_from_slice(&keys.read_keys(value_len)[0]);
            let req = GetValueRequest {
                key,
                version,
                reply: reply.clone(),
                ..Default::default()
            };
            let rep = GetValueReply {
                value: Some(Bytes::copy_from_slice(keys.value(value_len))),
                ..Default::default()
            };
            vec![
                grv,
                Exchange {
                    request: packet(token, &encode(&req)),
                    reply: packet(token, &encode_reply(&ErrorOr::Ok(rep))),
                },
            ]
        }
        Op::Range { rows, value_len } => {
            let req = GetKeyValuesRequest {
                begin: KeySelector::first_greater_or_equal(Bytes::copy_from_slice(
                    &keys.range_begin,
                )),
                end: KeySelector::first_greater_or_equal(Bytes::copy_from_slice(&keys.range_end)),
                version,
                limit: rows as i32,
                limit_bytes: 80_000,
                reply: reply.clone(),
                ..Default::default()
            };
            let data = keys.range_keys[..rows]
                .iter()
                .map(|k| KeyValue {
                    key: Bytes::copy_from_slice(k),
                    value: Bytes::copy_from_slice(keys.value(value_len)),
                })
                .collect();
            let rep = GetKeyValuesReply {
                data: KeyValueBlob(data),
                version,
                ..Default::default()
            };
            vec![
                grv,
                Exchange {
                    request: packet(token, &encode(&req)),
                    reply: packet(token, &encode_reply(&ErrorOr::Ok(rep))),
                },
            ]
        }
        Op::Sets { count, value_len } => {
            let mut mutations = Vec::new();
            let mut writes = Vec::new();
            for k in keys.write_keys(0, 0, count) {
                mutations.push(MutationRef::new(
                    mutation_type::SET_VALUE,
                    Bytes::copy_from_slice(k),
                    Bytes::copy_from_slice(keys.value(value_len)),
                ));
                writes.push(KeyRange::single_key(k));
            }
            // Nothing read conflicts with these writes, so both clients add a random
            // self-conflicting key to both conflict lists (FDB's `makeSelfConflicting`):
            // `\xff/SC/` and a 16-byte UID.
            let mut sc = b"\xff/SC/".to_vec();
            sc.extend_from_slice(&token.to_bytes());
            let sc = KeyRange::single_key(&sc);
            writes.push(sc.clone());
            let req = CommitTransactionRequest {
                transaction: CommitTransactionRef {
                    read_conflict_ranges: vec![sc],
                    write_conflict_ranges: writes,
                    mutations,
                    read_snapshot: version,
                    ..Default::default()
                },
                reply,
                ..Default::default()
            };
            let rep = CommitID {
                version: version + 1,
                ..Default::default()
            };
            vec![
                grv,
                Exchange {
                    request: packet(token, &encode(&req)),
                    reply: packet(token, &encode_reply(&ErrorOr::Ok(rep))),
                },
            ]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for w in Workload::ALL {
            assert_eq!(Workload::parse(&w.name()), Some(w));
        }
        assert_eq!(Workload::parse("nope"), None);
        assert_eq!(Workload::parse("range100"), Some(Workload::Range100));
        assert_eq!(Workload::parse("batchset50"), Some(Workload::BatchSet50));
        assert_eq!(
            Workload::parse("range10000"),
            Some(Workload::RangeRows(10_000))
        );
        assert_eq!(
            Workload::parse("batchset1000"),
            Some(Workload::BatchSets(1000))
        );
        for bad in [
            "range0",
            "range10001",
            "range010",
            "batchset1001",
            "batchset",
            "range-1",
        ] {
            assert_eq!(Workload::parse(bad), None, "{bad}");
        }
        let w = Workload::parse("range1000").unwrap();
        assert_eq!(Workload::parse(&w.name()), Some(w));
        assert_eq!(w.range_rows(), 1000);
    }

    #[test]
    fn wire_sizes_grow_with_payload() {
        let keys = KeySet::new(2, 0);
        let size = |w| -> usize {
            wire_exchanges(w, &keys)
                .iter()
                .map(|e| e.request + e.reply)
                .sum()
        };
        assert_eq!(wire_exchanges(Workload::Grv, &keys).len(), 1);
        assert!(size(Workload::Get1000) > size(Workload::Get100) + 850);
        assert!(size(Workload::Range100) > 100 * 100);
        assert!(size(Workload::BatchSet50) > 50 * 100);
        assert!(size(Workload::BatchSet50x1000) > 50 * 1000);
    }

    /// The floor replays what the clients really send. Frame sizes (length, checksum, token,
    /// message) seen on a real 7.3.77 cluster, identical for libfdb_c, rust-tokio and
    /// rust-mio (BENCHMARKS.md, "Same work on the wire"): requests exactly; replies as
    /// fdbserver lays them out, which for `GetValueReply` and `CommitID` is 8 bytes more than
    /// this crate's (equally valid) encoding of the same fields.
    #[test]
    fn floor_sizes_are_the_real_clusters() {
        let keys = KeySet::new(1, 0);
        let real: [(Workload, &[(usize, usize)]); 7] = [
            (Workload::Grv, &[(196, 204)]),
            (Workload::Get100, &[(196, 204), (292, 220)]),
            (Workload::Get1000, &[(196, 204), (292, 1116)]),
            (Workload::Range100, &[(196, 204), (364, 13124)]),
            (Workload::Set100, &[(196, 204), (644, 116)]),
            (Workload::BatchSet50, &[(196, 204), (10636, 116)]),
            (Workload::BatchSet50x1000, &[(196, 204), (55636, 116)]),
        ];
        for (w, exchanges) in real {
            let ours = wire_exchanges(w, &keys);
            assert_eq!(ours.len(), exchanges.len(), "{w:?}");
            for (i, (o, &(req, rep))) in ours.iter().zip(exchanges).enumerate() {
                assert_eq!(o.request, req, "{w:?} exchange {i}: request");
                let layout = if i == 1 && !matches!(w, Workload::Range100) {
                    8
                } else {
                    0
                };
                assert_eq!(o.reply + layout, rep, "{w:?} exchange {i}: reply");
            }
        }
    }

    #[test]
    fn write_keys_cycle_within_the_worker() {
        let keys = KeySet::new(2, 0);
        let a: Vec<&[u8]> = keys.write_keys(1, 3, 50).collect();
        assert_eq!(a.len(), 50);
        assert!(a.iter().all(|k| k.starts_with(b"fdb-bench/write/001/")));
        assert!(keys
            .range_keys
            .iter()
            .all(|k| k.as_slice() >= keys.range_begin.as_slice()
                && k.as_slice() < keys.range_end.as_slice()));
        let (b, e) = KeySet::PREFIX_RANGE;
        let inside = |k: &[u8]| k >= b && k < e;
        assert!(keys.population().iter().all(|(k, _)| inside(k)));
        assert!(keys.write.iter().flatten().all(|k| inside(k)));
    }

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..1000 {
            let x = a.below(10);
            assert_eq!(x, b.below(10));
            assert!(x < 10);
        }
    }
}
