//! `get_estimated_range_size_bytes` and `get_range_split_points`, as libfdb_c 7.3 does them
//! (`fdbclient/NativeAPI.actor.cpp`: `getStorageMetricsLargeKeyRange`, `doGetStorageMetrics`,
//! `getRangeSplitPoints`; the checks before them in `ReadYourWrites.actor.cpp`).
//!
//! Both locate every shard of `[begin, end)` (from the location cache, or with one
//! `GetKeyServerLocationsRequest` for the whole range) and send one request per shard, clipped
//! to the range, to a replica of the shard, all at once:
//!
//! * The estimate sends `WaitMetricsRequest { min.bytes: 0, max.bytes: -1 }`, which a storage
//!   server answers at once with its byte sample's estimate, and adds up the bytes. A shard
//!   answering `wrong_shard_server` or `all_alternatives_failed` is dropped from the location
//!   cache and, after `WRONG_SHARD_SERVER_DELAY`, its part alone is located and asked again;
//!   `future_version` asks again after `FUTURE_VERSION_RETRY_DELAY`. Without a tenant libfdb_c
//!   does not hand the transaction to it: no read version is needed, versions are
//!   `latestVersion` and the location lookup has a span of its own.
//! * Split points send `SplitRangeRequest { chunk_size }`. The result is `begin`, then each
//!   shard's points, preceded by the shard's begin for every shard but the first, then `end`
//!   unless the last point already is `end`. `wrong_shard_server` or `all_alternatives_failed`
//!   from any shard starts the whole read over after `WRONG_SHARD_SERVER_DELAY`; other errors,
//!   `future_version` included, fail it.
//!
//! A request that gets no answer (its connection failed, `broken_promise`,
//! `request_maybe_delivered`, `server_overloaded`) goes to the shard's next replica as
//! `loadBalance` sends it; once every replica failed it counts as `all_alternatives_failed`.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use super::op::{OpKind, Timer, Wait};
use super::replicas::FAILED_SERVER_AVOIDANCE;
use super::shards::{cover, Metric, MetricsOp, Part, PartState, TOO_MANY};
use super::state::ReadVersion;
use super::{Ctx, Transactions};
use crate::error::{knobs, ErrorCode};
use crate::event::{ClientError, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::messages::commit::GetKeyServerLocationsRequest;
use crate::messages::coordination::CommitProxyInterface;
use crate::messages::storage::{
    SplitRangeReply, SplitRangeRequest, StorageMetrics, StorageServerInterface, WaitMetricsRequest,
};
use crate::messages::types::{KeyRange, SpanContext, TenantInfo, LATEST_VERSION};
use crate::messages::{decode_reply, ErrorOr, ReplyPromise};
use crate::route::Route;
use crate::time::Instant;

impl Transactions {
    /// `fdb_transaction_get_estimated_range_size_bytes`: about how many bytes `[begin, end)`
    /// holds, by the storage servers' byte samples. Finishes with [`Reply::Size`].
    pub(crate) fn get_estimated_range_size_bytes(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
    ) -> RequestId {
        self.start_metrics(cx, tx, begin, end, Metric::Size)
    }

    /// `fdb_transaction_get_range_split_points`: keys cutting `[begin, end)` into chunks of
    /// about `chunk_size` bytes, starting with `begin` and ending with `end`. Finishes with
    /// [`Reply::Keys`].
    pub(crate) fn get_range_split_points(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        chunk_size: i64,
    ) -> RequestId {
        self.start_metrics(cx, tx, begin, end, Metric::SplitPoints(chunk_size))
    }

    pub(super) fn start_metrics(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        metric: Metric,
    ) -> RequestId {
        let req = cx.new_request();
        if let Err(e) = self.check_metrics(tx, begin, end, metric) {
            cx.finish(req, Err(e));
            return req;
        }
        let (begin, end) = (Bytes::copy_from_slice(begin), Bytes::copy_from_slice(end));
        let op = MetricsOp {
            metric,
            todo: vec![(begin.clone(), end.clone(), cx.now)],
            begin,
            end,
            parts: Vec::new(),
            epoch: 0,
            bytes: 0,
            seed: cx.rng.next_u64() as usize,
            timer: None,
        };
        self.insert_op(cx, req, tx, OpKind::Metrics(Box::new(op)));
        req
    }

    /// What libfdb_c refuses before asking anyone.
    pub(super) fn check_metrics(
        &mut self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        metric: Metric,
    ) -> Result<(), ClientError> {
        let fdb = |e| Err(ClientError::Fdb(e));
        // `KeyRangeRef`'s constructor, in `fdb_c.cpp` already.
        if begin > end {
            return fdb(ErrorCode::INVERTED_RANGE);
        }
        // `ThreadSafeTransaction` checks the deferred error, then RYW whether the commit
        // started and whether the transaction is finished (cancelled: `resetPromise`).
        self.check_usable(tx)?;
        let t = self.tx_ref(tx)?;
        if let Metric::SplitPoints(_) = metric {
            let max = t.max_read_key();
            if begin > max || end > max {
                return fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE);
            }
        }
        // `getKeyRangeLocations` asserts a non-empty range; a failed `ASSERT` throws
        // `internal_error`.
        if begin == end {
            return fdb(ErrorCode::INTERNAL_ERROR);
        }
        Ok(())
    }

    pub(super) fn metrics_op(&mut self, req: RequestId) -> Option<&mut MetricsOp> {
        match &mut self.ops.get_mut(&req)?.kind {
            OpKind::Metrics(m) => Some(m),
            _ => None,
        }
    }

    /// Locates what is due, sends what is unsent, finishes when all parts answered.
    pub(super) fn advance_metrics(&mut self, cx: &mut Ctx<'_>, req: RequestId, tx: TransactionId) {
        let now = cx.now;
        let engine = &mut *self;
        let Some(OpKind::Metrics(m)) = engine.ops.get_mut(&req).map(|o| &mut o.kind) else {
            return;
        };
        let mut lookups = Vec::new();
        let mut wake_at: Option<Instant> = None;
        for (a, b, at) in core::mem::take(&mut m.todo) {
            if at > now {
                wake_at = Some(wake_at.map_or(at, |w| w.min(at)));
                m.todo.push((a, b, at));
                continue;
            }
            match cover(&engine.locations, &a, &b) {
                Some(pieces) => {
                    for (begin, end, servers) in pieces {
                        m.parts.push(Part {
                            begin,
                            end,
                            servers,
                            state: PartState::Unsent,
                            attempt: 0,
                            sent: None,
                            points: Vec::new(),
                        });
                    }
                }
                None => {
                    lookups.push((a.clone(), b.clone()));
                    m.todo.push((a, b, at));
                }
            }
        }
        let finished = m.todo.is_empty()
            && m.parts
                .iter()
                .all(|p| matches!(p.state, PartState::Done | PartState::Retired));
        if finished {
            let reply = match m.metric {
                Metric::Size => Reply::Size(m.bytes),
                Metric::SplitPoints(_) => {
                    let mut keys = vec![m.begin.clone()];
                    for (i, p) in m.parts.iter().enumerate() {
                        if i > 0 {
                            keys.push(p.begin.clone()); // the shard boundary
                        }
                        keys.extend(p.points.iter().cloned());
                    }
                    if keys.last() != Some(&m.end) {
                        keys.push(m.end.clone());
                    }
                    Reply::Keys(keys)
                }
            };
            return self.succeed_op(cx, req, reply);
        }
        let metric = m.metric;
        let arm = wake_at.filter(|w| m.timer.is_none_or(|t| t > *w || t <= now));
        if arm.is_some() {
            m.timer = arm;
        }
        let unsent: Vec<usize> = (0..m.parts.len())
            .filter(|&i| m.parts[i].state == PartState::Unsent)
            .collect();
        if let Some(at) = arm {
            engine.add_timer(at, Timer::Op(req));
        }
        for i in unsent {
            self.send_part(cx, req, i);
        }
        for (a, b) in &lookups {
            self.locate_range(cx, tx, a, b, metric);
        }
        let wait = if lookups.is_empty() {
            Wait::Reply
        } else {
            Wait::Location
        };
        self.set_wait(req, wait);
    }

    /// Asks a commit proxy for every shard of `[begin, end)`, as `getKeyRangeLocations` does.
    pub(super) fn locate_range(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        begin: &Bytes,
        end: &Bytes,
        metric: Metric,
    ) {
        if self.location_backoff.holding(cx.now) {
            return; // woken when the backoff ends
        }
        let k = (begin.clone(), false);
        if self.locating.contains(&k) {
            return;
        }
        let Some(proxy) = cx.pick_commit_proxy(CommitProxyInterface::GET_KEY_SERVERS_LOCATIONS)
        else {
            return; // woken again when the cluster names proxies
        };
        let (limit, span_context, min_version) = match metric {
            // `getStorageMetricsLargeKeyRange` without a transaction: a span of its own and
            // `latestVersion`.
            Metric::Size => {
                let span = SpanContext {
                    trace_id: cx.rng.uid(),
                    span_id: cx.rng.next_u64(),
                    flags: 0,
                };
                (i32::MAX, span, LATEST_VERSION)
            }
            // `getKeyRangeLocations(trState, ...)`: the transaction's span, and its read
            // version if it has one.
            Metric::SplitPoints(_) => {
                let version = match self.txs.get(&tx).map(|t| t.read_version) {
                    Some(ReadVersion::Ready(v)) => v,
                    _ => LATEST_VERSION,
                };
                (TOO_MANY, self.span(cx, tx), version)
            }
        };
        let token = cx.rng.uid();
        let msg = GetKeyServerLocationsRequest {
            begin: begin.clone(),
            end: Some(end.clone()),
            limit,
            reverse: false,
            reply: ReplyPromise { token },
            span_context,
            tenant: TenantInfo::none(),
            min_tenant_version: min_version,
        };
        let addr = proxy.commit.endpoint.addresses.address.clone();
        let dest = proxy.stream(CommitProxyInterface::GET_KEY_SERVERS_LOCATIONS);
        self.locating.insert(k);
        let pending = Route::Locations {
            key: begin.clone(),
            reverse: false,
        };
        cx.send(&addr, dest, &msg, token, pending);
    }

    /// The replica for a part's attempt: like `choose_replica`, the healthy one with the
    /// lowest smoothed latency first, then the others in turn; recently failed ones only
    /// when nothing else is left.
    pub(super) fn part_replica(
        &self,
        cx: &Ctx<'_>,
        servers: &[StorageServerInterface],
        start: usize,
        attempt: usize,
    ) -> usize {
        let n = servers.len();
        let order: Vec<usize> = (0..n)
            .map(|j| start.wrapping_add(attempt).wrapping_add(j) % n)
            .collect();
        let stats = |i: &usize| {
            self.servers
                .get(&servers[*i].unique_id)
                .copied()
                .unwrap_or_default()
        };
        let healthy: Vec<usize> = order
            .iter()
            .copied()
            .filter(|i| stats(i).failed_until.is_none_or(|t| t <= cx.now))
            .collect();
        let pool = if healthy.is_empty() { order } else { healthy };
        if attempt == 0 {
            *pool
                .iter()
                .min_by_key(|i| stats(i).latency.unwrap_or(Duration::ZERO))
                .expect("a shard has servers")
        } else {
            pool[0]
        }
    }

    pub(super) fn send_part(&mut self, cx: &mut Ctx<'_>, req: RequestId, i: usize) {
        let now = cx.now;
        let Some(m) = self.metrics_op(req) else {
            return;
        };
        let (metric, epoch, start) = (m.metric, m.epoch, m.seed.wrapping_add(i));
        let Some(p) = m.parts.get(i) else {
            return;
        };
        if p.servers.is_empty() {
            return;
        }
        let keys = KeyRange::new(p.begin.clone(), p.end.clone());
        let (servers, attempt) = (p.servers.clone(), p.attempt);
        let server = servers[self.part_replica(cx, &servers, start, attempt)].clone();
        let token = cx.rng.uid();
        let reply = ReplyPromise { token };
        let addr = server.get_value.endpoint.addresses.address.clone();
        let pending = Route::Metrics {
            op: req,
            part: i as u32,
            epoch,
        };
        match metric {
            Metric::Size => {
                // `doGetStorageMetrics`: a reversed min/max asks for an immediate answer.
                let msg = WaitMetricsRequest {
                    keys,
                    min: StorageMetrics::default(),
                    max: StorageMetrics {
                        bytes: -1,
                        ..StorageMetrics::default()
                    },
                    reply,
                    tenant_info: TenantInfo::none(),
                    min_version: LATEST_VERSION,
                };
                let dest = server.stream(StorageServerInterface::WAIT_METRICS);
                cx.send(&addr, dest, &msg, token, pending);
            }
            Metric::SplitPoints(chunk_size) => {
                let msg = SplitRangeRequest {
                    keys,
                    chunk_size,
                    reply,
                    tenant_info: TenantInfo::none(),
                };
                let dest = server.stream(StorageServerInterface::GET_RANGE_SPLIT_POINTS);
                cx.send(&addr, dest, &msg, token, pending);
            }
        }
        if let Some(p) = self.metrics_op(req).and_then(|m| m.parts.get_mut(i)) {
            p.state = PartState::InFlight;
            p.sent = Some((server.unique_id, now));
        }
    }

    /// The part a reply or loss is about, if it is still waiting for one.
    pub(super) fn waiting_part(
        &mut self,
        req: RequestId,
        part: u32,
        epoch: u32,
    ) -> Option<&mut Part> {
        let m = self.metrics_op(req)?;
        if m.epoch != epoch {
            return None;
        }
        m.parts
            .get_mut(part as usize)
            .filter(|p| p.state == PartState::InFlight)
    }

    pub(crate) fn on_metrics_reply(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        part: u32,
        epoch: u32,
        msg: &Bytes,
    ) {
        let now = cx.now;
        let Some(p) = self.waiting_part(req, part, epoch) else {
            return;
        };
        let (begin, end) = (p.begin.clone(), p.end.clone());
        if let Some((id, sent)) = p.sent.take() {
            let s = self.servers.entry(id).or_default();
            let lat = now.saturating_since(sent);
            s.latency = Some(match s.latency {
                Some(old) => (old * 4 + lat) / 5,
                None => lat,
            });
            s.failed_until = None;
        }
        let Some(metric) = self.metrics_op(req).map(|m| m.metric) else {
            return;
        };
        let i = part as usize;
        let outcome = match metric {
            Metric::Size => match decode_reply::<StorageMetrics>(msg) {
                Ok(ErrorOr::Ok(r)) => Ok((r.bytes, Vec::new())),
                Ok(ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
                Err(e) => Err(ClientError::Decode(e)),
            },
            Metric::SplitPoints(_) => match decode_reply::<SplitRangeReply>(msg) {
                Ok(ErrorOr::Ok(r)) => {
                    // A storage server answers points after the part's begin, up to its end,
                    // ascending; anything else would make a wrong answer.
                    let ordered = r.split_points.windows(2).all(|w| w[0] < w[1]);
                    let inside = r.split_points.iter().all(|k| begin < *k && *k <= end);
                    if ordered && inside {
                        Ok((0, r.split_points))
                    } else {
                        Err(ClientError::Decode(
                            crate::serializer::DecodeError::InvalidValue(
                                "split points outside their request",
                            ),
                        ))
                    }
                }
                Ok(ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
                Err(e) => Err(ClientError::Decode(e)),
            },
        };
        match outcome {
            Ok((bytes, points)) => {
                if let Some(m) = self.metrics_op(req) {
                    m.bytes = m.bytes.saturating_add(bytes);
                    if let Some(p) = m.parts.get_mut(i) {
                        p.state = PartState::Done;
                        p.points = points;
                    }
                }
                self.set_wait(req, Wait::Ready);
            }
            Err(ClientError::Fdb(code)) => self.on_metrics_error(cx, req, i, metric, code),
            Err(e) => self.fail_op(cx, req, e),
        }
    }

    pub(super) fn on_metrics_error(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        i: usize,
        metric: Metric,
        code: ErrorCode,
    ) {
        if code == ErrorCode::WRONG_SHARD_SERVER || code == ErrorCode::ALL_ALTERNATIVES_FAILED {
            self.metrics_relocate(cx, req, i);
        } else if code == ErrorCode::BROKEN_PROMISE
            || code == ErrorCode::REQUEST_MAYBE_DELIVERED
            || code == ErrorCode::SERVER_OVERLOADED
        {
            self.metrics_next_replica(cx, req, i);
        } else if code == ErrorCode::FUTURE_VERSION && metric == Metric::Size {
            let at = cx.now + knobs::FUTURE_VERSION_RETRY_DELAY;
            if let Some(m) = self.metrics_op(req) {
                if let Some(p) = m.parts.get_mut(i) {
                    p.state = PartState::Retired;
                    m.todo.push((p.begin.clone(), p.end.clone(), at));
                }
            }
            self.set_wait(req, Wait::Ready);
        } else {
            self.fail_op(cx, req, ClientError::Fdb(code));
        }
    }

    /// `wrong_shard_server` / `all_alternatives_failed`: forget the locations and locate
    /// again after `WRONG_SHARD_SERVER_DELAY` (the part alone for the estimate, everything
    /// for split points).
    pub(super) fn metrics_relocate(&mut self, cx: &mut Ctx<'_>, req: RequestId, i: usize) {
        let at = cx.now + knobs::WRONG_SHARD_SERVER_DELAY;
        let Some(m) = self.metrics_op(req) else {
            return;
        };
        let (a, b) = match m.metric {
            Metric::Size => {
                let Some(p) = m.parts.get_mut(i) else {
                    return;
                };
                p.state = PartState::Retired;
                (p.begin.clone(), p.end.clone())
            }
            Metric::SplitPoints(_) => {
                m.parts.clear();
                m.epoch = m.epoch.wrapping_add(1);
                (m.begin.clone(), m.end.clone())
            }
        };
        m.todo.push((a.clone(), b.clone(), at));
        self.locations.invalidate_range(&a, &b);
        self.set_wait(req, Wait::Ready);
    }

    /// The replica did not answer: try the next one; after all of them, relocate.
    pub(super) fn metrics_next_replica(&mut self, cx: &mut Ctx<'_>, req: RequestId, i: usize) {
        let until = cx.now + FAILED_SERVER_AVOIDANCE;
        let Some(p) = self.metrics_op(req).and_then(|m| m.parts.get_mut(i)) else {
            return;
        };
        let failed = p.sent.take().map(|(id, _)| id);
        p.attempt += 1;
        let all_failed = p.attempt >= p.servers.len();
        if !all_failed {
            p.state = PartState::Unsent;
        }
        if let Some(id) = failed {
            self.servers.entry(id).or_default().failed_until = Some(until);
        }
        if all_failed {
            self.metrics_relocate(cx, req, i);
        } else {
            self.set_wait(req, Wait::Ready);
        }
    }

    pub(crate) fn on_metrics_lost(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        part: u32,
        epoch: u32,
    ) {
        if self.waiting_part(req, part, epoch).is_some() {
            self.metrics_next_replica(cx, req, part as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_file::ClusterFile;
    use crate::framing::{encode_packet, ConnectPacket, FrameDecoder, Incoming, ProtocolVersion};
    use crate::messages::commit::{GetKeyServerLocationsReply, ShardLocation};
    use crate::messages::coordination::{ClientDBInfo, GrvProxyInterface};
    use crate::messages::{
        decode_any, encode_reply, AnyMessage, Endpoint, IpAddress, NetworkAddress,
        NetworkAddressList, RequestStream,
    };
    use crate::uid::Uid;
    use crate::{Call, Client, ClientConfig, Completion, ConnectionId, Event, Outcome};
    use alloc::collections::BTreeMap;
    use bytes::BytesMut;

    pub(super) fn stream(port: u16, token: Uid) -> RequestStream {
        RequestStream {
            endpoint: Endpoint {
                addresses: NetworkAddressList {
                    address: NetworkAddress {
                        ip: IpAddress::V4(0x7f00_0001),
                        port,
                        flags: 0,
                        from_hostname: false,
                    },
                    secondary_address: None,
                },
                token,
            },
        }
    }

    /// A storage request the sim holds for the test to answer.
    struct Held {
        conn: ConnectionId,
        dest: Uid,
        msg: AnyMessage,
    }

    impl Held {
        fn token(&self) -> Uid {
            match &self.msg {
                AnyMessage::WaitMetricsRequest(r) => r.reply.token,
                AnyMessage::SplitRangeRequest(r) => r.reply.token,
                _ => unreachable!(),
            }
        }
        fn keys(&self) -> (&[u8], &[u8]) {
            let k = match &self.msg {
                AnyMessage::WaitMetricsRequest(r) => &r.keys,
                AnyMessage::SplitRangeRequest(r) => &r.keys,
                _ => unreachable!(),
            };
            (&k.begin, &k.end)
        }
    }

    /// A client against a scripted cluster: the coordinator and proxy answer at once (shards
    /// from `shards`), storage requests wait in `held`.
    struct Sim {
        c: Client,
        now: Instant,
        decoders: BTreeMap<u64, FrameDecoder>,
        info: ClientDBInfo,
        servers: Vec<StorageServerInterface>,
        /// `(begin, end, servers)`.
        shards: Vec<(&'static [u8], &'static [u8], Vec<usize>)>,
        held: Vec<Held>,
        locations: Vec<GetKeyServerLocationsRequest>,
        grvs: usize,
        done: BTreeMap<RequestId, Completion>,
    }

    impl Sim {
        fn new(shards: Vec<(&'static [u8], &'static [u8], Vec<usize>)>) -> Sim {
            let cluster = ClusterFile::parse("t:t@127.0.0.1:4500").unwrap();
            let now = Instant::ZERO;
            let info = ClientDBInfo {
                grv_proxies: vec![GrvProxyInterface {
                    get_consistent_read_version: stream(4500, Uid::new(1, 0x10)),
                    ..Default::default()
                }],
                commit_proxies: vec![CommitProxyInterface {
                    commit: stream(4500, Uid::new(2, 0x20)),
                    ..Default::default()
                }],
                id: Uid::new(3, 3),
                ..Default::default()
            };
            let servers = (0..3u16)
                .map(|i| StorageServerInterface {
                    unique_id: Uid::new(100 + i as u64, 1),
                    get_value: stream(4501 + i, Uid::new(200 + i as u64, 0x1000)),
                    accepting_requests: true,
                    ..Default::default()
                })
                .collect();
            let mut sim = Sim {
                c: Client::new(ClientConfig::new(cluster, 7), now),
                now,
                decoders: BTreeMap::new(),
                info,
                servers,
                shards,
                held: Vec::new(),
                locations: Vec::new(),
                grvs: 0,
                done: BTreeMap::new(),
            };
            sim.pump();
            sim
        }

        /// The result of `call`, once it completed.
        fn take<T: Outcome>(&mut self, call: Call<T>) -> Option<Result<T, ClientError>> {
            self.done.remove(&call.id()).map(|c| call.take(c))
        }

        fn send(&mut self, conn: ConnectionId, token: Uid, body: &[u8]) {
            let mut out = BytesMut::new();
            encode_packet(&mut out, token, body, true);
            self.c.handle_input(conn, self.now, &out);
        }

        fn pump(&mut self) {
            loop {
                let mut progress = false;
                while let Some(ev) = self.c.poll_event() {
                    progress = true;
                    match ev {
                        Event::Connect { conn, .. } => {
                            self.c.handle_connected(conn, self.now);
                            let mut hello = BytesMut::new();
                            ConnectPacket::client(ProtocolVersion::V7_3).encode(&mut hello);
                            self.c.handle_input(conn, self.now, &hello);
                        }
                        Event::Complete(c) => {
                            self.done.insert(c.request(), c);
                        }
                        _ => {}
                    }
                }
                while let Some(t) = self.c.poll_transmit() {
                    progress = true;
                    let d = self
                        .decoders
                        .entry(t.conn.0)
                        .or_insert_with(|| FrameDecoder::new(true, true));
                    d.feed(&t.data);
                    let mut frames = Vec::new();
                    while let Ok(Some(f)) = d.next_frame() {
                        frames.push(f);
                    }
                    for f in frames {
                        let Incoming::Packet(p) = f else { continue };
                        let msg = decode_any(&p.message).expect("a known request");
                        self.serve(t.conn, p.token, msg);
                    }
                }
                if !progress {
                    break;
                }
            }
        }

        fn serve(&mut self, conn: ConnectionId, dest: Uid, msg: AnyMessage) {
            match msg {
                AnyMessage::OpenDatabaseCoordRequest(r)
                    if r.known_client_info_id == Uid::default() =>
                {
                    let body = encode_reply(&ErrorOr::Ok(self.info.clone()));
                    self.send(conn, r.reply.token, &body);
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
                    let token = r.reply.token;
                    self.locations.push(r);
                    let body = encode_reply(&ErrorOr::Ok(GetKeyServerLocationsReply {
                        results,
                        ..Default::default()
                    }));
                    self.send(conn, token, &body);
                }
                m @ (AnyMessage::WaitMetricsRequest(_) | AnyMessage::SplitRangeRequest(_)) => {
                    self.held.push(Held { conn, dest, msg: m })
                }
                _ => {}
            }
        }

        /// Answers the held request for `[begin, ..)` with `body`.
        fn answer(&mut self, begin: &[u8], body: Vec<u8>) {
            let i = self
                .held
                .iter()
                .position(|h| h.keys().0 == begin)
                .expect("a held request for that part");
            let h = self.held.remove(i);
            self.send(h.conn, h.token(), &body);
            self.pump();
        }

        fn advance(&mut self, d: Duration) {
            self.now = self.now + d;
            self.c.handle_timeout(self.now);
            self.pump();
        }

        fn server_of(&self, dest: Uid, stream: u32) -> usize {
            (0..self.servers.len())
                .find(|&i| self.servers[i].stream(stream) == dest)
                .expect("sent to a storage stream")
        }
    }

    pub(super) fn metrics(bytes: i64) -> Vec<u8> {
        encode_reply(&ErrorOr::Ok(StorageMetrics {
            bytes,
            ..Default::default()
        }))
    }

    pub(super) fn points(keys: &[&'static [u8]]) -> Vec<u8> {
        encode_reply(&ErrorOr::Ok(SplitRangeReply {
            split_points: keys.iter().map(|k| Bytes::from_static(k)).collect(),
        }))
    }

    pub(super) fn error<T: crate::serializer::Message>(e: ErrorCode) -> Vec<u8> {
        encode_reply::<T>(&ErrorOr::Err(e))
    }

    pub(super) fn three_shards() -> Vec<(&'static [u8], &'static [u8], Vec<usize>)> {
        vec![
            (b"", b"b", vec![0]),
            (b"b", b"d", vec![1]),
            (b"d", b"\xff\xff", vec![2]),
        ]
    }

    pub(super) fn keys(v: &[&'static [u8]]) -> Vec<Bytes> {
        v.iter().map(|k| Bytes::from_static(k)).collect()
    }

    #[test]
    pub(super) fn estimate_asks_every_shard_and_adds_up() {
        let mut s = Sim::new(three_shards());
        let tx = s.c.create_transaction(s.now);
        let req = s.c.get_estimated_range_size_bytes(s.now, tx, b"a", b"e");
        s.pump();
        // One lookup for the whole range, as `getStorageMetricsLargeKeyRange` makes it; no
        // read version.
        assert_eq!(s.locations.len(), 1);
        let l = &s.locations[0];
        assert_eq!(
            (&l.begin[..], l.end.as_deref()),
            (&b"a"[..], Some(&b"e"[..]))
        );
        assert_eq!(l.limit, i32::MAX);
        assert_eq!(l.min_tenant_version, LATEST_VERSION);
        assert_eq!(s.grvs, 0);
        let mut parts: Vec<(Vec<u8>, Vec<u8>, usize)> = s
            .held
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
        assert!(s.done.is_empty());
        s.answer(b"d", metrics(3));
        assert_eq!(s.take(req), Some(Ok(123)));

        // The locations are cached now: the next estimate asks no proxy.
        let req = s.c.get_estimated_range_size_bytes(s.now, tx, b"b", b"c");
        s.pump();
        assert_eq!(s.locations.len(), 1);
        s.answer(b"b", metrics(7));
        assert_eq!(s.take(req), Some(Ok(7)));
    }

    #[test]
    pub(super) fn estimate_relocates_only_the_wrong_shard() {
        let mut s = Sim::new(three_shards());
        let tx = s.c.create_transaction(s.now);
        let req = s.c.get_estimated_range_size_bytes(s.now, tx, b"a", b"e");
        s.pump();
        s.answer(b"a", metrics(100));
        s.answer(b"b", error::<StorageMetrics>(ErrorCode::WRONG_SHARD_SERVER));
        // `WRONG_SHARD_SERVER_DELAY` first.
        assert_eq!(s.locations.len(), 1);
        s.advance(Duration::from_millis(5));
        assert_eq!(s.locations.len(), 1);
        s.advance(Duration::from_millis(5));
        assert_eq!(s.locations.len(), 2);
        let l = &s.locations[1];
        assert_eq!(
            (&l.begin[..], l.end.as_deref()),
            (&b"b"[..], Some(&b"d"[..]))
        );
        // The shard moved meanwhile: its part is now split in two.
        s.shards = vec![
            (b"", b"b", vec![0]),
            (b"b", b"c", vec![2]),
            (b"c", b"d", vec![0]),
            (b"d", b"\xff\xff", vec![2]),
        ];
        let again: Vec<(Vec<u8>, Vec<u8>)> = s
            .held
            .iter()
            .map(|h| (h.keys().0.to_vec(), h.keys().1.to_vec()))
            .collect();
        assert_eq!(again.len(), 2, "{again:?}"); // [d, e) and the new [b, d)
        s.answer(b"b", error::<StorageMetrics>(ErrorCode::WRONG_SHARD_SERVER));
        s.advance(Duration::from_millis(10));
        assert_eq!(s.locations.len(), 3);
        let mut parts: Vec<_> = s.held.iter().map(|h| h.keys().0.to_vec()).collect();
        parts.sort();
        assert_eq!(parts, vec![b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]);
        s.answer(b"b", metrics(1));
        s.answer(b"c", metrics(2));
        s.answer(b"d", metrics(3));
        assert_eq!(s.take(req), Some(Ok(106)));
    }

    #[test]
    pub(super) fn estimate_retries_future_version_and_fails_on_other_errors() {
        let mut s = Sim::new(three_shards());
        let tx = s.c.create_transaction(s.now);
        let req = s.c.get_estimated_range_size_bytes(s.now, tx, b"a", b"b");
        s.pump();
        s.answer(b"a", error::<StorageMetrics>(ErrorCode::FUTURE_VERSION));
        assert!(s.held.is_empty());
        s.advance(knobs::FUTURE_VERSION_RETRY_DELAY);
        assert_eq!(s.locations.len(), 1, "future_version keeps the location");
        s.answer(b"a", metrics(9));
        assert_eq!(s.take(req), Some(Ok(9)));

        let req = s.c.get_estimated_range_size_bytes(s.now, tx, b"a", b"e");
        s.pump();
        s.answer(b"b", error::<StorageMetrics>(ErrorCode::TENANT_NOT_FOUND));
        assert_eq!(
            s.take(req),
            Some(Err(ClientError::Fdb(ErrorCode::TENANT_NOT_FOUND)))
        );
        // Late answers of the failed read change nothing.
        s.answer(b"a", metrics(1));
        s.answer(b"d", metrics(1));
        assert!(s.done.is_empty());
    }

    #[test]
    pub(super) fn lost_request_goes_to_the_next_replica() {
        let mut s = Sim::new(vec![(b"", b"\xff\xff", vec![0, 1])]);
        let tx = s.c.create_transaction(s.now);
        let req = s.c.get_estimated_range_size_bytes(s.now, tx, b"a", b"z");
        s.pump();
        let first = s.server_of(s.held[0].dest, StorageServerInterface::WAIT_METRICS);
        let conn = s.held.remove(0).conn;
        s.c.handle_closed(conn, s.now);
        s.pump();
        assert_eq!(s.held.len(), 1);
        let second = s.server_of(s.held[0].dest, StorageServerInterface::WAIT_METRICS);
        assert_ne!(first, second);
        s.answer(b"a", metrics(5));
        assert_eq!(s.take(req), Some(Ok(5)));
    }

    #[test]
    pub(super) fn split_points_concatenate_shards_with_their_boundaries() {
        let mut s = Sim::new(three_shards());
        let tx = s.c.create_transaction(s.now);
        let req = s.c.get_range_split_points(s.now, tx, b"a", b"e", 1000);
        s.pump();
        assert_eq!(s.locations.len(), 1);
        assert_eq!(s.locations[0].limit, TOO_MANY);
        assert_eq!(s.locations[0].min_tenant_version, LATEST_VERSION);
        assert_eq!(s.grvs, 0);
        for h in &s.held {
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
        let req = s.c.get_range_split_points(s.now, tx, b"b1", b"c", 1000);
        s.pump();
        s.answer(b"b1", points(&[]));
        assert_eq!(s.take(req), Some(Ok(keys(&[b"b1", b"c"]))));
    }

    #[test]
    pub(super) fn split_points_start_over_on_wrong_shard_server() {
        let mut s = Sim::new(three_shards());
        let tx = s.c.create_transaction(s.now);
        let req = s.c.get_range_split_points(s.now, tx, b"a", b"e", 10);
        s.pump();
        s.answer(b"a", points(&[b"a5"]));
        s.answer(
            b"b",
            error::<SplitRangeReply>(ErrorCode::ALL_ALTERNATIVES_FAILED),
        );
        // The answer still in flight belongs to the abandoned pass.
        s.answer(b"d", points(&[b"d5"]));
        assert!(s.done.is_empty() && s.held.is_empty());
        s.advance(knobs::WRONG_SHARD_SERVER_DELAY);
        assert_eq!(s.locations.len(), 2);
        assert_eq!(&s.locations[1].begin[..], b"a");
        assert_eq!(s.held.len(), 3);
        s.answer(b"a", points(&[b"a6"]));
        s.answer(b"b", points(&[b"c"]));
        s.answer(b"d", points(&[]));
        assert_eq!(
            s.take(req),
            Some(Ok(keys(&[b"a", b"a6", b"b", b"c", b"d", b"e"])))
        );
    }

    #[test]
    pub(super) fn split_points_fail_on_future_version_and_bad_answers() {
        let mut s = Sim::new(three_shards());
        let tx = s.c.create_transaction(s.now);
        let req = s.c.get_range_split_points(s.now, tx, b"a", b"b", 10);
        s.pump();
        s.answer(b"a", error::<SplitRangeReply>(ErrorCode::FUTURE_VERSION));
        assert_eq!(
            s.take(req),
            Some(Err(ClientError::Fdb(ErrorCode::FUTURE_VERSION)))
        );
        let req = s.c.get_range_split_points(s.now, tx, b"a", b"b", 10);
        s.pump();
        s.answer(b"a", points(&[b"c"]));
        assert!(matches!(s.take(req), Some(Err(ClientError::Decode(_)))));
    }

    #[test]
    pub(super) fn refused_before_asking() {
        let mut s = Sim::new(three_shards());
        let tx = s.c.create_transaction(s.now);
        let cases: [(RequestId, ErrorCode); 5] = [
            (
                s.c.get_estimated_range_size_bytes(s.now, tx, b"b", b"a")
                    .id(),
                ErrorCode::INVERTED_RANGE,
            ),
            (
                s.c.get_estimated_range_size_bytes(s.now, tx, b"a", b"a")
                    .id(),
                ErrorCode::INTERNAL_ERROR,
            ),
            (
                s.c.get_range_split_points(s.now, tx, b"a", b"\xff\x01", 10)
                    .id(),
                ErrorCode::KEY_OUTSIDE_LEGAL_RANGE,
            ),
            (
                s.c.get_range_split_points(s.now, TransactionId(99), b"a", b"b", 10)
                    .id(),
                ErrorCode::TRANSACTION_CANCELLED,
            ),
            (
                s.c.get_range_split_points(s.now, tx, b"a", b"a", 10).id(),
                ErrorCode::INTERNAL_ERROR,
            ),
        ];
        s.pump();
        for (req, code) in cases {
            let done = s.done.remove(&req).expect("refused at once");
            assert_eq!(done.error(), Some(&ClientError::Fdb(code)));
        }
        // System keys are fine for the estimate, and for split points with the option.
        let req =
            s.c.get_estimated_range_size_bytes(s.now, tx, b"a", b"\xff\x01");
        s.pump();
        assert!(!s.done.contains_key(&req.id()));
        s.c.set_option(
            s.now,
            tx,
            crate::transaction::TransactionOption::ReadSystemKeys,
        )
        .unwrap();
        let req = s.c.get_range_split_points(s.now, tx, b"a", b"\xff\x01", 10);
        s.pump();
        assert!(!s.done.contains_key(&req.id()));
        s.c.set(tx, b"k", b"v").unwrap();
        let _ = s.c.commit(s.now, tx); // waits for a read version the sim never gives
        s.pump();
        let req = s.c.get_estimated_range_size_bytes(s.now, tx, b"a", b"b");
        s.pump();
        assert_eq!(
            s.take(req),
            Some(Err(ClientError::Fdb(ErrorCode::USED_DURING_COMMIT)))
        );
    }

    #[test]
    pub(super) fn a_reset_transaction_cancels_the_read() {
        let mut s = Sim::new(three_shards());
        let tx = s.c.create_transaction(s.now);
        let req = s.c.get_estimated_range_size_bytes(s.now, tx, b"a", b"e");
        s.pump();
        s.c.reset_transaction(s.now, tx);
        s.pump();
        assert_eq!(
            s.take(req),
            Some(Err(ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED)))
        );
        s.answer(b"a", metrics(1));
        assert!(s.done.is_empty());
    }
}
