//! The reachability check a coordinators change makes before it writes `\xff/coordinators`
//! (`changeQuorumChecker`, `fdbclient/ManagementAPI.actor.cpp`): every new coordinator is
//! asked who leads the cluster under the new cluster key (`GetLeaderRequest` with no known
//! leader), and the change goes ahead only if each of them answers within 5 s.
//!
//! Any answer counts, a leader or none. `broken_promise` is asked again after
//! `PREVENT_FAST_SPIN_DELAY`, as `retryBrokenPromise` does; a request the network lost (the
//! process not listening) is asked again after a short pause until the deadline, as libfdb_c's
//! request would wait for the connection; any other error fails the check with that error.

use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::error::ErrorCode;
use crate::event::{ClientError, Reply};
use crate::ids::RequestId;
use crate::messages::{decode_any, AnyMessage, ErrorOr, NetworkAddress};
use crate::part::{requests_in, LeaderAsks, Part, PartCx, Requests, PREVENT_FAST_SPIN_DELAY};
use crate::route::Loss;
use crate::time::Instant;

/// How long the new coordinators have to answer (`delay(5.0)` in `changeQuorumChecker`).
pub(crate) const QUORUM_CHECK_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
struct Check {
    coordinators: LeaderAsks,
    deadline: Option<Instant>,
    failed: Option<ClientError>,
}

impl Check {
    /// Decided: failed, every coordinator answered, or the deadline passed.
    fn outcome(&mut self, now: Instant) -> Option<Result<Reply, ClientError>> {
        if let Some(e) = &self.failed {
            Some(Err(e.clone()))
        } else if self.coordinators.answers() == self.coordinators.len() {
            Some(Ok(Reply::Reachable(true)))
        } else if self.deadline.is_some_and(|d| now >= d) {
            Some(Ok(Reply::Reachable(false)))
        } else {
            None
        }
    }
}

/// The checks in flight; a reply's leg is the coordinator's place in the list checked.
#[derive(Debug, Default)]
pub(crate) struct QuorumChecks {
    checks: Requests<Check>,
}

impl QuorumChecks {
    /// Starts checking that every one of `coordinators` answers for cluster key `key`.
    pub(crate) fn start(&mut self, req: RequestId, key: Bytes, coordinators: Vec<NetworkAddress>) {
        let coordinators = LeaderAsks::new(key, coordinators.into_iter().map(Some), Instant::ZERO);
        self.checks.start(
            req,
            Check {
                coordinators,
                deadline: None,
                failed: None,
            },
        );
    }
}

impl Part for QuorumChecks {
    type Leg = usize;

    requests_in!(checks);

    fn poll_timeout(&self) -> Option<Instant> {
        self.checks
            .next_timer(|c| c.coordinators.timers().chain(c.deadline))
    }

    /// Sends what is due and finishes the checks that are decided.
    fn poll(&mut self, cx: &mut PartCx<'_>) {
        let now = cx.now();
        for req in self.checks.ids() {
            let Some(c) = self.checks.get_mut(req) else {
                continue;
            };
            let deadline = *c.deadline.get_or_insert(now + QUORUM_CHECK_TIMEOUT);
            if now < deadline {
                c.coordinators.send_due(cx, req, |i| i);
            }
            self.checks.settle(cx, req, Check::outcome);
        }
    }

    /// Coordinator `part` of check `req` answered.
    fn on_reply(&mut self, cx: &mut PartCx<'_>, req: RequestId, part: usize, msg: &Bytes) {
        let Some(c) = self
            .checks
            .get_mut(req)
            .filter(|c| part < c.coordinators.len())
        else {
            return;
        };
        let failed = match decode_any(msg) {
            Ok(AnyMessage::Leader(ErrorOr::Ok(_))) => {
                c.coordinators.answered(part);
                None
            }
            Ok(AnyMessage::Leader(ErrorOr::Err(ErrorCode::BROKEN_PROMISE))) => {
                c.coordinators
                    .ask_again(part, cx.now() + PREVENT_FAST_SPIN_DELAY);
                None
            }
            Ok(AnyMessage::Leader(ErrorOr::Err(e))) => Some(ClientError::Fdb(e)),
            Ok(_) => Some(ClientError::Fdb(ErrorCode::INTERNAL_ERROR)),
            Err(e) => Some(ClientError::Decode(e)),
        };
        if let Some(e) = failed {
            c.failed.get_or_insert(e);
        }
        self.checks.settle(cx, req, Check::outcome);
    }

