//! The operations, one file per kind, each telling its whole story: the checks when it is
//! called, the requests it builds, the replies it decodes, how it finishes (`get.rs`,
//! `range.rs` with `get_key`, NativeAPI's walks in `native.rs` and `get_mapped_range` in
//! `mapped.rs`, `commit.rs`, `on_error.rs`, `versionstamp.rs`, `watch.rs`, `metrics.rs` over
//! the plan in `shards.rs`, `addresses.rs`, `read_version.rs`).
//!
//! This file is their common lifecycle: created ready, run, parked on what it waits for (a
//! read version, a location, a reply, a timer), woken, finished with exactly one completion.
//! The [`OpTable`] owns them with their timers and ready list; runnable operations sit in an
//! ordered ready set, so a round runs only those, in request order. Running an operation and
//! a storage reply to it are each one `match` over [`OpKind`], handing it to its kind's type;
//! what it waits for and the timers are `wait.rs`'s.

pub(super) mod addresses;
pub(super) mod commit;
pub(super) mod get;
pub(super) mod get_key;
pub(super) mod mapped;
pub(super) mod metrics;
pub(super) mod native;
pub(super) mod on_error;
pub(super) mod range;
pub(super) mod read_version;
pub(super) mod replica_check;
pub(super) mod shards;
pub(super) mod versionstamp;
pub(super) mod wait;
pub(super) mod watch;

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use bytes::Bytes;

pub(super) use wait::{Timer, Wait};

use super::{Ctx, Transactions};
use crate::error::ErrorCode;
use crate::event::{ClientError, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::messages::types::Version;
use crate::time::Instant;
use crate::uid::Uid;

// Ops live in a map and are few at a time; boxing the range state would only add a hop.
// Each kind's state is defined in the kind's file, its steps beside it.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum OpKind {
    ReadVersion(read_version::ReadVersionOp),
    Get(get::GetOp),
    GetKey(range::ReadOp),
    /// `get_range` or `get_mapped_range`.
    Range(range::ReadOp),
    Commit(commit::CommitOp),
    /// `get_addresses_for_key`.
    Addresses(addresses::AddressesOp),
    Watch(watch::WatchOp),
    /// `on_error` sleeping before the retry.
    Backoff(on_error::BackoffOp),
    /// `get_estimated_range_size_bytes` or `get_range_split_points`.
    Metrics(alloc::boxed::Box<metrics::MetricsOp>),
    /// `get_versionstamp`: parked until the transaction's commit finishes.
    Versionstamp(versionstamp::VersionstampOp),
}

impl OpKind {
    /// The key a storage request of this operation is about (keys before it when `true`),
    /// for failover and relocation.
    pub(super) fn storage_key(&self) -> Option<(Bytes, bool)> {
        match self {
            OpKind::Get(get::GetOp { key, .. })
            | OpKind::Watch(watch::WatchOp { key, .. })
            | OpKind::Addresses(addresses::AddressesOp { key, .. }) => Some((key.clone(), false)),
            OpKind::GetKey(r) | OpKind::Range(r) => r.storage_key(),
            _ => None,
        }
    }

    /// Its storage request was lost (the connection went, or the server failed): nothing of
    /// it is in flight any more, so the next step sends again instead of waiting for a
    /// reply that cannot come.
    pub(super) fn request_lost(&mut self) {
        if let OpKind::Watch(w) = self {
            w.request_lost();
        }
    }
}

#[derive(Debug)]
pub(crate) struct Op {
    pub(super) tx: TransactionId,
    pub(super) kind: OpKind,
    pub(super) wait: Wait,
    /// Load-balancing: which replica of the shard to try next.
    pub(super) attempt: usize,
    pub(super) start: usize,
    /// A watch outlives its transaction once armed.
    pub(super) detached: bool,
    /// The storage server of the request in flight, and when it was sent.
    pub(super) server: Option<(Uid, Instant)>,
    /// How many times the shard was looked up again (grows the relocation delay).
    pub(super) relocations: u32,
    /// A read in flight when `on_error` reset the read version keeps the one it had.
    pub(super) version: Option<Version>,
    /// The replica consistency check of its storage request, when the transaction asks for
    /// one.
    pub(super) check: Option<alloc::boxed::Box<replica_check::ReplicaCheck>>,
}

impl Op {
    pub(super) fn new(
        tx: TransactionId,
        kind: OpKind,
        wait: Wait,
        start: usize,
        detached: bool,
    ) -> Op {
        Op {
            tx,
            kind,
            wait,
            attempt: 0,
            start,
            detached,
            server: None,
            relocations: 0,
            version: None,
            check: None,
        }
    }

    pub(super) fn is_read(&self) -> bool {
        is_read(&self.kind)
    }
}

