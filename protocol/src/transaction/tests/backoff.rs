//! `on_error`'s backoff against a scripted cluster on the simulated network
//! ([`crate::sim`]), where time moves only when the test moves it: what is in flight when
//! `on_error` is called, and what is asked during its delay (libfdb_c: NativeAPI resets at
//! once, RYW's `resetRyow` runs after the delay).

use alloc::vec;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::client::ClientConfig;
use crate::cluster_file::ClusterFile;
use crate::error::ErrorCode;
use crate::event::Call;
use crate::event::ClientError;
use crate::ids::TransactionId;
use crate::knobs::Knobs;
use crate::messages::commit::{CommitID, GetKeyServerLocationsReply, ShardLocation};
use crate::messages::coordination::ClientDBInfo;
use crate::messages::grv::{
    GetReadVersionReply, GlobalConfigRefreshReply, RangeResult, TagCount, TagThrottleEntry,
};
use crate::messages::storage::{GetValueReply, StorageServerInterface};
use crate::messages::types::{KeyRange, KeyValue};
use crate::messages::{AnyMessage, ErrorOr};
use crate::sim::{Request, Server, Sim, Wire};
use crate::uid::Uid;

use crate::sim::loopback_stream as stream;

/// One proxy pair answering at once (read versions 100, 101, ...; one shard on its storage
/// servers, one unless the test adds more); storage reads (gets, key selectors, range reads) wait for the test, and so do commits unless `commit_error` says
/// what to answer them.
pub(super) struct Cluster {
    info: ClientDBInfo,
    pub(super) servers: Vec<StorageServerInterface>,
    pub(super) version: i64,
    commit_error: Option<ErrorCode>,
    /// The tags of each read version request, in order.
    pub(super) grv_tags: Vec<Vec<TagCount>>,
    /// What the read version replies say of tag throttles.
    pub(super) throttles: Vec<TagThrottleEntry>,
    /// The rows of `\xff/globalConfig/k/` a global configuration refresh answers.
    pub(super) global_config: Vec<KeyValue>,
    /// The refresh's endpoint is gone (its proxy's role ended): refreshes are answered
    /// "endpoint not found".
    pub(super) global_config_gone: bool,
}

impl Server for Cluster {
    fn serve(&mut self, wire: &mut Wire<'_>, req: Request) -> Option<Request> {
        match &req.msg {
            AnyMessage::OpenDatabaseCoordRequest(r) if r.known_client_info_id == Uid::default() => {
                wire.reply(&req, ErrorOr::Ok(self.info.clone()));
            }
            AnyMessage::GetReadVersionRequest(r) => {
                self.version += 1;
                self.grv_tags.push(r.tags.clone());
                let reply = GetReadVersionReply {
                    version: self.version,
                    tag_throttle_info: self.throttles.clone(),
                    ..Default::default()
                };
                wire.reply(&req, ErrorOr::Ok(reply));
            }
            AnyMessage::GlobalConfigRefreshRequest(_) if self.global_config_gone => {
                wire.endpoint_not_found(&req);
            }
            AnyMessage::GlobalConfigRefreshRequest(_) => {
                let reply = GlobalConfigRefreshReply {
                    result: RangeResult {
                        data: self.global_config.clone(),
                        ..Default::default()
                    },
                    version: self.version,
                };
                wire.reply(&req, ErrorOr::Ok(reply));
            }
            AnyMessage::GetKeyServerLocationsRequest(_) => {
                let results = vec![ShardLocation {
                    range: KeyRange::new(Bytes::new(), Bytes::from_static(b"\xff")),
                    servers: self.servers.clone(),
                }];
                let reply = GetKeyServerLocationsReply {
                    results,
                    ..Default::default()
                };
                wire.reply(&req, ErrorOr::Ok(reply));
            }
            AnyMessage::GetValueRequest(_)
            | AnyMessage::GetKeyRequest(_)
            | AnyMessage::GetKeyValuesRequest(_)
            | AnyMessage::WatchValueRequest(_) => return Some(req),
            AnyMessage::CommitTransactionRequest(_) => match self.commit_error {
                Some(e) => wire.reply(&req, ErrorOr::<CommitID>::Err(e)),
                None => return Some(req),
            },
            _ => {}
        }
        None
    }
}

