//! The replica consistency check of FDB 7.4 (`enable_replica_consistency_check` with
//! `consistency_check_required_replicas`; `replicaComparison` in `LoadBalance.actor.h`): once
//! a replica answered a read (`get`, `get_key`, a range or mapped range request), the same
//! request goes to other replicas of the shard, and the read goes on only when their answers
//! match the first one (`TSS_doCompare`'s rules). A replica that answers otherwise fails the
//! read with `storage_replica_comparison_error`, so a replica that lies or lost data is seen
//! by the application instead of being served from.
//!
//! How many other replicas are asked is the option's value: a count (the read fails with
//! `unreachable_storage_replica` when fewer than that many answered and enough were asked),
//! `-1` every replica (one known to be down, an error or an answer later than
//! `LOAD_BALANCE_FETCH_REPLICA_TIMEOUT` fails the read), or `-2` every replica not known to be
//! down, counting only disagreements. `wrong_shard_server` from any of them relocates the read
//! as it would from the first.
//!
//! "Known to be down" is this client's failover view (a request to the replica lost within
//! the last second); libfdb_c's failure monitor waits until connections have failed for
//! `FAILURE_DETECTION_DELAY` (4 s), so right after a replica dies it still asks it.
//!
//! The knob `enable_replica_consistency_check_on_reads` checks every read of a transaction
//! that did not enable the check itself, asking `read_consistency_check_required_replicas`.
//!
//! The check costs nothing unless asked for: the request is kept only then.

use alloc::boxed::Box;
use alloc::vec::Vec;
use bytes::Bytes;

use super::wait::{Timer, Wait};
use super::{get, range, OpKind};
use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::ids::{RequestId, TransactionId};
use crate::messages::storage::{
    GetKeyRequest, GetKeyValuesRequest, GetMappedKeyValuesRequest, GetValueRequest,
    StorageServerInterface,
};
use crate::messages::types::KeySelector;
use crate::messages::ReplyPromise;
use crate::route::Route;
use crate::transaction::replicas::{Replica, FAILED_SERVER_AVOIDANCE};
use crate::transaction::{Ctx, Transactions};
use crate::uid::Uid;

/// `RequiredReplicas::ALL_REPLICAS`.
const ALL_REPLICAS: i64 = -1;
/// `RequiredReplicas::BEST_EFFORT`.
const BEST_EFFORT: i64 = -2;

/// A storage read request as it was sent, to be sent again to other replicas.
#[derive(Clone, Debug)]
pub(in crate::transaction) enum CheckedRequest {
    Value(GetValueRequest),
    Key(GetKeyRequest),
    Range(GetKeyValuesRequest),
    Mapped(GetMappedKeyValuesRequest),
}

/// What a replica answered, as the comparison sees it: decoded as the read itself decodes
/// it.
#[derive(Debug)]
enum Answer {
    Value(Option<Bytes>),
    Read(range::Answer),
}

impl CheckedRequest {
    /// Sends the request again to `replica`, answered to `token`.
    fn send_to(&self, cx: &mut Ctx<'_>, replica: &Replica, token: Uid, route: Route) {
        macro_rules! again {
            ($msg:expr, $stream:ident) => {{
                let mut msg = $msg.clone();
                msg.reply = ReplyPromise { token };
                let dest = replica.stream(StorageServerInterface::$stream);
                cx.io().send(&replica.addr, dest, &msg, token, route);
            }};
        }
        match self {
            CheckedRequest::Value(m) => again!(m, GET_VALUE),
            CheckedRequest::Key(m) => again!(m, GET_KEY),
            CheckedRequest::Range(m) => again!(m, GET_KEY_VALUES),
            CheckedRequest::Mapped(m) => again!(m, GET_MAPPED_KEY_VALUES),
        }
    }

    /// The answer in `message`, or the error the replica answered with.
    fn answer(&self, message: &Bytes) -> Result<Answer, ClientError> {
        let (key_request, mapped) = match self {
            CheckedRequest::Value(_) => return get::decode_value(message).map(Answer::Value),
            CheckedRequest::Key(_) => (true, false),
            CheckedRequest::Range(_) => (false, false),
            CheckedRequest::Mapped(_) => (false, true),
        };
        range::decode_answer(key_request, mapped, message).map(Answer::Read)
    }
}

