//! `\xff\xff/status/json` (`fdbclient/StatusClient.actor.cpp`).
//!
//! As libfdb_c does: every coordinator is asked who leads the cluster (`GetLeaderRequest`)
//! and for its protocol version (`ProtocolInfoRequest`); the leader info names the cluster
//! controller's `ClusterInterface`, whose `databaseStatus` stream answers a `StatusRequest`
//! with the cluster's status document. The value read is `{"client": ..., "cluster": ...}`:
//! the client's own view (coordinators reachable, quorum, database available) and the
//! cluster controller's document as it came.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt::Write;
use core::time::Duration;

use crate::event::{ClientError, Reply};
use crate::framing::ProtocolVersion;
use crate::ids::RequestId;
use crate::messages::coordination::{
    ClusterControllerClientInterface, ProtocolInfoReply, ProtocolInfoRequest, StatusReply,
    StatusRequest, StatusRequestV7_3,
};
use crate::messages::{decode_any, decode_reply, AnyMessage, EnsureTable, ErrorOr, NetworkAddress};
use crate::part::{requests_in, Leg, Part, PartCx, Requests};
use crate::route::Loss;
use crate::time::Instant;
use crate::uid::well_known;

/// The special key.
pub const STATUS_JSON_KEY: &[u8] = b"\xff\xff/status/json";
/// How long the status read waits for silent coordinators or cluster controller.
pub const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, Default)]
struct Probe {
    name: String,
    addr: Option<NetworkAddress>,
    /// `Some(true)` once it answered, `Some(false)` once it failed.
    reachable: Option<bool>,
    leader_answered: bool,
    protocol: Option<u64>,
    protocol_answered: bool,
}

/// The state of one status read.
#[derive(Clone, Debug, Default)]
struct StatusOp {
    started: bool,
    deadline: Option<Instant>,
    probes: Vec<Probe>,
    /// The status document once asked for / received.
    status_sent: bool,
    status: Option<Result<Bytes, ClientError>>,
}

impl StatusOp {
    fn complete(&self) -> bool {
        let probes = self
            .probes
            .iter()
            .all(|p| p.addr.is_none() || (p.leader_answered && p.protocol_answered));
        let leader_known = self.status_sent;
        let no_leader = self
            .probes
            .iter()
            .all(|p| p.addr.is_none() || p.leader_answered);
        probes && (self.status.is_some() || (!leader_known && no_leader))
    }

    /// The `{"client": ..., "cluster": ...}` document.
    fn document(&self) -> Bytes {
        let mut s = String::new();
        let reachable = self
            .probes
            .iter()
            .filter(|p| p.reachable == Some(true))
            .count();
        let quorum = reachable * 2 > self.probes.len();
        let available = matches!(self.status, Some(Ok(_)));
        s.push_str("{\"client\":{\"coordinators\":{\"coordinators\":[");
        for (i, p) in self.probes.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str("{\"address\":");
            crate::client_status::json_string(&mut s, &p.name);
            let _ = write!(s, ",\"reachable\":{}", p.reachable == Some(true));
            if let Some(v) = p.protocol {
                let _ = write!(s, ",\"protocol\":\"{:x}\"", ProtocolVersion(v).version());
            }
            s.push('}');
        }
        let _ = write!(
            s,
            "],\"quorum_reachable\":{quorum}}},\"database_status\":{{\"available\":{available},\"healthy\":{available}}},\"messages\":["
        );
        let mut messages = Vec::new();
        if !quorum {
            messages.push((
                "quorum_not_reachable",
                "Unable to reach a quorum of coordinators.",
            ));
        }
        match &self.status {
            Some(Ok(_)) => {}
            Some(Err(_)) | None if quorum => messages.push((
                "status_incomplete_cluster",
                "Could not retrieve cluster status from the cluster controller.",
            )),
            _ => {}
        }
        for (i, (name, desc)) in messages.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str("{\"name\":");
            crate::client_status::json_string(&mut s, name);
            s.push_str(",\"description\":");
            crate::client_status::json_string(&mut s, desc);
            s.push('}');
        }
        s.push_str("]},\"cluster\":");
        match &self.status {
            Some(Ok(doc)) if !doc.is_empty() => {
                s.push_str(&String::from_utf8_lossy(doc));
            }
            _ => s.push_str("{}"),
        }
        s.push('}');
        Bytes::from(s)
    }
}

