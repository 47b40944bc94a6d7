//! Transactions replayed against the server side of real libfdb_c 7.3.77 captures.
//!
//! For each scenario the client core makes the same API calls the captured Python program
//! made. Every request it sends is matched with the next captured request of the same type
//! and must equal it field for field once the random parts are masked (reply tokens, span
//! ids, the random `\xff/SC/` key); it must go to the same endpoint token. The captured
//! reply is then re-addressed to our reply token and fed back. Results must equal what the
//! scenario recorded in its `result.json`. No sockets, no clock: fully deterministic.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use fdb_protocol::client::{Client, ClientConfig, ClientError, Event, Reply, RequestId};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::framing::{encode_packet, FrameDecoder, Incoming};
use fdb_protocol::messages::commit::mutation_type as mt;
use fdb_protocol::messages::types::{KeyRange, KeySelector, SpanContext};
use fdb_protocol::messages::{decode_any, AnyMessage, ReplyPromise};
use fdb_protocol::time::Instant;
use fdb_protocol::transaction::{RangeOptions, TransactionId};
use fdb_protocol::Uid;
use fdb_tests::{captures_dir, load_capture, CapturedFrame, Dir};

struct Replay {
    name: String,
    frames: Vec<CapturedFrame>,
    used: Vec<bool>,
    client: Client,
    conn: fdb_protocol::client::ConnectionId,
    decoder: FrameDecoder,
    now: Instant,
    events: VecDeque<Event>,
    /// Replies kept back until the test releases them (watch replies).
    held: Vec<Vec<u8>>,
    /// Requests we sent, by type, for the report.
    sent: Vec<&'static str>,
}

fn reply_token(m: &AnyMessage) -> Option<Uid> {
    Some(match m {
        AnyMessage::OpenDatabaseCoordRequest(r) => r.reply.token,
        AnyMessage::GetReadVersionRequest(r) => r.reply.token,
        AnyMessage::GetKeyServerLocationsRequest(r) => r.reply.token,
        AnyMessage::GetValueRequest(r) => r.reply.token,
        AnyMessage::GetKeyValuesRequest(r) => r.reply.token,
        AnyMessage::CommitTransactionRequest(r) => r.reply.token,
        AnyMessage::WatchValueRequest(r) => r.reply.token,
        AnyMessage::GlobalConfigRefreshRequest(r) => r.reply.token,
        _ => return None,
    })
}

fn masked_span(s: &SpanContext) -> SpanContext {
    // The trace id is random per transaction but must be present on everything except GRV.
    SpanContext {
        trace_id: if s.trace_id == Uid::default() {
            Uid::default()
        } else {
            Uid::new(1, 1)
        },
        span_id: 0,
        flags: s.flags,
    }
}

fn mask_sc(ranges: &mut [KeyRange]) {
    for r in ranges {
        if r.begin.starts_with(b"\xff/SC/") {
            assert_eq!(
                r.begin.len(),
                5 + 16,
                "self-conflict key is \\xff/SC/ + a UID"
            );
            r.begin = Bytes::from_static(b"\xff/SC/*");
            r.end = Bytes::from_static(b"\xff/SC/*\0");
        }
    }
}

/// Masks what is random in a request.
fn mask(m: &AnyMessage) -> AnyMessage {
    let mut m = m.clone();
    let rp = ReplyPromise::default();
    match &mut m {
        AnyMessage::OpenDatabaseCoordRequest(r) => r.reply = rp,
        AnyMessage::GetReadVersionRequest(r) => {
            r.reply = rp;
            r.span_context = masked_span(&r.span_context);
        }
        AnyMessage::GetKeyServerLocationsRequest(r) => {
            r.reply = rp;
            r.span_context = masked_span(&r.span_context);
        }
        AnyMessage::GetValueRequest(r) => {
            r.reply = rp;
            r.span_context = masked_span(&r.span_context);
        }
        AnyMessage::GetKeyValuesRequest(r) => {
            r.reply = rp;
            r.span_context = masked_span(&r.span_context);
        }
        AnyMessage::WatchValueRequest(r) => {
            r.reply = rp;
            r.span_context = masked_span(&r.span_context);
        }
        AnyMessage::CommitTransactionRequest(r) => {
            r.reply = rp;
            r.span_context = masked_span(&r.span_context);
            mask_sc(&mut r.transaction.read_conflict_ranges);
            mask_sc(&mut r.transaction.write_conflict_ranges);
        }
        _ => {}
    }
    m
}

