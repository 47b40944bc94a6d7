//! `get_range`, whole, and the reading machinery `get_key` (`get_key.rs`) and
//! `get_mapped_range` (`mapped.rs`) share, all three a [`ReadOp`]: the checks when it is
//! called (the arguments, then the transaction, the readable keys, selectors that enclose no
//! key), then, with read-your-writes on, RYW's walk over the snapshot cache and the write map
//! (`ryw::range_read`), which asks NativeAPI's range read for what it does not know; with it
//! off, NativeAPI's `getKey` and `getRange` directly (`readThrough`). Either way the storage
//! requests come from NativeAPI's walks (`native.rs`, with `getRangeFallback` when a
//! selector's shard cannot resolve it): this file builds them for a replica of the right shard
//! (`GetKeyRequest`, `GetKeyValuesRequest`, `GetMappedKeyValuesRequest`), decodes the replies
//! and feeds them back (falling back, retrying or failing on an error), and, when the read is
//! done, adds its read conflict range and finishes with the rows.

use bytes::Bytes;

use super::native::{range_finished_conflict, NativeKey, NativeRange, NativeStep};
use super::replica_check::CheckedRequest;
use super::{OpId, OpKind, Wait};
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
use crate::ryw::{cmp_bytes, Unreadable, WriteMap};
use crate::transaction::scan::{range_limits, NativeOp, RangeOptions, ReadKind, StreamingMode};
use crate::transaction::state::Tx;
use crate::transaction::{fdb, storage_error, Ctx, Transactions};

/// A `get_key`, `get_range` or `get_mapped_range` in flight: [`OpKind::GetKey`]'s and
/// [`OpKind::Range`]'s state.
#[derive(Debug)]
pub(in crate::transaction) struct ReadOp {
    snapshot: bool,
    kind: ReadKind,
    /// The NativeAPI read it waits for.
    native: Option<NativeOp>,
    /// The storage request in flight.
    sent: Option<Sent>,
}

/// The storage request in flight: a key request (else a range request), to the shard of
/// `key` (of the keys before it when `backward`).
#[derive(Clone, Debug)]
struct Sent {
    key_request: bool,
    key: Bytes,
    backward: bool,
}

/// Where a read stands after running.
pub(super) enum Progress {
    /// Waiting for a read version, a location or a reply.
    Wait,
    Done(Reply),
    Failed(ClientError),
}

fn unreadable(_: Unreadable) -> ClientError {
    ClientError::Fdb(ErrorCode::ACCESSED_UNREADABLE)
}

/// What a storage server answered to the request in flight.
#[derive(Debug)]
pub(super) enum Answer {
    Key(KeySelector),
    Range(alloc::vec::Vec<KeyValue>, bool),
    Mapped(alloc::vec::Vec<MappedKeyValue>, bool),
}

/// The answer in a reply to a key request, a mapped range request or a range request, or
/// the error the storage server answered with.
pub(super) fn decode_answer(
    key_request: bool,
    mapped: bool,
    message: &Bytes,
) -> Result<Answer, ClientError> {
    if key_request {
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
    }
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

    /// Reads one batch of the rows between two selectors: the checks, then RYW's walk or
    /// NativeAPI's `getRange` (the read's start itself, as the arguments are many).
    #[allow(clippy::too_many_arguments)]
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
            None => (&b""[..], Some(WriteMap::blank())),
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
        ReadOp::insert(self, cx, req, tx, snapshot, kind);
        req
    }
}

/// The read's steps.
impl ReadOp {
    /// A new read of `kind`, runnable, for operation `req` of `tx`: a `get_key` if `key`.
    pub(super) fn insert(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
        snapshot: bool,
        kind: ReadKind,
    ) {
        let key = matches!(kind, ReadKind::RywKey { .. } | ReadKind::NativeKey { .. });
        let op = ReadOp {
            snapshot,
            kind,
            native: None,
            sent: None,
        };
        let kind = if key {
            OpKind::GetKey(op)
        } else {
            OpKind::Range(op)
        };
        txs.insert_op(cx, req, tx, kind);
    }