/// Whether `other` agrees with `first` (`TSS_doCompare`).
fn agree(first: &Answer, other: &Answer) -> bool {
    use range::Answer as R;
    match (first, other) {
        (Answer::Value(a), Answer::Value(b)) => a == b,
        (Answer::Read(R::Key(a)), Answer::Read(R::Key(b))) => selectors_agree(a, b),
        (Answer::Read(R::Range(a, more_a)), Answer::Read(R::Range(b, more_b))) => {
            more_a == more_b && a == b
        }
        (Answer::Read(R::Mapped(a, more_a)), Answer::Read(R::Mapped(b, more_b))) => {
            more_a == more_b && a == b
        }
        _ => false,
    }
}

/// Two `get_key` answers agree unless they could differ only because the storage engines
/// hold different data: a replica whose shard ends sooner hands back a selector to go on
/// from, not the key, and that is no disagreement.
fn selectors_agree(a: &KeySelector, b: &KeySelector) -> bool {
    let resolved = |s: &KeySelector| s.offset == 0 && s.or_equal;
    let one_past = |s: &KeySelector| s.offset == 1 && !s.or_equal;
    if a.or_equal == b.or_equal && a.offset == b.offset {
        // Both resolved must name the same key; both unresolved may stop at other shard ends.
        return !resolved(a) || a.key == b.key;
    }
    if a.key == b.key {
        // One resolved at the key the other stopped just before.
        return (resolved(a) && one_past(b)) || (resolved(b) && one_past(a));
    }
    // Different keys and offsets: the keys must be ordered as the offsets are.
    let b_key_larger = a.key < b.key;
    let b_offset_larger = if a.offset == b.offset {
        b.or_equal
    } else {
        a.offset < b.offset
    };
    b_key_larger != b_offset_larger
}

/// A read's check: the request, and the comparison while other replicas are asked.
#[derive(Debug)]
pub(in crate::transaction) struct ReplicaCheck {
    request: CheckedRequest,
    /// The shard's key (keys before it when `backward`).
    key: Bytes,
    backward: bool,
    /// The replica the request went to first.
    asked: Option<Uid>,
    /// `consistency_check_required_replicas`.
    required: i64,
    /// Tells this comparison's replies and timer from an earlier one's of the same read.
    epoch: u32,
    comparing: Option<Comparing>,
}

/// The other replicas' answers so far.
#[derive(Debug)]
struct Comparing {
    /// The first replica's reply, delivered to the read once the check passes.
    first: Bytes,
    answer: Answer,
    /// Replicas asked, and those of them yet to answer.
    sent: usize,
    outstanding: usize,
    /// Answers counted, agreeing or not (no more than a count asks for).
    answers: usize,
    mismatches: usize,
    failures: usize,
    /// The last error a replica answered (`timed_out` for one that did not answer in time).
    last_error: Option<ErrorCode>,
    wrong_shard: bool,
}

impl Transactions {
    /// The check operation `req` wants, if any: keeps the request it just sent, with the key
    /// of its shard (keys before it when `true`), built only then.
    pub(in crate::transaction) fn keep_for_check(
        &mut self,
        req: RequestId,
        tx: TransactionId,
        request: impl FnOnce() -> (CheckedRequest, Bytes, bool),
    ) {
        // The transaction's own options decide; without them, the knob checking every read
        // (`maybeDoReplicaComparison`).
        let required = match self.txs.get(&tx) {
            Some(t) if t.options.replica_check => t.options.required_replicas,
            Some(_) if self.knobs.enable_replica_consistency_check_on_reads => {
                self.knobs.read_consistency_check_required_replicas
            }
            _ => 0,
        };
        let Some(op) = self.table.ops.get_mut(&req) else {
            return;
        };
        if required == 0 {
            op.check = None;
            return;
        }
        let epoch = op.check.as_ref().map_or(0, |c| c.epoch.wrapping_add(1));
        let (request, key, backward) = request();
        op.check = Some(Box::new(ReplicaCheck {
            request,
            key,
            backward,
            asked: op.server.map(|(id, _)| id),
            required,
            epoch,
            comparing: None,
        }));
    }

