//! Commits and the retry rules: the commit request (conflict ranges, mutations in write-map
//! order, the self-conflicting key), `commit_unknown_result` after a dummy transaction on that
//! key (`commitDummyTransaction`), and `on_error`'s backoff and reset.

use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use super::{Op, OpKind, Timer, Wait};
use crate::error::{knobs, ErrorCode, OnErrorAction};
use crate::event::{ClientError, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::messages::commit::{CommitID, CommitTransactionRef, CommitTransactionRequest};
use crate::messages::coordination::CommitProxyInterface;
use crate::messages::types::{KeyRange, TagSet, Version};
use crate::messages::{decode_reply, ErrorOr, ReplyPromise};
use crate::route::Route;
use crate::ryw::{key_after, RangeSet};
use crate::transaction::state::{NativeTx, ReadVersion, Tx};
use crate::transaction::{fdb, Ctx, Transactions};

impl Transactions {
    /// Commits. Finishes with [`Reply::Committed`].
    pub(crate) fn commit(&mut self, cx: &mut Ctx<'_>, tx: TransactionId) -> RequestId {
        let req = cx.new_request();
        match self.txs.get_mut(&tx) {
            None => {
                cx.finish(req, fdb(ErrorCode::TRANSACTION_CANCELLED));
                return req;
            }
            // A failed write fails the commit before it starts (the transaction is not
            // marked as committing, as in `ThreadSafeTransaction::commit`).
            Some(t) if t.deferred.is_some() => {
                let e = t.deferred.clone().expect("checked");
                cx.finish(req, Err(e));
                return req;
            }
            Some(t) if t.committing => {
                let e = self.check_not_committing(tx);
                cx.finish(req, e.map(|_| Reply::Retry));
                return req;
            }
            Some(t) if t.finished.is_some() => {
                let e = t.finished.expect("checked");
                cx.finish(req, fdb(e));
                return req;
            }
            // Special-key writes the caller did not carry out ([`Client::take_special_writes`]
            // is how a driver runs their module's commit first): refused, not dropped.
            Some(t) if !t.special_writes.is_empty() => {
                cx.finish(req, fdb(ErrorCode::UNSUPPORTED_OPERATION));
                return req;
            }
            Some(t) => {
                t.committing = true;
                if let Some(e) = t.read_failed.clone() {
                    self.insert_op(cx, req, tx, OpKind::Commit);
                    self.fail_commit(cx, req, tx, e);
                    return req;
                }
            }
        }
        self.insert_op(cx, req, tx, OpKind::Commit);
        req
    }

    // ----- commit -----

    pub(super) fn advance_commit(&mut self, cx: &mut Ctx<'_>, req: RequestId, tx: TransactionId) {
        let t = &self.txs[&tx];
        let (mutations, mut write_conflicts, mut read_conflicts) = Self::commit_lists(t);
        let read_only = mutations.is_empty() && write_conflicts.is_empty();
        if read_only {
            // Nothing to send (`Transaction::commit` of a read-only transaction). Its watches
            // start from its read version.
            // Outside a tenant, such a commit succeeds even where tenants are required (its
            // watches fail with `tenant_name_required`, as libfdb_c's do).
            let v = if t.watches.is_empty() {
                None
            } else if !self.tx_tenants.contains_key(&tx) {
                match self.read_version_only(cx, req, tx, false) {
                    Some(Ok(v)) => Some(v),
                    Some(Err(e)) => return self.fail_commit(cx, req, tx, e),
                    None => return,
                }
            } else {
                match self.read_version_for(cx, req, tx, false) {
                    Some(Ok(v)) => Some(v),
                    Some(Err(e)) => return self.fail_commit(cx, req, tx, e),
                    None => return,
                }
            };
            if let Some(t) = self.txs.get_mut(&tx) {
                t.committed = Some((-1, None));
            }
            self.settle_versionstamps(cx, tx, Err(ErrorCode::NO_COMMIT_VERSION));
            super::watch::WatchOp::arm(&mut self.table, self.txs.get_mut(&tx), v);
            return self.succeed_op(
                cx,
                req,
                Reply::Committed {
                    version: -1,
                    versionstamp: None,
                },
            );
        }
        // `read_lock_aware` alone makes the transaction read-only (`commitMutations`).
        if t.options.read_only {
            return self.fail_commit(
                cx,
                req,
                tx,
                ClientError::Fdb(ErrorCode::TRANSACTION_READ_ONLY),
            );
        }
        let size = Self::list_size(&mutations, &write_conflicts, &read_conflicts);
        // `get_approximate_size` counts the same lists without building them.
        debug_assert_eq!(size, Self::commit_size(t));
        if size > t.options.size_limit {
            return self.fail_commit(
                cx,
                req,
                tx,
                ClientError::Fdb(ErrorCode::TRANSACTION_TOO_LARGE),
            );
        }
        let version = match self.read_version_for(cx, req, tx, true) {
            Some(Ok(v)) => v,
            Some(Err(e)) => return self.fail_commit(cx, req, tx, e),
            None => return,
        };
        let proxy = if self.txs[&tx].options.commit_on_first_proxy {
            cx.first_commit_proxy()
        } else {
            cx.pick_commit_proxy(CommitProxyInterface::COMMIT)
        };
        let Some(proxy) = proxy else {
            return self.table.set_wait(req, Wait::Cluster);
        };
        let idempotency_id = self.commit_idempotency_id(cx, tx);
        let t = &self.txs[&tx];
        // The read conflict ranges of NativeAPI's own key and range reads come after the
        // size check (`extraConflictRanges`).
        read_conflicts.extend(t.native.extra_read_conflicts.iter().cloned());
        let extra_size = Self::list_size(&[], &t.native.extra_read_conflicts, &[]);
        // An idempotency id conflicts with itself, so that the dummy commit after an unknown
        // outcome can stop this one (`tryCommit`).
        if let Some(id) = &idempotency_id {
            let r = KeyRange::single_key(&[&b"\xff/SC/"[..], id].concat());
            read_conflicts.push(r.clone());
            write_conflicts.push(r);
        }
        let report = t.options.report_conflicting_keys;
        let lock_aware = t.options.lock_aware;
        let mut flags = 0;
        if lock_aware {
            flags |= CommitTransactionRequest::FLAG_IS_LOCK_AWARE;
        }
        if t.options.first_in_batch {
            flags |= CommitTransactionRequest::FLAG_FIRST_IN_BATCH;
        }
        if t.options.bypass_storage_quota {
            flags |= CommitTransactionRequest::FLAG_BYPASS_STORAGE_QUOTA;
        }
        crate::transaction::log::log_commit(
            t,
            &mutations,
            read_conflicts.len(),
            write_conflicts.len(),
        );
        let causal_write_risky = t.options.causal_write_risky;
        let intersects = write_conflicts.iter().any(|w| {
            read_conflicts
                .iter()
                .any(|r| r.begin < w.end && w.begin < r.end)
        });
        let mut self_conflict = None;
        if !causal_write_risky && !intersects {
            // `makeSelfConflicting`: a random key in both lists lets a retry after
            // `commit_unknown_result` conflict with this attempt if it did commit.
            let mut k = [0u8; 5 + 16];
            k[..5].copy_from_slice(b"\xff/SC/");
            k[5..].copy_from_slice(&cx.rng.uid().to_bytes());
            let r = KeyRange::single_key(&k);
            self_conflict = Some(r.begin.clone());
            read_conflicts.push(r.clone());
            write_conflicts.push(r);
        } else if !causal_write_risky || idempotency_id.is_some() {
            // The first key both read and written serves the same purpose.
            self_conflict = write_conflicts.iter().find_map(|w| {
                read_conflicts
                    .iter()
                    .find(|r| r.begin < w.end && w.begin < r.end)
                    .map(|r| core::cmp::max(&r.begin, &w.begin).clone())
            });
        }
        if report {
            if let Some(t) = self.txs.get_mut(&tx) {
                t.sent_read_conflicts = read_conflicts.clone();
            }
        }
        // In a tenant the commit carries prefixed keys (`applyTenantPrefix`); the dummy
        // transaction after `commit_unknown_result` runs outside the tenant on the prefixed key.
        let mut read_conflicts = read_conflicts;
        let mut write_conflicts = write_conflicts;
        let mut mutations = mutations;
        let tenant_info = self.tenant_info(tx);
        if let Some(id) = self.tx_tenant(tx) {
            let p = crate::transaction::tenant::tenant_prefix(id);
            crate::transaction::tenant::prefix_commit(
                &p,
                &mut read_conflicts,
                &mut write_conflicts,
                &mut mutations,
            );
            self_conflict = self_conflict.map(|k| crate::transaction::tenant::with_prefix(&p, &k));
        }
        let token = cx.rng.uid();
        let span = self.span(cx, tx);
        let msg = CommitTransactionRequest {
            transaction: CommitTransactionRef {
                read_conflict_ranges: read_conflicts,
                write_conflict_ranges: write_conflicts,
                mutations,
                read_snapshot: version,
                report_conflicting_keys: report,
                lock_aware,
                span_context: None,
                tenant_ids: None,
            },
            reply: ReplyPromise { token },
            flags,
            debug_id: self.read_options(cx.rng, tx).and_then(|o| o.debug_id),
            commit_cost_estimation: None,
            // `tr.tagSet` when the transaction has tags.
            tag_set: self.txs.get(&tx).and_then(|t| {
                let tags = &t.options.tags;
                (!tags.is_empty()).then(|| TagSet(tags.clone()))
            }),
            span_context: span,
            tenant_info: tenant_info.clone(),
            idempotency_id: idempotency_id.clone().unwrap_or_default(),
        };
        let expire_token = proxy.stream(CommitProxyInterface::EXPIRE_IDEMPOTENCY_ID);
        let ep = proxy.commit.endpoint;
        if let Some(t) = self.txs.get_mut(&tx) {
            t.self_conflict = self_conflict;
            // libfdb_c expires the id only of a commit its load balancer placed (not with
            // `commit_on_first_proxy`).
            t.idempotency = idempotency_id.map(|id| crate::transaction::idempotency::SentId {
                id,
                read_snapshot: version,
                expire_to: (t.options.automatic_idempotency && !t.options.commit_on_first_proxy)
                    .then(|| (ep.address().clone(), expire_token, tenant_info)),
            });
        }
        self.table.set_wait(req, Wait::Reply);
        // `getSize` counts about what the message carries per mutation and range; the rest
        // of the request is a few hundred bytes.
        let estimate = size + extra_size + 512;
        cx.io().send_sized(
            ep.address(),
            ep.token,
            &msg,
            token,
            Route::Commit(req),
            estimate,
        );
    }

    pub(in crate::transaction) fn fail_commit(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
        e: ClientError,
    ) {
        if let Some(t) = self.txs.get_mut(&tx) {
            let watches = core::mem::take(&mut t.watches);
            for w in watches {
                self.fail_op(cx, w, e.clone());
            }
        }
        // Only a commit that started tells the versionstamp it failed (`commitAndWatch`); a
        // commit refused before it starts leaves it waiting for the reset.
        if self.txs.get(&tx).is_some_and(|t| t.committing) {
            self.settle_versionstamps(cx, tx, Err(ErrorCode::TRANSACTION_INVALID_VERSION));
        }
        self.fail_op(cx, req, e);
    }

    /// `get_versionstamp`: finishes with the 10-byte versionstamp once the transaction
    /// commits (`Reply::Key`); with `no_commit_version` if the commit wrote nothing, with
    /// `transaction_invalid_version` if it failed, with `transaction_cancelled` if the
    /// transaction is reset, cancelled or dropped first (RYW's `getVersionstamp`: a future
    /// of NativeAPI's `versionstampPromise` or of the reset).
    pub(crate) fn get_versionstamp(&mut self, cx: &mut Ctx<'_>, tx: TransactionId) -> RequestId {
        let req = cx.new_request();
        // `ThreadSafeTransaction` checks the deferred error first, then RYW whether the
        // commit started (which finishes the transaction), then the reset future.
        let refused = match self.txs.get(&tx).map(|t| t.deferred.clone()) {
            None => Some(ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED)),
            Some(Some(e)) => Some(e),
            Some(None) => match self.check_not_committing(tx) {
                Err(e) => Some(e),
                Ok(()) => self
                    .txs
                    .get(&tx)
                    .and_then(|t| t.finished.map(ClientError::Fdb)),
            },
        };
        match refused {
            Some(e) => cx.finish(req, Err(e)),
            None => self.insert_op(cx, req, tx, OpKind::Versionstamp),
        }
        req
    }

    /// Finishes every `get_versionstamp` of `tx` with the commit's outcome.
    fn settle_versionstamps(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        outcome: Result<[u8; 10], ErrorCode>,
    ) {
        let waiting: Vec<RequestId> = self
            .table
            .ops
            .iter()
            .filter(|(_, op)| op.tx == tx && matches!(op.kind, OpKind::Versionstamp))
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            match outcome {
                Ok(stamp) => self.succeed_op(cx, id, Reply::Key(Bytes::copy_from_slice(&stamp))),
                Err(e) => self.fail_op(cx, id, ClientError::Fdb(e)),
            }
        }
    }

    pub(crate) fn on_commit_reply(&mut self, cx: &mut Ctx<'_>, req: RequestId, message: &Bytes) {
        let Some((tx, dummy_for)) = self.table.ops.get(&req).map(|o| (o.tx, o.dummy_for)) else {
            return;
        };
        if let Some(parent) = dummy_for {
            let ok = matches!(
                decode_reply::<CommitID>(message),
                Ok(ErrorOr::Ok(ref id)) if id.version != crate::messages::types::INVALID_VERSION
            );
            return self.on_dummy_done(cx, req, tx, parent, ok);
        }
        match decode_reply::<CommitID>(message) {
            Ok(ErrorOr::Err(e))
                if e == ErrorCode::COMMIT_UNKNOWN_RESULT
                    || e == ErrorCode::REQUEST_MAYBE_DELIVERED =>
            {
                self.outcome_unknown(cx, req, tx)
            }
            Ok(ErrorOr::Ok(id)) if id.version == crate::messages::types::INVALID_VERSION => {
                // With `report_conflicting_keys` a conflict comes back as a `CommitID` without
                // a version, naming the read conflict ranges that conflicted (`tryCommit`).
                if let Some(t) = self.txs.get_mut(&tx) {
                    let mut set = RangeSet::new();
                    for i in id.conflicting_kr_indices.iter().flatten() {
                        if let Some(r) = usize::try_from(*i)
                            .ok()
                            .and_then(|i| t.sent_read_conflicts.get(i))
                        {
                            set.insert(&r.begin, &r.end);
                        }
                    }
                    t.conflicting = Some(set);
                }
                self.fail_commit(cx, req, tx, ClientError::Fdb(ErrorCode::NOT_COMMITTED))
            }
            Ok(ErrorOr::Ok(id)) => {
                cx.grv
                    .note_metadata_version(id.version, id.metadata_version.clone());
                self.expire_idempotency_id(cx, tx, id.version, id.txn_batch_id);
                let stamp = id.versionstamp();
                self.commit_succeeded(cx, req, tx, id.version, id.version, stamp);
            }
            Ok(ErrorOr::Err(e)) => self.fail_commit(cx, req, tx, ClientError::Fdb(e)),
            Err(e) => self.fail_commit(cx, req, tx, ClientError::Decode(e)),
        }
    }

    /// The commit of `tx` went through: `version` is what the application is told (and what
    /// `get_committed_version` says), `at` the version it committed at.
    pub(in crate::transaction) fn commit_succeeded(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
        version: Version,
        at: Version,
        stamp: [u8; 10],
    ) {
        if let Some(t) = self.txs.get_mut(&tx) {
            t.committed = Some((version, Some(stamp)));
        }
        self.settle_versionstamps(cx, tx, Ok(stamp));
        super::watch::WatchOp::arm(&mut self.table, self.txs.get_mut(&tx), Some(at));
        self.succeed_op(
            cx,
            req,
            Reply::Committed {
                version,
                versionstamp: Some(stamp),
            },
        );
    }

    pub(crate) fn on_commit_lost(&mut self, cx: &mut Ctx<'_>, req: RequestId) {
        // The request may or may not have reached the proxy.
        let Some((tx, dummy_for)) = self.table.ops.get(&req).map(|o| (o.tx, o.dummy_for)) else {
            return;
        };
        match dummy_for {
            Some(parent) => self.on_dummy_done(cx, req, tx, parent, false),
            None => self.outcome_unknown(cx, req, tx),
        }
    }

    /// The commit may have happened and may even still be in flight. Like `tryCommit`, first
    /// commit a dummy transaction that reads and writes the commit's self-conflicting key: once
    /// it commits, the original can no longer commit later. Then report
    /// `commit_unknown_result`.
    pub(super) fn outcome_unknown(&mut self, cx: &mut Ctx<'_>, req: RequestId, tx: TransactionId) {
        let key = self.txs.get(&tx).and_then(|t| t.self_conflict.clone());
        let Some(key) = key else {
            return self.fail_commit(
                cx,
                req,
                tx,
                ClientError::Fdb(ErrorCode::COMMIT_UNKNOWN_RESULT),
            );
        };
        self.table.set_wait(req, Wait::Dummy);
        self.start_dummy(cx, req, key);
    }

    pub(super) fn start_dummy(&mut self, cx: &mut Ctx<'_>, parent: RequestId, key: Bytes) {
        let dummy = self.create_transaction(cx);
        if let Some(t) = self.txs.get_mut(&dummy) {
            t.options.access_system_keys = true;
            t.options.causal_write_risky = true;
            let end = key_after(&key);
            t.read_conflicts.insert(&key, &end);
            t.native
                .write_conflicts
                .push(KeyRange::new(key.clone(), end));
            t.committing = true;
        }
        let req = cx.new_request();
        self.insert_op(cx, req, dummy, OpKind::Commit);
        if let Some(op) = self.table.ops.get_mut(&req) {
            op.dummy_for = Some(parent);
            op.detached = true;
        }
    }

    pub(super) fn on_dummy_done(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        dummy: TransactionId,
        parent: RequestId,
        ok: bool,
    ) {
        let key = self
            .txs
            .get(&dummy)
            .and_then(|t| t.read_conflicts.ranges().next().map(|r| r.begin));
        self.table.remove(req);
        self.txs.remove(&dummy);
        let Some(parent_tx) = self.table.ops.get(&parent).map(|o| o.tx) else {
            return; // the user gave up on the commit
        };
        match (ok, key) {
            (false, Some(key)) => {
                // Try again until it commits, as `commitDummyTransaction` loops on `onError`.
                let at = cx.now + knobs::DEFAULT_BACKOFF;
                self.table.add_timer(at, Timer::Dummy(parent));
                if let Some(t) = self.txs.get_mut(&parent_tx) {
                    t.self_conflict = Some(key);
                }
            }
            // With an idempotency id, the rows of committed ids tell (`determineCommitStatus`).
            _ if self.has_idempotency_id(parent_tx) => {
                self.start_status_check(cx, parent, parent_tx)
            }
            _ => self.fail_commit(
                cx,
                parent,
                parent_tx,
                ClientError::Fdb(ErrorCode::COMMIT_UNKNOWN_RESULT),
            ),
        }
    }

    /// `fdb_transaction_on_error`: finishes with [`Reply::Retry`] after the backoff (the
    /// transaction is then reset and can run again), or with the error if it must not retry.
    pub(crate) fn on_error(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        code: ErrorCode,
    ) -> RequestId {
        let req = cx.new_request();
        let Some(t) = self.txs.get_mut(&tx) else {
            cx.finish(req, fdb(ErrorCode::TRANSACTION_CANCELLED));
            return req;
        };
        // A finished transaction fails with what finished it; an `on_error` that refuses to
        // retry finishes the transaction: everything but `reset` then fails with
        // `transaction_cancelled` (RYW's `onError`).
        if let Some(e) = t.finished {
            cx.finish(req, fdb(e));
            return req;
        }
        let action = code.on_error_action();
        let retry_ok = t.options.retry_limit.is_none_or(|n| t.retries < n);
        let refuse = match action {
            OnErrorAction::FailWithClientInvalidOperation => {
                Some(ErrorCode::CLIENT_INVALID_OPERATION)
            }
            OnErrorAction::Fatal => Some(code),
            _ if !retry_ok || t.timed_out => Some(code),
            _ => None,
        };
        if let Some(e) = refuse {
            t.finished = Some(ErrorCode::TRANSACTION_CANCELLED);
            // RYW's `onError` turns a refused `broken_promise` into `transaction_cancelled`.
            let e = if e == ErrorCode::BROKEN_PROMISE {
                ErrorCode::TRANSACTION_CANCELLED
            } else {
                e
            };
            cx.finish(req, fdb(e));
            return req;
        }
        let delay = match action {
            // (Refused above.)
            OnErrorAction::FailWithClientInvalidOperation
            | OnErrorAction::Fatal
            | OnErrorAction::RetryImmediately => Duration::ZERO,
            OnErrorAction::RetryAfterFutureVersionDelay => {
                knobs::FUTURE_VERSION_RETRY_DELAY.min(t.options.max_retry_delay)
            }
            OnErrorAction::RetryWithBackoff => {
                let mut d = t.backoff;
                if code == ErrorCode::TAG_THROTTLED {
                    // Long enough for the transaction's tag throttles (`getBackoff`).
                    let (p, tags) = (t.options.priority, &t.options.tags);
                    let b = cx.throttles.backoff(cx.now, p, tags, d.as_secs_f64());
                    d = Duration::from_secs_f64(b);
                }
                let d = d.mul_f64(cx.rng.random01());
                t.backoff = code.next_backoff(t.backoff, t.options.max_retry_delay);
                d
            }
        };
        crate::transaction::log::log_retry(t, code);
        t.retries += 1;
        // NativeAPI's `Transaction::onError` resets the native transaction at once (its
        // read version and mutations: `reset()` before `delay(backoff)`), while RYW's
        // `onError` resets its own state (writes, cache, conflict ranges, options) and fails
        // what is still pending only after the delay (`resetRyow`). A read in flight keeps
        // the read version it had (NativeAPI's read actors hold the old `TransactionState`).
        if let ReadVersion::Ready(v) = t.read_version {
            for op in self.table.ops.values_mut() {
                if op.tx == tx && !op.detached && op.version.is_none() && op.is_read() {
                    op.version = Some(v);
                }
            }
        }
        if let Some(t) = self.txs.get_mut(&tx) {
            t.read_version = ReadVersion::None;
            t.metadata_version = None;
            t.native = NativeTx::default();
        }
        self.table
            .ops
            .insert(req, Op::new(tx, OpKind::Backoff, Wait::Timer, 0, true));
        self.table.add_timer(cx.now + delay, Timer::Op(req));
        req
    }

    /// The end of `on_error`'s backoff (`resetRyow`): what is still pending of the
    /// transaction fails with `transaction_cancelled`, its RYW state and non-persistent
    /// options are reset, and `on_error` finishes. Another `on_error` still sleeping fails
    /// with `transaction_cancelled` and leaves the transaction cancelled until `reset` (the
    /// catch of RYW's `onError` sets the new `resetPromise`).
    pub(super) fn end_backoff(&mut self, cx: &mut Ctx<'_>, req: RequestId) {
        let Some(op) = self.table.remove(req) else {
            return;
        };
        let tx = op.tx;
        let Some(t) = self.txs.get(&tx) else {
            cx.finish(req, fdb(ErrorCode::TRANSACTION_CANCELLED));
            return;
        };
        // What set `resetPromise` meanwhile ends the wait with its error.
        let ended = if t.timed_out {
            Some(ErrorCode::TRANSACTION_TIMED_OUT)
        } else {
            t.finished
        };
        if let Some(e) = ended {
            cx.finish(req, fdb(e));
            return;
        }
        let others: Vec<RequestId> = self
            .table
            .ops
            .iter()
            .filter(|(_, o)| o.tx == tx && matches!(o.kind, OpKind::Backoff))
            .map(|(id, _)| *id)
            .collect();
        self.cancel_tx_ops(cx, tx, ErrorCode::TRANSACTION_CANCELLED);
        for other in &others {
            self.fail_op(
                cx,
                *other,
                ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED),
            );
        }
        if let Some(t) = self.txs.get_mut(&tx) {
            let keep_opts = t.options.clone();
            // NativeAPI's `reset` keeps the span context (`\xff\xff/tracing/`).
            let mut fresh = Tx::new(t.trace_id, t.created);
            fresh.span_token = t.span_token;
            fresh.token_rng = t.token_rng.clone();
            // What is NativeAPI's survives `resetRyow`: the backoff, the read version and
            // mutations it got during the delay, the conflicting keys (as in
            // `reset_transaction`); RYW's retry count and timeout clock too.
            fresh.backoff = t.backoff;
            fresh.retries = t.retries;
            fresh.timed_out = t.timed_out;
            fresh.read_version = t.read_version;
            fresh.native = core::mem::take(&mut t.native);
            fresh.conflicting = t.conflicting.take();
            *t = fresh;
            // RYW's `resetRyow`: the options return to the database's defaults, except the
            // persistent ones (fdb.options: timeout, retry_limit, max_retry_delay,
            // authorization_token); size_limit, read_your_writes_disable,
            // report_conflicting_keys, ... must be set again.
            self.apply_defaults(tx);
            if let Some(t) = self.txs.get_mut(&tx) {
                t.options.timeout = keep_opts.timeout;
                t.options.retry_limit = keep_opts.retry_limit;
                t.options.max_retry_delay = keep_opts.max_retry_delay;
                t.options.auth_token = keep_opts.auth_token;
                if !others.is_empty() {
                    t.finished = Some(ErrorCode::TRANSACTION_CANCELLED);
                }
            }
        }
        cx.finish(req, Ok(Reply::Retry));
    }

    /// Whether a commit of `tx` is in flight or an `on_error` of it sleeps.
    pub(crate) fn commit_or_backoff_pending(&self, tx: TransactionId) -> bool {
        self.table.ops.values().any(|o| {
            o.tx == tx
                && (matches!(o.kind, OpKind::Backoff)
                    || (matches!(o.kind, OpKind::Commit) && o.dummy_for.is_none()))
        })
    }

    /// Fails the `on_error` calls of `tx` still sleeping: what sets RYW's `resetPromise`
    /// (a timeout, a cancel) ends their wait at once.
    pub(in crate::transaction) fn fail_backoffs(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        err: ErrorCode,
    ) {
        let ids: Vec<RequestId> = self
            .table
            .ops
            .iter()
            .filter(|(_, o)| o.tx == tx && matches!(o.kind, OpKind::Backoff))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.fail_op(cx, id, ClientError::Fdb(err));
        }
    }
}
