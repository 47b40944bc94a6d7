//! Range reads and key selectors. A selector resolves as libfdb_c's RYW layer does it, as a
//! one-row range read (reverse for offsets ≤ 0); a range read walks shard by shard, merging the
//! storage rows with the transaction's writes and its snapshot cache, within the row and byte
//! limits of the streaming mode.

use alloc::vec::Vec;
use bytes::Bytes;

use super::op::{OpKind, Wait};
use super::scan::{normalize, KeyResolve, RangeOptions, Scan, StreamingMode, REPLY_BYTE_LIMIT};
use super::special::CONFLICTING_KEYS_PREFIX;
use super::{fdb, Ctx, Transactions};
use crate::error::ErrorCode;
use crate::event::{ClientError, RangeResult, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::messages::storage::{GetKeyValuesReply, GetKeyValuesRequest, StorageServerInterface};
use crate::messages::types::{KeySelector, VersionVector};
use crate::messages::ReplyPromise;
use crate::route::Route;
use crate::ryw::key_after;

impl Transactions {
    /// Resolves a key selector.
    pub(crate) fn get_key(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        sel: KeySelector,
        snapshot: bool,
    ) -> RequestId {
        let req = cx.new_request();
        let max = match self.txs.get(&tx) {
            Some(t) => Bytes::from_static(t.max_read_key()),
            None => {
                cx.finish(req, fdb(ErrorCode::TRANSACTION_CANCELLED));
                return req;
            }
        };
        if let Err(e) = self.check_usable(tx) {
            cx.finish(req, Err(e));
            return req;
        }
        if sel.key.as_ref() > max.as_ref() {
            cx.finish(req, fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE));
            return req;
        }
        // A selector already past either end of the database answers that end without a
        // read (and without fetching a read version), as RYW's getKey does; it still counts
        // as a read.
        let (k, offset) = normalize(&sel);
        let end = if offset >= 1 && k.as_ref() >= max.as_ref() {
            Some(max.clone())
        } else if offset <= 0 && k.is_empty() {
            Some(Bytes::new())
        } else {
            None
        };
        if let Some(key) = end {
            if let Some(t) = self.txs.get_mut(&tx) {
                t.read_started = true;
            }
            cx.finish(req, Ok(Reply::Key(key)));
            return req;
        }
        let resolve = Self::key_resolve(sel, max);
        self.insert_op(cx, req, tx, OpKind::GetKey { snapshot, resolve });
        req
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
        // `fdb_transaction_get_range` checks its arguments before the transaction's state.
        if opts.mode == StreamingMode::Exact && opts.limit == 0 && opts.target_bytes == 0 {
            cx.finish(req, fdb(ErrorCode::EXACT_MODE_WITHOUT_LIMITS));
            return req;
        }
        if opts.mode == StreamingMode::Iterator && opts.iteration == 0 {
            cx.finish(req, fdb(ErrorCode::CLIENT_INVALID_OPERATION));
            return req;
        }
        if let Some(e) = self.txs.get(&tx).and_then(|t| t.deferred.clone()) {
            cx.finish(req, Err(e));
            return req;
        }
        // A special key range, readable even after the commit (RYW's special key space).
        if begin.key.starts_with(CONFLICTING_KEYS_PREFIX) && self.txs.contains_key(&tx) {
            let (b, _) = normalize(&begin);
            let (e, _) = normalize(&end);
            let r = self.conflicting_keys(tx, &b, &e, opts);
            cx.finish(req, Ok(Reply::Range(r)));
            return req;
        }
        if let Err(e) = self.check_usable(tx) {
            cx.finish(req, Err(e));
            return req;
        }
        let max = self.txs.get(&tx).map_or(&b""[..], |t| t.max_read_key());
        if begin.key.as_ref() > max || end.key.as_ref() > max {
            cx.finish(req, fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE));
            return req;
        }
        // RYW `getRange`: selectors that cannot enclose a key give no rows at once, without a
        // read (no conflict range; it does not count as a read either).
        let ((bk, bo), (ek, eo)) = (normalize(&begin), normalize(&end));
        if bo >= eo && bk >= ek {
            cx.finish(req, Ok(Reply::Range(RangeResult::default())));
            return req;
        }
        self.insert_op(
            cx,
            req,
            tx,
            OpKind::Range {
                snapshot,
                begin,
                end,
                begin_key: None,
                end_key: None,
                resolving: None,
                opts,
                scan: None,
            },
        );
        req
    }

    pub(super) fn key_resolve(sel: KeySelector, max: Bytes) -> KeyResolve {
        let (key, offset) = normalize(&sel);
        if offset > 0 {
            let scan = Scan::new(key.clone(), max, false, Some(offset as usize), None);
            KeyResolve { sel, scan }
        } else {
            let rows = (1 - offset as i64) as usize;
            let scan = Scan::new(Bytes::new(), key.clone(), true, Some(rows), None);
            KeyResolve { sel, scan }
        }
    }

    // ----- range reads and selectors -----

    // ----- range reads and selectors -----

    /// Advances a scan: sends the next storage request or finishes. `Ok(true)`: done.
    pub(super) fn step_scan(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
        scan: &mut Scan,
        byte_limit: Option<i32>,
    ) -> Result<bool, ClientError> {
        let version = match self.read_version_for(cx, req, tx, false) {
            Some(Ok(v)) => v,
            Some(Err(e)) => return Err(e),
            None => return Ok(false),
        };
        let ryw = !self.txs[&tx].options.ryw_disabled;
        loop {
            if scan.done || scan.at_end() {
                if scan.cut_at_unreadable && scan.at_end() && !scan.more && !scan.limits_reached() {
                    return Err(ClientError::Fdb(ErrorCode::ACCESSED_UNREADABLE));
                }
                scan.done = true;
                return Ok(true);
            }
            let reverse = scan.reverse;
            if ryw {
                let t = &self.txs[&tx];
                let (ra, rb) = if reverse {
                    (scan.lo.clone(), scan.cursor.clone())
                } else {
                    (scan.cursor.clone(), scan.hi.clone())
                };
                if let Some(u) = t.writes.first_unreadable(&ra, &rb, reverse) {
                    if u == if reverse { rb.clone() } else { ra.clone() } {
                        return Err(ClientError::Fdb(ErrorCode::ACCESSED_UNREADABLE));
                    }
                    // Read up to it; needing more fails there.
                    if reverse {
                        scan.lo = u;
                    } else {
                        scan.hi = u;
                    }
                    scan.cut_at_unreadable = true;
                    continue;
                }
                // Answer from the writes (all cleared) or from what was already read.
                let local = if t.writes.fully_cleared(&ra, &rb) {
                    Some((ra, rb, Vec::new()))
                } else if reverse {
                    t.cache
                        .known
                        .containing_before(&scan.cursor)
                        .map(|(kb, _)| {
                            let a = core::cmp::max(kb.clone(), scan.lo.clone());
                            let rows = t.cache.rows_in(&a, &scan.cursor);
                            (a, scan.cursor.clone(), rows)
                        })
                } else {
                    t.cache.known.containing(&scan.cursor).map(|(_, ke)| {
                        let b = core::cmp::min(ke.clone(), scan.hi.clone());
                        let rows = t.cache.rows_in(&scan.cursor, &b);
                        (scan.cursor.clone(), b, rows)
                    })
                };
                if let Some((a, b, stored)) = local {
                    let mut rows = t.writes.merge(&a, &b, &stored);
                    if reverse {
                        rows.reverse();
                    }
                    scan.take(rows, &a, &b, false);
                    continue;
                }
            }
            let Some((shard_begin, shard_end)) = self.shard_bounds(tx, &scan.cursor, reverse)
            else {
                let cursor = scan.cursor.clone();
                self.set_wait(req, Wait::Location);
                self.request_location(cx, tx, &cursor, reverse);
                return Ok(false);
            };
            let (a, b) = if reverse {
                (
                    core::cmp::max(scan.lo.clone(), shard_begin),
                    scan.cursor.clone(),
                )
            } else {
                (
                    scan.cursor.clone(),
                    core::cmp::min(scan.hi.clone(), shard_end),
                )
            };
            // Stop the request where the cache already knows the keys.
            let t = &self.txs[&tx];
            let (a, b) = if !ryw {
                (a, b)
            } else if reverse {
                match t.cache.known.prev_end_before(&b) {
                    Some(e) if *e > a => (e.clone(), b),
                    _ => (a, b),
                }
            } else {
                match t.cache.known.next_begin_after(&a) {
                    Some(nb) if *nb < b => (a, nb.clone()),
                    _ => (a, b),
                }
            };
            let rows_limit = scan
                .rows_left
                .map_or(REPLY_BYTE_LIMIT, |r| r.min(i32::MAX as usize) as i32);
            let bytes_limit = match (scan.bytes_left, byte_limit) {
                // A storage reply carries at most REPLY_BYTE_LIMIT whatever the caller asked.
                (Some(b), _) => b.min(REPLY_BYTE_LIMIT as usize) as i32,
                (None, Some(b)) => b,
                (None, None) => REPLY_BYTE_LIMIT,
            };
            let cursor = scan.cursor.clone();
            let server = self
                .choose_replica(cx, req, &cursor, reverse)
                .expect("the shard was found above");
            let token = cx.rng.uid();
            let msg = GetKeyValuesRequest {
                begin: KeySelector::first_greater_or_equal(a.clone()),
                end: KeySelector::first_greater_or_equal(b.clone()),
                version,
                limit: if reverse { -rows_limit } else { rows_limit },
                limit_bytes: bytes_limit,
                tags: None,
                reply: ReplyPromise { token },
                span_context: self.span(cx, tx),
                tenant_info: self.tenant_info(tx),
                options: self.read_options(cx.rng, tx),
                ss_latest_commit_versions: VersionVector::empty(-1),
            };
            scan.chunk = Some((a, b));
            let addr = server.addr.clone();
            let dest = server.stream(StorageServerInterface::GET_KEY_VALUES);
            self.set_wait(req, Wait::Reply);
            cx.send(&addr, dest, &msg, token, Route::Storage(req));
            return Ok(false);
        }
    }

    /// Feeds a storage reply into a scan.
    pub(super) fn feed_scan(
        &mut self,
        tx: TransactionId,
        scan: &mut Scan,
        reply: GetKeyValuesReply,
    ) -> Result<(), ClientError> {
        let Some((a, b)) = scan.chunk.take() else {
            return Ok(());
        };
        let mut rows = reply.data.0;
        // A server must answer inside the chunk, in order; anything else would corrupt the
        // merge and the cache, so it is refused.
        let in_chunk = rows.iter().all(|kv| a <= kv.key && kv.key < b);
        let ordered = rows.windows(2).all(|w| {
            if scan.reverse {
                w[0].key > w[1].key
            } else {
                w[0].key < w[1].key
            }
        });
        if !in_chunk || !ordered {
            return Err(ClientError::Decode(
                crate::serializer::DecodeError::InvalidValue("range reply outside its request"),
            ));
        }
        // The part of the chunk the reply covers.
        let (ca, cb) = if reply.more && !rows.is_empty() {
            if scan.reverse {
                (rows.last().expect("non-empty").key.clone(), b.clone())
            } else {
                (a.clone(), key_after(&rows.last().expect("non-empty").key))
            }
        } else {
            (a, b)
        };
        let Some(t) = self.txs.get_mut(&tx) else {
            return Ok(());
        };
        if !t.options.ryw_disabled {
            if scan.reverse {
                let mut asc = rows.clone();
                asc.reverse();
                t.cache.insert_range(&ca, &cb, &asc);
            } else {
                t.cache.insert_range(&ca, &cb, &rows);
            }
        }
        if !t.options.ryw_disabled && t.writes.touches(&ca, &cb) {
            if scan.reverse {
                rows.reverse();
            }
            rows = t.writes.merge(&ca, &cb, &rows);
            if scan.reverse {
                rows.reverse();
            }
        }
        scan.take(rows, &ca, &cb, true);
        Ok(())
    }

    pub(super) fn scan_conflict(&mut self, tx: TransactionId, begin: &[u8], end: &[u8]) {
        let Some(t) = self.txs.get_mut(&tx) else {
            return;
        };
        // Never past the readable keys: a selector resolved to the end gives `[sel, end\0)`,
        // and a read conflict range past `\xff\xff` makes the commit proxy drop the commit
        // (broken_promise, seen on a real 7.3.77 cluster).
        let end = core::cmp::min(end, t.max_read_key());
        if begin >= end {
            return;
        }
        if t.options.ryw_disabled {
            t.read_conflicts.insert(begin, end);
            return;
        }
        for (b, e) in t.writes.undecided(begin, end) {
            t.read_conflicts.insert(&b, &e);
        }
    }

    /// The key a finished selector scan resolved to.
    pub(super) fn resolved_key(r: &KeyResolve, max: &[u8]) -> Bytes {
        let (_, offset) = normalize(&r.sel);
        let want = if offset > 0 {
            offset as usize
        } else {
            (1 - offset as i64) as usize
        };
        if r.scan.out.len() >= want {
            r.scan.out[want - 1].key.clone()
        } else if offset > 0 {
            Bytes::copy_from_slice(max)
        } else {
            Bytes::new()
        }
    }

    /// `addConflictRange` for a resolved selector.
    pub(super) fn key_conflict(&mut self, tx: TransactionId, r: &KeyResolve, result: &Bytes) {
        let (_, offset) = normalize(&r.sel);
        let sel_key = if r.sel.or_equal {
            key_after(&r.sel.key)
        } else {
            r.sel.key.clone()
        };
        if offset <= 0 {
            self.scan_conflict(tx, result, &sel_key);
        } else {
            self.scan_conflict(tx, &sel_key, &key_after(result));
        }
    }

    pub(super) fn advance_get_key(&mut self, cx: &mut Ctx<'_>, req: RequestId, tx: TransactionId) {
        let Some(op) = self.ops.get_mut(&req) else {
            return;
        };
        let OpKind::GetKey { snapshot, resolve } = &mut op.kind else {
            return;
        };
        let snapshot = *snapshot;
        let mut r = core::mem::replace(
            resolve,
            Self::key_resolve(KeySelector::default(), Bytes::new()),
        );
        let res = self.step_scan(cx, req, tx, &mut r.scan, None);
        self.finish_key_step(cx, req, tx, snapshot, r, res);
    }

    pub(super) fn finish_key_step(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
        snapshot: bool,
        r: KeyResolve,
        res: Result<bool, ClientError>,
    ) {
        match res {
            Err(e) => self.fail_op(cx, req, e),
            Ok(false) => {
                if let Some(OpKind::GetKey { resolve, .. }) =
                    self.ops.get_mut(&req).map(|o| &mut o.kind)
                {
                    *resolve = r;
                }
            }
            Ok(true) => {
                let max = self.txs.get(&tx).map_or(&b"\xff"[..], |t| t.max_read_key());
                let key = Self::resolved_key(&r, max);
                if !snapshot {
                    self.key_conflict(tx, &r, &key);
                }
                self.succeed_op(cx, req, Reply::Key(key));
            }
        }
    }

    pub(super) fn advance_range(&mut self, cx: &mut Ctx<'_>, req: RequestId, tx: TransactionId) {
        let max = Bytes::from_static(self.txs[&tx].max_read_key());
        let Some(op) = self.ops.get_mut(&req) else {
            return;
        };
        let OpKind::Range {
            snapshot,
            begin,
            end,
            begin_key,
            end_key,
            resolving,
            opts,
            scan: _,
        } = &mut op.kind
        else {
            return;
        };
        let snapshot = *snapshot;
        let opts = *opts;
        // 1. Resolve selectors that are not plain `first_greater_or_equal`.
        if begin_key.is_none() || end_key.is_none() {
            for (is_begin, sel, slot) in [
                (true, begin.clone(), &mut *begin_key),
                (false, end.clone(), &mut *end_key),
            ] {
                if slot.is_none() {
                    let (k, offset) = normalize(&sel);
                    if offset == 1 {
                        *slot = Some(if k > max { max.clone() } else { k });
                    } else if resolving.is_none() {
                        *resolving = Some((is_begin, Self::key_resolve(sel, max.clone())));
                    }
                }
            }
        }
        if let Some((is_begin, mut r)) = resolving.take() {
            let res = self.step_scan(cx, req, tx, &mut r.scan, None);
            match res {
                Err(e) => return self.fail_op(cx, req, e),
                Ok(false) => {
                    if let Some(OpKind::Range { resolving, .. }) =
                        self.ops.get_mut(&req).map(|o| &mut o.kind)
                    {
                        *resolving = Some((is_begin, r));
                    }
                    return;
                }
                Ok(true) => {
                    let key = Self::resolved_key(&r, &max);
                    if !snapshot {
                        self.key_conflict(tx, &r, &key);
                    }
                    if let Some(OpKind::Range {
                        begin_key, end_key, ..
                    }) = self.ops.get_mut(&req).map(|o| &mut o.kind)
                    {
                        if is_begin {
                            *begin_key = Some(key);
                        } else {
                            *end_key = Some(key);
                        }
                    }
                    // Continue with the other selector or the scan.
                    self.set_wait(req, Wait::Ready);
                    return;
                }
            }
        }
        let Some(op) = self.ops.get_mut(&req) else {
            return;
        };
        let OpKind::Range {
            begin_key,
            end_key,
            scan,
            ..
        } = &mut op.kind
        else {
            return;
        };
        let (Some(b), Some(e)) = (begin_key.clone(), end_key.clone()) else {
            return;
        };
        if b >= e {
            return self.succeed_op(cx, req, Reply::Range(RangeResult::default()));
        }
        let mut s = match scan.take() {
            Some(s) => s,
            None => {
                let rows = (opts.limit > 0).then_some(opts.limit);
                let byte_limit = match opts.mode.byte_limit(opts.iteration) {
                    Some(m) if opts.target_bytes > 0 => Some(m.min(opts.target_bytes)),
                    Some(m) => Some(m),
                    None if opts.target_bytes > 0 => Some(opts.target_bytes),
                    None => None,
                };
                Scan::new(b, e, opts.reverse, rows, byte_limit)
            }
        };
        let res = self.step_scan(cx, req, tx, &mut s, None);
        match res {
            Err(e) => self.fail_op(cx, req, e),
            Ok(false) => {
                if let Some(OpKind::Range { scan, .. }) =
                    self.ops.get_mut(&req).map(|o| &mut o.kind)
                {
                    *scan = Some(s);
                }
            }
            Ok(true) => {
                if !snapshot {
                    let (cb, ce) = s.conflict();
                    self.scan_conflict(tx, &cb, &ce);
                }
                let result = RangeResult {
                    rows: s.out,
                    more: s.more,
                };
                self.succeed_op(cx, req, Reply::Range(result));
            }
        }
    }

    pub(super) fn on_range_reply(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        r: Result<GetKeyValuesReply, ClientError>,
    ) {
        let reply = match r {
            Ok(r) => r,
            Err(e) => {
                if !self.retried_read_error(cx, req, &e) {
                    self.fail_op(cx, req, e);
                }
                return;
            }
        };
        let Some(op) = self.ops.get_mut(&req) else {
            return;
        };
        let tx = op.tx;
        op.attempt = 0;
        op.wait = Wait::Ready;
        self.ready.push(req);
        // Take the scan out, feed it, put it back; the op then runs again.
        let mut kind = core::mem::replace(&mut op.kind, OpKind::Backoff);
        let fed = match &mut kind {
            OpKind::GetKey { resolve, .. } => self.feed_scan(tx, &mut resolve.scan, reply),
            OpKind::Range {
                resolving: Some((_, r)),
                ..
            } => self.feed_scan(tx, &mut r.scan, reply),
            OpKind::Range { scan: Some(s), .. } => self.feed_scan(tx, s, reply),
            _ => Ok(()),
        };
        if let Some(op) = self.ops.get_mut(&req) {
            op.kind = kind;
        }
        if let Err(e) = fed {
            self.fail_op(cx, req, e);
        }
    }
}
