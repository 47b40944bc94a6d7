//! `get_estimated_range_size_bytes` and `get_range_split_points`, as libfdb_c 7.3 does them
//! (`fdbclient/NativeAPI.actor.cpp`: `getStorageMetricsLargeKeyRange`, `doGetStorageMetrics`,
//! `getRangeSplitPoints`; the checks before them in `ReadYourWrites.actor.cpp`).
//!
//! Both check their range first (inverted, empty, past the readable keys for split points)
//! and, in a tenant, wait for the transaction's tenant id and read version. Both then locate
//! every shard of `[begin, end)` (from the location cache, or with one
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

use super::shards::{cover, Metric, Part, PartState, TOO_MANY};
use super::{OpId, OpKind, OpTable, Timer, Wait};
use crate::error::ErrorCode;
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
use crate::transaction::replicas::{Routing, FAILED_SERVER_AVOIDANCE};
use crate::transaction::state::ReadVersion;
use crate::transaction::tenant::{relative_range, tenant_prefix, with_prefix};
use crate::transaction::{Ctx, Transactions};

/// A metrics read in flight: [`OpKind::Metrics`]'s state.
#[derive(Debug)]
pub(in crate::transaction) struct MetricsOp {
    metric: Metric,
    begin: Bytes,
    end: Bytes,
    /// Ranges still to locate, each not before its instant.
    todo: Vec<(Bytes, Bytes, Instant)>,
    /// Requests sent, in key order within one location pass.
    parts: Vec<Part>,
    /// Bumped when split points start over: replies of earlier passes are stale.
    epoch: u32,
    /// The bytes answered so far (estimate).
    bytes: i64,
    /// Spreads first choices of replica across ops.
    seed: usize,
    /// The wake-up already armed.
    timer: Option<Instant>,
    /// Whether the transaction has started (in a tenant: its tenant id and read version
    /// are known, and `todo` holds the prefixed ranges).
    started: bool,
    /// The tenant's prefix, in a tenant: parts are located by their prefixed keys and asked
    /// for with the tenant's keys and its `TenantInfo`.
    prefix: Option<Bytes>,
    /// The read version the requests carry (`latestVersion` outside a tenant).
    version: i64,
}

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
        MetricsOp::start(self, cx, tx, begin, end, Metric::Size)
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
        MetricsOp::start(self, cx, tx, begin, end, Metric::SplitPoints(chunk_size))
    }

    /// A storage server answered part `part` of metrics read `req` (pass `epoch`).
    pub(crate) fn on_metrics_reply(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        part: u32,
        epoch: u32,
        msg: &Bytes,
    ) {
        MetricsOp::on_reply(
            &mut self.table,
            &mut self.routing,
            cx,
            req,
            part,
            epoch,
            msg,
        )
    }

    /// Part `part`'s request of metrics read `req` (pass `epoch`) got no answer.
    pub(crate) fn on_metrics_lost(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        part: u32,
        epoch: u32,
    ) {
        if MetricsOp::waiting_part(&mut self.table, req, part, epoch).is_some() {
            MetricsOp::next_replica(&mut self.table, &mut self.routing, cx, req, part as usize);
        }
    }
}

/// The metrics read's steps. Those after the requests are sent take only the op table and
/// the routing (a metrics read is no read of the transaction: failing it touches no
/// transaction).
impl MetricsOp {
    /// Starts a metrics read: the checks, then the op.
    fn start(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        metric: Metric,
    ) -> RequestId {
        let req = cx.new_request();
        if let Err(e) = MetricsOp::check(txs, tx, begin, end, metric) {
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
            started: false,
            prefix: None,
            version: LATEST_VERSION,
        };
        txs.insert_op(cx, req, tx, OpKind::Metrics(Box::new(op)));
        req
    }