/// Which question of a status read a reply answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StatusPart {
    /// The leader info asked of coordinator `usize`.
    Leader(usize),
    /// The protocol version asked of coordinator `usize`.
    Protocol(usize),
    /// The cluster controller's status document.
    Status,
}

impl Leg for StatusPart {
    fn to_leg(self) -> u32 {
        match self {
            StatusPart::Status => 0,
            StatusPart::Leader(i) => 2 * i as u32 + 1,
            StatusPart::Protocol(i) => 2 * i as u32 + 2,
        }
    }

    fn from_leg(leg: u32) -> Option<Self> {
        let i = (leg.saturating_sub(1) / 2) as usize;
        Some(match leg {
            0 => StatusPart::Status,
            _ if leg % 2 == 1 => StatusPart::Leader(i),
            _ => StatusPart::Protocol(i),
        })
    }
}

/// Every status read in flight.
#[derive(Debug, Default)]
pub(crate) struct StatusReads {
    reads: Requests<StatusOp>,
}

impl StatusReads {
    /// Starts a status read for request `req`; it asks the coordinators once the cluster is
    /// known ([`Part::poll`]).
    pub(crate) fn start(&mut self, req: RequestId) {
        self.reads.start(req, StatusOp::default());
    }
}

impl StatusOp {
    /// Decided: every probe and the document answered, or the deadline passed.
    fn outcome(&mut self, now: Instant) -> Option<Result<Reply, ClientError>> {
        let done = self.complete() || self.deadline.is_some_and(|d| now >= d);
        (self.started && done).then(|| Ok(Reply::Value(Some(self.document()))))
    }

    /// Asks each coordinator who leads and which protocol it speaks.
    fn probe(&mut self, cx: &mut PartCx<'_>, req: RequestId) {
        let monitor = cx.monitor;
        self.started = true;
        self.deadline = Some(cx.now() + STATUS_TIMEOUT);
        let targets = monitor.coordinator_targets();
        let key = Bytes::from(monitor.cluster().cluster_key());
        self.probes = targets
            .iter()
            .map(|(name, addr)| Probe {
                name: name.clone(),
                addr: addr.clone(),
                reachable: if addr.is_some() { None } else { Some(false) },
                ..Probe::default()
            })
            .collect();
        for (i, (_, addr)) in targets.into_iter().enumerate() {
            let Some(addr) = addr else { continue };
            cx.ask_leader(&addr, &key, req, StatusPart::Leader(i));
            let protocol = StatusPart::Protocol(i);
            let ask = |reply| ProtocolInfoRequest { reply };
            cx.ask(&addr, well_known::PROTOCOL_INFO, req, protocol, ask);
        }
    }
}

impl Part for StatusReads {
    type Leg = StatusPart;

    requests_in!(reads);

    /// The earliest deadline of a status read.
    fn poll_timeout(&self) -> Option<Instant> {
        self.reads.next_timer(|st| st.deadline)
    }

    /// Sends the probes of reads not started yet (once the cluster is known), and finishes
    /// the reads whose deadline passed.
    fn poll(&mut self, cx: &mut PartCx<'_>) {
        for req in self.reads.ids() {
            let Some(st) = self.reads.get_mut(req) else {
                continue;
            };
            if !st.started && cx.monitor.info().is_some() {
                st.probe(cx, req);
            }
            self.reads.settle(cx, req, StatusOp::outcome);
        }
    }