impl Replay {
    fn new(name: &str) -> Replay {
        let cap = load_capture(&captures_dir().join(format!("{name}.frames.jsonl")));
        let mut frames = cap.frames.clone();
        frames.sort_by_key(|f| (f.dir == Dir::ServerToClient, f.seq));
        let cluster = ClusterFile::parse("test:test@127.0.0.1:4500").unwrap();
        let mut client = Client::new(ClientConfig::new(cluster, 42), Instant::ZERO);
        let Some(Event::Connect { conn, .. }) = client.poll_event() else {
            panic!("the client connects first")
        };
        client.handle_connected(conn, Instant::ZERO);
        let server_connect = frames
            .iter()
            .find(|f| f.dir == Dir::ServerToClient && f.is_connect)
            .expect("server connect packet")
            .wire_bytes();
        client.handle_input(conn, Instant::ZERO, &server_connect);
        let used = vec![false; frames.len()];
        Replay {
            name: name.to_string(),
            frames,
            used,
            client,
            conn,
            decoder: FrameDecoder::new(true, true),
            now: Instant::ZERO,
            events: VecDeque::new(),
            held: Vec::new(),
            sent: Vec::new(),
        }
    }

    /// Answers everything the client sent; returns how many requests were handled.
    fn pump(&mut self) -> usize {
        let mut handled = 0;
        loop {
            while let Some(e) = self.client.poll_event() {
                self.events.push_back(e);
            }
            let Some(t) = self.client.poll_transmit() else {
                return handled;
            };
            self.decoder.feed(&t.data);
            while let Some(f) = self.decoder.next_frame().expect("our frames decode") {
                let Incoming::Packet(p) = f else { continue };
                handled += 1;
                self.answer(p.token, &p.message);
            }
        }
    }

    fn answer(&mut self, dest: Uid, msg: &Bytes) {
        let ours = decode_any(msg).expect("our requests decode");
        if matches!(ours, AnyMessage::PingRequest(_)) {
            return;
        }
        self.sent.push(ours.name());
        // The next unused captured request of the same type.
        let idx = self
            .frames
            .iter()
            .enumerate()
            .position(|(i, f)| {
                !self.used[i]
                    && f.dir == Dir::ClientToServer
                    && !f.is_connect
                    && decode_any(&f.message()).map(|m| m.name()).ok() == Some(ours.name())
            })
            .unwrap_or_else(|| {
                panic!(
                    "{}: we sent a {} that libfdb_c did not send: {ours:?}",
                    self.name,
                    ours.name()
                )
            });
        self.used[idx] = true;
        let theirs = decode_any(&self.frames[idx].message()).unwrap();
        assert_eq!(
            mask(&ours),
            mask(&theirs),
            "{}: request differs from libfdb_c's (capture c2s seq {})",
            self.name,
            self.frames[idx].seq
        );
        assert_eq!(
            dest,
            self.frames[idx].token(),
            "{}: {} went to another endpoint",
            self.name,
            ours.name()
        );
        let (Some(their_token), Some(our_token)) = (reply_token(&theirs), reply_token(&ours))
        else {
            return;
        };
        let Some(reply) = self
            .frames
            .iter()
            .find(|f| f.dir == Dir::ServerToClient && !f.is_connect && f.token() == their_token)
        else {
            return; // never answered (the held OpenDatabase long poll)
        };
        let mut out = BytesMut::new();
        encode_packet(&mut out, our_token, &reply.message(), true);
        if matches!(ours, AnyMessage::WatchValueRequest(_)) {
            self.held.push(out.to_vec());
        } else {
            self.client.handle_input(self.conn, self.now, &out);
        }
    }

    fn release_held(&mut self) {
        for h in std::mem::take(&mut self.held) {
            self.client.handle_input(self.conn, self.now, &h);
        }
    }

