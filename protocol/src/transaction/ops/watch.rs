//! Watches: the value to compare with, the watch request after the commit, the storage server's
//! answer confirmed against the committed version (`waitForCommittedVersion`), and polling again
//! when the storage server gives up on it.

use alloc::vec::Vec;
use bytes::Bytes;

use super::{OpKind, Timer, Wait};
use crate::error::{knobs, ErrorCode};
use crate::event::{ClientError, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::messages::grv::GetReadVersionRequest;
use crate::messages::storage::{StorageServerInterface, WatchValueReply, WatchValueRequest};
use crate::messages::types::{SpanContext, TagSet, Version};
use crate::messages::{decode_reply, ReplyPromise};
use crate::route::Route;
use crate::ryw::Lookup;
use crate::transaction::{fdb, storage_error, Ctx, Transactions};
use crate::uid::Uid;

/// `DEFAULT_MAX_OUTSTANDING_WATCHES` (the `max_watches` database option changes it).
pub const MAX_OUTSTANDING_WATCHES: usize = 10_000;
/// `ABSOLUTE_MAX_WATCHES`: the most `max_watches` may be.
pub const ABSOLUTE_MAX_WATCHES: usize = 1_000_000;

/// A watch in flight: [`OpKind::Watch`]'s state.
#[derive(Debug)]
pub(in crate::transaction) struct WatchOp {
    pub(super) key: Bytes,
    /// The value the watch compares against, once known.
    pub(super) value: Option<Option<Bytes>>,
    /// The version from which to watch, once the transaction committed.
    pub(super) version: Option<Version>,
    /// The value read is in flight.
    pub(super) reading: bool,
    /// The storage server said the key changed at this version; the watch completes
    /// once the cluster's committed version is known to have reached it.
    pub(super) fired: Option<Version>,
    /// The transaction's trace id, kept for the requests the watch makes after it.
    pub(super) trace_id: Uid,
    /// The transaction's read tags when the watch was set (`WatchParameters::tags`).
    pub(super) read_tags: Vec<Bytes>,
}

impl Transactions {
    /// Watches `key`: fires once its value differs from the one this transaction sees, after
    /// the transaction commits.
    pub(crate) fn watch(&mut self, cx: &mut Ctx<'_>, tx: TransactionId, key: &[u8]) -> RequestId {
        let req = cx.new_request();
        let check = self.check_read_key(tx, key).and_then(|_| {
            let t = self.tx_ref(tx)?;
            if t.options.ryw_disabled {
                return fdb(ErrorCode::WATCHES_DISABLED);
            }
            if self.table.watches >= self.max_watches {
                return fdb(ErrorCode::TOO_MANY_WATCHES);
            }
            Ok(())
        });
        if let Err(e) = check {
            cx.finish(req, Err(e));
            return req;
        }
        self.table.watches += 1;
        let trace_id = self.txs.get(&tx).map_or(Uid::default(), |t| t.trace_id);
        let read_tags = self
            .txs
            .get(&tx)
            .map(|t| t.options.read_tags.clone())
            .unwrap_or_default();
        let value = self
            .txs
            .get(&tx)
            .and_then(|t| t.writes.lookup(key).decided());
        self.insert_op(
            cx,
            req,
            tx,
            OpKind::Watch(WatchOp {
                key: Bytes::copy_from_slice(key),
                value,
                version: None,
                reading: false,
                fired: None,
                trace_id,
                read_tags,
            }),
        );
        if let Some(t) = self.txs.get_mut(&tx) {
            t.watches.push(req);
        }
        req
    }

    // ----- watches -----

    pub(super) fn arm_watches(&mut self, tx: TransactionId, version: Option<Version>) {
        let Some(t) = self.txs.get_mut(&tx) else {
            return;
        };
        let watches = core::mem::take(&mut t.watches);
        for w in watches {
            if let Some(op) = self.table.ops.get_mut(&w) {
                op.detached = true;
                if let OpKind::Watch(WatchOp { version: v, .. }) = &mut op.kind {
                    *v = version;
                }
                op.wait = Wait::Ready;
                self.table.ready.push(w);
            }
        }
    }

    pub(super) fn advance_watch(&mut self, cx: &mut Ctx<'_>, req: RequestId, tx: TransactionId) {
        let Some(op) = self.table.ops.get(&req) else {
            return;
        };
        let OpKind::Watch(WatchOp {
            key,
            value,
            version,
            reading,
            fired,
            trace_id,
            read_tags,
        }) = &op.kind
        else {
            return;
        };
        if fired.is_some() {
            return self.confirm_watch(cx, req);
        }
        let (key, value, version, reading) = (key.clone(), value.clone(), *version, *reading);
        let (trace_id, read_tags) = (*trace_id, read_tags.clone());
        if self.tenant_name_required(cx, tx) {
            return self.fail_op(cx, req, ClientError::Fdb(ErrorCode::TENANT_NAME_REQUIRED));
        }
        let Some(value) = value else {
            if reading {
                self.table.set_wait(req, Wait::Reply);
                return;
            }
            // Learn the value to compare with: a snapshot read at the read version, or at the
            // commit version once committed.
            let at = match version {
                Some(v) => v,
                None => match self.read_version_to_read(cx, req, tx) {
                    Some(Ok(v)) => v,
                    Some(Err(e)) => return self.fail_op(cx, req, e),
                    None => return,
                },
            };
            return self.send_watch_read(cx, req, tx, key, at);
        };
        let Some(version) = version else {
            self.table.set_wait(req, Wait::Commit);
            return;
        };
        let Some(server) = self.pick_server(cx, req, tx, &key, false) else {
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
            span_context: SpanContext {
                trace_id,
                span_id: cx.rng.next_u64(),
                flags: 0,
            },
            tenant_info: self.tenant_info(tx),
        };
        let addr = server.addr.clone();
        let dest = server.stream(StorageServerInterface::WATCH_VALUE);
        self.table.set_wait(req, Wait::Reply);
        cx.io().send(&addr, dest, &msg, token, Route::Storage(req));
    }

    /// Reads the watched key's current value with a GetValue (reply handled as a watch reply).
    pub(super) fn send_watch_read(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
        key: Bytes,
        version: Version,
    ) {
        if super::get::GetOp::send(self, cx, req, tx, key, version) {
            if let Some(OpKind::Watch(WatchOp { reading, .. })) =
                self.table.ops.get_mut(&req).map(|o| &mut o.kind)
            {
                *reading = true;
            }
        }
    }

    /// A storage server answered the watch's first read (a `GetValueReply`) or the watch
    /// itself (a `WatchValueReply`).
    pub(super) fn on_watch_storage_reply(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        message: &Bytes,
    ) {
        let reading = matches!(
            self.table.ops.get(&req).map(|o| &o.kind),
            Some(OpKind::Watch(WatchOp { value: None, .. }))
        );
        if reading {
            self.on_watch_value(cx, req, super::get::decode_value(message));
        } else {
            let r = storage_error(decode_reply::<WatchValueReply>(message)).map(|r| r.version);
            self.on_watch_reply(cx, req, r);
        }
    }

    pub(super) fn on_watch_value(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        r: Result<Option<Bytes>, ClientError>,
    ) {
        if let Some(OpKind::Watch(WatchOp { reading, .. })) =
            self.table.ops.get_mut(&req).map(|o| &mut o.kind)
        {
            *reading = false;
        }
        let v = match r {
            Ok(v) => v,
            Err(e) => {
                if !self.retried_read_error(cx, req, &e) {
                    self.fail_op(cx, req, e);
                }
                return;
            }
        };
        let Some(op) = self.table.ops.get(&req) else {
            return;
        };
        let tx = op.tx;
        let OpKind::Watch(WatchOp { key, .. }) = &op.kind else {
            return;
        };
        // The transaction's own view: its atomic ops over the stored value.
        let v = match self.txs.get(&tx).map(|t| t.writes.lookup(key)) {
            Some(Lookup::Dependent(ops)) => ops.value_over(v.as_ref()),
            Some(l) => l.decided().unwrap_or(v),
            None => v,
        };
        if let Some(op) = self.table.ops.get_mut(&req) {
            if let OpKind::Watch(WatchOp { value, .. }) = &mut op.kind {
                *value = Some(v);
            }
            op.wait = Wait::Ready;
            self.table.ready.push(req);
        }
    }

    pub(super) fn on_watch_reply(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        r: Result<Version, ClientError>,
    ) {
        let e = match r {
            Ok(v) => {
                if let Some(OpKind::Watch(WatchOp { fired, .. })) =
                    self.table.ops.get_mut(&req).map(|o| &mut o.kind)
                {
                    *fired = Some(v);
                }
                return self.confirm_watch(cx, req);
            }
            Err(e) => e,
        };
        if self.retried_read_error(cx, req, &e) {
            return;
        }
        let code = e.code();
        // `watchValue`: a storage server that gave up on the watch (too many of them, or
        // behind) is polled again after a while; a lapsed one at once.
        let again = if code == ErrorCode::WATCH_CANCELLED || code == ErrorCode::PROCESS_BEHIND {
            knobs::WATCH_POLLING_TIME
        } else if code == ErrorCode::TIMED_OUT {
            knobs::FUTURE_VERSION_RETRY_DELAY
        } else {
            return self.fail_op(cx, req, e);
        };
        self.table.set_wait(req, Wait::Timer);
        let at = cx.now + again;
        self.table.add_timer(at, Timer::Op(req));
    }

    /// `waitForCommittedVersion`: read versions, until one reaches the version the watch
    /// fired at. Each is a request of its own, not batched: no transaction count, and no
    /// flags at all — the C++ constructor it is built with sets the priority bits on its
    /// parameter, not on the member, so libfdb_c sends 0 (the proxy reads that as default
    /// priority), as the `watch` capture shows.
    pub(super) fn confirm_watch(&mut self, cx: &mut Ctx<'_>, req: RequestId) {
        let Some((addr, dest)) = cx.grv_endpoint() else {
            // Every GRV proxy is gone: ask again with the next cluster info.
            return self.table.set_wait(req, Wait::Cluster);
        };
        let trace_id = match self.table.ops.get(&req).map(|o| &o.kind) {
            Some(OpKind::Watch(WatchOp { trace_id, .. })) => *trace_id,
            _ => return,
        };
        let token = cx.rng.uid();
        let msg = GetReadVersionRequest {
            transaction_count: 0,
            flags: 0,
            tags: Vec::new(),
            debug_id: None,
            reply: ReplyPromise { token },
            span_context: SpanContext {
                trace_id,
                span_id: cx.rng.next_u64(),
                flags: 0,
            },
            max_version: crate::messages::types::INVALID_VERSION,
        };
        self.table.set_wait(req, Wait::Reply);
        cx.io()
            .send(&addr, dest, &msg, token, Route::CommittedVersion(req));
    }

    /// The confirmation read was lost with its connection or proxy: send it again.
    pub(crate) fn on_watch_confirm_lost(&mut self, req: RequestId) {
        if self.table.ops.contains_key(&req) {
            self.table.set_wait(req, Wait::Ready);
        }
    }

    pub(crate) fn on_watch_committed(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        r: Result<Version, ClientError>,
    ) {
        let Some(op) = self.table.ops.get_mut(&req) else {
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
                    return self.succeed_op(cx, req, Reply::WatchFired(at));
                }
                // A recovery came between the fire and now: watch again from here.
                *fired = None;
                *version = Some(committed);
                op.wait = Wait::Ready;
                self.table.ready.push(req);
                return;
            }
            Ok(_) => knobs::FUTURE_VERSION_RETRY_DELAY,
            Err(ClientError::Fdb(e))
                if e == ErrorCode::BATCH_TRANSACTION_THROTTLED
                    || e == ErrorCode::GRV_PROXY_MEMORY_LIMIT_EXCEEDED =>
            {
                cx.rng.jittered(knobs::GRV_ERROR_RETRY_DELAY)
            }
            Err(e) => return self.fail_op(cx, req, e),
        };
        self.table.set_wait(req, Wait::Timer);
        let at = cx.now + retry;
        self.table.add_timer(at, Timer::Op(req));
    }
}