    /// A coordinator or the cluster controller answered part `part` of read `req`.
    fn on_reply(&mut self, cx: &mut PartCx<'_>, req: RequestId, part: StatusPart, message: &Bytes) {
        let Some(st) = self.reads.get_mut(req) else {
            return;
        };
        let mut send_status = None;
        match part {
            StatusPart::Leader(i) => {
                let Some(p) = st.probes.get_mut(i) else {
                    return;
                };
                p.leader_answered = true;
                let leader = match decode_any(message) {
                    Ok(AnyMessage::Leader(l)) => Some(l),
                    _ => None,
                };
                if leader.is_some() {
                    p.reachable = Some(true);
                }
                if let Some(ErrorOr::Ok(EnsureTable(Some(info)))) = leader {
                    if !info.forward && !st.status_sent {
                        if let Ok((_, cc)) = ClusterControllerClientInterface::from_serialized_info(
                            &info.serialized_info,
                        ) {
                            st.status_sent = true;
                            send_status = Some(cc.client_interface.database_status.endpoint);
                        }
                    }
                }
            }
            StatusPart::Protocol(i) => {
                let Some(p) = st.probes.get_mut(i) else {
                    return;
                };
                p.protocol_answered = true;
                if let Ok(ErrorOr::Ok(r)) = decode_reply::<ProtocolInfoReply>(message) {
                    p.protocol = Some(r.version);
                    p.reachable = Some(true);
                }
            }
            StatusPart::Status => {
                st.status = Some(match decode_reply::<StatusReply>(message) {
                    Ok(ErrorOr::Ok(r)) => Ok(r.status_str),
                    Ok(ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
                    Err(e) => Err(ClientError::Decode(e)),
                });
            }
        }
        if let Some(ep) = send_status {
            let (addr, part) = (ep.address(), StatusPart::Status);
            if cx.io.net.protocol().status_request_has_field() {
                let ask = |reply| StatusRequest {
                    reply,
                    status_field: Bytes::new(),
                };
                cx.ask(addr, ep.token, req, part, ask);
            } else {
                let ask = |reply| StatusRequestV7_3 { reply };
                cx.ask(addr, ep.token, req, part, ask);
            }
        }
        self.reads.settle(cx, req, StatusOp::outcome);
    }

    /// Part `part` of read `req` will get no answer.
    fn on_lost(&mut self, cx: &mut PartCx<'_>, req: RequestId, part: StatusPart, _why: Loss) {
        let Some(st) = self.reads.get_mut(req) else {
            return;
        };
        match part {
            StatusPart::Leader(i) | StatusPart::Protocol(i) => {
                if let Some(p) = st.probes.get_mut(i) {
                    p.leader_answered |= matches!(part, StatusPart::Leader(_));
                    p.protocol_answered |= matches!(part, StatusPart::Protocol(_));
                    if p.reachable != Some(true) {
                        p.reachable = Some(false);
                    }
                }
            }
            StatusPart::Status => {
                st.status = Some(Err(ClientError::Fdb(
                    crate::error::ErrorCode::CONNECTION_FAILED,
                )));
            }
        }
        self.reads.settle(cx, req, StatusOp::outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_comes_back_from_its_leg() {
        for p in [
            StatusPart::Status,
            StatusPart::Leader(0),
            StatusPart::Protocol(0),
            StatusPart::Leader(4),
            StatusPart::Protocol(4),
        ] {
            assert_eq!(StatusPart::from_leg(p.to_leg()), Some(p));
        }
    }

    #[test]
    fn document_shape() {
        let op = StatusOp {
            started: true,
            deadline: None,
            probes: alloc::vec![Probe {
                name: "127.0.0.1:4500".into(),
                addr: None,
                reachable: Some(true),
                leader_answered: true,
                protocol: Some(0x1FDB_00B0_7300_0000),
                protocol_answered: true,
            }],
            status_sent: true,
            status: Some(Ok(Bytes::from_static(b"{\"generation\":3}"))),
        };
        assert_eq!(
            op.document(),
            Bytes::from_static(
                b"{\"client\":{\"coordinators\":{\"coordinators\":[{\"address\":\"127.0.0.1:4500\",\"reachable\":true,\"protocol\":\"fdb00b073000000\"}],\"quorum_reachable\":true},\"database_status\":{\"available\":true,\"healthy\":true},\"messages\":[]},\"cluster\":{\"generation\":3}}"
            )
        );
    }
}
