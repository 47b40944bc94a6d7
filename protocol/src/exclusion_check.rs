//! The safety check a client makes before it marks servers failed (`checkSafeExclusions`,
//! `fdbclient/NativeAPI.actor.cpp`), in two steps:
//!
//! 1. A commit proxy is asked ([`ExclusionSafetyCheckRequest`]) whether every storage team
//!    keeps a replica without the named processes; the proxy asks the data distributor. A
//!    request lost with its proxy (`broken_promise` too: the network takes the endpoint for
//!    gone) is asked again, of another proxy or the new ones (`onProxiesChanged`); an error
//!    the proxy answers with fails the check with that error.
//! 2. Every coordinator of the connection string is asked who leads (`GetLeaderRequest` with
//!    no known leader; one the network lost, `broken_promise` too, is asked again, as
//!    `retryBrokenPromise` and a waiting connection would); once a majority answered the
//!    others get 1 s more (`smartQuorum`), and
//!    without a majority within 3 s the exclusion is unsafe. Those that did not answer count
//!    against the coordinators' fault tolerance, `(n - 1) / 2`, and so do the answering ones
//!    the exclusions name; the exclusion is safe only if what is left of it covers them.
//!
//! The check is safe only when both steps say so. A coordinator named by host name is asked
//! at the address it resolved to and, as in libfdb_c (whose leader interface for it has no
//! address), is never counted as excluded.

use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::event::{ClientError, Reply};
use crate::ids::RequestId;
use crate::messages::coordination::CommitProxyInterface;
use crate::messages::exclusion::{ExclusionSafetyCheckReply, ExclusionSafetyCheckRequest};
use crate::messages::{decode_any, decode_reply, AddressExclusion, AnyMessage, ErrorOr};
use crate::monitor::ClusterMonitor;
use crate::part::{requests_in, LeaderAsks, Part, PartCx, Requests, PREVENT_FAST_SPIN_DELAY};
use crate::route::Loss;
use crate::time::Instant;

