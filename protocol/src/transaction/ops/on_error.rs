//! `on_error`, whole: the retry rules (which errors retry, after which backoff, within the
//! retry limit and the timeout), NativeAPI's reset at once (its read version and mutations),
//! the backoff's sleep, and at its end RYW's reset (`resetRyow`): what is still pending fails,
//! the options return to the defaults but the persistent ones.

use alloc::vec::Vec;
use core::time::Duration;

use super::{Op, OpKind, OpTable, Timer, Wait};
use crate::error::{ErrorCode, OnErrorAction};
use crate::event::{ClientError, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::transaction::state::{NativeTx, ReadVersion, Tx};
use crate::transaction::{fdb, Ctx, Transactions};

/// `on_error` sleeping before the retry: [`OpKind::Backoff`] (its state is its timer).
#[derive(Debug)]
pub(in crate::transaction) struct BackoffOp;

impl Transactions {
    /// `fdb_transaction_on_error`: finishes with [`Reply::Retry`] after the backoff (the
    /// transaction is then reset and can run again), or with the error if it must not retry.
    pub(crate) fn on_error(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        code: ErrorCode,
    ) -> RequestId {
        BackoffOp::start(self, cx, tx, code)
    }

    /// Fails the `on_error` calls of `tx` still sleeping (what sets RYW's `resetPromise`: a
    /// timeout, a cancel, a use during the commit).
    pub(in crate::transaction) fn fail_backoffs(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        err: ErrorCode,
    ) {
        BackoffOp::fail_sleeping(&mut self.table, cx, tx, err)
    }
}

/// The backoff's steps.
impl BackoffOp {
    /// The retry rules, NativeAPI's reset, then the sleep.
    fn start(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        code: ErrorCode,
    ) -> RequestId {
        let req = cx.new_request();
        let knobs = txs.knobs;
        let Some(t) = txs.txs.get_mut(&tx) else {
            cx.finish(req, fdb(ErrorCode::TRANSACTION_CANCELLED));
            return req;
        };
        if code == ErrorCode::CLUSTER_VERSION_CHANGED {
            // The multi-version client's own error, which it retries with a new transaction
            // whatever state the old one was in.
            txs.replace_transaction(cx, tx);
            cx.finish(req, Ok(Reply::Retry));
            return req;
        }
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
            // (Refused, or for `cluster_version_changed` answered, above.)
            OnErrorAction::FailWithClientInvalidOperation
            | OnErrorAction::Fatal
            | OnErrorAction::RetryImmediately => Duration::ZERO,
            OnErrorAction::RetryAfterFutureVersionDelay => knobs
                .future_version_retry_delay
                .min(t.options.max_retry_delay),
            OnErrorAction::RetryWithBackoff => {
                let mut d = t.backoff;
                if code == ErrorCode::TAG_THROTTLED {
                    // Long enough for the transaction's tag throttles (`getBackoff`).
                    let (p, tags) = (t.options.priority, &t.options.tags);
                    let b = cx.throttles.backoff(cx.now, p, tags, d.as_secs_f64());
                    d = Duration::from_secs_f64(b);
                }
                let d = d.mul_f64(cx.rng.random01());
                t.backoff = knobs.next_backoff(code, t.backoff, t.options.max_retry_delay);
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
            txs.table.ops.for_each_mut(|_, op| {
                if op.tx == tx && !op.detached && op.version.is_none() && op.is_read() {
                    op.version = Some(v);
                }
            });
        }
        if let Some(t) = txs.txs.get_mut(&tx) {
            t.read_version = ReadVersion::None;
            t.metadata_version = None;
            t.native = NativeTx::default();
        }
        txs.table.ops.insert(
            req,
            Op::new(tx, OpKind::Backoff(BackoffOp), Wait::Timer, 0, true),
        );
        txs.table.add_timer(cx.now + delay, Timer::Op(req));
        req
    }

    /// The end of `on_error`'s backoff (`resetRyow`): what is still pending of the
    /// transaction fails with `transaction_cancelled`, its RYW state and non-persistent
    /// options are reset, and `on_error` finishes. Another `on_error` still sleeping fails
    /// with `transaction_cancelled` and leaves the transaction cancelled until `reset` (the
    /// catch of RYW's `onError` sets the new `resetPromise`).
    pub(super) fn end(txs: &mut Transactions, cx: &mut Ctx<'_>, req: RequestId) {
        let Some(op) = txs.table.remove(req) else {
            return;
        };
        let tx = op.tx;
        let Some(t) = txs.txs.get(&tx) else {
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
        let others = BackoffOp::of(&txs.table, tx);
        txs.cancel_tx_ops(cx, tx, ErrorCode::TRANSACTION_CANCELLED);
        for other in &others {
            txs.fail_op(
                cx,
                *other,
                ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED),
            );
        }
        if let Some(t) = txs.txs.get_mut(&tx) {
            let keep_opts = t.options.clone();
            // NativeAPI's `reset` keeps the span context (`\xff\xff/tracing/`).
            let mut fresh = Tx::new(t.trace_id, t.created, &txs.knobs);
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
            txs.apply_defaults(tx);
            if let Some(t) = txs.txs.get_mut(&tx) {
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

    /// Runnable only by its timer.
    pub(super) fn advance(table: &mut OpTable, req: RequestId) {
        table.set_wait(req, Wait::Timer)
    }

    /// Fails the `on_error` calls of `tx` still sleeping: what sets RYW's `resetPromise`
    /// (a timeout, a cancel) ends their wait at once.
    pub(super) fn fail_sleeping(
        table: &mut OpTable,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        err: ErrorCode,
    ) {
        // A backoff is no read: failing it touches no transaction.
        for id in BackoffOp::of(table, tx) {
            table.finish(cx, id, fdb(err));
        }
    }

    /// The `on_error` calls of `tx` sleeping, in request order.
    fn of(table: &OpTable, tx: TransactionId) -> Vec<RequestId> {
        table.ids_where(|o| o.tx == tx && matches!(o.kind, OpKind::Backoff(_)))
    }
}