/// The simulated network with the scripted cluster.
pub(super) type SimCluster = Sim<Cluster>;

pub(super) fn sim() -> Sim<Cluster> {
    sim_with(Knobs::default())
}

/// Storage server `i` of the scripted cluster (the first on port 4501, the next on 4502, ...).
pub(super) fn storage_server(i: u16) -> StorageServerInterface {
    StorageServerInterface {
        unique_id: Uid::new(100, 1 + u64::from(i)),
        get_value: stream(4501 + i, Uid::new(200 + u64::from(i), 0x1000)),
        accepting_requests: true,
        ..Default::default()
    }
}

/// [`sim`] under `knobs`.
pub(super) fn sim_with(knobs: Knobs) -> Sim<Cluster> {
    let cluster_file = ClusterFile::parse("t:t@127.0.0.1:4500").unwrap();
    let info = crate::sim::loopback_proxies();
    let server = storage_server(0);
    let cluster = Cluster {
        info,
        servers: vec![server],
        version: 99,
        commit_error: None,
        grv_tags: Vec::new(),
        throttles: Vec::new(),
        global_config: Vec::new(),
        global_config_gone: false,
    };
    let config = ClientConfig {
        knobs,
        ..ClientConfig::new(cluster_file, 7)
    };
    let mut s = Sim::with_server(config, cluster);
    s.drive();
    s
}

impl Sim<Cluster> {
    /// Answers the held read of `key` with `value`; returns the version it was asked at.
    pub(super) fn answer(&mut self, key: &[u8], value: Option<&'static [u8]>) -> i64 {
        let req = self
            .take_request(|r| matches!(&r.msg, AnyMessage::GetValueRequest(g) if g.key == key))
            .expect("a held read of that key");
        let AnyMessage::GetValueRequest(g) = &req.msg else {
            unreachable!()
        };
        let version = g.version;
        let reply = GetValueReply {
            value: value.map(Bytes::from_static),
            ..Default::default()
        };
        self.reply(&req, ErrorOr::Ok(reply));
        version
    }

    pub(super) fn held_reads(&mut self) -> Vec<Bytes> {
        self.drive();
        self.requests()
            .iter()
            .filter_map(|r| match &r.msg {
                AnyMessage::GetValueRequest(g) => Some(g.key.clone()),
                _ => None,
            })
            .collect()
    }
}

const CANCELLED: ClientError = ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED);

#[test]
fn a_read_in_flight_finishes_during_the_backoff_at_its_own_version() {
    let mut s = sim();
    let tx = s.client.create_transaction(s.now());
    let read = s.client.get(s.now(), tx, b"k", false);
    assert_eq!(s.held_reads(), vec![Bytes::from_static(b"k")]);
    let retry = s.client.on_error(s.now(), tx, ErrorCode::NOT_COMMITTED);
    s.drive();
    // The delay has not passed: the read is still in flight, and answered normally.
    assert_eq!(s.take(retry), None);
    assert_eq!(s.answer(b"k", Some(b"old")), 100);
    assert_eq!(s.take(read), Some(Ok(Some(Bytes::from_static(b"old")))));
    // A read during the backoff asks a new read version (NativeAPI reset the old one).
    let during = s.client.get(s.now(), tx, b"m", false);
    assert_eq!(s.answer(b"m", None), 101);
    assert_eq!(s.take(during), Some(Ok(None)));
    assert_eq!(s.take(retry), None);
    assert_eq!(s.run(retry), Some(Ok(())));
    // After the reset the cache of the old attempt is gone: `k` is read again, at the read
    // version NativeAPI got during the backoff (`resetRyow` does not touch it).
    let again = s.client.get(s.now(), tx, b"k", false);
    assert_eq!(s.answer(b"k", Some(b"new")), 101);
    assert_eq!(s.take(again), Some(Ok(Some(Bytes::from_static(b"new")))));
}

