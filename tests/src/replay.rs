//! Replaying captures into the client core: every request the core sends is matched with the
//! next captured request of the same type and must equal it field for field once the random
//! parts are masked (reply tokens, span ids, the random `\xff/SC/` key), and must go to the
//! same endpoint token. The captured reply is then re-addressed to our reply token and fed
//! back. It runs on the core's simulated network (`fdb_protocol::sim`): no sockets, no clock,
//! fully deterministic.

use bytes::Bytes;
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::messages::types::{KeyRange, KeySelector, SpanContext};
use fdb_protocol::messages::{decode_any, AnyMessage, ReplyPromise};
use fdb_protocol::sim::{Request, Server, Sim, Wire};
use fdb_protocol::version::Protocol;
use fdb_protocol::Uid;
use fdb_protocol::{Call, ClientConfig, ClientError, Event, Outcome};
use fdb_protocol::{MutationType, RangeOptions, RangeResult, TransactionId};

use crate::{captures_dir, load_capture, CapturedFrame, Dir};

/// A client core driven by the server side of one capture (see the module docs), on the
/// core's simulated network.
pub struct Replay {
    pub sim: Sim<CapturedServer>,
}

/// The server side of a capture: answers each request as fdbserver answered libfdb_c's.
pub struct CapturedServer {
    pub name: String,
    pub frames: Vec<CapturedFrame>,
    pub used: Vec<bool>,
    /// Replies kept back until the test releases them (watch replies).
    pub held: Vec<(Request, Bytes)>,
    /// Requests we sent, by type, for the report.
    pub sent: Vec<&'static str>,
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
        // In a tenant the self-conflict key sits under the tenant's 8-byte prefix.
        let at = if r.begin.starts_with(b"\xff/SC/") {
            0
        } else if r.begin.get(8..).is_some_and(|k| k.starts_with(b"\xff/SC/")) {
            8
        } else {
            continue;
        };
        assert_eq!(
            r.begin.len(),
            at + 5 + 16,
            "self-conflict key is \\xff/SC/ + a UID"
        );
        let mut b = r.begin[..at].to_vec();
        b.extend_from_slice(b"\xff/SC/*");
        r.begin = Bytes::from(b.clone());
        b.push(0);
        r.end = Bytes::from(b);
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
        AnyMessage::GetTenantIdRequest(r) => r.reply = rp,
        AnyMessage::GetDDMetricsRequest(r) => r.reply = rp,
        AnyMessage::GetHealthMetricsRequest(r) => r.reply = rp,
        AnyMessage::GetClientWorkersRequest(r) => r.reply = rp,
        AnyMessage::ExclusionSafetyCheckRequest(r) => r.reply = rp,
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
    /// A replay of a capture taken against the cluster `test:test@127.0.0.1:4500`.
    pub fn new(name: &str) -> Replay {
        Replay::with_cluster(name, "test:test@127.0.0.1:4500")
    }

    /// A replay of a capture taken against the cluster whose connection string is `cluster`.
    pub fn with_cluster(name: &str, cluster: &str) -> Replay {
        Replay::from_dir(&captures_dir(), name, cluster, Protocol::V7_3)
    }

    /// A replay of a 7.4.6 capture (`tests/data/fdb-captures-7.4`), by a client that speaks
    /// 7.4 from the start as libfdb_c 7.4.6 does.
    pub fn v74(name: &str) -> Replay {
        Replay::from_dir(
            &crate::captures_v74_dir(),
            name,
            "local:7ce29500b0339b84@127.0.0.1:41427",
            Protocol::V7_4,
        )
    }

    fn from_dir(dir: &std::path::Path, name: &str, cluster: &str, protocol: Protocol) -> Replay {
        let cap = load_capture(&dir.join(format!("{name}.frames.jsonl")));
        let mut frames = cap.frames.clone();
        frames.sort_by_key(|f| (f.dir == Dir::ServerToClient, f.seq));
        let server_connect = frames
            .iter()
            .find(|f| f.dir == Dir::ServerToClient && f.is_connect)
            .expect("server connect packet")
            .wire_bytes();
        let cluster = ClusterFile::parse(cluster).unwrap();
        let used = vec![false; frames.len()];
        let server = CapturedServer {
            name: name.to_string(),
            frames,
            used,
            held: Vec::new(),
            sent: Vec::new(),
        };
        let mut config = ClientConfig::new(cluster, 42);
        config.protocol = protocol;
        let mut sim = Sim::with_server(config, server);
        sim.set_hello(Bytes::from(server_connect));
        sim.drive();
        assert!(
            matches!(sim.events().first(), Some(Event::Connect { .. })),
            "the client connects first"
        );
        Replay { sim }
    }

    /// The capture's name.
    pub fn name(&self) -> &str {
        &self.sim.server.name
    }

    /// Requests we sent, by type.
    pub fn sent(&self) -> &[&'static str] {
        &self.sim.server.sent
    }