/// An operation as its steps see it: its request and the transaction it belongs to, passed
/// together because every step needs both.
#[derive(Debug, Clone, Copy)]
pub(super) struct OpId {
    pub(super) req: RequestId,
    pub(super) tx: TransactionId,
}

/// The operations in flight and what wakes them: their timers (ordered by time, then by
/// when they were set) and the ready list. Owned apart from the transactions so that what
/// only schedules can be seen to touch nothing else.
#[derive(Debug)]
pub(super) struct OpTable {
    pub(super) ops: super::slab_map::SlabMap<RequestId, Op>,
    pub(super) timers: BTreeMap<(Instant, u64), Timer>,
    pub(super) timer_seq: u64,
    /// Watches among `ops`.
    pub(super) watches: usize,
    /// The most watches outstanding at once (`max_watches`).
    pub(super) max_watches: usize,
    /// The pauses its timers wait (`FUTURE_VERSION_RETRY_DELAY`, `WRONG_SHARD_SERVER_DELAY`,
    /// `WATCH_POLLING_TIME`, `GRV_ERROR_RETRY_DELAY`), as the knobs set them.
    pub(super) knobs: crate::knobs::Knobs,
    /// Operations that became runnable since the last round (may repeat; may have moved on).
    pub(super) ready: Vec<RequestId>,
    /// The round `run_ready_ops` is running, kept for its allocation.
    pub(super) scratch: Vec<RequestId>,
}

impl Default for OpTable {
    fn default() -> Self {
        OpTable {
            ops: super::slab_map::SlabMap::default(),
            timers: BTreeMap::new(),
            timer_seq: 0,
            watches: 0,
            max_watches: watch::MAX_OUTSTANDING_WATCHES,
            knobs: Default::default(),
            ready: Vec::new(),
            scratch: Vec::new(),
        }
    }
}

impl OpTable {
    /// An empty table allowing `default_max_outstanding_watches` watches.
    pub(super) fn new(knobs: &crate::knobs::Knobs) -> Self {
        OpTable {
            max_watches: knobs.default_max_outstanding_watches,
            knobs: *knobs,
            ..OpTable::default()
        }
    }

    /// When the earliest timer is due.
    pub(super) fn next_timer(&self) -> Option<Instant> {
        self.timers.keys().next().map(|(t, _)| *t)
    }

    pub(super) fn add_timer(&mut self, at: Instant, t: Timer) {
        self.timer_seq += 1;
        self.timers.insert((at, self.timer_seq), t);
    }

    /// Takes the earliest timer due at `now`.
    fn pop_due(&mut self, now: Instant) -> Option<Timer> {
        let (&(at, seq), _) = self.timers.iter().next()?;
        if at > now {
            return None;
        }
        self.timers.remove(&(at, seq))
    }

    /// Adds a runnable operation.
    fn insert(&mut self, req: RequestId, op: Op) {
        self.ops.insert(req, op);
        self.ready.push(req);
    }

    /// Takes operation `req` out, uncounting it if a watch.
    pub(super) fn remove(&mut self, req: RequestId) -> Option<Op> {
        let op = self.ops.remove(&req)?;
        if matches!(op.kind, OpKind::Watch(_)) {
            self.watches -= 1;
        }
        Some(op)
    }

    /// Finishes operation `req` with `result`. Only for an operation that is no read: a read's
    /// failure is the transaction's too ([`Transactions::fail_op`]).
    pub(super) fn finish(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        result: Result<Reply, ClientError>,
    ) {
        if self.remove(req).is_some() {
            cx.finish(req, result);
        }
    }

    /// Operation `req` waits until `at`.
    pub(super) fn sleep(&mut self, at: Instant, req: RequestId) {
        self.set_wait(req, Wait::Timer);
        self.add_timer(at, Timer::Op(req));
    }

    pub(super) fn set_wait(&mut self, req: RequestId, wait: Wait) {
        if let Some(op) = self.ops.get_mut(&req) {
            op.wait = wait;
            if wait == Wait::Ready {
                self.ready.push(req);
            }
        }
    }

    /// Every operation waiting for `wait` becomes runnable.
    pub(super) fn wake(&mut self, wait: Wait) {
        self.wake_if(wait, |_| true);
    }

    /// Every operation waiting for `wait` that `which` picks becomes runnable.
    pub(super) fn wake_if(&mut self, wait: Wait, which: impl Fn(&Op) -> bool) {
        let ready = &mut self.ready;
        self.ops.for_each_mut(|id, op| {
            if op.wait == wait && which(op) {
                op.wait = Wait::Ready;
                ready.push(*id);
            }
        });
    }