#[test]
fn what_is_pending_when_the_backoff_ends_fails_with_transaction_cancelled() {
    let mut s = sim();
    let tx = s.client.create_transaction(s.now());
    s.client.set(tx, b"w", b"x").unwrap();
    let read = s.client.get(s.now(), tx, b"k", false);
    let retry = s.client.on_error(s.now(), tx, ErrorCode::NOT_COMMITTED);
    // During the backoff the transaction still reads its own writes.
    let own = s.client.get(s.now(), tx, b"w", false);
    assert_eq!(s.take(own), Some(Ok(Some(Bytes::from_static(b"x")))));
    let during = s.client.get(s.now(), tx, b"m", false);
    assert_eq!(s.held_reads().len(), 2);
    assert_eq!(s.run(retry), Some(Ok(())));
    assert_eq!(s.take(read), Some(Err(CANCELLED)));
    assert_eq!(s.take(during), Some(Err(CANCELLED)));
    // The write is gone with the rest of RYW's state.
    let after = s.client.get(s.now(), tx, b"w", false);
    assert_eq!(s.answer(b"w", None), 101);
    assert_eq!(s.take(after), Some(Ok(None)));
}

#[test]
fn a_second_on_error_is_cancelled_by_the_first_ones_reset() {
    let mut s = sim();
    let tx = s.client.create_transaction(s.now());
    let first = s.client.on_error(s.now(), tx, ErrorCode::NOT_COMMITTED);
    let second = s
        .client
        .on_error(s.now(), tx, ErrorCode::TRANSACTION_TOO_OLD);
    s.drive();
    assert_eq!(s.take(first), None);
    let (a, b) = (s.run(first), s.take(second));
    // Whichever delay ends first resets; the other fails, and so does the transaction.
    let outcomes = [a, b];
    assert!(outcomes.contains(&Some(Ok(()))), "{outcomes:?}");
    assert!(outcomes.contains(&Some(Err(CANCELLED))), "{outcomes:?}");
    let read = s.client.get(s.now(), tx, b"k", false);
    assert_eq!(s.take(read), Some(Err(CANCELLED)));
    reads_again_once_reset(&mut s, tx);
}

/// The knobs set the pauses: `future_version_retry_delay` after `transaction_too_old`, and
/// after `not_committed` a random part of a backoff that starts at `default_backoff` and
/// grows ×`backoff_growth_rate` up to `default_max_backoff`.
#[test]
fn the_knobs_set_the_pauses() {
    let knobs = Knobs::default()
        .with("future_version_retry_delay", "0.3")
        .unwrap()
        .with("default_backoff", "0.5")
        .unwrap()
        .with("backoff_growth_rate", "3")
        .unwrap()
        .with("default_max_backoff", "2")
        .unwrap();
    let mut s = sim_with(knobs);
    let tx = s.client.create_transaction(s.now());
    let start = s.now();
    let retry = s
        .client
        .on_error(s.now(), tx, ErrorCode::TRANSACTION_TOO_OLD);
    assert_eq!(s.run(retry), Some(Ok(())));
    assert_eq!(s.now().saturating_since(start), Duration::from_millis(300));
    let mut total = 0.0;
    for cap in [0.5, 1.5, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0] {
        let start = s.now();
        let retry = s.client.on_error(s.now(), tx, ErrorCode::NOT_COMMITTED);
        assert_eq!(s.run(retry), Some(Ok(())));
        let waited = s.now().saturating_since(start).as_secs_f64();
        assert!(waited <= cap + 1e-9, "waited {waited}, backoff {cap}");
        total += waited;
    }
    // Under the defaults (10 ms, ×2, up to 1 s) ten pauses cannot reach 4.27 s together.
    assert!(total > 4.27, "{total}");
}

/// Resets `tx` and checks that it reads again.
fn reads_again_once_reset(s: &mut Sim<Cluster>, tx: TransactionId) {
    s.client.reset_transaction(s.now(), tx);
    let read = s.client.get(s.now(), tx, b"k", false);
    s.answer(b"k", None);
    assert_eq!(s.take(read), Some(Ok(None)));
}

const USED_DURING_COMMIT: ClientError = ClientError::Fdb(ErrorCode::USED_DURING_COMMIT);

