//! The reachability check a coordinators change makes before it writes `\xff/coordinators`
//! (`changeQuorumChecker`, `fdbclient/ManagementAPI.actor.cpp`): every new coordinator is
//! asked who leads the cluster under the new cluster key (`GetLeaderRequest` with no known
//! leader), and the change goes ahead only if each of them answers within 5 s.
//!
//! Any answer counts, a leader or none. `broken_promise` is asked again after
//! `PREVENT_FAST_SPIN_DELAY`, as `retryBrokenPromise` does; a request the network lost (the
//! process not listening) is asked again after a short pause until the deadline, as libfdb_c's
//! request would wait for the connection; any other error fails the check with that error.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::error::ErrorCode;
use crate::event::{ClientError, Completion, Event, Reply};
use crate::ids::RequestId;
use crate::messages::coordination::GetLeaderRequest;
use crate::messages::{decode_any, AnyMessage, ErrorOr, NetworkAddress, ReplyPromise};
use crate::net::Io;
use crate::route::Route;
use crate::time::Instant;
use crate::uid::{well_known, Uid};

/// How long the new coordinators have to answer (`delay(5.0)` in `changeQuorumChecker`).
pub(crate) const QUORUM_CHECK_TIMEOUT: Duration = Duration::from_secs(5);
/// `FLOW_KNOBS->PREVENT_FAST_SPIN_DELAY`: the pause before a `broken_promise` is asked again.
const BROKEN_PROMISE_RETRY: Duration = Duration::from_millis(10);
/// The pause before a request the network lost is sent again.
const LOST_RETRY: Duration = Duration::from_millis(250);

#[derive(Clone, Debug)]
struct Target {
    addr: NetworkAddress,
    answered: bool,
    /// When to send (again); `None` while a request is out or once answered.
    send_at: Option<Instant>,
}

#[derive(Clone, Debug)]
struct Check {
    key: Bytes,
    targets: Vec<Target>,
    deadline: Option<Instant>,
    failed: Option<ClientError>,
}

/// The checks in flight, by request.
#[derive(Debug, Default)]
pub(crate) struct QuorumChecks {
    checks: BTreeMap<RequestId, Check>,
}

impl QuorumChecks {
    /// Starts checking that every one of `coordinators` answers for cluster key `key`.
    pub(crate) fn start(&mut self, req: RequestId, key: Bytes, coordinators: Vec<NetworkAddress>) {
        let targets = coordinators
            .into_iter()
            .map(|addr| Target {
                addr,
                answered: false,
                send_at: Some(Instant::ZERO),
            })
            .collect();
        self.checks.insert(
            req,
            Check {
                key,
                targets,
                deadline: None,
                failed: None,
            },
        );
    }

    pub(crate) fn len(&self) -> usize {
        self.checks.len()
    }

    pub(crate) fn cancel(&mut self, req: RequestId) -> bool {
        self.checks.remove(&req).is_some()
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.checks
            .values()
            .flat_map(|c| c.targets.iter().filter_map(|t| t.send_at).chain(c.deadline))
            .min()
    }

    /// Sends what is due and finishes the checks that are decided.
    pub(crate) fn poll(&mut self, io: &mut Io<'_>) {
        let now = io.now;
        let ids: Vec<RequestId> = self.checks.keys().copied().collect();
        for req in ids {
            let Some(c) = self.checks.get_mut(&req) else {
                continue;
            };
            let deadline = *c.deadline.get_or_insert(now + QUORUM_CHECK_TIMEOUT);
            for (i, t) in c.targets.iter_mut().enumerate() {
                if t.answered || t.send_at.is_none_or(|at| at > now) || now >= deadline {
                    continue;
                }
                t.send_at = None;
                let token = io.token();
                let msg = GetLeaderRequest {
                    key: c.key.clone(),
                    known_leader: Uid::default(),
                    reply: ReplyPromise { token },
                };
                let route = Route::QuorumCheck { op: req, part: i };
                io.send(
                    &t.addr,
                    well_known::CLIENT_LEADER_REG_GET_LEADER,
                    &msg,
                    token,
                    route,
                );
            }
            self.maybe_finish(io, req);
        }
    }

    fn maybe_finish(&mut self, io: &mut Io<'_>, req: RequestId) {
        let Some(c) = self.checks.get(&req) else {
            return;
        };
        let result = if let Some(e) = &c.failed {
            Err(e.clone())
        } else if c.targets.iter().all(|t| t.answered) {
            Ok(Reply::Reachable(true))
        } else if c.deadline.is_some_and(|d| io.now >= d) {
            Ok(Reply::Reachable(false))
        } else {
            return;
        };
        self.checks.remove(&req);
        io.events
            .push_back(Event::Complete(Completion::new(req, result)));
    }

    /// Coordinator `part` of check `req` answered.
    pub(crate) fn on_reply(&mut self, io: &mut Io<'_>, req: RequestId, part: usize, msg: &Bytes) {
        let Some(t) = self
            .checks
            .get_mut(&req)
            .and_then(|c| c.targets.get_mut(part))
        else {
            return;
        };
        let failed = match decode_any(msg) {
            Ok(AnyMessage::Leader(ErrorOr::Ok(_))) => {
                t.answered = true;
                None
            }
            Ok(AnyMessage::Leader(ErrorOr::Err(ErrorCode::BROKEN_PROMISE))) => {
                t.send_at = Some(io.now + BROKEN_PROMISE_RETRY);
                None
            }
            Ok(AnyMessage::Leader(ErrorOr::Err(e))) => Some(ClientError::Fdb(e)),
            Ok(_) => Some(ClientError::Fdb(ErrorCode::INTERNAL_ERROR)),
            Err(e) => Some(ClientError::Decode(e)),
        };
        if let (Some(e), Some(c)) = (failed, self.checks.get_mut(&req)) {
            c.failed.get_or_insert(e);
        }
        self.maybe_finish(io, req);
    }

    /// Coordinator `part` of check `req` will not answer this request: ask again soon.
    pub(crate) fn on_lost(&mut self, now: Instant, req: RequestId, part: usize) {
        if let Some(t) = self
            .checks
            .get_mut(&req)
            .and_then(|c| c.targets.get_mut(part))
        {
            if !t.answered {
                t.send_at = Some(now + LOST_RETRY);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cluster_file::{ClusterFile, Coordinator, NetworkAddress as Addr};
    use crate::error::ErrorCode;
    use crate::event::ClientError;
    use crate::messages::{AnyMessage, EnsureTable, ErrorOr};
    use crate::sim::Sim;
    use crate::uid::well_known;
    use crate::ClientConfig;
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

    const NO_LEADER: AnyMessage = AnyMessage::Leader(ErrorOr::Ok(EnsureTable(None)));

    #[test]
    fn every_new_coordinator_must_answer() {
        let mut s = sim();
        let now = s.now();
        let call = s
            .client
            .check_coordinators(now, "new:key", &new_coordinators());
        let reqs = asked(&mut s);
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
        let mut s = sim();
        let now = s.now();
        let call = s
            .client
            .check_coordinators(now, "new:key", &new_coordinators());
        let reqs = asked(&mut s);
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
            let mut s = sim();
            let now = s.now();
            let call = s
                .client
                .check_coordinators(now, "new:key", &new_coordinators());
            let reqs = asked(&mut s);
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