    /// The ids of the operations `which` picks, in request order.
    pub(super) fn ids_where(&self, which: impl Fn(&Op) -> bool) -> Vec<RequestId> {
        self.ops
            .iter()
            .filter(|(_, op)| which(op))
            .map(|(id, _)| *id)
            .collect()
    }
}

/// `run_ready_ops` gives up after this many rounds (each round advances every runnable op once;
/// real work needs a handful).
pub(super) const MAX_READY_ROUNDS: u32 = 10_000;

impl Transactions {
    pub(super) fn insert_op(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        tx: TransactionId,
        kind: OpKind,
    ) {
        if matches!(kind, OpKind::Get(_) | OpKind::GetKey(_) | OpKind::Range(_)) {
            if let Some(t) = self.txs.get_mut(&tx) {
                t.read_started = true;
            }
        }
        let start = cx.rng.next_u64() as usize;
        self.table
            .insert(req, Op::new(tx, kind, Wait::Ready, start, false));
    }

    /// Fails every unfinished request of `tx`.
    pub(super) fn cancel_tx_ops(&mut self, cx: &mut Ctx<'_>, tx: TransactionId, err: ErrorCode) {
        let ids = self.table.ids_where(|op| op.tx == tx && !op.detached);
        for id in ids {
            self.fail_op(cx, id, ClientError::Fdb(err));
        }
    }

    /// Fails operation `req` (a commit cut off by a protocol change, say).
    pub(crate) fn fail_request(&mut self, cx: &mut Ctx<'_>, req: RequestId, err: ErrorCode) {
        let Some(op) = self.table.ops.get(&req) else {
            return;
        };
        let tx = op.tx;
        self.fail_by_kind(cx, OpId { req, tx }, ClientError::Fdb(err));
    }

    /// Fails operation `req` of `tx` as its kind fails (a commit fails its watches too).
    fn fail_by_kind(&mut self, cx: &mut Ctx<'_>, id: OpId, e: ClientError) {
        match self.table.ops.get(&id.req).map(|o| &o.kind) {
            Some(OpKind::Commit(_)) => commit::CommitOp::fail(self, cx, id, e),
            _ => self.fail_op(cx, id.req, e),
        }
    }

    /// Fails every unfinished operation (the cluster speaks a protocol this client cannot).
    pub(crate) fn fail_all(&mut self, cx: &mut Ctx<'_>, err: ErrorCode) {
        let ids: Vec<RequestId> = self.table.ops.keys().copied().collect();
        for id in ids {
            self.fail_request(cx, id, err);
        }
    }

    pub(super) fn fail_op(&mut self, cx: &mut Ctx<'_>, req: RequestId, err: ClientError) {
        if let Some(op) = self.table.remove(req) {
            let read = matches!(
                op.kind,
                OpKind::Get(_) | OpKind::GetKey(_) | OpKind::Range(_)
            );
            if read && err.code() != ErrorCode::TRANSACTION_CANCELLED {
                if let Some(t) = self.txs.get_mut(&op.tx) {
                    t.read_failed.get_or_insert(err.clone());
                }
            }
            cx.finish(req, Err(err));
        }
    }

    pub(super) fn succeed_op(&mut self, cx: &mut Ctx<'_>, req: RequestId, reply: Reply) {
        if self.table.remove(req).is_some() {
            cx.finish(req, Ok(reply));
        }
    }

    pub(crate) fn fire_timers(&mut self, cx: &mut Ctx<'_>) {
        while let Some(t) = self.table.pop_due(cx.now) {
            match t {
                Timer::Op(req) => match self.table.ops.get(&req).map(|o| &o.kind) {
                    Some(OpKind::Backoff(_)) => on_error::BackoffOp::end(self, cx, req),
                    Some(_) => self.table.set_wait(req, Wait::Ready),
                    None => {}
                },
                Timer::ReplicaCheck(req, epoch) => self.on_replica_check_timeout(cx, req, epoch),
                Timer::Locations => self.table.wake(Wait::Location),
                Timer::Dummy(parent) => commit::CommitOp::retry_dummy(self, cx, parent),
                Timer::Deadline(tx) => {
                    let due = self.txs.get(&tx).is_some_and(|t| {
                        t.options.timeout.is_some_and(|d| t.created + d <= cx.now)
                    });
                    if due {
                        if let Some(t) = self.txs.get_mut(&tx) {
                            t.timed_out = true;
                        }
                        self.cancel_tx_ops(cx, tx, ErrorCode::TRANSACTION_TIMED_OUT);
                        self.fail_backoffs(cx, tx, ErrorCode::TRANSACTION_TIMED_OUT);
                    }
                }
            }
        }
    }