/// A transaction whose commit failed with `transaction_too_old`, sleeping in `on_error`.
fn failed_and_sleeping(s: &mut Sim<Cluster>) -> (TransactionId, Call<()>) {
    s.server.commit_error = Some(ErrorCode::TRANSACTION_TOO_OLD);
    let tx = s.client.create_transaction(s.now());
    s.client.set(tx, b"w", b"x").unwrap();
    let commit = s.client.commit(s.now(), tx);
    assert_eq!(
        s.take(commit).map(|r| r.map(|_| ())),
        Some(Err(ClientError::Fdb(ErrorCode::TRANSACTION_TOO_OLD)))
    );
    let retry = s
        .client
        .on_error(s.now(), tx, ErrorCode::TRANSACTION_TOO_OLD);
    s.drive();
    assert_eq!(s.take(retry), None, "the backoff has not passed");
    (tx, retry)
}

#[test]
fn a_read_during_the_backoff_of_a_failed_commit_fails_on_error_at_once() {
    // RYW's `commitStarted` stays set after a failed commit until the backoff's
    // `resetRyow`: a read meanwhile is a use during the commit, and its `resetPromise`
    // error ends `on_error`'s wait at once, not when the delay is over.
    let mut s = sim();
    let (tx, retry) = failed_and_sleeping(&mut s);
    let read = s.client.get(s.now(), tx, b"k", false);
    assert_eq!(s.take(read), Some(Err(USED_DURING_COMMIT)));
    assert_eq!(s.take(retry), Some(Err(USED_DURING_COMMIT)), "at once");
    // The transaction stays finished until it is reset.
    let again = s.client.get(s.now(), tx, b"k", false);
    assert_eq!(s.take(again), Some(Err(USED_DURING_COMMIT)));
    reads_again_once_reset(&mut s, tx);
}

#[test]
fn a_write_during_the_backoff_of_a_failed_commit_fails_on_error_at_once() {
    let mut s = sim();
    let (tx, retry) = failed_and_sleeping(&mut s);
    assert_eq!(s.client.set(tx, b"v", b"y"), Err(USED_DURING_COMMIT));
    assert_eq!(s.take(retry), Some(Err(USED_DURING_COMMIT)), "at once");
}

#[test]
fn a_read_version_during_the_backoff_of_a_failed_commit_is_no_use_during_the_commit() {
    // RYW's `getReadVersion` looks only at `resetPromise`: the backoff goes on.
    let mut s = sim();
    let (tx, retry) = failed_and_sleeping(&mut s);
    let v = s.client.tx_read_version(s.now(), tx);
    assert!(matches!(s.take(v), Some(Ok(_))));
    assert_eq!(s.take(retry), None);
    assert_eq!(s.run(retry), Some(Ok(())));
}

#[test]
fn a_use_during_a_commit_in_flight_fails_the_commit_at_once() {
    // The commit waits on `resetPromise` too (`resetPromise || tr.commit()`).
    for write in [false, true] {
        let mut s = sim();
        let tx = s.client.create_transaction(s.now());
        s.client.set(tx, b"w", b"x").unwrap();
        let stamp = s.client.get_versionstamp(s.now(), tx);
        let commit = s.client.commit(s.now(), tx);
        s.drive();
        assert!(
            s.requests()
                .iter()
                .any(|r| matches!(r.msg, AnyMessage::CommitTransactionRequest(_))),
            "the commit is held by the proxy"
        );
        assert_eq!(s.take(commit).map(|r| r.map(|_| ())), None);
        if write {
            assert_eq!(s.client.clear(tx, b"w"), Err(USED_DURING_COMMIT));
        } else {
            let read = s.client.get(s.now(), tx, b"k", false);
            assert_eq!(s.take(read), Some(Err(USED_DURING_COMMIT)));
        }
        assert_eq!(
            s.take(commit).map(|r| r.map(|_| ())),
            Some(Err(USED_DURING_COMMIT)),
            "write: {write}"
        );
        assert_eq!(s.take(stamp), Some(Err(USED_DURING_COMMIT)));
        // Not retryable: `on_error` refuses it.
        let retry = s
            .client
            .on_error(s.now(), tx, ErrorCode::USED_DURING_COMMIT);
        assert_eq!(s.take(retry), Some(Err(USED_DURING_COMMIT)));
    }
}