    /// Runs until `req` finishes.
    fn wait(&mut self, req: RequestId) -> Result<Reply, ClientError> {
        for _ in 0..1000 {
            if let Some(i) = self
                .events
                .iter()
                .position(|e| matches!(e, Event::Complete { req: r, .. } if *r == req))
            {
                let Some(Event::Complete { result, .. }) = self.events.remove(i) else {
                    unreachable!()
                };
                return result;
            }
            if self.pump() == 0 && self.client.poll_timeout().is_some() {
                // Let timers (backoffs, retries) run.
                self.now = self.client.poll_timeout().unwrap().max(self.now);
                self.client.handle_timeout(self.now);
            }
        }
        panic!(
            "{}: request {req:?} never finished; sent {:?}",
            self.name, self.sent
        )
    }

    fn tx(&mut self) -> TransactionId {
        self.client.create_transaction(self.now)
    }

    fn get(
        &mut self,
        tx: TransactionId,
        key: &[u8],
        snapshot: bool,
    ) -> Result<Option<Bytes>, ClientError> {
        let r = self.client.get(self.now, tx, key, snapshot);
        self.wait(r).map(|r| match r {
            Reply::Value(v) => v,
            other => panic!("{other:?}"),
        })
    }

    fn commit(&mut self, tx: TransactionId) -> Result<i64, ClientError> {
        let r = self.client.commit(self.now, tx);
        self.wait(r).map(|r| match r {
            Reply::Committed { version, .. } => version,
            other => panic!("{other:?}"),
        })
    }

    fn range(
        &mut self,
        tx: TransactionId,
        b: KeySelector,
        e: KeySelector,
        opts: RangeOptions,
    ) -> fdb_protocol::transaction::RangeResult {
        let r = self.client.get_range(self.now, tx, b, e, opts, false);
        match self.wait(r).unwrap() {
            Reply::Range(r) => r,
            other => panic!("{other:?}"),
        }
    }

    /// Every captured request of these types must have been matched.
    fn all_used(&self, kinds: &[&str]) {
        for (i, f) in self.frames.iter().enumerate() {
            if f.dir != Dir::ClientToServer || f.is_connect || self.used[i] {
                continue;
            }
            let name = decode_any(&f.message()).unwrap().name();
            assert!(
                !kinds.contains(&name),
                "{}: libfdb_c sent a {name} (c2s seq {}) that we did not; we sent {:?}",
                self.name,
                f.seq,
                self.sent
            );
        }
    }
}

const TXN_REQUESTS: &[&str] = &[
    "GetReadVersionRequest",
    "GetKeyServerLocationsRequest",
    "GetValueRequest",
    "GetKeyValuesRequest",
    "CommitTransactionRequest",
    "WatchValueRequest",
];

fn result_json(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(captures_dir().join(format!("{name}.result.json"))).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).unwrap()["result"].clone()
}

#[test]
fn get() {
    let mut r = Replay::new("get");
    let tx = r.tx();
    let v = r.get(tx, b"cap/get/exists", false).unwrap().unwrap();
    assert_eq!(v.len(), 100);
    assert_eq!(r.get(tx, b"cap/get/missing", false).unwrap(), None);
    r.all_used(TXN_REQUESTS);
}

#[test]
fn get_range_iterates_like_the_bindings() {
    let mut r = Replay::new("get_range");
    let tx = r.tx();
    let mut begin = KeySelector::first_greater_or_equal(Bytes::from_static(b"cap/range/"));
    let end = KeySelector::first_greater_or_equal(Bytes::from_static(b"cap/range0"));
    let mut rows = Vec::new();
    for iteration in 1.. {
        let opts = RangeOptions {
            iteration,
            ..RangeOptions::default()
        };
        let batch = r.range(tx, begin.clone(), end.clone(), opts);
        let last = batch.rows.last().unwrap().key.clone();
        rows.extend(batch.rows);
        if !batch.more {
            break;
        }
        begin = KeySelector::first_greater_than(last);
    }
    let want = result_json("get_range");
    assert_eq!(rows.len() as u64, want["count"].as_u64().unwrap());
    assert_eq!(rows[0].key, want["first"].as_str().unwrap().as_bytes());
    r.all_used(TXN_REQUESTS);
}