    /// Runs the runnable operations, round after round, until none is left. A round runs the
    /// operations that became runnable before it, in request order; what they make runnable
    /// runs in the next round. Only the ready list is looked at, never every operation.
    pub(crate) fn run_ready_ops(&mut self, cx: &mut Ctx<'_>) {
        // Two lists, swapped and reused: this runs on every input and every call.
        let mut round = core::mem::take(&mut self.table.scratch);
        let mut rounds = 0u32;
        loop {
            // What the core's own requests finished may start new operations.
            self.settle_internal(cx);
            if self.table.ready.is_empty() {
                break;
            }
            round.clear();
            core::mem::swap(&mut round, &mut self.table.ready);
            round.sort_unstable();
            round.dedup();
            round.retain(|id| {
                self.table
                    .ops
                    .get(id)
                    .is_some_and(|o| o.wait == Wait::Ready)
            });
            rounds += 1;
            if rounds > MAX_READY_ROUNDS {
                // An operation that stays runnable without progress is a bug; fail it rather
                // than spin the driver's thread forever.
                for &id in &round {
                    self.fail_op(cx, id, ClientError::Fdb(ErrorCode::INTERNAL_ERROR));
                }
                self.table.ready.clear();
                break;
            }
            for &id in &round {
                self.advance(cx, id);
            }
        }
        round.clear();
        self.table.scratch = round;
    }

    pub(super) fn advance(&mut self, cx: &mut Ctx<'_>, req: RequestId) {
        let Some(op) = self.table.ops.get(&req) else {
            return;
        };
        let tx = op.tx;
        if !op.detached {
            match self.txs.get(&tx) {
                None => {
                    return self.fail_op(
                        cx,
                        req,
                        ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED),
                    )
                }
                Some(t) if t.timed_out => {
                    return self.fail_op(
                        cx,
                        req,
                        ClientError::Fdb(ErrorCode::TRANSACTION_TIMED_OUT),
                    )
                }
                // A read already started is not failed by a write that fails after it: libfdb_c
                // checks the deferred error only as a read is called (`ThreadSafeTransaction`).
                // What does fail it is what resets RYW (`resetPromise`): `used_during_commit`
                // or a cancel, kept in `finished`.
                Some(t) if is_read(&op.kind) => {
                    if let Some(e) = t.finished {
                        return self.fail_op(cx, req, ClientError::Fdb(e));
                    }
                }
                Some(t) if t.deferred.is_some() => {
                    let e = t.deferred.clone().expect("checked");
                    return self.fail_by_kind(cx, OpId { req, tx }, e);
                }
                _ => {}
            }
        }
        let id = OpId { req, tx };
        match &op.kind {
            OpKind::ReadVersion(_) => read_version::ReadVersionOp::advance(self, cx, id),
            OpKind::Get(_) => get::GetOp::advance(self, cx, id),
            OpKind::GetKey(_) | OpKind::Range(_) => range::ReadOp::advance(self, cx, id),
            OpKind::Commit(_) => commit::CommitOp::advance(self, cx, id),
            OpKind::Watch(_) => watch::WatchOp::advance(self, cx, id),
            OpKind::Backoff(_) => on_error::BackoffOp::advance(&mut self.table, req),
            OpKind::Metrics(_) => metrics::MetricsOp::advance(self, cx, id),
            OpKind::Addresses(_) => addresses::AddressesOp::advance(self, cx, id),
            OpKind::Versionstamp(_) => versionstamp::VersionstampOp::advance(&mut self.table, req),
        }
    }

    /// A storage server answered operation `req`: its file decodes the reply (once the
    /// replica consistency check, if asked for, agrees).
    pub(crate) fn on_storage_reply(&mut self, cx: &mut Ctx<'_>, req: RequestId, message: &Bytes) {
        self.server_answered(cx, req);
        if !self.hold_for_check(cx, req, message) {
            self.deliver_storage_reply(cx, req, message);
        }
    }

    /// Hands a storage reply to the file of its operation's kind.
    pub(super) fn deliver_storage_reply(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        message: &Bytes,
    ) {
        let Some(op) = self.table.ops.get(&req) else {
            return;
        };
        match &op.kind {
            OpKind::Get(_) => get::GetOp::on_reply(self, cx, req, message),
            OpKind::Watch(_) => watch::WatchOp::on_reply(self, cx, req, message),
            OpKind::GetKey(_) | OpKind::Range(_) => range::ReadOp::on_reply(self, cx, req, message),
            _ => {}
        }
    }

    /// Gives up on a request: no event will come for it.
    pub(crate) fn cancel(&mut self, req: RequestId) {
        self.table.remove(req);
    }
}

/// The reads RYW runs against its snapshot of the writes (`readWithConflictRange`).
fn is_read(kind: &OpKind) -> bool {
    matches!(kind, OpKind::Get(_) | OpKind::GetKey(_) | OpKind::Range(_))
}