    /// A replica answered operation `req`: `true` if the answer is held while other replicas
    /// are asked (or the read already failed the check); `false` lets the read take it now.
    pub(in crate::transaction) fn hold_for_check(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        message: &Bytes,
    ) -> bool {
        let Some(op) = self.table.ops.get(&req) else {
            return false;
        };
        let tx = op.tx;
        let Some(check) = op.check.as_deref() else {
            return false;
        };
        if check.comparing.is_some() {
            return false;
        }
        // Errors go the usual way; only an answer is compared.
        let Ok(answer) = check.request.answer(message) else {
            return false;
        };
        let (required, asked, epoch) = (check.required, check.asked, check.epoch);
        let Some(shard) = self.shard_of(tx, &check.key, check.backward) else {
            return false;
        };
        let mut candidates = Vec::new();
        let mut unreachable = false;
        for s in &shard.servers {
            if Some(s.unique_id) == asked {
                continue;
            }
            if !self.routing.is_down(&s.unique_id, cx.now) {
                candidates.push(Replica::of(s));
            } else if required == ALL_REPLICAS {
                unreachable = true;
            }
        }
        if unreachable {
            self.fail_check(
                cx,
                req,
                ClientError::Fdb(ErrorCode::UNREACHABLE_STORAGE_REPLICA),
            );
            return true;
        }
        if candidates.is_empty() {
            return false;
        }
        // A random choice of them, as many as required.
        for i in (1..candidates.len()).rev() {
            candidates.swap(i, cx.rng.below(i + 1));
        }
        if required > 0 {
            candidates.truncate(required.min(candidates.len() as i64) as usize);
        }
        let Some(check) = self.check_mut(req) else {
            return false;
        };
        for replica in &candidates {
            let token = cx.rng.uid();
            let route = Route::ReplicaCheck {
                op: req,
                epoch,
                replica: replica.id,
            };
            check.request.send_to(cx, replica, token, route);
        }
        check.comparing = Some(Comparing {
            first: message.clone(),
            answer,
            sent: candidates.len(),
            outstanding: candidates.len(),
            answers: 0,
            mismatches: 0,
            failures: 0,
            last_error: None,
            wrong_shard: false,
        });
        self.table.set_wait(req, Wait::Reply);
        let at = cx.now + self.knobs.load_balance_fetch_replica_timeout;
        self.table.add_timer(at, Timer::ReplicaCheck(req, epoch));
        true
    }

    /// Another replica answered the check of operation `req`.
    pub(crate) fn on_replica_check_reply(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        epoch: u32,
        message: &Bytes,
    ) {
        let Some(check) = self.comparing_check(req, epoch) else {
            return;
        };
        let answer = check.request.answer(message);
        let Some(c) = check.comparing.as_mut() else {
            return;
        };
        c.outstanding -= 1;
        if check.required <= 0 || c.answers < check.required as usize {
            match answer {
                Ok(a) => {
                    if !agree(&c.answer, &a) {
                        c.mismatches += 1;
                    }
                    c.answers += 1;
                }
                Err(e) => {
                    c.failures += 1;
                    let code = e.code();
                    c.wrong_shard |= code == ErrorCode::WRONG_SHARD_SERVER;
                    c.last_error = Some(code);
                }
            }
        }
        if c.outstanding == 0 {
            self.end_check(cx, req);
        }
    }

    /// A check request of operation `req` to `replica` got no reply (its connection failed):
    /// the replica counts as down for a while, as a read's own does. A best-effort check
    /// counts it as failed at once; the others wait for the replica until their timeout, as
    /// libfdb_c's `getReply` does, and the next check needing every replica fails at once.
    pub(crate) fn on_replica_check_lost(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        epoch: u32,
        replica: Uid,
    ) {
        self.routing
            .failed(replica, cx.now + FAILED_SERVER_AVOIDANCE);
        let Some(check) = self.comparing_check(req, epoch) else {
            return;
        };
        if check.required != BEST_EFFORT {
            return;
        }
        let Some(c) = check.comparing.as_mut() else {
            return;
        };
        c.outstanding -= 1;
        c.failures += 1;
        c.last_error = Some(ErrorCode::REQUEST_MAYBE_DELIVERED);
        if c.outstanding == 0 {
            self.end_check(cx, req);
        }
    }

    /// The check of operation `req` ran out of time: who has not answered timed out.
    pub(in crate::transaction) fn on_replica_check_timeout(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        epoch: u32,
    ) {
        let Some(check) = self.comparing_check(req, epoch) else {
            return;
        };
        let Some(c) = check.comparing.as_mut() else {
            return;
        };
        if c.outstanding > 0 {
            c.failures += c.outstanding;
            c.outstanding = 0;
            c.last_error = Some(ErrorCode::TIMED_OUT);
        }
        self.end_check(cx, req);
    }

    /// Operation `req`'s check.
    fn check_mut(&mut self, req: RequestId) -> Option<&mut ReplicaCheck> {
        self.table.ops.get_mut(&req)?.check.as_deref_mut()
    }

    /// Operation `req`'s check in progress, if it is comparison `epoch`.
    fn comparing_check(&mut self, req: RequestId, epoch: u32) -> Option<&mut ReplicaCheck> {
        let check = self.check_mut(req)?;
        (check.epoch == epoch && check.comparing.is_some()).then_some(check)
    }