#[test]
fn range_large_takes_nineteen_batches() {
    let mut r = Replay::new("range_large");
    let tx = r.tx();
    let mut begin = KeySelector::first_greater_or_equal(Bytes::from_static(b"cap/big/"));
    let end = KeySelector::first_greater_or_equal(Bytes::from_static(b"cap/big0"));
    let mut rows = 0;
    let mut calls = 0;
    for iteration in 1.. {
        calls += 1;
        let opts = RangeOptions {
            iteration,
            ..RangeOptions::default()
        };
        let batch = r.range(tx, begin.clone(), end.clone(), opts);
        rows += batch.rows.len();
        if !batch.more {
            break;
        }
        begin = KeySelector::first_greater_than(batch.rows.last().unwrap().key.clone());
    }
    let want = result_json("range_large");
    assert_eq!(rows as u64, want["count"].as_u64().unwrap());
    assert_eq!(calls, want["client_get_range_calls"].as_u64().unwrap());
    r.all_used(TXN_REQUESTS);
}

#[test]
fn get_key_selectors() {
    let mut r = Replay::new("get_key");
    let tx = r.tx();
    let want = result_json("get_key");
    let q = r.client.get_key(
        r.now,
        tx,
        KeySelector::first_greater_than(Bytes::from_static(b"cap/range/050")),
        false,
    );
    let Reply::Key(k) = r.wait(q).unwrap() else {
        panic!()
    };
    assert_eq!(
        k,
        want["first_greater_than(range/050)"]
            .as_str()
            .unwrap()
            .as_bytes()
    );
    let q = r.client.get_key(
        r.now,
        tx,
        KeySelector::last_less_or_equal(Bytes::from_static(b"cap/range/050x")),
        false,
    );
    let Reply::Key(k) = r.wait(q).unwrap() else {
        panic!()
    };
    assert_eq!(
        k,
        want["last_less_or_equal(range/050x)"]
            .as_str()
            .unwrap()
            .as_bytes()
    );
    r.all_used(TXN_REQUESTS);
}

#[test]
fn set_commit() {
    let mut r = Replay::new("set_commit");
    let tx = r.tx();
    let value: Vec<u8> = (0..100).map(|i| b'a' + (i % 26) as u8).collect();
    r.client.set(tx, b"cap/set/k", &value).unwrap();
    let v = r.commit(tx).unwrap();
    assert_eq!(
        v,
        result_json("set_commit")["committed_version"]
            .as_i64()
            .unwrap()
    );
    r.all_used(TXN_REQUESTS);
}

#[test]
fn mutations_in_ryw_order() {
    let mut r = Replay::new("mutations");
    let tx = r.tx();
    r.client.set(tx, b"cap/mut/set", b"set-value").unwrap();
    r.client.clear(tx, b"cap/mut/clear").unwrap();
    r.client
        .clear_range(tx, b"cap/mut/cr/", b"cap/mut/cr0")
        .unwrap();
    r.client
        .atomic_op(tx, b"cap/mut/counter", &1i64.to_le_bytes(), mt::ADD_VALUE)
        .unwrap();
    let mut vk = b"cap/mut/vs/".to_vec();
    vk.extend_from_slice(&[0u8; 10]);
    vk.extend_from_slice(&11u32.to_le_bytes());
    r.client
        .atomic_op(tx, &vk, b"vs-value", mt::SET_VERSIONSTAMPED_KEY)
        .unwrap();
    let v = r.commit(tx).unwrap();
    let want = result_json("mutations");
    assert_eq!(v, want["committed_version"].as_i64().unwrap());
    let stamp = r.client.versionstamp(tx).unwrap();
    let hex: String = stamp.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, want["versionstamp"].as_str().unwrap());
    r.all_used(TXN_REQUESTS);
}