    /// The key its storage request in flight is about (keys before it when `true`).
    pub(super) fn storage_key(&self) -> Option<(Bytes, bool)> {
        self.sent.as_ref().map(|s| (s.key.clone(), s.backward))
    }

    /// Runs a `get_key` or `get_range` as far as it goes. Takes the whole of the
    /// transactions: a read reads the read version, the tenant and the location cache.
    pub(super) fn advance(txs: &mut Transactions, cx: &mut Ctx<'_>, id: OpId) {
        let OpId { req, .. } = id;
        let Some(op) = txs.table.ops.get_mut(&req) else {
            return;
        };
        // The read is taken out while it runs (it and the transactions are borrowed
        // together); meanwhile its op stands as a kind that is no read and has no key.
        let placeholder = OpKind::Backoff(super::on_error::BackoffOp);
        let (mut read, is_key) = match core::mem::replace(&mut op.kind, placeholder) {
            OpKind::GetKey(r) => (r, true),
            OpKind::Range(r) => (r, false),
            other => {
                op.kind = other;
                return;
            }
        };
        let progress = read.run(txs, cx, id);
        if let Some(op) = txs.table.ops.get_mut(&req) {
            op.kind = if is_key {
                OpKind::GetKey(read)
            } else {
                OpKind::Range(read)
            };
        }
        match progress {
            Progress::Wait => {}
            Progress::Done(reply) => txs.succeed_op(cx, req, reply),
            Progress::Failed(e) => txs.fail_op(cx, req, e),
        }
    }

