//! `\xff\xff/status/json` (`fdbclient/StatusClient.actor.cpp`).
//!
//! As libfdb_c does: every coordinator is asked who leads the cluster (`GetLeaderRequest`)
//! and for its protocol version (`ProtocolInfoRequest`); the leader info names the cluster
//! controller's `ClusterInterface`, whose `databaseStatus` stream answers a `StatusRequest`
//! with the cluster's status document. The value read is `{"client": ..., "cluster": ...}`:
//! the client's own view (coordinators reachable, quorum, database available) and the
//! cluster controller's document as it came.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt::Write;
use core::time::Duration;

use crate::event::{ClientError, Completion, Event, Reply};
use crate::framing::ProtocolVersion;
use crate::ids::RequestId;
use crate::messages::coordination::{
    ClusterControllerClientInterface, GetLeaderRequest, ProtocolInfoReply, ProtocolInfoRequest,
    StatusReply, StatusRequest, StatusRequestV7_3,
};
use crate::messages::{
    decode_any, decode_reply, AnyMessage, EnsureTable, ErrorOr, NetworkAddress, ReplyPromise,
};
use crate::monitor::ClusterMonitor;
use crate::net::Io;
use crate::route::{Route, StatusPart};
use crate::time::Instant;
use crate::uid::{well_known, Uid};

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
            json_string(&mut s, &p.name);
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
            json_string(&mut s, name);
            s.push_str(",\"description\":");
            json_string(&mut s, desc);
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

fn json_string(out: &mut String, v: &str) {
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Every status read in flight.
#[derive(Debug, Default)]
pub(crate) struct StatusReads {
    reads: BTreeMap<RequestId, StatusOp>,
}

impl StatusReads {
    /// Starts a status read for request `req`; it asks the coordinators once the cluster is
    /// known ([`StatusReads::poll`]).
    pub(crate) fn start(&mut self, req: RequestId) {
        self.reads.insert(req, StatusOp::default());
    }

    /// How many reads are in flight.
    pub(crate) fn len(&self) -> usize {
        self.reads.len()
    }

    /// Gives up on `req` (no event will come for it); `false` if it is not a status read.
    pub(crate) fn cancel(&mut self, req: RequestId) -> bool {
        self.reads.remove(&req).is_some()
    }

    /// The earliest deadline of a status read.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.reads.values().filter_map(|st| st.deadline).min()
    }

    /// Sends the probes of reads not started yet, and finishes the reads whose deadline
    /// passed. `monitor` knows the coordinators (and the cluster, once started).
    pub(crate) fn poll(&mut self, io: &mut Io<'_>, monitor: &ClusterMonitor) {
        let now = io.now;
        let ids: Vec<RequestId> = self.reads.keys().copied().collect();
        for req in ids {
            let Some(st) = self.reads.get_mut(&req) else {
                continue;
            };
            if !st.started && monitor.info().is_some() {
                st.started = true;
                st.deadline = Some(now + STATUS_TIMEOUT);
                let targets = monitor.coordinator_targets();
                let key = Bytes::from(monitor.cluster().cluster_key());
                st.probes = targets
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
                    let token = io.token();
                    let msg = GetLeaderRequest {
                        key: key.clone(),
                        known_leader: Uid::default(),
                        reply: ReplyPromise { token },
                    };
                    let route = Route::Status {
                        op: req,
                        part: StatusPart::Leader(i),
                    };
                    io.send(
                        &addr,
                        well_known::CLIENT_LEADER_REG_GET_LEADER,
                        &msg,
                        token,
                        route,
                    );
                    let token = io.token();
                    let msg = ProtocolInfoRequest {
                        reply: ReplyPromise { token },
                    };
                    let route = Route::Status {
                        op: req,
                        part: StatusPart::Protocol(i),
                    };
                    io.send(&addr, well_known::PROTOCOL_INFO, &msg, token, route);
                }
            }
            self.maybe_finish(io, req);
        }
    }

    fn maybe_finish(&mut self, io: &mut Io<'_>, req: RequestId) {
        let Some(st) = self.reads.get(&req) else {
            return;
        };
        if st.started && (st.complete() || st.deadline.is_some_and(|d| io.now >= d)) {
            let doc = st.document();
            self.reads.remove(&req);
            io.events.push_back(Event::Complete(Completion::new(
                req,
                Ok(Reply::Value(Some(doc))),
            )));
        }
    }

    /// A coordinator or the cluster controller answered part `part` of read `req`.
    pub(crate) fn on_reply(
        &mut self,
        io: &mut Io<'_>,
        req: RequestId,
        part: StatusPart,
        message: &Bytes,
    ) {
        let mut send_status = None;
        {
            let Some(st) = self.reads.get_mut(&req) else {
                return;
            };
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
                            if let Ok((_, cc)) =
                                ClusterControllerClientInterface::from_serialized_info(
                                    &info.serialized_info,
                                )
                            {
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
        }
        if let Some(ep) = send_status {
            let token = io.token();
            let route = Route::Status {
                op: req,
                part: StatusPart::Status,
            };
            let reply = ReplyPromise { token };
            if io.net.protocol().status_request_has_field() {
                let msg = StatusRequest {
                    reply,
                    status_field: Bytes::new(),
                };
                io.send(ep.address(), ep.token, &msg, token, route);
            } else {
                let msg = StatusRequestV7_3 { reply };
                io.send(ep.address(), ep.token, &msg, token, route);
            }
        }
        self.maybe_finish(io, req);
    }

    /// Part `part` of read `req` will get no answer.
    pub(crate) fn on_lost(&mut self, io: &mut Io<'_>, req: RequestId, part: StatusPart) {
        {
            let Some(st) = self.reads.get_mut(&req) else {
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
        }
        self.maybe_finish(io, req);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
