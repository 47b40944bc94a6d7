//! `get_estimated_range_size_bytes` and `get_range_split_points` against a scripted cluster
//! on the simulated network ([`crate::sim`]): the coordinator and the commit proxy answer at
//! once (locations from [`Cluster::shards`]), read versions are counted and never answered,
//! and storage requests wait for the test.

use super::*;
use crate::client::ClientConfig;
use crate::cluster_file::ClusterFile;
use crate::error::knobs;
use crate::event::Call;
use crate::messages::commit::{GetKeyServerLocationsReply, ShardLocation};
use crate::messages::coordination::ClientDBInfo;
use crate::messages::{encode_reply, AnyMessage};
use crate::sim::{Request, Server, Sim, Wire};
use crate::uid::Uid;

use crate::sim::loopback_stream as stream;

/// The keys a storage request asks about.
fn keys_of(r: &Request) -> (&[u8], &[u8]) {
    let k = match &r.msg {
        AnyMessage::WaitMetricsRequest(r) => &r.keys,
        AnyMessage::SplitRangeRequest(r) => &r.keys,
        m => panic!("not a storage request: {m:?}"),
    };
    (&k.begin, &k.end)
}

/// A scripted cluster: one coordinator, one GRV and one commit proxy, three storage servers.
struct Cluster {
    info: ClientDBInfo,
    servers: Vec<StorageServerInterface>,
    /// `(begin, end, servers)`: what location lookups answer.
    shards: Vec<(&'static [u8], &'static [u8], Vec<usize>)>,
    /// Every location lookup, in order.
    locations: Vec<GetKeyServerLocationsRequest>,
    /// Read versions asked for.
    grvs: usize,
}

impl Server for Cluster {
    fn serve(&mut self, wire: &mut Wire<'_>, req: Request) -> Option<Request> {
        match &req.msg {
            AnyMessage::OpenDatabaseCoordRequest(r) if r.known_client_info_id == Uid::default() => {
                wire.reply(&req, ErrorOr::Ok(self.info.clone()));
            }
            AnyMessage::GetReadVersionRequest(_) => self.grvs += 1,
            AnyMessage::GetKeyServerLocationsRequest(r) => {
                let end = r.end.clone().expect("a range lookup");
                let results = self
                    .shards
                    .iter()
                    .filter(|(b, e, _)| *e > &r.begin[..] && *b < &end[..])
                    .map(|(b, e, s)| ShardLocation {
                        range: KeyRange::new(Bytes::from_static(b), Bytes::from_static(e)),
                        servers: s.iter().map(|&i| self.servers[i].clone()).collect(),
                    })
                    .collect();
                self.locations.push(r.clone());
                wire.reply(
                    &req,
                    ErrorOr::Ok(GetKeyServerLocationsReply {
                        results,
                        ..Default::default()
                    }),
                );
            }
            AnyMessage::WaitMetricsRequest(_) | AnyMessage::SplitRangeRequest(_) => {
                return Some(req)
            }
            _ => {}
        }
        None
    }
}

fn sim(shards: Vec<(&'static [u8], &'static [u8], Vec<usize>)>) -> Sim<Cluster> {
    let cluster_file = ClusterFile::parse("t:t@127.0.0.1:4500").unwrap();
    let info = crate::sim::loopback_proxies();
    let servers = (0..3u16)
        .map(|i| StorageServerInterface {
            unique_id: Uid::new(100 + i as u64, 1),
            get_value: stream(4501 + i, Uid::new(200 + i as u64, 0x1000)),
            accepting_requests: true,
            ..Default::default()
        })
        .collect();
    let cluster = Cluster {
        info,
        servers,
        shards,
        locations: Vec::new(),
        grvs: 0,
    };
    let mut s = Sim::with_server(ClientConfig::new(cluster_file, 7), cluster);
    s.drive();
    s
}

impl Sim<Cluster> {
    /// Answers the waiting storage request for `[begin, ..)` with `body`.
    fn answer(&mut self, begin: &[u8], body: Vec<u8>) {
        let req = self
            .take_request(|r| keys_of(r).0 == begin)
            .expect("a held request for that part");
        self.reply_bytes(&req, &body);
    }

    /// Which storage server `dest` is `stream` of.
    fn server_of(&self, dest: Uid, stream: u32) -> usize {
        let servers = &self.server.servers;
        (0..servers.len())
            .find(|&i| servers[i].stream(stream) == dest)
            .expect("sent to a storage stream")
    }

    /// Whether `req` finished (without taking its completion).
    fn finished(&self, req: RequestId) -> bool {
        self.completions().iter().any(|c| c.request() == req)
    }
}

