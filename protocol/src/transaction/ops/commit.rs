//! A commit, whole: the checks when it is called (a failed write, a commit already in flight,
//! special-key writes not carried out), the read version, the size and read-only checks, the
//! `CommitTransactionRequest` to a commit proxy (conflict ranges, mutations in write-map order,
//! the self-conflicting key or the idempotency id, in a tenant prefixed), the `CommitID`
//! decoded (the conflicting keys with `report_conflicting_keys`), the watches armed and the
//! versionstamps settled; and when the outcome is unknown, a dummy transaction on the
//! self-conflicting key (`commitDummyTransaction`) before `commit_unknown_result`, or the
//! idempotency rows read back (`idempotency.rs`).

use alloc::vec::Vec;
use bytes::Bytes;

use super::versionstamp::VersionstampOp;
use super::watch::WatchOp;
use super::{OpId, OpKind, Timer, Wait};
use crate::error::ErrorCode;
use crate::event::{ClientError, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::messages::commit::MutationRef;
use crate::messages::commit::{CommitID, CommitTransactionRef, CommitTransactionRequest};
use crate::messages::coordination::CommitProxyInterface;
use crate::messages::types::{KeyRange, TagSet, Version};
use crate::messages::{decode_reply, ErrorOr, ReplyPromise};
use crate::route::Route;
use crate::ryw::{key_after, RangeSet, ALL_KEYS_END, MUTATION_OVERHEAD, RANGE_OVERHEAD};
use crate::transaction::state::Tx;
use crate::transaction::{fdb, Ctx, Transactions};

/// A commit in flight: [`OpKind::Commit`]'s state. Its steps take the whole of the
/// transactions: a commit reads the transaction's writes, its read version, its tenant and
/// its idempotency id, and finishes its watches and versionstamps.
#[derive(Debug)]
pub(in crate::transaction) struct CommitOp {
    /// For the dummy commit after `commit_unknown_result`: the user's commit it stands for.
    dummy_for: Option<RequestId>,
}

impl Transactions {
    /// Commits. Finishes with [`Reply::Committed`].
    pub(crate) fn commit(&mut self, cx: &mut Ctx<'_>, tx: TransactionId) -> RequestId {
        CommitOp::start(self, cx, tx)
    }

    /// A commit proxy answered commit `req`.
    pub(crate) fn on_commit_reply(&mut self, cx: &mut Ctx<'_>, req: RequestId, message: &Bytes) {
        CommitOp::on_reply(self, cx, req, message)
    }

    /// Commit `req` was lost on its way: it may or may not have reached the proxy.
    pub(crate) fn on_commit_lost(&mut self, cx: &mut Ctx<'_>, req: RequestId) {
        CommitOp::on_lost(self, cx, req)
    }

    /// Whether a commit of `tx` is in flight or an `on_error` of it sleeps.
    pub(crate) fn commit_or_backoff_pending(&self, tx: TransactionId) -> bool {
        self.table.ops.values().any(|o| {
            o.tx == tx
                && match &o.kind {
                    OpKind::Backoff(_) => true,
                    OpKind::Commit(c) => c.dummy_for.is_none(),
                    _ => false,
                }
        })
    }
}

/// What a commit sends, and its size (`get_approximate_size` counts it too).
impl Transactions {
    /// What NativeAPI commits: the mutations, write conflict ranges and read conflict ranges
    /// it holds, after RYW wrote out its whole write map and its read conflict ranges
    /// (`writeRangeToNativeTransaction`, in RYW's `commit`).
    pub(in crate::transaction) fn commit_lists(
        t: &Tx,
    ) -> (Vec<MutationRef>, Vec<KeyRange>, Vec<KeyRange>) {
        let mut mutations = t.native.mutations.clone();
        let mut writes = t.native.write_conflicts.clone();
        let mut reads = t.native.read_conflicts.clone();
        if !t.options.ryw_disabled {
            // About one mutation and one conflict range per entry of the write map: room
            // for them at once, not a doubling per power of two.
            let entries = t.writes.entry_count();
            mutations.reserve(entries);
            writes.reserve(entries);
            let (all_b, all_e) = (Bytes::new(), Bytes::from_static(ALL_KEYS_END));
            t.writes
                .write_to_native(&all_b, &all_e, &mut mutations, &mut writes);
            reads.extend(t.read_conflicts.ranges());
        }
        (mutations, writes, reads)
    }

    /// NativeAPI's `getSize`, checked against `size_limit`: each mutation's parameters plus
    /// `sizeof(MutationRef)` (44 bytes in libfdb_c 7.3.77, measured with `size_limit`), and
    /// both conflict range lists, each element counting `sizeof(KeyRangeRef)` (24 bytes)
    /// besides its keys.
    pub(in crate::transaction) fn list_size(
        mutations: &[MutationRef],
        writes: &[KeyRange],
        reads: &[KeyRange],
    ) -> usize {
        let m: usize = mutations
            .iter()
            .map(|m| m.param1.len() + m.param2.len() + MUTATION_OVERHEAD)
            .sum();
        m + Self::ranges_size(writes.iter().chain(reads))
    }

    fn ranges_size<'r>(ranges: impl Iterator<Item = &'r KeyRange>) -> usize {
        ranges
            .map(|r| r.begin.len() + r.end.len() + RANGE_OVERHEAD)
            .sum()
    }

    /// [`Transactions::list_size`] of what the transaction would commit now, counted
    /// without building the lists (`get_approximate_size` may be called after every write).
    pub(in crate::transaction) fn commit_size(t: &Tx) -> usize {
        let n = &t.native;
        let mut size = Self::list_size(&n.mutations, &n.write_conflicts, &n.read_conflicts);
        if !t.options.ryw_disabled {
            let (all_b, all_e) = (Bytes::new(), Bytes::from_static(ALL_KEYS_END));
            size += t.writes.native_size(&all_b, &all_e);
            size += t
                .read_conflicts
                .iter()
                .map(|(b, e)| b.len() + e.len() + RANGE_OVERHEAD)
                .sum::<usize>();
        }
        size
    }
}