    /// Every replica asked answered or timed out: the verdict, then the read goes on with
    /// the first answer or fails.
    fn end_check(&mut self, cx: &mut Ctx<'_>, req: RequestId) {
        let Some(check) = self.check_mut(req) else {
            return;
        };
        let Some(c) = check.comparing.take() else {
            return;
        };
        let required = check.required;
        check.epoch = check.epoch.wrapping_add(1);
        let verdict = if c.wrong_shard {
            Some(ErrorCode::WRONG_SHARD_SERVER)
        } else if c.mismatches > 0 {
            Some(ErrorCode::STORAGE_REPLICA_COMPARISON_ERROR)
        } else if c.failures > 0 && required == ALL_REPLICAS {
            c.last_error
        } else if required > 0 && c.answers < required as usize && c.sent >= required as usize {
            Some(ErrorCode::UNREACHABLE_STORAGE_REPLICA)
        } else {
            None
        };
        match verdict {
            Some(e) => self.fail_check(cx, req, ClientError::Fdb(e)),
            None => self.deliver_storage_reply(cx, req, &c.first),
        }
    }

    /// The check failed operation `req` with `e`: the read takes it as its replica's error
    /// (so `wrong_shard_server` relocates it, and the rest fail it).
    fn fail_check(&mut self, cx: &mut Ctx<'_>, req: RequestId, e: ClientError) {
        if let Some(c) = self.check_mut(req) {
            c.comparing = None;
        }
        match self.table.ops.get(&req).map(|o| &o.kind) {
            Some(OpKind::Get(_)) => get::GetOp::on_failed(self, cx, req, e),
            Some(OpKind::GetKey(_) | OpKind::Range(_)) => {
                range::ReadOp::on_failed(self, cx, req, e)
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::types::KeyValue;

    fn sel(key: &[u8], or_equal: bool, offset: i32) -> KeySelector {
        KeySelector::new(Bytes::copy_from_slice(key), or_equal, offset)
    }

    /// `TSS_doCompare`'s `get_key` cases, as FDB's own unit test lists them (keys `a` to
    /// `e` ascending).
    #[test]
    fn get_key_answers_agree_as_fdb_compares_them() {
        let same = |x: &KeySelector, y: &KeySelector| selectors_agree(x, y);
        // Further keys with smaller offsets: all consistent with each other.
        let ladder = [
            sel(b"a", false, 20),
            sel(b"b", false, 10),
            sel(b"c", true, 0),
            sel(b"d", false, -10),
            sel(b"e", false, -20),
        ];
        for x in &ladder {
            for y in &ladder {
                assert!(same(x, y), "{x:?} {y:?}");
            }
        }
        // The same offset, resolved to other keys.
        assert!(!same(&sel(b"a", true, 0), &sel(b"b", true, 0)));
        // The same offset, unresolved: other shard ends.
        assert!(same(&sel(b"a", false, 10), &sel(b"b", false, 10)));
        // Offsets ordered as the keys are.
        assert!(!same(&sel(b"a", false, 0), &sel(b"b", false, 10)));
        assert!(!same(&sel(b"a", false, -10), &sel(b"b", false, 0)));
        // Found in one shard, the other stopped before it.
        assert!(same(&sel(b"a", false, 1), &sel(b"b", true, 0)));
        assert!(!same(&sel(b"a", true, 0), &sel(b"b", false, 1)));
        assert!(same(&sel(b"a", true, 0), &sel(b"b", false, 0)));
        assert!(!same(&sel(b"a", false, 0), &sel(b"b", true, 0)));
        // The shard end one stopped at is the key the other found.
        assert!(same(&sel(b"a", true, 0), &sel(b"a", false, 1)));
    }

    #[test]
    fn values_and_rows_agree_only_when_equal() {
        let v = |s: &'static [u8]| Answer::Value(Some(Bytes::from_static(s)));
        assert!(agree(&v(b"x"), &v(b"x")));
        assert!(!agree(&v(b"x"), &v(b"y")));
        assert!(!agree(&v(b"x"), &Answer::Value(None)));
        let rows = |more| {
            Answer::Read(range::Answer::Range(
                alloc::vec![KeyValue {
                    key: Bytes::from_static(b"k"),
                    value: Bytes::from_static(b"v"),
                }],
                more,
            ))
        };
        assert!(agree(&rows(false), &rows(false)));
        assert!(!agree(&rows(false), &rows(true)));
        assert!(!agree(
            &rows(false),
            &Answer::Read(range::Answer::Range(Vec::new(), false))
        ));
    }
}