    /// Steps the read until it waits or ends.
    fn run(&mut self, txs: &mut Transactions, cx: &mut Ctx<'_>, id: OpId) -> Progress {
        let OpId { tx, .. } = id;
        let snapshot = self.snapshot;
        loop {
            if let Some(native) = &mut self.native {
                // NativeAPI's reads start by waiting for the read version.
                let version = match txs.read_version_to_read(cx, id) {
                    Some(Ok(v)) => v,
                    Some(Err(e)) => return Progress::Failed(e),
                    None => return Progress::Wait,
                };
                let (key, backward, key_request) = match native.step() {
                    NativeStep::Done => {
                        let n = self.native.take().expect("stepped");
                        let Some(t) = txs.txs.get_mut(&tx) else {
                            return Progress::Failed(ClientError::Fdb(
                                ErrorCode::TRANSACTION_CANCELLED,
                            ));
                        };
                        ReadOp::native_done(t, snapshot, &mut self.kind, n);
                        continue;
                    }
                    NativeStep::Range { key, backward } => (key, backward, false),
                    NativeStep::Key { key, backward } => (key, backward, true),
                };
                self.send(txs, cx, id, version, key, backward, key_request);
                return Progress::Wait;
            }
            let Some(t) = txs.txs.get_mut(&tx) else {
                return Progress::Failed(ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED));
            };
            if matches!(self.kind, ReadKind::Mapped { .. }) {
                match ReadOp::mapped_step(t, &mut self.kind, &mut self.native) {
                    None => continue,
                    Some(p) => return p,
                }
            }
            let max = Bytes::from_static(t.max_read_key());
            match &mut self.kind {
                ReadKind::RywKey { .. } | ReadKind::NativeKey { .. } => {
                    match ReadOp::key_step(t, snapshot, &mut self.kind, &mut self.native, max) {
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
                        self.native = Some(NativeOp::Range(NativeRange::new(
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
                        self.native = Some(NativeOp::Key(NativeKey::new(end.clone())));
                        continue;
                    }
                    let Some(r) = result.take() else {
                        // `getRangeInternal`: nothing to read between these selectors.
                        if limits.is_reached()
                            || (begin.offset >= end.offset && begin.key >= end.key)
                        {
                            return Progress::Done(Reply::Range(RangeResult::default()));
                        }
                        self.native = Some(NativeOp::Range(NativeRange::new(
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
    fn native_done(t: &mut Tx, snapshot: bool, kind: &mut ReadKind, native: NativeOp) {
        match (kind, native) {
            (kind @ (ReadKind::RywKey { .. } | ReadKind::NativeKey { .. }), native) => {
                ReadOp::key_native_done(t, kind, native)
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
                ReadOp::mapped_end_resolved(t, kind, k.result().cloned().unwrap_or_default());
            }
            (ReadKind::Mapped { result, .. }, NativeOp::Mapped { mut range, .. }) => {
                *result = Some(range.take_result());
            }
            _ => {}
        }
    }

    /// Sends the NativeAPI read's next request to a replica of the shard of `key` (after
    /// looking the shard up if needed).
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        id: OpId,
        version: i64,
        key: Bytes,
        backward: bool,
        key_request: bool,
    ) {
        let OpId { req, tx } = id;
        self.sent = Some(Sent {
            key_request,
            key: key.clone(),
            backward,
        });
        let Some((sb, se)) = txs.shard_bounds(tx, &key, backward) else {
            txs.table.set_wait(req, Wait::Location);
            txs.request_location(cx, tx, &key, backward);
            return;
        };
        let Some(native) = &mut self.native else {
            return;
        };
        let server = txs
            .choose_replica(cx, req, &key, backward)
            .expect("the shard was found above");
        let token = cx.rng.uid();
        let span_context = txs.span(cx, tx);
        let options = txs.read_options(cx.rng, tx);
        let tags = txs.sampled_read_tags(cx, tx);
        let tenant_info = txs.tenant_info(tx);
        let addr = server.addr.clone();
        txs.table.set_wait(req, Wait::Reply);
        // The three requests are other wire messages with the same fields after their
        // selectors (and the mapper): those fields, and the send, written once.
        macro_rules! send_read {
            ($msg:ident { $($field:ident),* }; $stream:ident, $checked:ident) => {{
                let msg = $msg {
                    $($field,)*
                    version,
                    tags,
                    reply: ReplyPromise { token },
                    span_context,
                    tenant_info,
                    options,
                    ss_latest_commit_versions: VersionVector::empty(-1),
                };
                let dest = server.stream(StorageServerInterface::$stream);
                cx.io().send(&addr, dest, &msg, token, Route::Storage(req));
                txs.keep_for_check(req, tx, || (CheckedRequest::$checked(msg), key, backward));
            }};
        }
        if key_request {
            let sel = match native {
                NativeOp::Key(k) => k.selector().clone(),
                NativeOp::Range(r) => r.key_selector().cloned().unwrap_or_default(),
                NativeOp::Mapped { range, .. } => range.key_selector().cloned().unwrap_or_default(),
            };
            send_read!(GetKeyRequest { sel }; GET_KEY, Key);
        } else if let NativeOp::Mapped { range, mapper } = native {
            let (begin, end, limit, limit_bytes) = range.range_request((&sb, &se));
            let mapper = mapper.clone();
            send_read!(
                GetMappedKeyValuesRequest { begin, end, mapper, limit, limit_bytes };
                GET_MAPPED_KEY_VALUES, Mapped
            );
        } else if let NativeOp::Range(r) = native {
            let (begin, end, limit, limit_bytes) = r.range_request((&sb, &se));
            send_read!(GetKeyValuesRequest { begin, end, limit, limit_bytes }; GET_KEY_VALUES, Range);
        }
    }

    /// A storage server answered a `get_key` or `get_range` request.
    pub(super) fn on_reply(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        req: RequestId,
        message: &Bytes,
    ) {
        let Some((sent, mapped)) = txs.table.ops.get(&req).and_then(|op| match &op.kind {
            OpKind::GetKey(read) | OpKind::Range(read) => read
                .sent
                .clone()
                .map(|s| (s, matches!(read.native, Some(NativeOp::Mapped { .. })))),
            _ => None,
        }) else {
            return;
        };
        let answer = match decode_answer(sent.key_request, mapped, message) {
            Ok(a) => a,
            Err(e) => return ReadOp::on_error(txs, cx, req, &sent, e),
        };
        let Some(op) = txs.table.ops.get_mut(&req) else {
            return;
        };
        let (OpKind::GetKey(read) | OpKind::Range(read)) = &mut op.kind else {
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
                if ReadOp::mapped_in_order(&rows, range.reverse()) {
                    range.on_range_reply(rows, more).map_err(|_| ())
                } else {
                    Err(())
                }
            }
            (Some(NativeOp::Range(r)), Answer::Range(rows, more)) => {
                // Rows come in read order, each once; anything else would corrupt the
                // snapshot cache, so it is refused.
                // (`cmp_bytes`, not `memcmp`: a hundred short keys a reply.)
                let want = if r.reverse() {
                    core::cmp::Ordering::Greater
                } else {
                    core::cmp::Ordering::Less
                };
                let ordered = rows
                    .windows(2)
                    .all(|w| cmp_bytes(&w[0].key, &w[1].key) == want);
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
        txs.table.ready.push(req);
        if fed.is_err() {
            return txs.fail_op(
                cx,
                req,
                ClientError::Decode(crate::serializer::DecodeError::InvalidValue(
                    "range reply outside its request",
                )),
            );
        }
        // The read goes on now, before the next reply is taken in: libfdb_c delivers each
        // reply as a task of its own, and RYW's walk resumes inside it. Left for the next
        // round, the walk would see what replies after this one put in the snapshot cache (a
        // get of the next key, say) and batch rows libfdb_c does not.
        txs.advance(cx, req);
    }

    /// The replica consistency check failed the request in flight with `e` (or relocates
    /// it).
    pub(super) fn on_failed(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        req: RequestId,
        e: ClientError,
    ) {
        let sent = txs.table.ops.get(&req).and_then(|op| match &op.kind {
            OpKind::GetKey(read) | OpKind::Range(read) => read.sent.clone(),
            _ => None,
        });
        match sent {
            Some(sent) => ReadOp::on_error(txs, cx, req, &sent, e),
            None => txs.fail_op(cx, req, e),
        }
    }

    fn on_error(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        req: RequestId,
        sent: &Sent,
        e: ClientError,
    ) {
        // `getRange` meets a selector its storage server cannot resolve: forget the shard and
        // resolve the selectors first (`getRangeFallback`), at once.
        let falls_back = e.code() == ErrorCode::WRONG_SHARD_SERVER
            && txs.table.ops.get(&req).is_some_and(|op| match &op.kind {
                OpKind::GetKey(read) | OpKind::Range(read) => {
                    matches!(&read.native, Some(n) if n.falls_back() && !sent.key_request)
                }
                _ => false,
            });
        if falls_back {
            txs.routing.forget(&sent.key, sent.backward);
            if let Some(op) = txs.table.ops.get_mut(&req) {
                if let OpKind::GetKey(read) | OpKind::Range(read) = &mut op.kind {
                    read.sent = None;
                    if let Some(n) = &mut read.native {
                        n.fall_back();
                    }
                }
                op.attempt = 0;
                op.wait = Wait::Ready;
                txs.table.ready.push(req);
            }
            return;
        }
        if txs.retried_read_error(cx, req, &e) {
            if let Some(op) = txs.table.ops.get_mut(&req) {
                if let OpKind::GetKey(read) | OpKind::Range(read) = &mut op.kind {
                    if let Some(n) = &mut read.native {
                        n.retry();
                    }
                }
            }
            return;
        }
        txs.fail_op(cx, req, e);
    }
}