    /// Answers the watch replies held back so far.
    pub fn release_held(&mut self) {
        for (req, reply) in std::mem::take(&mut self.sim.server.held) {
            self.sim.reply_bytes(&req, &reply);
        }
    }

    /// Runs until `call` finishes.
    pub fn wait<T: Outcome>(&mut self, call: Call<T>) -> Result<T, ClientError> {
        self.sim.run(call).unwrap_or_else(|| {
            panic!(
                "{}: request {:?} never finished; sent {:?}",
                self.name(),
                call.id(),
                self.sent()
            )
        })
    }

    pub fn tx(&mut self) -> TransactionId {
        self.sim.client.create_transaction(self.sim.now())
    }

    pub fn get(
        &mut self,
        tx: TransactionId,
        key: &[u8],
        snapshot: bool,
    ) -> Result<Option<Bytes>, ClientError> {
        let r = self.sim.client.get(self.sim.now(), tx, key, snapshot);
        self.wait(r)
    }

    pub fn commit(&mut self, tx: TransactionId) -> Result<i64, ClientError> {
        let r = self.sim.client.commit(self.sim.now(), tx);
        self.wait(r).map(|c| c.version)
    }

    /// The `mutations` capture's transaction (a set, a clear, a clear range, an add and a
    /// versionstamped key, as `capture.py` writes them), committed: its committed version and
    /// versionstamp. The same program replays against the 7.3 and the 7.4 capture.
    pub fn commit_captured_mutations(&mut self) -> (i64, [u8; 10]) {
        let tx = self.tx();
        let c = &mut self.sim.client;
        c.set(tx, b"cap/mut/set", b"set-value").unwrap();
        c.clear(tx, b"cap/mut/clear").unwrap();
        c.clear_range(tx, b"cap/mut/cr/", b"cap/mut/cr0").unwrap();
        c.atomic_op(
            tx,
            b"cap/mut/counter",
            &1i64.to_le_bytes(),
            MutationType::Add,
        )
        .unwrap();
        let mut vk = b"cap/mut/vs/".to_vec();
        vk.extend_from_slice(&[0u8; 10]);
        vk.extend_from_slice(&11u32.to_le_bytes());
        c.atomic_op(tx, &vk, b"vs-value", MutationType::SetVersionstampedKey)
            .unwrap();
        let v = self.commit(tx).unwrap();
        (v, self.sim.client.versionstamp(tx).unwrap())
    }

    pub fn range(
        &mut self,
        tx: TransactionId,
        b: KeySelector,
        e: KeySelector,
        opts: RangeOptions,
    ) -> RangeResult {
        let r = self
            .sim
            .client
            .get_range(self.sim.now(), tx, b, e, opts, false);
        self.wait(r).unwrap()
    }

    /// Every captured request of these types must have been matched.
    pub fn all_used(&self, kinds: &[&str]) {
        let s = &self.sim.server;
        for (i, f) in s.frames.iter().enumerate() {
            if f.dir != Dir::ClientToServer || f.is_connect || s.used[i] {
                continue;
            }
            let name = decode_any(&f.message()).unwrap().name();
            assert!(
                !kinds.contains(&name),
                "{}: libfdb_c sent a {name} (c2s seq {}) that we did not; we sent {:?}",
                s.name,
                f.seq,
                s.sent
            );
        }
    }
}

impl Server for CapturedServer {
    /// Matches our request with the next captured one of its type and answers it with the
    /// captured reply, re-addressed to our reply token (watch replies are held back).
    fn serve(&mut self, wire: &mut Wire<'_>, req: Request) -> Option<Request> {
        let ours = &req.msg;
        self.sent.push(ours.name());
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
            mask(ours),
            mask(&theirs),
            "{}: request differs from libfdb_c's (capture c2s seq {})",
            self.name,
            self.frames[idx].seq
        );
        assert_eq!(
            req.dest,
            self.frames[idx].token(),
            "{}: {} went to another endpoint",
            self.name,
            ours.name()
        );
        let (Some(their_token), Some(_)) = (theirs.reply_token(), req.reply) else {
            return None;
        };
        let Some(reply) = self
            .frames
            .iter()
            .find(|f| f.dir == Dir::ServerToClient && !f.is_connect && f.token() == their_token)
        else {
            return None; // never answered (the held OpenDatabase long poll)
        };
        let reply = reply.message();
        if matches!(ours, AnyMessage::WatchValueRequest(_)) {
            self.held.push((req, reply));
        } else {
            wire.reply_bytes(&req, &reply);
        }
        None
    }
}

/// What a scenario recorded (`<name>.result.json`'s `result`).
pub fn result_json(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(captures_dir().join(format!("{name}.result.json")))
        .expect("result.json");
    serde_json::from_str::<serde_json::Value>(&text).expect("JSON")["result"].clone()
}
