//! Replaying captures into the client core: every request the core sends is matched with the
//! next captured request of the same type and must equal it field for field once the random
//! parts are masked (reply tokens, span ids, the random `\xff/SC/` key), and must go to the
//! same endpoint token. The captured reply is then re-addressed to our reply token and fed
//! back. No sockets, no clock: fully deterministic.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::framing::{encode_packet, FrameDecoder, Incoming};
use fdb_protocol::messages::types::{KeyRange, KeySelector, SpanContext};
use fdb_protocol::messages::{decode_any, AnyMessage, ReplyPromise};
use fdb_protocol::Uid;
use fdb_protocol::{Call, Client, ClientConfig, ClientError, ConnectionId, Event, Outcome};
use fdb_protocol::{Instant, RangeOptions, RangeResult, TransactionId};

use crate::{captures_dir, load_capture, CapturedFrame, Dir};

/// A client core driven by the server side of one capture (see the module docs).
pub struct Replay {
    pub name: String,
    pub frames: Vec<CapturedFrame>,
    pub used: Vec<bool>,
    pub client: Client,
    pub conn: ConnectionId,
    pub decoder: FrameDecoder,
    pub now: Instant,
    pub events: VecDeque<Event>,
    /// Replies kept back until the test releases them (watch replies).
    pub held: Vec<Vec<u8>>,
    /// Requests we sent, by type, for the report.
    pub sent: Vec<&'static str>,
}

/// The reply token a request asks to be answered on.
pub fn reply_token(m: &AnyMessage) -> Option<Uid> {
    Some(match m {
        AnyMessage::OpenDatabaseCoordRequest(r) => r.reply.token,
        AnyMessage::GetReadVersionRequest(r) => r.reply.token,
        AnyMessage::GetKeyServerLocationsRequest(r) => r.reply.token,
        AnyMessage::GetValueRequest(r) => r.reply.token,
        AnyMessage::GetKeyValuesRequest(r) => r.reply.token,
        AnyMessage::CommitTransactionRequest(r) => r.reply.token,
        AnyMessage::WatchValueRequest(r) => r.reply.token,
        AnyMessage::GlobalConfigRefreshRequest(r) => r.reply.token,
        AnyMessage::GetLeaderRequest(r) => r.reply.token,
        AnyMessage::ProtocolInfoRequest(r) => r.reply.token,
        AnyMessage::StatusRequest(r) => r.reply.token,
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
pub fn mask(m: &AnyMessage) -> AnyMessage {
    let mut m = m.clone();
    let rp = ReplyPromise::default();
    match &mut m {
        AnyMessage::OpenDatabaseCoordRequest(r) => r.reply = rp,
        AnyMessage::GetLeaderRequest(r) => r.reply = rp,
        AnyMessage::ProtocolInfoRequest(r) => r.reply = rp,
        AnyMessage::StatusRequest(r) => r.reply = rp,
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
    pub fn new(name: &str) -> Replay {
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
    pub fn pump(&mut self) -> usize {
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

    pub fn answer(&mut self, dest: Uid, msg: &Bytes) {
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

    pub fn release_held(&mut self) {
        for h in std::mem::take(&mut self.held) {
            self.client.handle_input(self.conn, self.now, &h);
        }
    }

    /// Runs until `call` finishes.
    pub fn wait<T: Outcome>(&mut self, call: Call<T>) -> Result<T, ClientError> {
        let req = call.id();
        for _ in 0..1000 {
            if let Some(i) = self
                .events
                .iter()
                .position(|e| matches!(e, Event::Complete(c) if c.request() == req))
            {
                let Some(Event::Complete(done)) = self.events.remove(i) else {
                    unreachable!()
                };
                return call.take(done);
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

    pub fn tx(&mut self) -> TransactionId {
        self.client.create_transaction(self.now)
    }

    pub fn get(
        &mut self,
        tx: TransactionId,
        key: &[u8],
        snapshot: bool,
    ) -> Result<Option<Bytes>, ClientError> {
        let r = self.client.get(self.now, tx, key, snapshot);
        self.wait(r)
    }

    pub fn commit(&mut self, tx: TransactionId) -> Result<i64, ClientError> {
        let r = self.client.commit(self.now, tx);
        self.wait(r).map(|c| c.version)
    }

    pub fn range(
        &mut self,
        tx: TransactionId,
        b: KeySelector,
        e: KeySelector,
        opts: RangeOptions,
    ) -> RangeResult {
        let r = self.client.get_range(self.now, tx, b, e, opts, false);
        self.wait(r).unwrap()
    }

    /// Every captured request of these types must have been matched.
    pub fn all_used(&self, kinds: &[&str]) {
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

/// What a scenario recorded (`<name>.result.json`'s `result`).
pub fn result_json(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(captures_dir().join(format!("{name}.result.json")))
        .expect("result.json");
    serde_json::from_str::<serde_json::Value>(&text).expect("JSON")["result"].clone()
}