/// How long a majority of the coordinators has to answer (`delay(3.0)`).
const QUORUM_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the others get once a majority answered (`smartQuorum`'s `extraSeconds`).
const EXTRA_TIME: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
enum Step {
    /// The proxies' verdict: to ask at `at` (at once: `None`), unless `sent`.
    Proxy { at: Option<Instant>, sent: bool },
    /// The coordinators, asked once the proxies said `proxy_safe`.
    Coordinators {
        proxy_safe: bool,
        coordinators: LeaderAsks,
        /// Whether the exclusions name each coordinator.
        excluded: Vec<bool>,
        /// When a majority must have answered by.
        deadline: Instant,
        /// When the stragglers' extra second ends, once a majority answered.
        extra_until: Option<Instant>,
    },
}

#[derive(Clone, Debug)]
struct Check {
    exclusions: Vec<AddressExclusion>,
    step: Step,
    failed: Option<ClientError>,
}

impl Check {
    /// Decided: failed, or the coordinators' step is over (a majority with its stragglers'
    /// extra time, or none by the deadline).
    fn outcome(&mut self, now: Instant) -> Option<Result<Reply, ClientError>> {
        let (proxy_safe, coordinators, excluded, deadline, extra_until) =
            match (&self.failed, &mut self.step) {
                (Some(e), _) => return Some(Err(e.clone())),
                (None, Step::Proxy { .. }) => return None,
                (
                    None,
                    Step::Coordinators {
                        proxy_safe,
                        coordinators,
                        excluded,
                        deadline,
                        extra_until,
                    },
                ) => (proxy_safe, coordinators, excluded, deadline, extra_until),
            };
        let n = coordinators.len();
        let answered = coordinators.answers();
        if extra_until.is_none() && answered > n / 2 {
            *extra_until = Some(now + EXTRA_TIME);
        }
        match *extra_until {
            None if now >= *deadline => Some(Ok(Reply::Safe(false))),
            None => None,
            Some(until) if answered < n && now < until => None,
            Some(_) => Some(Ok(Reply::Safe(
                *proxy_safe && coordinators_safe(coordinators, excluded),
            ))),
        }
    }
}

/// The checks in flight; a reply's leg is `None` for the proxy's answer, the coordinator's
/// place in the connection string for a coordinator's.
#[derive(Debug, Default)]
pub(crate) struct ExclusionChecks {
    checks: Requests<Check>,
}

impl ExclusionChecks {
    /// Starts checking whether the processes `exclusions` name can be marked failed.
    pub(crate) fn start(&mut self, req: RequestId, exclusions: Vec<AddressExclusion>) {
        let step = Step::Proxy {
            at: None,
            sent: false,
        };
        self.checks.start(
            req,
            Check {
                exclusions,
                step,
                failed: None,
            },
        );
    }
}

impl Part for ExclusionChecks {
    type Leg = Option<usize>;

    requests_in!(checks);

    fn poll_timeout(&self) -> Option<Instant> {
        self.checks.next_timer(|c| match &c.step {
            Step::Proxy { at, sent: false } => Vec::from_iter(*at),
            Step::Proxy { .. } => Vec::new(),
            Step::Coordinators {
                coordinators,
                deadline,
                extra_until,
                ..
            } => coordinators
                .timers()
                .chain([extra_until.unwrap_or(*deadline)])
                .collect(),
        })
    }

    /// Sends what is due and finishes the checks that are decided.
    fn poll(&mut self, cx: &mut PartCx<'_>) {
        let now = cx.now();
        for req in self.checks.ids() {
            let Some(c) = self.checks.get_mut(req) else {
                continue;
            };
            match &mut c.step {
                Step::Proxy { at, sent } => {
                    let due = !*sent && at.is_none_or(|t| t <= now);
                    if let (true, Some(info)) = (due, cx.monitor.info()) {
                        let proxies = info
                            .commit_proxy_streams(CommitProxyInterface::EXCLUSION_SAFETY_CHECK_REQ);
                        let exclusions = &c.exclusions;
                        let ask = |reply| ExclusionSafetyCheckRequest {
                            exclusions: exclusions.clone(),
                            reply,
                        };
                        match cx.ask_one(&proxies, req, None, ask) {
                            true => *sent = true,
                            false => *at = Some(now + PREVENT_FAST_SPIN_DELAY),
                        }
                    }
                }
                Step::Coordinators { coordinators, .. } => {
                    coordinators.send_due(cx, req, Some);
                }
            }
            self.checks.settle(cx, req, Check::outcome);
        }
    }

    /// An answer to check `req`: the proxy's (`part` `None`) or coordinator `part`'s.
    fn on_reply(&mut self, cx: &mut PartCx<'_>, req: RequestId, part: Option<usize>, msg: &Bytes) {
        let Some(c) = self.checks.get_mut(req) else {
            return;
        };
        let now = cx.now();
        let failed = match (part, &mut c.step) {
            (None, Step::Proxy { .. }) => match decode_reply::<ExclusionSafetyCheckReply>(msg) {
                Ok(ErrorOr::Ok(r)) => {
                    c.step = coordinators_step(cx.monitor, &c.exclusions, r.safe, now);
                    None
                }
                Ok(ErrorOr::Err(e)) => Some(ClientError::Fdb(e)),
                Err(e) => Some(ClientError::Decode(e)),
            },
            (Some(i), Step::Coordinators { coordinators, .. }) if i < coordinators.len() => {
                match decode_any(msg) {
                    // Any answer, an error too, makes its future ready: it counts as
                    // reachable.
                    Ok(AnyMessage::Leader(_)) => coordinators.answered(i),
                    Ok(_) | Err(_) => {
                        coordinators.lost(i, now);
                        true
                    }
                };
                None
            }
            _ => return,
        };
        if let Some(e) = failed {
            c.failed.get_or_insert(e);
        }
        self.poll(cx);
    }

    /// The request `part` of check `req` will get no answer: asked again shortly.
    fn on_lost(&mut self, cx: &mut PartCx<'_>, req: RequestId, part: Option<usize>, _why: Loss) {
        let Some(c) = self.checks.get_mut(req) else {
            return;
        };
        match (part, &mut c.step) {
            (None, Step::Proxy { .. }) => {
                c.step = Step::Proxy {
                    at: Some(cx.now() + PREVENT_FAST_SPIN_DELAY),
                    sent: false,
                }
            }
            (Some(i), Step::Coordinators { coordinators, .. }) => {
                coordinators.lost(i, cx.now());
            }
            _ => {}
        }
    }

    /// The proxy's question goes to a commit proxy.
    fn asks_proxies(part: Option<usize>) -> bool {
        part.is_none()
    }
}

/// The coordinators' step: each of the connection string's coordinators to ask at once.
fn coordinators_step(
    monitor: &ClusterMonitor,
    exclusions: &[AddressExclusion],
    proxy_safe: bool,
    now: Instant,
) -> Step {
    let named = monitor.coordinator_addresses();
    let excluded = named
        .iter()
        .map(|a| {
            a.as_ref()
                .is_some_and(|a| exclusions.iter().any(|e| e.excludes(a)))
        })
        .collect();
    let targets = monitor.coordinator_targets().into_iter().map(|(_, a)| a);
    Step::Coordinators {
        proxy_safe,
        coordinators: LeaderAsks::new(Bytes::from(monitor.cluster().cluster_key()), targets, now),
        excluded,
        deadline: now + QUORUM_TIMEOUT,
        extra_until: None,
    }
}

/// Whether the coordinators the exclusions name, with those that did not answer, are within
/// the coordinators' fault tolerance.
fn coordinators_safe(coordinators: &LeaderAsks, excluded: &[bool]) -> bool {
    let n = coordinators.len() as i64;
    let unavailable = n - coordinators.answers() as i64;
    let excluded = (0..coordinators.len())
        .filter(|&i| coordinators.has_answered(i) && excluded.get(i) == Some(&true))
        .count() as i64;
    excluded <= (n - 1) / 2 - unavailable
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientConfig;
    use crate::cluster_file::ClusterFile;
    use crate::error::ErrorCode;
    use crate::messages::coordination::ClientDBInfo;
    use crate::messages::{EnsureTable, IpAddress};
    use crate::sim::{loopback_stream, InfoServer, Request, Sim};
    use crate::uid::{well_known, Uid};

    const PROXY: Uid = Uid::new(2, 0x20);
    const OTHER_PROXY: Uid = Uid::new(2, 0x40);

    fn sim() -> Sim<InfoServer> {
        let cs = "t:t@127.0.0.1:4500,127.0.0.2:4500,127.0.0.3:4500";
        let info = ClientDBInfo {
            commit_proxies: [PROXY, OTHER_PROXY]
                .map(|token| CommitProxyInterface {
                    commit: loopback_stream(4500, token),
                    ..Default::default()
                })
                .to_vec(),
            id: Uid::new(3, 3),
            ..Default::default()
        };
        let config = ClientConfig::new(ClusterFile::parse(cs).unwrap(), 7);
        let mut s = Sim::with_server(config, InfoServer { info });
        s.drive();
        s
    }

    fn excl(ip: [u8; 4], port: i32) -> AddressExclusion {
        AddressExclusion {
            ip: IpAddress::V4(u32::from_be_bytes(ip)),
            port,
        }
    }

    fn start(
        s: &mut Sim<InfoServer>,
        exclusions: Vec<AddressExclusion>,
    ) -> crate::event::Call<bool> {
        let now = s.now();
        let call = s.client.check_safe_exclusions(now, exclusions);
        s.drive();
        call
    }

    fn proxy_request(s: &mut Sim<InfoServer>) -> Request {
        s.take_request(|r| matches!(r.msg, AnyMessage::ExclusionSafetyCheckRequest(_)))
            .expect("the proxy was asked")
    }

    fn leader_requests(s: &mut Sim<InfoServer>) -> Vec<Request> {
        s.drive();
        let mut out = Vec::new();
        while let Some(r) = s.take_request(|r| r.dest == well_known::CLIENT_LEADER_REG_GET_LEADER) {
            out.push(r);
        }
        out
    }

    fn answer_leader(s: &mut Sim<InfoServer>, r: &Request) {
        let none = AnyMessage::Leader(ErrorOr::Ok(EnsureTable(None)));
        s.reply_bytes(r, &none.encode());
    }

    /// The proxy answers `safe`; then every coordinator is asked, `answering` of them (in
    /// the connection string's order) answer.
    fn run(exclusions: Vec<AddressExclusion>, safe: bool, answering: usize) -> Option<bool> {
        let mut s = sim();
        let call = start(&mut s, exclusions.clone());
        let req = proxy_request(&mut s);
        assert!(
            [PROXY.adjusted(8), OTHER_PROXY.adjusted(8)].contains(&req.dest),
            "exclusionSafetyCheckReq"
        );
        let AnyMessage::ExclusionSafetyCheckRequest(m) = &req.msg else {
            unreachable!()
        };
        assert_eq!(m.exclusions, exclusions);
        s.reply(&req, ErrorOr::Ok(ExclusionSafetyCheckReply { safe }));
        let mut asked = leader_requests(&mut s);
        assert_eq!(asked.len(), 3, "every coordinator");
        asked.sort_by_key(|r| s.addr(r.conn).map(|a| alloc::format!("{a}")));
        for r in &asked[..answering] {
            answer_leader(&mut s, r);
        }
        let r = s.run(call).map(|r| r.expect("no error"));
        assert_eq!(s.client.census().status_reads, 0, "nothing left behind");
        r
    }

    #[test]
    fn safe_when_the_proxies_say_so_and_a_coordinator_majority_is_left() {
        assert_eq!(run(alloc::vec![], true, 3), Some(true));
        // One of three coordinators may go, by process or by machine.
        assert_eq!(
            run(alloc::vec![excl([127, 0, 0, 2], 4500)], true, 3),
            Some(true)
        );
        assert_eq!(
            run(alloc::vec![excl([127, 0, 0, 3], 0)], true, 3),
            Some(true)
        );
        // Two may not; another port of a coordinator's machine is no coordinator.
        let two = alloc::vec![excl([127, 0, 0, 2], 0), excl([127, 0, 0, 3], 4500)];
        assert_eq!(run(two, true, 3), Some(false));
        let other_port = alloc::vec![excl([127, 0, 0, 2], 4501), excl([127, 0, 0, 3], 4501)];
        assert_eq!(run(other_port, true, 3), Some(true));
        // The proxies' verdict stands.
        assert_eq!(run(alloc::vec![], false, 3), Some(false));
    }

    #[test]
    fn a_silent_coordinator_counts_against_the_fault_tolerance() {
        // Two of three answer: nothing more may go.
        assert_eq!(run(alloc::vec![], true, 2), Some(true));
        assert_eq!(
            run(alloc::vec![excl([127, 0, 0, 1], 0)], true, 2),
            Some(false)
        );
        // No majority within 3 s: unsafe.
        assert_eq!(run(alloc::vec![], true, 1), Some(false));
    }

    #[test]
    fn the_stragglers_get_one_second_once_a_majority_answered() {
        let mut s = sim();
        let call = start(&mut s, alloc::vec![]);
        let req = proxy_request(&mut s);
        s.reply(&req, ErrorOr::Ok(ExclusionSafetyCheckReply { safe: true }));
        let asked = leader_requests(&mut s);
        let t0 = s.now();
        answer_leader(&mut s, &asked[0]);
        answer_leader(&mut s, &asked[1]);
        s.advance_by(Duration::from_millis(900));
        assert!(s.take(call).is_none(), "decided before the extra second");
        answer_leader(&mut s, &asked[2]);
        assert_eq!(s.take(call), Some(Ok(true)));
        assert!(s.now() < t0 + EXTRA_TIME);
    }

    #[test]
    fn the_proxy_is_asked_again_after_broken_promise_and_its_errors_fail_the_check() {
        let mut s = sim();
        let call = start(&mut s, alloc::vec![excl([10, 0, 0, 1], 0)]);
        let req = proxy_request(&mut s);
        // The proxy's role ended: the other is asked.
        s.broken_promise(&req);
        s.drive();
        assert!(s.requests().is_empty(), "not asked again at once");
        s.advance_by(PREVENT_FAST_SPIN_DELAY);
        let other = proxy_request(&mut s);
        assert_ne!(other.dest, req.dest);
        let req = other;
        // A connection lost under the request: asked again once the proxy is reachable.
        s.close(req.conn);
        let mut waited = 0;
        let req = loop {
            s.advance_by(Duration::from_millis(100));
            if let Some(r) =
                s.take_request(|r| matches!(r.msg, AnyMessage::ExclusionSafetyCheckRequest(_)))
            {
                break r;
            }
            waited += 1;
            assert!(waited < 100, "never asked again");
        };
        assert!(s.take(call).is_none());
        s.reply::<ExclusionSafetyCheckReply>(&req, ErrorOr::Err(ErrorCode::OPERATION_FAILED));
        assert_eq!(
            s.take(call),
            Some(Err(ClientError::Fdb(ErrorCode::OPERATION_FAILED)))
        );
        // Garbage is a typed error, never a panic.
        let call = start(&mut s, alloc::vec![]);
        let req = proxy_request(&mut s);
        s.reply_bytes(&req, &[0xff; 5]);
        assert!(matches!(s.take(call), Some(Err(ClientError::Decode(_)))));
        assert_eq!(s.client.census().status_reads, 0);
    }
}