/// The commit's steps.
impl CommitOp {
    /// Starts a commit: the checks, then the op.
    fn start(txs: &mut Transactions, cx: &mut Ctx<'_>, tx: TransactionId) -> RequestId {
        let req = cx.new_request();
        match txs.txs.get_mut(&tx) {
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
                let e = txs.check_not_committing(tx);
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
                    txs.insert_op(cx, req, tx, OpKind::Commit(CommitOp { dummy_for: None }));
                    CommitOp::fail(txs, cx, OpId { req, tx }, e);
                    return req;
                }
            }
        }
        txs.insert_op(cx, req, tx, OpKind::Commit(CommitOp { dummy_for: None }));
        req
    }

    /// The checks that need the writes, the read version, then the request to a commit proxy.
    pub(super) fn advance(txs: &mut Transactions, cx: &mut Ctx<'_>, id: OpId) {
        let OpId { req, tx } = id;
        let t = &txs.txs[&tx];
        let (mutations, mut write_conflicts, mut read_conflicts) = Transactions::commit_lists(t);
        let read_only = mutations.is_empty() && write_conflicts.is_empty();
        if read_only {
            // Nothing to send (`Transaction::commit` of a read-only transaction). Its watches
            // start from its read version.
            // Outside a tenant, such a commit succeeds even where tenants are required (its
            // watches fail with `tenant_name_required`, as libfdb_c's do).
            let v = if t.watches.is_empty() {
                None
            } else if !txs.tx_tenants.contains_key(&tx) {
                match txs.read_version_only(cx, id, false) {
                    Some(Ok(v)) => Some(v),
                    Some(Err(e)) => return CommitOp::fail(txs, cx, id, e),
                    None => return,
                }
            } else {
                match txs.read_version_for(cx, id, false) {
                    Some(Ok(v)) => Some(v),
                    Some(Err(e)) => return CommitOp::fail(txs, cx, id, e),
                    None => return,
                }
            };
            if let Some(t) = txs.txs.get_mut(&tx) {
                t.committed = Some((-1, None));
            }
            VersionstampOp::settle(&mut txs.table, cx, tx, Err(ErrorCode::NO_COMMIT_VERSION));
            WatchOp::arm(&mut txs.table, txs.txs.get_mut(&tx), v);
            return txs.succeed_op(
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
            return CommitOp::fail(
                txs,
                cx,
                id,
                ClientError::Fdb(ErrorCode::TRANSACTION_READ_ONLY),
            );
        }
        let size = Transactions::list_size(&mutations, &write_conflicts, &read_conflicts);
        // `get_approximate_size` counts the same lists without building them.
        debug_assert_eq!(size, Transactions::commit_size(t));
        if size > t.options.size_limit {
            return CommitOp::fail(
                txs,
                cx,
                id,
                ClientError::Fdb(ErrorCode::TRANSACTION_TOO_LARGE),
            );
        }
        let version = match txs.read_version_for(cx, id, true) {
            Some(Ok(v)) => v,
            Some(Err(e)) => return CommitOp::fail(txs, cx, id, e),
            None => return,
        };
        let proxy = if txs.txs[&tx].options.commit_on_first_proxy {
            cx.first_commit_proxy()
        } else {
            cx.pick_commit_proxy(CommitProxyInterface::COMMIT)
        };
        let Some(proxy) = proxy else {
            return txs.table.set_wait(req, Wait::Cluster);
        };
        let idempotency_id = txs.commit_idempotency_id(cx, tx);
        let t = &txs.txs[&tx];
        // The read conflict ranges of NativeAPI's own key and range reads come after the
        // size check (`extraConflictRanges`).
        read_conflicts.extend(t.native.extra_read_conflicts.iter().cloned());
        let extra_size = Transactions::list_size(&[], &t.native.extra_read_conflicts, &[]);
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
            if let Some(t) = txs.txs.get_mut(&tx) {
                t.sent_read_conflicts = read_conflicts.clone();
            }
        }
        // In a tenant the commit carries prefixed keys (`applyTenantPrefix`); the dummy
        // transaction after `commit_unknown_result` runs outside the tenant on the prefixed key.
        let mut read_conflicts = read_conflicts;
        let mut write_conflicts = write_conflicts;
        let mut mutations = mutations;
        let tenant_info = txs.tenant_info(tx);
        if let Some(id) = txs.tx_tenant(tx) {
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
        let span = txs.span(cx, tx);
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
            debug_id: txs.read_options(cx.rng, tx).and_then(|o| o.debug_id),
            commit_cost_estimation: None,
            // `tr.tagSet` when the transaction has tags.
            tag_set: txs.txs.get(&tx).and_then(|t| {
                let tags = &t.options.tags;
                (!tags.is_empty()).then(|| TagSet(tags.clone()))
            }),
            span_context: span,
            tenant_info: tenant_info.clone(),
            idempotency_id: idempotency_id.clone().unwrap_or_default(),
        };
        let expire_token = proxy.stream(CommitProxyInterface::EXPIRE_IDEMPOTENCY_ID);
        let ep = proxy.commit.endpoint;
        if let Some(t) = txs.txs.get_mut(&tx) {
            t.self_conflict = self_conflict;
            // libfdb_c expires the id only of a commit its load balancer placed (not with
            // `commit_on_first_proxy`).
            t.idempotency = idempotency_id.map(|id| crate::transaction::state::SentId {
                id,
                read_snapshot: version,
                expire_to: (t.options.automatic_idempotency && !t.options.commit_on_first_proxy)
                    .then(|| (ep.address().clone(), expire_token, tenant_info)),
            });
        }
        txs.table.set_wait(req, Wait::Reply);
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

    /// Fails commit `req` of `tx` with `e`, and the watches waiting for it.
    pub(in crate::transaction) fn fail(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        id: OpId,
        e: ClientError,
    ) {
        let OpId { req, tx } = id;
        if let Some(t) = txs.txs.get_mut(&tx) {
            let watches = core::mem::take(&mut t.watches);
            for w in watches {
                txs.fail_op(cx, w, e.clone());
            }
        }
        // Only a commit that started tells the versionstamp it failed (`commitAndWatch`); a
        // commit refused before it starts leaves it waiting for the reset.
        if txs.txs.get(&tx).is_some_and(|t| t.committing) {
            VersionstampOp::settle(
                &mut txs.table,
                cx,
                tx,
                Err(ErrorCode::TRANSACTION_INVALID_VERSION),
            );
        }
        txs.fail_op(cx, req, e);
    }

    /// The `CommitID`: committed, conflicted (with the conflicting keys), failed, or unknown.
    fn on_reply(txs: &mut Transactions, cx: &mut Ctx<'_>, req: RequestId, message: &Bytes) {
        let Some((tx, dummy_for)) = CommitOp::of(txs, req) else {
            return;
        };
        let op = OpId { req, tx };
        if let Some(parent) = dummy_for {
            let ok = matches!(
                decode_reply::<CommitID>(message),
                Ok(ErrorOr::Ok(ref id)) if id.version != crate::messages::types::INVALID_VERSION
            );
            return CommitOp::on_dummy_done(txs, cx, req, tx, parent, ok);
        }
        match decode_reply::<CommitID>(message) {
            Ok(ErrorOr::Err(e))
                if e == ErrorCode::COMMIT_UNKNOWN_RESULT
                    || e == ErrorCode::REQUEST_MAYBE_DELIVERED =>
            {
                CommitOp::outcome_unknown(txs, cx, OpId { req, tx })
            }
            Ok(ErrorOr::Ok(id)) if id.version == crate::messages::types::INVALID_VERSION => {
                // With `report_conflicting_keys` a conflict comes back as a `CommitID` without
                // a version, naming the read conflict ranges that conflicted (`tryCommit`).
                if let Some(t) = txs.txs.get_mut(&tx) {
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
                CommitOp::fail(txs, cx, op, ClientError::Fdb(ErrorCode::NOT_COMMITTED))
            }
            Ok(ErrorOr::Ok(id)) => {
                cx.grv
                    .note_metadata_version(id.version, id.metadata_version.clone());
                txs.expire_idempotency_id(cx, tx, id.version, id.txn_batch_id);
                let stamp = id.versionstamp();
                CommitOp::succeeded(txs, cx, op, id.version, id.version, stamp);
            }
            Ok(ErrorOr::Err(e)) => CommitOp::fail(txs, cx, op, ClientError::Fdb(e)),
            Err(e) => CommitOp::fail(txs, cx, op, ClientError::Decode(e)),
        }
    }

    /// The commit of `tx` went through: `version` is what the application is told (and what
    /// `get_committed_version` says), `at` the version it committed at.
    pub(in crate::transaction) fn succeeded(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        id: OpId,
        version: Version,
        at: Version,
        stamp: [u8; 10],
    ) {
        let OpId { req, tx } = id;
        if let Some(t) = txs.txs.get_mut(&tx) {
            t.committed = Some((version, Some(stamp)));
        }
        VersionstampOp::settle(&mut txs.table, cx, tx, Ok(stamp));
        WatchOp::arm(&mut txs.table, txs.txs.get_mut(&tx), Some(at));
        txs.succeed_op(
            cx,
            req,
            Reply::Committed {
                version,
                versionstamp: Some(stamp),
            },
        );
    }

    /// The request was lost: it may or may not have reached the proxy.
    fn on_lost(txs: &mut Transactions, cx: &mut Ctx<'_>, req: RequestId) {
        let Some((tx, dummy_for)) = CommitOp::of(txs, req) else {
            return;
        };
        match dummy_for {
            Some(parent) => CommitOp::on_dummy_done(txs, cx, req, tx, parent, false),
            None => CommitOp::outcome_unknown(txs, cx, OpId { req, tx }),
        }
    }

    /// The commit may have happened and may even still be in flight. Like `tryCommit`, first
    /// commit a dummy transaction that reads and writes the commit's self-conflicting key: once
    /// it commits, the original can no longer commit later. Then report
    /// `commit_unknown_result`.
    fn outcome_unknown(txs: &mut Transactions, cx: &mut Ctx<'_>, id: OpId) {
        let OpId { req, tx } = id;
        let key = txs.txs.get(&tx).and_then(|t| t.self_conflict.clone());
        let Some(key) = key else {
            return CommitOp::fail(
                txs,
                cx,
                id,
                ClientError::Fdb(ErrorCode::COMMIT_UNKNOWN_RESULT),
            );
        };
        txs.table.set_wait(req, Wait::Dummy);
        CommitOp::start_dummy(txs, cx, req, key);
    }

    fn start_dummy(txs: &mut Transactions, cx: &mut Ctx<'_>, parent: RequestId, key: Bytes) {
        let dummy = txs.create_transaction(cx);
        if let Some(t) = txs.txs.get_mut(&dummy) {
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
        let dummy_for = Some(parent);
        txs.insert_op(cx, req, dummy, OpKind::Commit(CommitOp { dummy_for }));
        if let Some(op) = txs.table.ops.get_mut(&req) {
            op.detached = true;
        }
    }

    fn on_dummy_done(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        req: RequestId,
        dummy: TransactionId,
        parent: RequestId,
        ok: bool,
    ) {
        let key = txs
            .txs
            .get(&dummy)
            .and_then(|t| t.read_conflicts.ranges().next().map(|r| r.begin));
        txs.table.remove(req);
        txs.txs.remove(&dummy);
        let Some(parent_tx) = txs.table.ops.get(&parent).map(|o| o.tx) else {
            return; // the user gave up on the commit
        };
        match (ok, key) {
            (false, Some(key)) => {
                // Try again until it commits, as `commitDummyTransaction` loops on `onError`.
                let at = cx.now + txs.knobs.default_backoff;
                txs.table.add_timer(at, Timer::Dummy(parent));
                if let Some(t) = txs.txs.get_mut(&parent_tx) {
                    t.self_conflict = Some(key);
                }
            }
            // With an idempotency id, the rows of committed ids tell (`determineCommitStatus`).
            _ if txs.has_idempotency_id(parent_tx) => txs.start_status_check(cx, parent, parent_tx),
            _ => CommitOp::fail(
                txs,
                cx,
                OpId {
                    req: parent,
                    tx: parent_tx,
                },
                ClientError::Fdb(ErrorCode::COMMIT_UNKNOWN_RESULT),
            ),
        }
    }

    /// The dummy commit's timer: try it again on the self-conflicting key.
    pub(super) fn retry_dummy(txs: &mut Transactions, cx: &mut Ctx<'_>, parent: RequestId) {
        let key = txs
            .table
            .ops
            .get(&parent)
            .and_then(|o| txs.txs.get(&o.tx))
            .and_then(|t| t.self_conflict.clone());
        if let Some(key) = key {
            CommitOp::start_dummy(txs, cx, parent, key);
        }
    }

    /// The transaction of commit `req`, and the user's commit it stands for if a dummy.
    fn of(txs: &Transactions, req: RequestId) -> Option<(TransactionId, Option<RequestId>)> {
        match txs.table.ops.get(&req) {
            Some(o) => match &o.kind {
                OpKind::Commit(c) => Some((o.tx, c.dummy_for)),
                _ => Some((o.tx, None)),
            },
            None => None,
        }
    }
}