/// [`sim`] and a transaction on it, as every test here starts.
fn sim_tx(
    shards: Vec<(&'static [u8], &'static [u8], Vec<usize>)>,
) -> (Sim<Cluster>, TransactionId) {
    let mut s = sim(shards);
    let tx = s.client.create_transaction(s.now());
    (s, tx)
}

fn metrics(bytes: i64) -> Vec<u8> {
    encode_reply(&ErrorOr::Ok(StorageMetrics {
        bytes,
        ..Default::default()
    }))
}

fn points(keys: &[&'static [u8]]) -> Vec<u8> {
    encode_reply(&ErrorOr::Ok(SplitRangeReply {
        split_points: keys.iter().map(|k| Bytes::from_static(k)).collect(),
    }))
}

fn error<T: crate::serializer::Message>(e: ErrorCode) -> Vec<u8> {
    encode_reply::<T>(&ErrorOr::Err(e))
}

fn three_shards() -> Vec<(&'static [u8], &'static [u8], Vec<usize>)> {
    vec![
        (b"", b"b", vec![0]),
        (b"b", b"d", vec![1]),
        (b"d", b"\xff\xff", vec![2]),
    ]
}

/// Starts an estimate of `[begin, end)` and runs it until it waits for answers.
fn estimate(s: &mut Sim<Cluster>, tx: TransactionId, begin: &[u8], end: &[u8]) -> Call<i64> {
    let req = s
        .client
        .get_estimated_range_size_bytes(s.now(), tx, begin, end);
    s.drive();
    req
}

/// Starts a split of `[begin, end)` and runs it until it waits for answers.
fn split_points(
    s: &mut Sim<Cluster>,
    tx: TransactionId,
    begin: &[u8],
    end: &[u8],
    chunk: i64,
) -> Call<Vec<Bytes>> {
    let req = s
        .client
        .get_range_split_points(s.now(), tx, begin, end, chunk);
    s.drive();
    req
}

fn keys(v: &[&'static [u8]]) -> Vec<Bytes> {
    v.iter().map(|k| Bytes::from_static(k)).collect()
}

#[test]
fn estimate_asks_every_shard_and_adds_up() {
    let (mut s, tx) = sim_tx(three_shards());
    let req = estimate(&mut s, tx, b"a", b"e");
    // One lookup for the whole range, as `getStorageMetricsLargeKeyRange` makes it; no
    // read version.
    assert_eq!(s.server.locations.len(), 1);
    let l = &s.server.locations[0];
    assert_eq!(
        (&l.begin[..], l.end.as_deref()),
        (&b"a"[..], Some(&b"e"[..]))
    );
    assert_eq!(l.limit, i32::MAX);
    assert_eq!(l.min_tenant_version, LATEST_VERSION);
    assert_eq!(s.server.grvs, 0);
    let mut parts: Vec<(Vec<u8>, Vec<u8>, usize)> = s
        .requests()
        .iter()
        .map(|h| {
            let AnyMessage::WaitMetricsRequest(r) = &h.msg else {
                panic!("{:?}", h.msg)
            };
            assert_eq!(r.min, StorageMetrics::default());
            assert_eq!(r.max.bytes, -1);
            assert_eq!(r.min_version, LATEST_VERSION);
            assert_eq!(r.tenant_info, TenantInfo::none());
            let ss = s.server_of(h.dest, StorageServerInterface::WAIT_METRICS);
            (r.keys.begin.to_vec(), r.keys.end.to_vec(), ss)
        })
        .collect();
    parts.sort();
    assert_eq!(
        parts,
        vec![
            (b"a".to_vec(), b"b".to_vec(), 0),
            (b"b".to_vec(), b"d".to_vec(), 1),
            (b"d".to_vec(), b"e".to_vec(), 2),
        ]
    );
    s.answer(b"b", metrics(20));
    s.answer(b"a", metrics(100));
    assert!(s.completions().is_empty());
    s.answer(b"d", metrics(3));
    assert_eq!(s.take(req), Some(Ok(123)));

    // The locations are cached now: the next estimate asks no proxy.
    let req = estimate(&mut s, tx, b"b", b"c");
    assert_eq!(s.server.locations.len(), 1);
    s.answer(b"b", metrics(7));
    assert_eq!(s.take(req), Some(Ok(7)));
}

#[test]
fn estimate_relocates_only_the_wrong_shard() {
    let (mut s, tx) = sim_tx(three_shards());
    let req = estimate(&mut s, tx, b"a", b"e");
    s.answer(b"a", metrics(100));
    s.answer(b"b", error::<StorageMetrics>(ErrorCode::WRONG_SHARD_SERVER));
    // `WRONG_SHARD_SERVER_DELAY` first.
    assert_eq!(s.server.locations.len(), 1);
    s.advance_by(Duration::from_millis(5));
    assert_eq!(s.server.locations.len(), 1);
    s.advance_by(Duration::from_millis(5));
    assert_eq!(s.server.locations.len(), 2);
    let l = &s.server.locations[1];
    assert_eq!(
        (&l.begin[..], l.end.as_deref()),
        (&b"b"[..], Some(&b"d"[..]))
    );
    // The shard moved meanwhile: its part is now split in two.
    s.server.shards = vec![
        (b"", b"b", vec![0]),
        (b"b", b"c", vec![2]),
        (b"c", b"d", vec![0]),
        (b"d", b"\xff\xff", vec![2]),
    ];
    let again: Vec<(Vec<u8>, Vec<u8>)> = s
        .requests()
        .iter()
        .map(|h| (keys_of(h).0.to_vec(), keys_of(h).1.to_vec()))
        .collect();
    assert_eq!(again.len(), 2, "{again:?}"); // [d, e) and the new [b, d)
    s.answer(b"b", error::<StorageMetrics>(ErrorCode::WRONG_SHARD_SERVER));
    s.advance_by(Duration::from_millis(10));
    assert_eq!(s.server.locations.len(), 3);
    let mut parts: Vec<_> = s.requests().iter().map(|h| keys_of(h).0.to_vec()).collect();
    parts.sort();
    assert_eq!(parts, vec![b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]);
    s.answer(b"b", metrics(1));
    s.answer(b"c", metrics(2));
    s.answer(b"d", metrics(3));
    assert_eq!(s.take(req), Some(Ok(106)));
}

#[test]
fn estimate_retries_future_version_and_fails_on_other_errors() {
    let (mut s, tx) = sim_tx(three_shards());
    let req = estimate(&mut s, tx, b"a", b"b");
    s.answer(b"a", error::<StorageMetrics>(ErrorCode::FUTURE_VERSION));
    assert!(s.requests().is_empty());
    s.advance_by(knobs::FUTURE_VERSION_RETRY_DELAY);
    assert_eq!(
        s.server.locations.len(),
        1,
        "future_version keeps the location"
    );
    s.answer(b"a", metrics(9));
    assert_eq!(s.take(req), Some(Ok(9)));

    let req = estimate(&mut s, tx, b"a", b"e");
    s.answer(b"b", error::<StorageMetrics>(ErrorCode::TENANT_NOT_FOUND));
    assert_eq!(
        s.take(req),
        Some(Err(ClientError::Fdb(ErrorCode::TENANT_NOT_FOUND)))
    );
    // Late answers of the failed read change nothing.
    s.answer(b"a", metrics(1));
    s.answer(b"d", metrics(1));
    assert!(s.completions().is_empty());
}

#[test]
fn lost_request_goes_to_the_next_replica() {
    let (mut s, tx) = sim_tx(vec![(b"", b"\xff\xff", vec![0, 1])]);
    let req = estimate(&mut s, tx, b"a", b"z");
    let first = s.server_of(s.requests()[0].dest, StorageServerInterface::WAIT_METRICS);
    let conn = s.take_request(|_| true).unwrap().conn;
    s.close(conn);
    assert_eq!(s.requests().len(), 1);
    let second = s.server_of(s.requests()[0].dest, StorageServerInterface::WAIT_METRICS);
    assert_ne!(first, second);
    s.answer(b"a", metrics(5));
    assert_eq!(s.take(req), Some(Ok(5)));
}

#[test]
fn split_points_concatenate_shards_with_their_boundaries() {
    let (mut s, tx) = sim_tx(three_shards());
    let req = split_points(&mut s, tx, b"a", b"e", 1000);
    assert_eq!(s.server.locations.len(), 1);
    assert_eq!(s.server.locations[0].limit, TOO_MANY);
    assert_eq!(s.server.locations[0].min_tenant_version, LATEST_VERSION);
    assert_eq!(s.server.grvs, 0);
    for h in s.requests() {
        let AnyMessage::SplitRangeRequest(r) = &h.msg else {
            panic!("{:?}", h.msg)
        };
        assert_eq!(r.chunk_size, 1000);
        assert_eq!(r.tenant_info, TenantInfo::none());
        s.server_of(h.dest, StorageServerInterface::GET_RANGE_SPLIT_POINTS);
    }
    s.answer(b"d", points(&[b"e"]));
    s.answer(b"a", points(&[b"a1", b"a2"]));
    s.answer(b"b", points(&[]));
    assert_eq!(
        s.take(req),
        Some(Ok(keys(&[b"a", b"a1", b"a2", b"b", b"d", b"e"])))
    );

    // One shard, nothing to split: just the ends.
    let req = split_points(&mut s, tx, b"b1", b"c", 1000);
    s.answer(b"b1", points(&[]));
    assert_eq!(s.take(req), Some(Ok(keys(&[b"b1", b"c"]))));
}

#[test]
fn split_points_start_over_on_wrong_shard_server() {
    let (mut s, tx) = sim_tx(three_shards());
    let req = split_points(&mut s, tx, b"a", b"e", 10);
    s.answer(b"a", points(&[b"a5"]));
    s.answer(
        b"b",
        error::<SplitRangeReply>(ErrorCode::ALL_ALTERNATIVES_FAILED),
    );
    // The answer still in flight belongs to the abandoned pass.
    s.answer(b"d", points(&[b"d5"]));
    assert!(s.completions().is_empty() && s.requests().is_empty());
    s.advance_by(knobs::WRONG_SHARD_SERVER_DELAY);
    assert_eq!(s.server.locations.len(), 2);
    assert_eq!(&s.server.locations[1].begin[..], b"a");
    assert_eq!(s.requests().len(), 3);
    s.answer(b"a", points(&[b"a6"]));
    s.answer(b"b", points(&[b"c"]));
    s.answer(b"d", points(&[]));
    assert_eq!(
        s.take(req),
        Some(Ok(keys(&[b"a", b"a6", b"b", b"c", b"d", b"e"])))
    );
}

#[test]
fn split_points_fail_on_future_version_and_bad_answers() {
    let (mut s, tx) = sim_tx(three_shards());
    let req = split_points(&mut s, tx, b"a", b"b", 10);
    s.answer(b"a", error::<SplitRangeReply>(ErrorCode::FUTURE_VERSION));
    assert_eq!(
        s.take(req),
        Some(Err(ClientError::Fdb(ErrorCode::FUTURE_VERSION)))
    );
    let req = split_points(&mut s, tx, b"a", b"b", 10);
    s.answer(b"a", points(&[b"c"]));
    assert!(matches!(s.take(req), Some(Err(ClientError::Decode(_)))));
}

#[test]
fn refused_before_asking() {
    let (mut s, tx) = sim_tx(three_shards());
    let cases: [(RequestId, ErrorCode); 5] = [
        (
            s.client
                .get_estimated_range_size_bytes(s.now(), tx, b"b", b"a")
                .id(),
            ErrorCode::INVERTED_RANGE,
        ),
        (
            s.client
                .get_estimated_range_size_bytes(s.now(), tx, b"a", b"a")
                .id(),
            ErrorCode::INTERNAL_ERROR,
        ),
        (
            s.client
                .get_range_split_points(s.now(), tx, b"a", b"\xff\x01", 10)
                .id(),
            ErrorCode::KEY_OUTSIDE_LEGAL_RANGE,
        ),
        (
            s.client
                .get_range_split_points(s.now(), TransactionId(99), b"a", b"b", 10)
                .id(),
            ErrorCode::TRANSACTION_CANCELLED,
        ),
        (
            s.client
                .get_range_split_points(s.now(), tx, b"a", b"a", 10)
                .id(),
            ErrorCode::INTERNAL_ERROR,
        ),
    ];
    s.drive();
    for (req, code) in cases {
        let done = s.take_completion(req).expect("refused at once");
        assert_eq!(done.error(), Some(&ClientError::Fdb(code)));
    }
    // System keys are fine for the estimate, and for split points with the option.
    let req = estimate(&mut s, tx, b"a", b"\xff\x01");
    assert!(!s.finished(req.id()));
    s.client
        .set_option(
            s.now(),
            tx,
            crate::transaction::TransactionOption::ReadSystemKeys,
        )
        .unwrap();
    let req = split_points(&mut s, tx, b"a", b"\xff\x01", 10);
    assert!(!s.finished(req.id()));
    s.client.set(tx, b"k", b"v").unwrap();
    let _ = s.client.commit(s.now(), tx); // waits for a read version the sim never gives
    s.drive();
    let req = estimate(&mut s, tx, b"a", b"b");
    assert_eq!(
        s.take(req),
        Some(Err(ClientError::Fdb(ErrorCode::USED_DURING_COMMIT)))
    );
}

#[test]
fn a_reset_transaction_cancels_the_read() {
    let (mut s, tx) = sim_tx(three_shards());
    let req = estimate(&mut s, tx, b"a", b"e");
    s.client.reset_transaction(s.now(), tx);
    s.drive();
    assert_eq!(
        s.take(req),
        Some(Err(ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED)))
    );
    s.answer(b"a", metrics(1));
    assert!(s.completions().is_empty());
}
