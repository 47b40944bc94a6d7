//! `get_range`, whole, and the reading machinery `get_key` (`get_key.rs`) and
//! `get_mapped_range` (`mapped.rs`) share. With read-your-writes on, a read goes through RYW's
//! walk over the snapshot cache and the write map (`ryw::range_read`), which asks NativeAPI's
//! range read for what it does not know; with it off, it is NativeAPI's `getKey` and
//! `getRange` directly (`readThrough`). Either way the storage requests come from NativeAPI's
//! walks (`native.rs`, with `getRangeFallback` when a selector's shard cannot resolve it): this
//! file builds them for a replica of the right shard, decodes the replies and feeds them back,
//! and, when the read is done, adds its read conflict range.
use bytes::Bytes;

use super::native::{range_finished_conflict, NativeKey, NativeRange, NativeStep};
use super::{OpKind, Wait};
use crate::error::ErrorCode;
use crate::event::{ClientError, RangeResult, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::messages::storage::{
    GetKeyReply, GetKeyRequest, GetKeyValuesReply, GetKeyValuesRequest, GetMappedKeyValuesReply,
    GetMappedKeyValuesRequest, MappedKeyValue, StorageServerInterface,
};
use crate::messages::types::{KeyRange, KeySelector, KeyValue, VersionVector};
use crate::messages::{decode_reply, ReplyPromise};
use crate::route::Route;
use crate::ryw::range_read::{
    fdb_key_after, range_conflict, remove_or_equal, update_conflict_map, RangeRead, Step,
};
use crate::ryw::{Unreadable, WriteMap};
use crate::transaction::scan::{
    range_limits, NativeOp, RangeOptions, Read, ReadKind, ReadOp, Sent, StreamingMode,
};
use crate::transaction::{fdb, storage_error, Ctx, Transactions};

/// Where a read stands after running.
enum Progress {
    /// Waiting for a read version, a location or a reply.
    Wait,
    Done(Reply),
    Failed(ClientError),
}

fn unreadable(_: Unreadable) -> ClientError {
    ClientError::Fdb(ErrorCode::ACCESSED_UNREADABLE)
}

/// What a storage server answered to the request in flight.
enum Answer {
    Key(KeySelector),
    Range(alloc::vec::Vec<KeyValue>, bool),
    Mapped(alloc::vec::Vec<MappedKeyValue>, bool),
}

impl Transactions {
    /// What `fdb_transaction_get_range` (and `get_mapped_range`) checks of its arguments
    /// before the transaction's state, then an error a write left for the next call.
    pub(in crate::transaction) fn check_range_args(
        &self,
        tx: TransactionId,
        opts: &RangeOptions,
    ) -> Result<(), ClientError> {
        if opts.mode == StreamingMode::Exact && opts.limit == 0 && opts.target_bytes == 0 {
            return fdb(ErrorCode::EXACT_MODE_WITHOUT_LIMITS);
        }
        if opts.mode == StreamingMode::Iterator && opts.iteration == 0 {
            return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
        }
        match self.txs.get(&tx).and_then(|t| t.deferred.clone()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Reads one batch of the rows between two selectors.
    pub(crate) fn get_range(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> RequestId {
        let req = cx.new_request();
        if let Err(e) = self.check_range_args(tx, &opts) {
            cx.finish(req, Err(e));
            return req;
        }
        let (mut begin, mut end) = (begin, end);
        if let Err(e) = self.check_usable(tx) {
            cx.finish(req, Err(e));
            return req;
        }
        let (max, writes) = match self.txs.get(&tx) {
            Some(t) => (t.max_read_key(), t.writes_seen(snapshot)),
            None => (&b""[..], Some(alloc::sync::Arc::new(WriteMap::new()))),
        };
        if begin.key.as_ref() > max || end.key.as_ref() > max {
            cx.finish(req, fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE));
            return req;
        }
        // RYW `getRange`: selectors that cannot enclose a key give no rows at once, without a
        // read (no conflict range; it does not count as a read either).
        remove_or_equal(&mut begin);
        remove_or_equal(&mut end);
        if begin.offset >= end.offset && begin.key >= end.key {
            cx.finish(req, Ok(Reply::Range(RangeResult::default())));
            return req;
        }
        let limits = range_limits(&opts);
        let reverse = opts.reverse;
        let kind = if let Some(writes) = writes {
            let read = RangeRead::new(
                begin.clone(),
                end.clone(),
                limits,
                reverse,
                Bytes::from_static(max),
            );
            ReadKind::RywRange {
                begin,
                end,
                reverse,
                read,
                writes,
            }
        } else {
            ReadKind::NativeRange {
                end_resolved: !(reverse && end.offset > 1),
                begin,
                end,
                reverse,
                limits,
                result: None,
            }
        };
        self.insert_op(
            cx,
            req,
            tx,
            OpKind::Range(ReadOp {
                snapshot,
                read: Read::new(kind),
            }),
        );
        req
    }

    // ----- running a read -----

    /// Runs a `get_key` or `get_range` as far as it goes.
    pub(super) fn advance_read(&mut self, cx: &mut Ctx<'_>, req: RequestId, tx: TransactionId) {
        let Some(op) = self.table.ops.get_mut(&req) else {
            return;
        };
        let (snapshot, mut read, is_key) =
            match core::mem::replace(&mut op.kind, OpKind::Backoff(super::on_error::BackoffOp)) {
                OpKind::GetKey(ReadOp { snapshot, read }) => (snapshot, read, true),
                OpKind::Range(ReadOp { snapshot, read }) => (snapshot, read, false),
                other => {
                    op.kind = other;
                    return;
                }
            };
        let progress = self.run_read(cx, req, tx, snapshot, &mut read);
        if let Some(op) = self.table.ops.get_mut(&req) {
            op.kind = if is_key {
                OpKind::GetKey(ReadOp { snapshot, read })
            } else {
                OpKind::Range(ReadOp { snapshot, read })
            };
        }
        match progress {
            Progress::Wait => {}
            Progress::Done(reply) => self.succeed_op(cx, req, reply),
            Progress::Failed(e) => self.fail_op(cx, req, e),
        }
    }

    fn run_read(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
        snapshot: bool,
        read: &mut Read,
    ) -> Progress {
        loop {
            if let Some(native) = &mut read.native {
                // NativeAPI's reads start by waiting for the read version.
                let version = match self.read_version_to_read(cx, req, tx) {
                    Some(Ok(v)) => v,
                    Some(Err(e)) => return Progress::Failed(e),
                    None => return Progress::Wait,
                };
                let (key, backward, key_request) = match native.step() {
                    NativeStep::Done => {
                        let n = read.native.take().expect("stepped");
                        if let Err(e) = self.native_done(tx, snapshot, &mut read.kind, n) {
                            return Progress::Failed(e);
                        }
                        continue;
                    }
                    NativeStep::Range { key, backward } => (key, backward, false),
                    NativeStep::Key { key, backward } => (key, backward, true),
                };
                self.send_native(cx, req, tx, version, read, key, backward, key_request);
                return Progress::Wait;
            }
            let Some(t) = self.txs.get_mut(&tx) else {
                return Progress::Failed(ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED));
            };
            if matches!(read.kind, ReadKind::Mapped { .. }) {
                match super::mapped::step(t, &mut read.kind, &mut read.native) {
                    super::mapped::MappedStep::Continue => continue,
                    super::mapped::MappedStep::Done(r) => return Progress::Done(Reply::Mapped(r)),
                    super::mapped::MappedStep::Failed(e) => return Progress::Failed(e),
                }
            }
            let max = Bytes::from_static(t.max_read_key());
            match &mut read.kind {
                ReadKind::RywKey { .. } | ReadKind::NativeKey { .. } => {
                    match super::get_key::step(t, snapshot, &mut read.kind, &mut read.native, max) {
                        None => {}
                        Some(Ok(key)) => return Progress::Done(Reply::Key(key)),
                        Some(Err(e)) => return Progress::Failed(e),
                    }
                }
                ReadKind::RywRange {
                    begin,
                    end,
                    reverse,
                    read: rr,
                    writes,
                } => match rr.step(&t.cache, writes) {
                    Err(u) => return Progress::Failed(unreadable(u)),
                    Ok(Step::Native(n)) => {
                        read.native = Some(NativeOp::Range(NativeRange::new(
                            n.begin, n.end, n.limits, n.reverse,
                        )));
                    }
                    Ok(Step::Done(r)) => {
                        if !snapshot {
                            match range_conflict(begin, end, *reverse, &r, &max) {
                                Ok((b, e)) => {
                                    update_conflict_map(writes, &b, &e, &mut t.read_conflicts)
                                }
                                Err(_) => {
                                    return Progress::Failed(ClientError::Fdb(
                                        ErrorCode::INVERTED_RANGE,
                                    ))
                                }
                            }
                        }
                        return Progress::Done(Reply::Range(RangeResult {
                            rows: r.rows,
                            more: r.more,
                        }));
                    }
                },
                ReadKind::NativeRange {
                    begin,
                    end,
                    reverse,
                    limits,
                    end_resolved,
                    result,
                } => {
                    if !*end_resolved {
                        read.native = Some(NativeOp::Key(NativeKey::new(end.clone())));
                        continue;
                    }
                    let Some(r) = result.take() else {
                        // `getRangeInternal`: nothing to read between these selectors.
                        if limits.is_reached()
                            || (begin.offset >= end.offset && begin.key >= end.key)
                        {
                            return Progress::Done(Reply::Range(RangeResult::default()));
                        }
                        read.native = Some(NativeOp::Range(NativeRange::new(
                            begin.clone(),
                            end.clone(),
                            *limits,
                            *reverse,
                        )));
                        continue;
                    };
                    if !snapshot {
                        let (b, e) = range_finished_conflict(begin, end, *reverse, &r);
                        if b < e {
                            t.native.extra_read_conflicts.push(KeyRange::new(b, e));
                        }
                    }
                    let mut rows = r.rows;
                    let mut more = r.more;
                    // `readThrough` drops rows past the readable keys.
                    if !*reverse && rows.last().is_some_and(|kv| kv.key >= max) {
                        let keep = rows.partition_point(|kv| kv.key < max);
                        rows.truncate(keep);
                        more = false;
                    }
                    return Progress::Done(Reply::Range(RangeResult { rows, more }));
                }
                ReadKind::Mapped { .. } => unreachable!("run above"),
            }
        }
    }

    /// A NativeAPI read finished: its answer goes where it was needed.
    fn native_done(
        &mut self,
        tx: TransactionId,
        snapshot: bool,
        kind: &mut ReadKind,
        native: NativeOp,
    ) -> Result<(), ClientError> {
        let t = self
            .txs
            .get_mut(&tx)
            .ok_or(ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED))?;
        match (kind, native) {
            (kind @ (ReadKind::RywKey { .. } | ReadKind::NativeKey { .. }), native) => {
                super::get_key::native_done(t, kind, native)
            }
            (ReadKind::RywRange { read, .. }, NativeOp::Range(mut n)) => {
                read.feed(&mut t.cache, n.take_result())
            }
            (
                ReadKind::NativeRange {
                    end, end_resolved, ..
                },
                NativeOp::Key(k),
            ) => {
                let key = k.result().cloned().unwrap_or_default();
                if !snapshot {
                    let sel = &*end;
                    let (b, e) = if sel.offset <= 0 {
                        (key.clone(), sel.key.clone())
                    } else {
                        (sel.key.clone(), fdb_key_after(&key))
                    };
                    if b < e {
                        t.native.extra_read_conflicts.push(KeyRange::new(b, e));
                    }
                }
                let max = t.max_read_key();
                *end = if key.as_ref() > max {
                    KeySelector::first_greater_or_equal(Bytes::from_static(max))
                } else {
                    KeySelector::first_greater_or_equal(key)
                };
                *end_resolved = true;
            }
            (ReadKind::NativeRange { result, .. }, NativeOp::Range(mut n)) => {
                *result = Some(n.take_result());
            }
            (kind @ ReadKind::Mapped { .. }, NativeOp::Key(k)) => {
                super::mapped::end_resolved(t, kind, k.result().cloned().unwrap_or_default());
            }
            (ReadKind::Mapped { result, .. }, NativeOp::Mapped { mut range, .. }) => {
                *result = Some(range.take_result());
            }
            _ => {}
        }
        Ok(())
    }

    /// Sends the NativeAPI read's next request to a replica of the shard of `key` (after
    /// looking the shard up if needed).
    #[allow(clippy::too_many_arguments)]
    fn send_native(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
        version: i64,
        read: &mut Read,
        key: Bytes,
        backward: bool,
        key_request: bool,
    ) {
        read.sent = Some(Sent {
            key_request,
            key: key.clone(),
            backward,
        });
        let Some((sb, se)) = self.shard_bounds(tx, &key, backward) else {
            self.table.set_wait(req, Wait::Location);
            self.request_location(cx, tx, &key, backward);
            return;
        };
        let Some(native) = &mut read.native else {
            return;
        };
        let server = self
            .choose_replica(cx, req, &key, backward)
            .expect("the shard was found above");
        let token = cx.rng.uid();
        let span_context = self.span(cx, tx);
        let options = self.read_options(cx.rng, tx);
        let tags = self.sampled_read_tags(cx, tx);
        let addr = server.addr.clone();
        self.table.set_wait(req, Wait::Reply);
        if key_request {
            let sel = match native {
                NativeOp::Key(k) => k.selector().clone(),
                NativeOp::Range(r) => r.key_selector().cloned().unwrap_or_default(),
                NativeOp::Mapped { range, .. } => range.key_selector().cloned().unwrap_or_default(),
            };
            let msg = GetKeyRequest {
                sel,
                version,
                tags,
                reply: ReplyPromise { token },
                span_context,
                tenant_info: self.tenant_info(tx),
                options,
                ss_latest_commit_versions: VersionVector::empty(-1),
            };
            let dest = server.stream(StorageServerInterface::GET_KEY);
            cx.io().send(&addr, dest, &msg, token, Route::Storage(req));
        } else if let NativeOp::Mapped { range, mapper } = native {
            let (begin, end, limit, limit_bytes) = range.range_request((&sb, &se));
            let msg = GetMappedKeyValuesRequest {
                begin,
                end,
                mapper: mapper.clone(),
                version,
                limit,
                limit_bytes,
                tags,
                reply: ReplyPromise { token },
                span_context,
                tenant_info: self.tenant_info(tx),
                options,
                ss_latest_commit_versions: VersionVector::empty(-1),
            };
            let dest = server.stream(StorageServerInterface::GET_MAPPED_KEY_VALUES);
            cx.io().send(&addr, dest, &msg, token, Route::Storage(req));
        } else {
            let NativeOp::Range(r) = native else {
                return;
            };
            let (begin, end, limit, limit_bytes) = r.range_request((&sb, &se));
            let msg = GetKeyValuesRequest {
                begin,
                end,
                version,
                limit,
                limit_bytes,
                tags,
                reply: ReplyPromise { token },
                span_context,
                tenant_info: self.tenant_info(tx),
                options,
                ss_latest_commit_versions: VersionVector::empty(-1),
            };
            let dest = server.stream(StorageServerInterface::GET_KEY_VALUES);
            cx.io().send(&addr, dest, &msg, token, Route::Storage(req));
        }
    }

    /// A storage server answered a `get_key` or `get_range` request.
    pub(super) fn on_read_reply(&mut self, cx: &mut Ctx<'_>, req: RequestId, message: &Bytes) {
        let Some((sent, mapped)) = self.table.ops.get(&req).and_then(|op| match &op.kind {
            OpKind::GetKey(ReadOp { read, .. }) | OpKind::Range(ReadOp { read, .. }) => read
                .sent
                .clone()
                .map(|s| (s, matches!(read.native, Some(NativeOp::Mapped { .. })))),
            _ => None,
        }) else {
            return;
        };
        let answer = if sent.key_request {
            storage_error(decode_reply::<GetKeyReply>(message)).and_then(|r| match r.error {
                Some(e) => fdb(e),
                None => Ok(Answer::Key(r.sel)),
            })
        } else if mapped {
            storage_error(decode_reply::<GetMappedKeyValuesReply>(message)).and_then(|r| {
                match r.error {
                    Some(e) => fdb(e),
                    None => Ok(Answer::Mapped(r.data, r.more)),
                }
            })
        } else {
            storage_error(decode_reply::<GetKeyValuesReply>(message)).and_then(|r| match r.error {
                Some(e) => fdb(e),
                None => Ok(Answer::Range(r.data.0, r.more)),
            })
        };
        let answer = match answer {
            Ok(a) => a,
            Err(e) => return self.on_read_error(cx, req, &sent, e),
        };
        let Some(op) = self.table.ops.get_mut(&req) else {
            return;
        };
        let (OpKind::GetKey(ReadOp { read, .. }) | OpKind::Range(ReadOp { read, .. })) =
            &mut op.kind
        else {
            return;
        };
        read.sent = None;
        let fed = match (&mut read.native, answer) {
            (Some(NativeOp::Key(k)), Answer::Key(sel)) => {
                k.on_reply(sel);
                Ok(())
            }
            (Some(NativeOp::Range(r)), Answer::Key(sel)) => {
                r.on_key_reply(sel);
                Ok(())
            }
            (Some(NativeOp::Mapped { range, .. }), Answer::Key(sel)) => {
                range.on_key_reply(sel);
                Ok(())
            }
            (Some(NativeOp::Mapped { range, .. }), Answer::Mapped(rows, more)) => {
                if super::mapped::in_order(&rows, range.reverse()) {
                    range.on_range_reply(rows, more).map_err(|_| ())
                } else {
                    Err(())
                }
            }
            (Some(NativeOp::Range(r)), Answer::Range(rows, more)) => {
                // Rows come in read order, each once; anything else would corrupt the
                // snapshot cache, so it is refused.
                let ordered = rows.windows(2).all(|w| {
                    if r.reverse() {
                        w[0].key > w[1].key
                    } else {
                        w[0].key < w[1].key
                    }
                });
                if ordered {
                    r.on_range_reply(rows, more).map_err(|_| ())
                } else {
                    Err(())
                }
            }
            _ => Ok(()),
        };
        op.attempt = 0;
        op.wait = Wait::Ready;
        self.table.ready.push(req);
        if fed.is_err() {
            self.fail_op(
                cx,
                req,
                ClientError::Decode(crate::serializer::DecodeError::InvalidValue(
                    "range reply outside its request",
                )),
            );
        }
    }

    fn on_read_error(&mut self, cx: &mut Ctx<'_>, req: RequestId, sent: &Sent, e: ClientError) {
        // `getRange` meets a selector its storage server cannot resolve: forget the shard and
        // resolve the selectors first (`getRangeFallback`), at once.
        let falls_back = e.code() == ErrorCode::WRONG_SHARD_SERVER
            && self.table.ops.get(&req).is_some_and(|op| match &op.kind {
                OpKind::GetKey(ReadOp { read, .. }) | OpKind::Range(ReadOp { read, .. }) => {
                    matches!(&read.native, Some(n) if n.falls_back() && !sent.key_request)
                }
                _ => false,
            });
        if falls_back {
            self.routing.forget(&sent.key, sent.backward);
            if let Some(op) = self.table.ops.get_mut(&req) {
                if let OpKind::GetKey(ReadOp { read, .. }) | OpKind::Range(ReadOp { read, .. }) =
                    &mut op.kind
                {
                    read.sent = None;
                    if let Some(n) = &mut read.native {
                        n.fall_back();
                    }
                }
                op.attempt = 0;
                op.wait = Wait::Ready;
                self.table.ready.push(req);
            }
            return;
        }
        if self.retried_read_error(cx, req, &e) {
            if let Some(op) = self.table.ops.get_mut(&req) {
                if let OpKind::GetKey(ReadOp { read, .. }) | OpKind::Range(ReadOp { read, .. }) =
                    &mut op.kind
                {
                    if let Some(n) = &mut read.native {
                        n.retry();
                    }
                }
            }
            return;
        }
        self.fail_op(cx, req, e);
    }
}