    /// What libfdb_c refuses before asking anyone.
    fn check(
        txs: &mut Transactions,
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
        txs.check_usable(tx)?;
        let t = txs.tx_ref(tx)?;
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

    /// In a tenant, both wait for the transaction to start (`startTransaction`: its tenant
    /// id and read version; a failed tenant lookup fails them) and then work on the tenant's
    /// keys. `false` while waiting or once failed.
    fn start_in_tenant(txs: &mut Transactions, cx: &mut Ctx<'_>, id: OpId) -> bool {
        let OpId { req, tx } = id;
        let mut tenant = None;
        if txs.tx_tenants.contains_key(&tx) {
            let version = match txs.read_version_for(cx, id, false) {
                Some(Ok(v)) => v,
                Some(Err(e)) => {
                    txs.fail_op(cx, req, e);
                    return false;
                }
                None => return false,
            };
            let Some(id) = txs.tx_tenant(tx) else {
                txs.fail_op(cx, req, ClientError::Fdb(ErrorCode::TENANT_NOT_FOUND));
                return false;
            };
            tenant = Some((Bytes::copy_from_slice(&tenant_prefix(id)), version));
        }
        let Some(m) = MetricsOp::of(&mut txs.table, req) else {
            return false;
        };
        m.started = true;
        if let Some((prefix, version)) = tenant {
            for (a, b, _) in &mut m.todo {
                *a = with_prefix(&prefix, a);
                *b = with_prefix(&prefix, b);
            }
            m.prefix = Some(prefix);
            m.version = version;
        }
        true
    }

    /// Operation `req`'s metrics read.
    fn of(table: &mut OpTable, req: RequestId) -> Option<&mut MetricsOp> {
        match &mut table.ops.get_mut(&req)?.kind {
            OpKind::Metrics(m) => Some(m),
            _ => None,
        }
    }

    /// Locates what is due, sends what is unsent, finishes when all parts answered.
    pub(super) fn advance(txs: &mut Transactions, cx: &mut Ctx<'_>, id: OpId) {
        let OpId { req, tx } = id;
        if !MetricsOp::of(&mut txs.table, req).is_some_and(|m| m.started)
            && !MetricsOp::start_in_tenant(txs, cx, id)
        {
            return;
        }
        let now = cx.now;
        let engine = &mut *txs;
        let Some(OpKind::Metrics(m)) = engine.table.ops.get_mut(&req).map(|o| &mut o.kind) else {
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
            match cover(&engine.routing.locations, &a, &b) {
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
                            // The shard boundary (the tenant's key, in a tenant).
                            keys.push(match &m.prefix {
                                Some(prefix) => relative_range(prefix, &p.begin, &p.end).0,
                                None => p.begin.clone(),
                            });
                        }
                        keys.extend(p.points.iter().cloned());
                    }
                    if keys.last() != Some(&m.end) {
                        keys.push(m.end.clone());
                    }
                    Reply::Keys(keys)
                }
            };
            return txs.succeed_op(cx, req, reply);
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
            engine.table.add_timer(at, Timer::Op(req));
        }
        for i in unsent {
            MetricsOp::send_part(txs, cx, req, i);
        }
        for (a, b) in &lookups {
            MetricsOp::locate(txs, cx, tx, a, b, metric);
        }
        let wait = if lookups.is_empty() {
            Wait::Reply
        } else {
            Wait::Location
        };
        txs.table.set_wait(req, wait);
    }

    /// Asks a commit proxy for every shard of `[begin, end)`, as `getKeyRangeLocations` does.
    fn locate(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        begin: &Bytes,
        end: &Bytes,
        metric: Metric,
    ) {
        if txs.routing.lookups_held(cx.now) {
            return; // woken when the backoff ends
        }
        let k = (begin.clone(), false);
        if txs.routing.locating(&k) {
            return;
        }
        let Some(proxy) = cx.pick_commit_proxy(CommitProxyInterface::GET_KEY_SERVERS_LOCATIONS)
        else {
            return; // woken again when the cluster names proxies
        };
        let tenant_version = txs.table.ops.values().find_map(|o| match &o.kind {
            OpKind::Metrics(m) if o.tx == tx && m.prefix.is_some() => Some(m.version),
            _ => None,
        });
        let (limit, span_context, min_version) = match metric {
            // `getStorageMetricsLargeKeyRange` in a tenant: the transaction's read version.
            Metric::Size if tenant_version.is_some() => (
                i32::MAX,
                txs.span(cx, tx),
                tenant_version.unwrap_or(LATEST_VERSION),
            ),
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
                let version = match txs.txs.get(&tx).map(|t| t.read_version) {
                    Some(ReadVersion::Ready(v)) => v,
                    _ => LATEST_VERSION,
                };
                (TOO_MANY, txs.span(cx, tx), version)
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
        let addr = proxy.commit.endpoint.address().clone();
        let dest = proxy.stream(CommitProxyInterface::GET_KEY_SERVERS_LOCATIONS);
        txs.routing.start_locating(k);
        let pending = Route::Locations {
            key: begin.clone(),
            reverse: false,
        };
        cx.io().send(&addr, dest, &msg, token, pending);
    }

    /// The replica for a part's attempt: like `choose_replica`, the healthy one with the
    /// lowest smoothed latency first, then the others in turn; recently failed ones only
    /// when nothing else is left.
    fn part_replica(
        routing: &Routing,
        cx: &Ctx<'_>,
        servers: &[StorageServerInterface],
        start: usize,
        attempt: usize,
    ) -> usize {
        let n = servers.len();
        let order: Vec<usize> = (0..n)
            .map(|j| start.wrapping_add(attempt).wrapping_add(j) % n)
            .collect();
        let stats = |i: &usize| routing.stats(&servers[*i].unique_id);
        let healthy: Vec<usize> = order
            .iter()
            .copied()
            .filter(|i| !routing.is_down(&servers[*i].unique_id, cx.now))
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

    fn send_part(txs: &mut Transactions, cx: &mut Ctx<'_>, req: RequestId, i: usize) {
        let now = cx.now;
        let tenant = match txs.table.ops.get(&req) {
            Some(o) => txs.tenant_info(o.tx),
            None => return,
        };
        let Some(m) = MetricsOp::of(&mut txs.table, req) else {
            return;
        };
        let (metric, epoch, start) = (m.metric, m.epoch, m.seed.wrapping_add(i));
        let version = m.version;
        let Some(p) = m.parts.get(i) else {
            return;
        };
        if p.servers.is_empty() {
            return;
        }
        // In a tenant the storage server gets the tenant's keys and adds the prefix ittxs.
        let (keys, tenant_info) = match &m.prefix {
            Some(prefix) => {
                let (b, e) = relative_range(prefix, &p.begin, &p.end);
                (KeyRange::new(b, e), tenant)
            }
            None => (
                KeyRange::new(p.begin.clone(), p.end.clone()),
                TenantInfo::none(),
            ),
        };
        let (servers, attempt) = (p.servers.clone(), p.attempt);
        let server =
            servers[MetricsOp::part_replica(&txs.routing, cx, &servers, start, attempt)].clone();
        let token = cx.rng.uid();
        let reply = ReplyPromise { token };
        let addr = server.get_value.endpoint.address().clone();
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
                    tenant_info,
                    min_version: version,
                };
                let dest = server.stream(StorageServerInterface::WAIT_METRICS);
                cx.io().send(&addr, dest, &msg, token, pending);
            }
            Metric::SplitPoints(chunk_size) => {
                let msg = SplitRangeRequest {
                    keys,
                    chunk_size,
                    reply,
                    tenant_info,
                };
                let dest = server.stream(StorageServerInterface::GET_RANGE_SPLIT_POINTS);
                cx.io().send(&addr, dest, &msg, token, pending);
            }
        }
        if let Some(p) = MetricsOp::of(&mut txs.table, req).and_then(|m| m.parts.get_mut(i)) {
            p.state = PartState::InFlight;
            p.sent = Some((server.unique_id, now));
        }
    }

    /// The part a reply or loss is about, if it is still waiting for one.
    fn waiting_part(
        table: &mut OpTable,
        req: RequestId,
        part: u32,
        epoch: u32,
    ) -> Option<&mut Part> {
        let m = MetricsOp::of(table, req)?;
        if m.epoch != epoch {
            return None;
        }
        m.parts
            .get_mut(part as usize)
            .filter(|p| p.state == PartState::InFlight)
    }

    /// A part's answer: its bytes or split points, or an error.
    #[allow(clippy::too_many_arguments)]
    fn on_reply(
        table: &mut OpTable,
        routing: &mut Routing,
        cx: &mut Ctx<'_>,
        req: RequestId,
        part: u32,
        epoch: u32,
        msg: &Bytes,
    ) {
        let now = cx.now;
        let prefix = MetricsOp::of(table, req).and_then(|m| m.prefix.clone());
        let Some(p) = MetricsOp::waiting_part(table, req, part, epoch) else {
            return;
        };
        // In a tenant the points are the tenant's keys, as the part was asked for.
        let (begin, end) = match &prefix {
            Some(prefix) => relative_range(prefix, &p.begin, &p.end),
            None => (p.begin.clone(), p.end.clone()),
        };
        if let Some((id, sent)) = p.sent.take() {
            routing.answered(id, now.saturating_since(sent));
        }
        let Some(metric) = MetricsOp::of(table, req).map(|m| m.metric) else {
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
                if let Some(m) = MetricsOp::of(table, req) {
                    m.bytes = m.bytes.saturating_add(bytes);
                    if let Some(p) = m.parts.get_mut(i) {
                        p.state = PartState::Done;
                        p.points = points;
                    }
                }
                table.set_wait(req, Wait::Ready);
            }
            Err(ClientError::Fdb(code)) => {
                MetricsOp::on_error(table, routing, cx, req, i, metric, code)
            }
            Err(e) => table.finish(cx, req, Err(e)),
        }
    }

    /// A part's error: relocate, try the next replica, retry later, or fail.
    #[allow(clippy::too_many_arguments)]
    fn on_error(
        table: &mut OpTable,
        routing: &mut Routing,
        cx: &mut Ctx<'_>,
        req: RequestId,
        i: usize,
        metric: Metric,
        code: ErrorCode,
    ) {
        if code == ErrorCode::WRONG_SHARD_SERVER || code == ErrorCode::ALL_ALTERNATIVES_FAILED {
            MetricsOp::relocate(table, routing, cx, req, i);
        } else if code == ErrorCode::BROKEN_PROMISE
            || code == ErrorCode::REQUEST_MAYBE_DELIVERED
            || code == ErrorCode::SERVER_OVERLOADED
        {
            MetricsOp::next_replica(table, routing, cx, req, i);
        } else if code == ErrorCode::FUTURE_VERSION && metric == Metric::Size {
            let at = cx.now + table.knobs.future_version_retry_delay;
            if let Some(m) = MetricsOp::of(table, req) {
                if let Some(p) = m.parts.get_mut(i) {
                    p.state = PartState::Retired;
                    m.todo.push((p.begin.clone(), p.end.clone(), at));
                }
            }
            table.set_wait(req, Wait::Ready);
        } else {
            table.finish(cx, req, Err(ClientError::Fdb(code)));
        }
    }

    /// `wrong_shard_server` / `all_alternatives_failed`: forget the locations and locate
    /// again after `WRONG_SHARD_SERVER_DELAY` (the part alone for the estimate, everything
    /// for split points).
    fn relocate(
        table: &mut OpTable,
        routing: &mut Routing,
        cx: &mut Ctx<'_>,
        req: RequestId,
        i: usize,
    ) {
        let at = cx.now + table.knobs.wrong_shard_server_delay;
        let Some(m) = MetricsOp::of(table, req) else {
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
        routing.locations.invalidate_range(&a, &b);
        table.set_wait(req, Wait::Ready);
    }

    /// The replica did not answer: try the next one; after all of them, relocate.
    fn next_replica(
        table: &mut OpTable,
        routing: &mut Routing,
        cx: &mut Ctx<'_>,
        req: RequestId,
        i: usize,
    ) {
        let until = cx.now + FAILED_SERVER_AVOIDANCE;
        let Some(p) = MetricsOp::of(table, req).and_then(|m| m.parts.get_mut(i)) else {
            return;
        };
        let failed = p.sent.take().map(|(id, _)| id);
        p.attempt += 1;
        let all_failed = p.attempt >= p.servers.len();
        if !all_failed {
            p.state = PartState::Unsent;
        }
        if let Some(id) = failed {
            routing.failed(id, until);
        }
        if all_failed {
            MetricsOp::relocate(table, routing, cx, req, i);
        } else {
            table.set_wait(req, Wait::Ready);
        }
    }
}

#[cfg(test)]
mod tests;