    /// Coordinator `part` of check `req` will not answer this request: ask again soon.
    fn on_lost(&mut self, cx: &mut PartCx<'_>, req: RequestId, part: usize, _why: Loss) {
        if let Some(c) = self.checks.get_mut(req) {
            c.coordinators.lost(part, cx.now());
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::client::ClientConfig;
    use crate::cluster_file::{ClusterFile, Coordinator, NetworkAddress as Addr};
    use crate::error::ErrorCode;
    use crate::event::ClientError;
    use crate::messages::{AnyMessage, EnsureTable, ErrorOr};
    use crate::sim::Sim;
    use crate::uid::well_known;
    use alloc::vec::Vec;
    use core::time::Duration;

    fn sim() -> Sim {
        Sim::new(ClientConfig::new(
            ClusterFile::parse("t:t@127.0.0.1:4500").unwrap(),
            3,
        ))
    }

    fn new_coordinators() -> Vec<Addr> {
        ["127.0.0.2:4500", "127.0.0.3:4500"]
            .iter()
            .map(|s| {
                let cs = ClusterFile::parse(&alloc::format!("a:b@{s}")).unwrap();
                match &cs.coordinators[0] {
                    Coordinator::Address(a) => a.clone(),
                    Coordinator::Hostname { .. } => unreachable!(),
                }
            })
            .collect()
    }

    fn asked(s: &mut Sim) -> Vec<crate::sim::Request> {
        s.drive();
        let mut out = Vec::new();
        while let Some(r) = s.take_request(|r| r.dest == well_known::CLIENT_LEADER_REG_GET_LEADER) {
            if let AnyMessage::GetLeaderRequest(m) = &r.msg {
                assert_eq!(&m.key[..], b"new:key", "asked under the new cluster key");
            }
            out.push(r);
        }
        out
    }

    /// A check of [`new_coordinators`] started: the simulation, when, the call and the
    /// requests it sent.
    fn started() -> (
        Sim,
        crate::Instant,
        crate::event::Call<bool>,
        Vec<crate::sim::Request>,
    ) {
        let mut s = sim();
        let now = s.now();
        let call = s
            .client
            .check_coordinators(now, "new:key", &new_coordinators());
        let reqs = asked(&mut s);
        (s, now, call, reqs)
    }

    const NO_LEADER: AnyMessage = AnyMessage::Leader(ErrorOr::Ok(EnsureTable(None)));

    #[test]
    fn every_new_coordinator_must_answer() {
        let (mut s, _, call, reqs) = started();
        assert_eq!(reqs.len(), 2);
        s.reply_bytes(&reqs[0], &NO_LEADER.encode());
        // `broken_promise` is asked again; then an answer without a leader counts.
        s.broken_promise(&reqs[1]);
        s.advance_by(Duration::from_millis(300));
        let again = asked(&mut s);
        assert_eq!(again.len(), 1);
        s.reply_bytes(&again[0], &NO_LEADER.encode());
        assert_eq!(s.run(call), Some(Ok(true)));
    }

    #[test]
    fn a_coordinator_that_never_answers_fails_the_check_after_five_seconds() {
        let (mut s, now, call, reqs) = started();
        s.reply_bytes(&reqs[0], &NO_LEADER.encode());
        // The other never answers: its connection drops under each request, which is sent
        // again after a pause, until the deadline.
        let mut sent = 1;
        s.close(reqs[1].conn);
        while s.now() + Duration::from_millis(100) < now + super::QUORUM_CHECK_TIMEOUT {
            for r in asked(&mut s) {
                sent += 1;
                s.close(r.conn);
            }
            assert!(s.take(call).is_none(), "decided early");
            s.advance_by(Duration::from_millis(100));
        }
        assert!((3..=25).contains(&sent), "{sent} requests");
        assert_eq!(s.run(call), Some(Ok(false)));
        assert_eq!(s.client.census().status_reads, 0, "nothing left behind");
    }

    #[test]
    fn hostile_answers_are_typed_errors() {
        let wrong = AnyMessage::Leader(ErrorOr::Err(ErrorCode::WRONG_CONNECTION_FILE)).encode();
        let garbage = alloc::vec![0xff; 7];
        let other = AnyMessage::Leader(ErrorOr::Ok(EnsureTable(None))).encode();
        for (i, body) in [wrong, garbage, other[..other.len() / 2].to_vec()]
            .into_iter()
            .enumerate()
        {
            let (mut s, _, call, reqs) = started();
            s.reply_bytes(&reqs[0], &body);
            match s.run(call) {
                Some(Err(ClientError::Fdb(e))) if i == 0 => {
                    assert_eq!(e, ErrorCode::WRONG_CONNECTION_FILE)
                }
                Some(Err(_)) if i > 0 => {}
                other => panic!("answer {i}: {other:?}"),
            }
        }
    }
}
