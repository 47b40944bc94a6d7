//! A watch, whole: the checks when it is called (RYW enabled, under `max_watches`), the value
//! to compare with (the transaction's writes, else a `GetValueRequest` at the read version, or
//! at the commit version once committed), armed by the commit (`WatchOp::arm`), the
//! `WatchValueRequest` to a replica of the key's shard, the storage server's answer confirmed
//! against the committed version (`waitForCommittedVersion`: a `GetReadVersionRequest` of its
//! own), and polling again when the storage server gives up on it.

use alloc::vec::Vec;
use bytes::Bytes;

use super::{OpId, OpKind, OpTable, Wait};
use crate::error::{knobs, ErrorCode};
use crate::event::{ClientError, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::messages::grv::GetReadVersionRequest;
use crate::messages::storage::{StorageServerInterface, WatchValueReply, WatchValueRequest};
use crate::messages::types::{SpanContext, TagSet, Version};
use crate::messages::{decode_reply, ReplyPromise};
use crate::route::Route;
use crate::ryw::Lookup;
use crate::transaction::state::Tx;
use crate::transaction::{fdb, storage_error, Ctx, Transactions};
use crate::uid::Uid;

pub use crate::knobs::MAX_OUTSTANDING_WATCHES;
/// `ABSOLUTE_MAX_WATCHES`: the most `max_watches` may be.
pub const ABSOLUTE_MAX_WATCHES: usize = 1_000_000;

/// A watch in flight: [`OpKind::Watch`]'s state.
#[derive(Debug)]
pub(in crate::transaction) struct WatchOp {
    pub(super) key: Bytes,
    /// The value the watch compares against, once known.
    value: Option<Option<Bytes>>,
    /// The version from which to watch, once the transaction committed.
    version: Option<Version>,
    /// The value read is in flight.
    reading: bool,
    /// The storage server said the key changed at this version; the watch completes
    /// once the cluster's committed version is known to have reached it.
    fired: Option<Version>,
    /// The transaction's trace id, kept for the requests the watch makes after it.
    trace_id: Uid,
    /// The transaction's read tags when the watch was set (`WatchParameters::tags`).
    read_tags: Vec<Bytes>,
}

impl Transactions {
    /// Watches `key`: fires once its value differs from the one this transaction sees, after
    /// the transaction commits.
    pub(crate) fn watch(&mut self, cx: &mut Ctx<'_>, tx: TransactionId, key: &[u8]) -> RequestId {
        WatchOp::start(self, cx, tx, key)
    }

    /// The committed version a fired watch asked for came back.
    pub(crate) fn on_watch_committed(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        r: Result<Version, ClientError>,
    ) {
        WatchOp::on_committed(&mut self.table, cx, req, r)
    }

    /// The confirmation read was lost with its connection or proxy: send it again.
    pub(crate) fn on_watch_confirm_lost(&mut self, req: RequestId) {
        if self.table.ops.contains_key(&req) {
            self.table.set_wait(req, Wait::Ready);
        }
    }
}

/// The watch's steps.
impl WatchOp {
    /// Starts a watch: the checks, then the value the transaction's writes decide, if any.
    fn start(txs: &mut Transactions, cx: &mut Ctx<'_>, tx: TransactionId, key: &[u8]) -> RequestId {
        let req = cx.new_request();
        let check = txs.check_read_key(tx, key).and_then(|_| {
            let t = txs.tx_ref(tx)?;
            if t.options.ryw_disabled {
                return fdb(ErrorCode::WATCHES_DISABLED);
            }
            if txs.table.watches >= txs.table.max_watches {
                return fdb(ErrorCode::TOO_MANY_WATCHES);
            }
            Ok(())
        });
        if let Err(e) = check {
            cx.finish(req, Err(e));
            return req;
        }
        txs.table.watches += 1;
        let t = txs.txs.get(&tx);
        let op = WatchOp {
            key: Bytes::copy_from_slice(key),
            value: t.and_then(|t| t.writes.lookup(key).decided()),
            version: None,
            reading: false,
            fired: None,
            trace_id: t.map_or(Uid::default(), |t| t.trace_id),
            read_tags: t.map(|t| t.options.read_tags.clone()).unwrap_or_default(),
        };
        txs.insert_op(cx, req, tx, OpKind::Watch(op));
        if let Some(t) = txs.txs.get_mut(&tx) {
            t.watches.push(req);
        }
        req
    }

    /// The transaction `t` committed at `version` (or, `None`, wrote nothing): its watches
    /// outlive it and run.
    pub(super) fn arm(table: &mut OpTable, t: Option<&mut Tx>, version: Option<Version>) {
        let Some(t) = t else {
            return;
        };
        for w in core::mem::take(&mut t.watches) {
            if let Some(op) = table.ops.get_mut(&w) {
                op.detached = true;
                if let OpKind::Watch(WatchOp { version: v, .. }) = &mut op.kind {
                    *v = version;
                }
                op.wait = Wait::Ready;
                table.ready.push(w);
            }
        }
    }

    /// The next step: confirm a fired watch, read the value to compare with, wait for the
    /// commit, or send the `WatchValueRequest`. Takes the whole of the transactions: it reads
    /// the read version, the tenant and the location cache.
    pub(super) fn advance(txs: &mut Transactions, cx: &mut Ctx<'_>, id: OpId) {
        let OpId { req, tx } = id;
        let Some(OpKind::Watch(w)) = txs.table.ops.get(&req).map(|o| &o.kind) else {
            return;
        };
        if w.fired.is_some() {
            return WatchOp::confirm(&mut txs.table, cx, req);
        }
        let (key, value, version, reading) = (w.key.clone(), w.value.clone(), w.version, w.reading);
        let (trace_id, read_tags) = (w.trace_id, w.read_tags.clone());
        if txs.tenant_name_required(cx, tx) {
            return txs.fail_op(cx, req, ClientError::Fdb(ErrorCode::TENANT_NAME_REQUIRED));
        }
        let Some(value) = value else {
            if reading {
                txs.table.set_wait(req, Wait::Reply);
                return;
            }
            // Learn the value to compare with: a snapshot read at the read version, or at the
            // commit version once committed.
            let at = match version {
                Some(v) => v,
                None => match txs.read_version_to_read(cx, id) {
                    Some(Ok(v)) => v,
                    Some(Err(e)) => return txs.fail_op(cx, req, e),
                    None => return,
                },
            };
            return WatchOp::send_read(txs, cx, id, key, at);
        };
        let Some(version) = version else {
            txs.table.set_wait(req, Wait::Commit);
            return;
        };
        let Some(server) = txs.pick_server(cx, req, tx, &key, false) else {
            return;
        };
        let token = cx.rng.uid();
        let msg = WatchValueRequest {
            key,
            value,
            version,
            // Sampled per request, as `watchValue` does on each round.
            tags: cx.sample_read_tags().then(|| TagSet(read_tags)),
            debug_id: None,
            reply: ReplyPromise { token },
            span_context: span(cx, trace_id),
            tenant_info: txs.tenant_info(tx),
        };
        let addr = server.addr.clone();
        let dest = server.stream(StorageServerInterface::WATCH_VALUE);
        txs.table.set_wait(req, Wait::Reply);
        cx.io().send(&addr, dest, &msg, token, Route::Storage(req));
    }

    /// Reads the watched key's current value with a GetValue (its reply comes back here).
    fn send_read(txs: &mut Transactions, cx: &mut Ctx<'_>, id: OpId, key: Bytes, version: Version) {
        let OpId { req, .. } = id;
        if super::get::GetOp::send(txs, cx, id, key, version) {
            if let Some(OpKind::Watch(w)) = txs.table.ops.get_mut(&req).map(|o| &mut o.kind) {
                w.reading = true;
            }
        }
    }

    /// Its storage request was lost: the read in flight, if it was one, is no more.
    pub(super) fn request_lost(&mut self) {
        self.reading = false;
    }

    /// A storage server answered the watch's first read (a `GetValueReply`) or the watch
    /// itself (a `WatchValueReply`).
    pub(super) fn on_reply(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        req: RequestId,
        message: &Bytes,
    ) {
        let reading = matches!(
            txs.table.ops.get(&req).map(|o| &o.kind),
            Some(OpKind::Watch(WatchOp { value: None, .. }))
        );
        if reading {
            WatchOp::on_value(txs, cx, req, super::get::decode_value(message));
        } else {
            let r = storage_error(decode_reply::<WatchValueReply>(message)).map(|r| r.version);
            WatchOp::on_fired(txs, cx, req, r);
        }
    }

    /// The value read: the transaction's atomic ops over it are what the watch compares with.
    fn on_value(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        req: RequestId,
        r: Result<Option<Bytes>, ClientError>,
    ) {
        if let Some(OpKind::Watch(w)) = txs.table.ops.get_mut(&req).map(|o| &mut o.kind) {
            w.reading = false;
        }
        let Some(v) = txs.read_or_retry(cx, req, r) else {
            return;
        };
        let Some(op) = txs.table.ops.get_mut(&req) else {
            return;
        };
        let OpKind::Watch(w) = &mut op.kind else {
            return;
        };
        // The transaction's own view: its atomic ops over the stored value.
        let v = match txs.txs.get(&op.tx).map(|t| t.writes.lookup(&w.key)) {
            Some(Lookup::Dependent(ops)) => ops.value_over(v.as_ref()),
            Some(l) => l.decided().unwrap_or(v),
            None => v,
        };
        w.value = Some(v);
        op.wait = Wait::Ready;
        txs.table.ready.push(req);
    }

    /// The `WatchValueReply`: the key changed at a version (confirm it), or the storage server
    /// gave up on the watch (ask again later).
    fn on_fired(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        req: RequestId,
        r: Result<Version, ClientError>,
    ) {
        let e = match r {
            Ok(v) => {
                if let Some(OpKind::Watch(w)) = txs.table.ops.get_mut(&req).map(|o| &mut o.kind) {
                    w.fired = Some(v);
                }
                return WatchOp::confirm(&mut txs.table, cx, req);
            }
            Err(e) => e,
        };
        if txs.retried_read_error(cx, req, &e) {
            return;
        }
        let code = e.code();
        // `watchValue`: a storage server that gave up on the watch (too many of them, or
        // behind) is polled again after a while; a lapsed one at once.
        let knobs = &txs.table.knobs;
        let again = if code == ErrorCode::WATCH_CANCELLED || code == ErrorCode::PROCESS_BEHIND {
            knobs.watch_polling_time
        } else if code == ErrorCode::TIMED_OUT {
            knobs.future_version_retry_delay
        } else {
            return txs.fail_op(cx, req, e);
        };
        txs.table.sleep(cx.now + again, req);
    }

    /// `waitForCommittedVersion`: read versions, until one reaches the version the watch
    /// fired at. Each is a request of its own, not batched: no transaction count, and no
    /// flags at all — the C++ constructor it is built with sets the priority bits on its
    /// parameter, not on the member, so libfdb_c sends 0 (the proxy reads that as default
    /// priority), as the `watch` capture shows.
    fn confirm(table: &mut OpTable, cx: &mut Ctx<'_>, req: RequestId) {
        let Some((addr, dest)) = cx.grv_endpoint() else {
            // Every GRV proxy is gone: ask again with the next cluster info.
            return table.set_wait(req, Wait::Cluster);
        };
        let trace_id = match table.ops.get(&req).map(|o| &o.kind) {
            Some(OpKind::Watch(w)) => w.trace_id,
            _ => return,
        };
        let token = cx.rng.uid();
        let msg = GetReadVersionRequest {
            transaction_count: 0,
            flags: 0,
            tags: Vec::new(),
            debug_id: None,
            reply: ReplyPromise { token },
            span_context: span(cx, trace_id),
            max_version: crate::messages::types::INVALID_VERSION,
        };
        table.set_wait(req, Wait::Reply);
        cx.io()
            .send(&addr, dest, &msg, token, Route::CommittedVersion(req));
    }

    /// The committed version: the watch fires once it reached the fire's version (a watch is
    /// no read, so finishing it touches no transaction).
    fn on_committed(
        table: &mut OpTable,
        cx: &mut Ctx<'_>,
        req: RequestId,
        r: Result<Version, ClientError>,
    ) {
        let Some(op) = table.ops.get_mut(&req) else {
            return;
        };
        let OpKind::Watch(WatchOp { fired, version, .. }) = &mut op.kind else {
            return;
        };
        let Some(at) = *fired else {
            return;
        };
        let retry = match r {
            Ok(committed) if committed >= at => {
                if committed - at < knobs::WATCH_MAX_VERSION_GAP {
                    return table.finish(cx, req, Ok(Reply::WatchFired(at)));
                }
                // A recovery came between the fire and now: watch again from here.
                *fired = None;
                *version = Some(committed);
                op.wait = Wait::Ready;
                table.ready.push(req);
                return;
            }
            Ok(_) => table.knobs.future_version_retry_delay,
            Err(ClientError::Fdb(e))
                if e == ErrorCode::BATCH_TRANSACTION_THROTTLED
                    || e == ErrorCode::GRV_PROXY_MEMORY_LIMIT_EXCEEDED =>
            {
                cx.rng.jittered(table.knobs.grv_error_retry_delay)
            }
            Err(e) => return table.finish(cx, req, Err(e)),
        };
        table.sleep(cx.now + retry, req);
    }
}

/// A new span of the watch's transaction's trace, unsampled.
fn span(cx: &mut Ctx<'_>, trace_id: Uid) -> SpanContext {
    SpanContext {
        trace_id,
        span_id: cx.rng.next_u64(),
        flags: 0,
    }
}