#[test]
fn conflict_gives_not_committed() {
    let mut r = Replay::new("conflict");
    let a = r.tx();
    let read = r.get(a, b"cap/conflict/k", false).unwrap().unwrap();
    let want = result_json("conflict");
    assert_eq!(read, want["a_read"].as_str().unwrap().as_bytes());
    let b = r.tx();
    r.client.set(b, b"cap/conflict/k", b"written-by-B").unwrap();
    assert_eq!(r.commit(b).unwrap(), want["b_committed"].as_i64().unwrap());
    r.client.set(a, b"cap/conflict/k", b"written-by-A").unwrap();
    let err = r.commit(a).unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode(want["a_error_code"].as_u64().unwrap() as u16)
    );
    r.all_used(TXN_REQUESTS);
}

#[test]
fn watch_fires_after_another_commit() {
    let mut r = Replay::new("watch");
    let t1 = r.tx();
    let w = r.client.watch(r.now, t1, b"cap/watch/k");
    r.pump();
    r.commit(t1).unwrap();
    r.pump();
    let t2 = r.tx();
    r.client.set(t2, b"cap/watch/k", b"after").unwrap();
    let committed = r.commit(t2).unwrap();
    assert_eq!(
        committed,
        result_json("watch")["writer_committed"].as_i64().unwrap()
    );
    r.release_held();
    let Reply::WatchFired(v) = r.wait(w).unwrap() else {
        panic!()
    };
    assert_eq!(v, committed);
    // libfdb_c also sends one unrelated GRV (transaction count 0) after the watch fires.
    r.all_used(&TXN_REQUESTS[1..]);
}

#[test]
fn versionstamped_value_reads_back() {
    let mut r = Replay::new("versionstamp_value");
    let t1 = r.tx();
    let mut param = b"vsv:".to_vec();
    param.extend_from_slice(&[0u8; 10]);
    param.extend_from_slice(b":end");
    param.extend_from_slice(&4u32.to_le_bytes());
    r.client
        .atomic_op(t1, b"cap/vsv/k", &param, mt::SET_VERSIONSTAMPED_VALUE)
        .unwrap();
    r.commit(t1).unwrap();
    let stamp = r.client.versionstamp(t1).unwrap();
    let want = result_json("versionstamp_value");
    let hex: String = stamp.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, want["versionstamp"].as_str().unwrap());
    let t2 = r.tx();
    let v = r.get(t2, b"cap/vsv/k", false).unwrap().unwrap();
    let mut expect = b"vsv:".to_vec();
    expect.extend_from_slice(&stamp);
    expect.extend_from_slice(b":end");
    assert_eq!(v.to_vec(), expect);
    r.all_used(TXN_REQUESTS);
}

#[test]
fn snapshot_and_cleared_range_need_no_range_read() {
    let mut r = Replay::new("snapshot_clear_range");
    let tx = r.tx();
    r.client.clear_range(tx, b"cap/scr/", b"cap/scr0").unwrap();
    r.client.set(tx, b"cap/scr/new", b"new-value").unwrap();
    let rows = r.range(
        tx,
        KeySelector::first_greater_or_equal(Bytes::from_static(b"cap/scr/")),
        KeySelector::first_greater_or_equal(Bytes::from_static(b"cap/scr0")),
        RangeOptions::default(),
    );
    assert_eq!(rows.rows.len(), 1);
    assert_eq!(rows.rows[0].key, &b"cap/scr/new"[..]);
    assert_eq!(rows.rows[0].value, &b"new-value"[..]);
    let v = r.get(tx, b"cap/snap/other", true).unwrap().unwrap();
    assert_eq!(v, &b"snapshot-value"[..]);
    let want = result_json("snapshot_clear_range");
    assert_eq!(
        r.commit(tx).unwrap(),
        want["committed_version"].as_i64().unwrap()
    );
    assert!(!r.sent.contains(&"GetKeyValuesRequest"));
    r.all_used(TXN_REQUESTS);
}

#[test]
fn too_old_read_fails_with_1007() {
    let mut r = Replay::new("too_old");
    let tx = r.tx();
    let q = r.client.tx_read_version(r.now, tx);
    let Reply::Version(v) = r.wait(q).unwrap() else {
        panic!()
    };
    let want = result_json("too_old");
    assert_eq!(v, want["read_version"].as_i64().unwrap());
    let err = r.get(tx, b"cap/tooold/k", false).unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode(want["error_code"].as_u64().unwrap() as u16)
    );
    r.all_used(TXN_REQUESTS);
}
