//! The cluster monitor: which coordinators to ask, the `ClientDBInfo` long poll, forwards to a
//! new connection string, and the proxies the client talks to (`fdbclient/MonitorLeader.actor.cpp`).
//!
//! It shuffles the coordinators and asks one for `ClientDBInfo` with an
//! `OpenDatabaseCoordRequest`; once answered it asks again with the info's id, which the
//! coordinator holds until the proxies change. When a coordinator fails it moves to the next,
//! pausing [`COORDINATOR_RECONNECTION_DELAY`] after a full round. A coordinator given by
//! host name is resolved (by the driver) before each request that has no address for it, and
//! its address is forgotten when a request to it fails on the connection, as libfdb_c's
//! `tryGetReplyFromHostname` drops its DNS cache entry. A reply with `forward` moves the
//! monitor to the new connection string; once a coordinator of the new string answers, it asks
//! the driver to persist it ([`Event::ClusterFileChanged`]), as `monitorProxiesOneGeneration`
//! does.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::cluster_file::{ClusterFile, Coordinator};
use crate::event::Event;
use crate::messages::coordination::{
    ClientDBInfo, ClientVersionRef, CommitProxyInterface, GrvProxyInterface, Hostname,
    OpenDatabaseCoordRequest,
};
use crate::messages::{decode_reply, ErrorOr, IpAddress, NetworkAddress, ReplyPromise};
use crate::net::Io;
use crate::route::Route;
use crate::time::{Instant, Rng};
use crate::uid::{well_known, Uid};
use crate::version::Protocol;

pub use crate::knobs::COORDINATOR_RECONNECTION_DELAY;
/// `MAX_GRV_PROXY_CONNECTIONS`: a client talks to at most this many GRV proxies.
pub const MAX_GRV_PROXY_CONNECTIONS: usize = 3;
/// `MAX_COMMIT_PROXY_CONNECTIONS`: a client talks to at most this many commit proxies.
pub const MAX_COMMIT_PROXY_CONNECTIONS: usize = 5;

/// One coordinator of the connection string.
#[derive(Clone, Debug)]
enum CoordinatorSlot {
    Address(NetworkAddress),
    /// A host name, and the address it last resolved to (until a request fails on it).
    Hostname {
        host: String,
        port: u16,
        tls: bool,
        resolved: Option<NetworkAddress>,
    },
}

impl CoordinatorSlot {
    fn describe(&self) -> String {
        match self {
            CoordinatorSlot::Address(a) => alloc::format!("{a}"),
            CoordinatorSlot::Hostname { host, port, .. } => alloc::format!("{host}:{port}"),
        }
    }
}

pub(crate) fn wire_address(a: &crate::cluster_file::NetworkAddress) -> NetworkAddress {
    NetworkAddress {
        ip: IpAddress::from(a.ip),
        port: a.port,
        flags: if a.tls { NetworkAddress::FLAG_TLS } else { 0 },
        from_hostname: false,
    }
}

/// What the coordinators are told about the connection string: its IP coordinators and its
/// host names, in connection-string order (`req.coordinators = cs.coords`,
/// `req.hostnames = cs.hostnames`).
fn wire_coordinators(cluster: &ClusterFile) -> (Vec<NetworkAddress>, Vec<Hostname>) {
    let mut addrs = Vec::new();
    let mut hosts = Vec::new();
    for c in &cluster.coordinators {
        match c {
            Coordinator::Address(a) => addrs.push(wire_address(a)),
            Coordinator::Hostname { host, port, tls } => hosts.push(Hostname {
                host: Bytes::from(host.clone().into_bytes()),
                service: Bytes::from(alloc::format!("{port}").into_bytes()),
                is_tls: *tls,
            }),
        }
    }
    (addrs, hosts)
}

/// The coordinators in the order `monitorProxiesOneGeneration` tries them: host names, then
/// addresses, shuffled so clients spread over them.
fn coordinator_slots(cluster: &ClusterFile, rng: &mut Rng) -> Vec<CoordinatorSlot> {
    let hosts = cluster.coordinators.iter().filter_map(|c| match c {
        Coordinator::Hostname { host, port, tls } => Some(CoordinatorSlot::Hostname {
            host: host.clone(),
            port: *port,
            tls: *tls,
            resolved: None,
        }),
        Coordinator::Address(_) => None,
    });
    let addrs = cluster.coordinators.iter().filter_map(|c| match c {
        Coordinator::Address(a) => Some(CoordinatorSlot::Address(wire_address(a))),
        Coordinator::Hostname { .. } => None,
    });
    let mut slots: Vec<CoordinatorSlot> = hosts.chain(addrs).collect();
    shuffle(rng, &mut slots);
    slots
}

fn shuffle<T>(rng: &mut Rng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i + 1);
        v.swap(i, j);
    }
}

/// What a new `ClientDBInfo` changed, for the rest of the client to follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InfoUpdate {
    /// The proxies are not those of the previous info: requests to the old ones are stale.
    pub(crate) proxies_changed: bool,
}

/// The cluster monitor's state.
#[derive(Debug)]
pub(crate) struct ClusterMonitor {
    cluster: ClusterFile,
    /// The client version announced to the cluster.
    client_version: Bytes,
    coordinators: Vec<CoordinatorSlot>,
    /// The `OpenDatabaseCoordRequest` sent on each (re)connect, kept between sends: only
    /// its reply token and known info id change per send, its supported version when the
    /// protocol changes, its connection string's parts when the connection string does.
    request: OpenDatabaseCoordRequest,
    /// The protocol `request`'s supported version was written for.
    request_protocol: Option<Protocol>,
    /// `request` encoded, to be sent again with its token and info id written in; `None`
    /// after the request changed otherwise (or if those could not be located).
    encoded: Option<EncodedRequest>,
    coordinator_index: usize,
    success_index: usize,
    /// Earliest time to ask a coordinator again (after a full failed round).
    open_db_at: Option<Instant>,
    open_db_outstanding: bool,
    /// The driver is resolving the current coordinator's host name.
    resolving: bool,
    /// While we follow a forward whose connection string no coordinator confirmed yet: the
    /// last one confirmed, which the cluster file still holds as far as this client knows
    /// (libfdb_c's connection record, as against its intermediate one).
    unconfirmed_from: Option<ClusterFile>,
    /// `shrinkProxyList`'s memory: the proxy ids last seen and the subset chosen from them.
    last_grv_ids: Vec<Uid>,
    last_grv: heapless::Vec<GrvProxyInterface, MAX_GRV_PROXY_CONNECTIONS>,
    last_commit_ids: Vec<Uid>,
    last_commit: heapless::Vec<CommitProxyInterface, MAX_COMMIT_PROXY_CONNECTIONS>,
    info: Option<ClientDBInfo>,
    /// `COORDINATOR_RECONNECTION_DELAY`: the pause after a round of coordinators failed.
    reconnection_delay: Duration,
}

impl ClusterMonitor {
    /// Starts monitoring `cluster`: the first coordinator request is due at once.
    pub(crate) fn new(
        cluster: ClusterFile,
        trace_log_group: Bytes,
        client_version: Bytes,
        now: Instant,
        rng: &mut Rng,
        reconnection_delay: Duration,
    ) -> ClusterMonitor {
        let coordinators = coordinator_slots(&cluster, rng);
        let (wire_coordinators, wire_hostnames) = wire_coordinators(&cluster);
        let request = OpenDatabaseCoordRequest {
            issues: Vec::new(),
            supported_versions: Vec::new(),
            // Sent to coordinators for their client statistics.
            trace_log_group,
            known_client_info_id: Uid::default(),
            cluster_key: Bytes::from(cluster.cluster_key()),
            coordinators: wire_coordinators,
            reply: ReplyPromise::default(),
            hostnames: wire_hostnames,
            internal: false,
        };
        ClusterMonitor {
            cluster,
            client_version,
            coordinators,
            request,
            request_protocol: None,
            encoded: None,
            coordinator_index: 0,
            success_index: 0,
            open_db_at: Some(now),
            open_db_outstanding: false,
            resolving: false,
            unconfirmed_from: None,
            last_grv_ids: Vec::new(),
            last_grv: heapless::Vec::new(),
            last_commit_ids: Vec::new(),
            last_commit: heapless::Vec::new(),
            info: None,
            reconnection_delay,
        }
    }

    /// The connection string in use (changes when a coordinator forwards us).
    pub(crate) fn cluster(&self) -> &ClusterFile {
        &self.cluster
    }

    /// The last connection string confirmed: the one the client started with or was given,
    /// or a forward's once its coordinators answered.
    pub(crate) fn confirmed_cluster(&self) -> &ClusterFile {
        self.unconfirmed_from.as_ref().unwrap_or(&self.cluster)
    }

    /// The current cluster information, once known.
    pub(crate) fn info(&self) -> Option<&ClientDBInfo> {
        self.info.as_ref()
    }

    /// Every coordinator's address when the connection string names it by address (`None`:
    /// by host name), in the order of [`ClusterMonitor::coordinator_targets`].
    pub(crate) fn coordinator_addresses(&self) -> Vec<Option<NetworkAddress>> {
        self.coordinators
            .iter()
            .map(|c| match c {
                CoordinatorSlot::Address(a) => Some(a.clone()),
                CoordinatorSlot::Hostname { .. } => None,
            })
            .collect()
    }

    /// Every coordinator: how the cluster file names it, and its address if known (a host
    /// name not resolved yet has none).
    pub(crate) fn coordinator_targets(&self) -> Vec<(String, Option<NetworkAddress>)> {
        self.coordinators
            .iter()
            .map(|c| match c {
                CoordinatorSlot::Address(a) => (c.describe(), Some(a.clone())),
                CoordinatorSlot::Hostname { resolved, .. } => (c.describe(), resolved.clone()),
            })
            .collect()
    }

    /// The coordinator asked for the cluster's information last (`DatabaseContext::
    /// coordinator`), as the cluster file names it.
    pub(crate) fn current_coordinator(&self) -> Option<String> {
        self.coordinators
            .get(self.coordinator_index)
            .map(CoordinatorSlot::describe)
    }

    /// When the next coordinator request is due (none while one is out or being resolved).
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        if self.open_db_outstanding || self.resolving {
            None
        } else {
            self.open_db_at
        }
    }

    /// Sends the coordinator request if it is due.
    pub(crate) fn poll(&mut self, io: &mut Io<'_>) {
        if !self.open_db_outstanding
            && !self.resolving
            && self.open_db_at.is_some_and(|t| io.now >= t)
            && !self.coordinators.is_empty()
        {
            self.open_db_at = None;
            self.send_open_database(io);
        }
    }

    /// Switches to another connection string: the coordinator request in flight is abandoned
    /// and the new coordinators are asked at once.
    pub(crate) fn set_cluster(&mut self, io: &mut Io<'_>, cluster: ClusterFile) {
        self.unconfirmed_from = None;
        self.switch_cluster(io, cluster);
    }

    fn switch_cluster(&mut self, io: &mut Io<'_>, cluster: ClusterFile) {
        tracing::info!(connection_string = %cluster, "switching coordinators");
        self.coordinators = coordinator_slots(&cluster, io.rng);
        let (addrs, hosts) = wire_coordinators(&cluster);
        self.request.coordinators = addrs;
        self.request.hostnames = hosts;
        self.request.cluster_key = Bytes::from(cluster.cluster_key());
        self.encoded = None;
        self.cluster = cluster;
        self.restart(io);
    }

    /// Forgets the coordinator request in flight and starts a new round at once.
    fn restart(&mut self, io: &mut Io<'_>) {
        io.net.forget_where(|r| *r == Route::OpenDatabase);
        self.open_db_outstanding = false;
        self.resolving = false;
        self.coordinator_index = 0;
        self.success_index = 0;
        self.open_db_at = Some(io.now);
    }

    /// The driver resolved `host:port` (asked by [`Event::Resolve`]); `addrs` is empty if the
    /// lookup failed. Like `Hostname::resolve`, one of the addresses is picked at random.
    pub(crate) fn handle_resolved(
        &mut self,
        io: &mut Io<'_>,
        host: &str,
        port: u16,
        addrs: &[core::net::IpAddr],
    ) {
        if !self.resolving {
            return;
        }
        let pick = if addrs.is_empty() {
            None
        } else {
            Some(addrs[io.rng.below(addrs.len())])
        };
        let Some(CoordinatorSlot::Hostname {
            host: h,
            port: p,
            tls,
            resolved,
        }) = self.coordinators.get_mut(self.coordinator_index)
        else {
            return;
        };
        if h != host || *p != port {
            return;
        }
        self.resolving = false;
        match pick {
            Some(ip) => {
                let addr = NetworkAddress {
                    ip: IpAddress::from(ip),
                    port,
                    flags: if *tls { NetworkAddress::FLAG_TLS } else { 0 },
                    from_hostname: true,
                };
                tracing::debug!(host, port, addr = %addr, "coordinator resolved");
                *resolved = Some(addr);
                self.open_db_at = Some(io.now);
            }
            None => {
                // `tryGetReplyFromHostname`: `lookup_failed`, the next coordinator.
                tracing::warn!(host, port, "coordinator host name did not resolve");
                self.next_coordinator(io);
            }
        }
    }

    /// A coordinator answered; `Some` when it brought new cluster information.
    pub(crate) fn on_reply(&mut self, io: &mut Io<'_>, message: &Bytes) -> Option<InfoUpdate> {
        self.open_db_outstanding = false;
        match decode_reply::<ClientDBInfo>(message) {
            Ok(ErrorOr::Ok(info)) => self.accept(io, info),
            Ok(ErrorOr::Err(e)) => {
                tracing::debug!(error = %e, "coordinator answered with an error");
                self.next_coordinator(io);
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "undecodable ClientDBInfo");
                self.next_coordinator(io);
                None
            }
        }
    }

    /// The coordinator request was cut off by a protocol change, not by the coordinator:
    /// ask the same one again at once, in the new protocol.
    pub(crate) fn resend_now(&mut self, io: &mut Io<'_>) {
        self.open_db_outstanding = false;
        self.open_db_at = Some(io.now);
    }

    /// The coordinator request got no answer: the next coordinator.
    pub(crate) fn on_lost(&mut self, io: &mut Io<'_>) {
        self.open_db_outstanding = false;
        // `tryGetReplyFromHostname` drops the DNS cache entry on a connection failure.
        if let Some(CoordinatorSlot::Hostname { resolved, .. }) =
            self.coordinators.get_mut(self.coordinator_index)
        {
            *resolved = None;
        }
        self.next_coordinator(io);
    }

    fn accept(&mut self, io: &mut Io<'_>, mut info: ClientDBInfo) -> Option<InfoUpdate> {
        if let Some(fwd) = info.forward.take() {
            self.follow_forward(io, fwd);
            return None;
        }
        self.success_index = self.coordinator_index;
        if self.unconfirmed_from.take().is_some() {
            // `monitorProxiesOneGeneration`: the first answer from the forwarded coordinators
            // makes the intermediate connection string the persisted one.
            io.events.push_back(Event::ClusterFileChanged {
                cluster: self.cluster.clone(),
            });
        }
        self.shrink_proxy_list(io.rng, &mut info);
        let proxies_changed = self.info.as_ref().is_some_and(|old| {
            old.commit_proxies != info.commit_proxies || old.grv_proxies != info.grv_proxies
        });
        if self.info.as_ref().map(|i| i.id) != Some(info.id) {
            tracing::info!(
                id = %info.id,
                grv_proxies = info.grv_proxies.len(),
                commit_proxies = info.commit_proxies.len(),
                proxies_changed,
                "cluster info"
            );
        }
        self.info = Some(info);
        // Long-poll for the next change right away.
        self.open_db_at = Some(io.now);
        Some(InfoUpdate { proxies_changed })
    }

    /// `shrinkProxyList`: with more proxies than the client may talk to, use a random subset,
    /// and keep using the same subset while the proxies stay the same.
    fn shrink_proxy_list(&mut self, rng: &mut Rng, info: &mut ClientDBInfo) {
        shrink(
            rng,
            &mut info.commit_proxies,
            |p| p.commit.endpoint.token,
            (&mut self.last_commit_ids, &mut self.last_commit),
        );
        shrink(
            rng,
            &mut info.grv_proxies,
            |p| p.get_consistent_read_version.endpoint.token,
            (&mut self.last_grv_ids, &mut self.last_grv),
        );
    }

    /// A coordinator says the cluster moved: switch to the new connection string and carry
    /// on bootstrapping there (`MonitorProxiesForwarding`).
    fn follow_forward(&mut self, io: &mut Io<'_>, fwd: Bytes) {
        match ClusterFile::parse_bytes(&fwd) {
            Ok(cluster) if !cluster.coordinators.is_empty() => {
                tracing::info!(
                    from = %self.cluster,
                    to = %cluster,
                    "coordinators forwarded the client"
                );
                // A forward from a forward: the file still holds the first one's origin.
                self.unconfirmed_from
                    .get_or_insert_with(|| self.cluster.clone());
                self.switch_cluster(io, cluster);
            }
            _ => {
                tracing::warn!("coordinator forwarded to an invalid connection string");
                self.next_coordinator(io);
            }
        }
    }

    fn next_coordinator(&mut self, io: &mut Io<'_>) {
        if self.coordinators.is_empty() {
            return;
        }
        self.coordinator_index = (self.coordinator_index + 1) % self.coordinators.len();
        let full_round = self.coordinator_index == self.success_index;
        tracing::debug!(
            coordinator = %self.coordinators[self.coordinator_index].describe(),
            full_round,
            "trying the next coordinator"
        );
        self.open_db_at = Some(if full_round {
            io.now + self.reconnection_delay
        } else {
            io.now
        });
        if full_round {
            io.events.push_back(Event::CoordinatorsUnreachable);
        }
    }

    fn send_open_database(&mut self, io: &mut Io<'_>) {
        let addr = match &self.coordinators[self.coordinator_index] {
            CoordinatorSlot::Address(a) => a.clone(),
            CoordinatorSlot::Hostname {
                resolved: Some(a), ..
            } => a.clone(),
            CoordinatorSlot::Hostname { host, port, .. } => {
                // `Hostname::resolve` happens outside the core.
                self.resolving = true;
                io.events.push_back(Event::Resolve {
                    host: host.clone(),
                    port: *port,
                });
                return;
            }
        };
        let token = io.token();
        let protocol = io.net.protocol();
        if self.request_protocol != Some(protocol) {
            self.request_protocol = Some(protocol);
            self.request.supported_versions = alloc::vec![ClientVersionRef {
                client_version: if self.client_version.is_empty() {
                    Bytes::from_static(protocol.release().as_bytes())
                } else {
                    self.client_version.clone()
                },
                source_version: Bytes::new(),
                // FDB prints it with `%llx`: no leading zero.
                protocol_version: Bytes::from(alloc::format!("{:x}", protocol.version().version())),
            }];
            self.encoded = None;
        }
        let known = self.info.as_ref().map(|i| i.id).unwrap_or_default();
        self.request.known_client_info_id = known;
        self.request.reply = ReplyPromise { token };
        self.open_db_outstanding = true;
        if self.encoded.is_none() {
            // Encoded with a marker for the known info id: while the id is all zeros (before
            // the first `ClientDBInfo`) its bytes occur many times and its place could not be
            // told, which cost a second encode once the id arrived.
            self.request.known_client_info_id = INFO_MARKER;
            let bytes = crate::serializer::encode(&self.request);
            self.request.known_client_info_id = known;
            self.encoded = EncodedRequest::new(token, INFO_MARKER, bytes);
        }
        let encoded = self.encoded.as_mut().and_then(|e| e.with(token, known));
        let full;
        let bytes = match encoded {
            Some(bytes) => {
                debug_assert_eq!(bytes, &crate::serializer::encode(&self.request)[..]);
                bytes
            }
            None => {
                full = crate::serializer::encode(&self.request);
                &full[..]
            }
        };
        io.send_encoded(
            &addr,
            well_known::CLIENT_LEADER_REG_OPEN_DATABASE,
            bytes,
            token,
            Route::OpenDatabase,
        );
    }
}

/// What [`EncodedRequest`] is first encoded with in place of the known info id (bytes unlikely
/// to occur elsewhere in the request; if they do, each send encodes the whole request).
const INFO_MARKER: Uid = Uid {
    first: 0x6d6f_6e69_746f_722d,
    second: 0x696e_666f_2d69_643f,
};

/// An `OpenDatabaseCoordRequest`, encoded, with the places of its two fields that change
/// between sends (each a [`Uid`], written as its 16 bytes): a reconnect writes them in
/// rather than encode the whole request again.
#[derive(Debug)]
struct EncodedRequest {
    bytes: Vec<u8>,
    token_at: usize,
    /// Where the known info id is, if it could be told apart, and the id encoded.
    info_at: Option<usize>,
    info: Uid,
}

impl EncodedRequest {
    /// `bytes`, the request encoded with reply token `token` and known info id `info`, with
    /// the places of those two fields: each is where its 16 bytes occur, if they occur once
    /// (the field holds them, so a single occurrence is the field). `None` if the token's
    /// place cannot be told.
    fn new(token: Uid, info: Uid, bytes: Vec<u8>) -> Option<EncodedRequest> {
        let once = |v: Uid| {
            let b = v.to_bytes();
            let mut at = bytes.windows(16).enumerate().filter(|(_, w)| *w == b);
            let first = at.next()?.0;
            at.next().is_none().then_some(first)
        };
        let token_at = once(token)?;
        let info_at = once(info);
        Some(EncodedRequest {
            token_at,
            info_at,
            info,
            bytes,
        })
    }

    /// The request with this reply token and known info id, if this encoding can say it.
    fn with(&mut self, token: Uid, known: Uid) -> Option<&[u8]> {
        match self.info_at {
            Some(at) => self.bytes[at..at + 16].copy_from_slice(&known.to_bytes()),
            None if known != self.info => return None,
            None => {}
        }
        self.info = known;
        self.bytes[self.token_at..self.token_at + 16].copy_from_slice(&token.to_bytes());
        Some(&self.bytes)
    }
}

/// One kind of proxies of `ClusterMonitor::shrink_proxy_list`: more than `MAX` become a
/// random subset of `MAX`, the one in `last` (chosen again when the proxies' tokens differ
/// from `last`'s ids). `last` holds at most `MAX` by its type.
fn shrink<P: Clone, const MAX: usize>(
    rng: &mut Rng,
    proxies: &mut Vec<P>,
    token: impl Fn(&P) -> Uid,
    (last_ids, last): (&mut Vec<Uid>, &mut heapless::Vec<P, MAX>),
) {
    if proxies.len() <= MAX {
        return;
    }
    let ids: Vec<Uid> = proxies.iter().map(token).collect();
    if ids != *last_ids {
        *last_ids = ids;
        let mut chosen = proxies.clone();
        shuffle(rng, &mut chosen);
        *last = chosen.into_iter().take(MAX).collect();
    }
    *proxies = last.to_vec();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reconnect's request, its token and known info id written into the bytes encoded
    /// with the marker, is byte for byte what a full encode makes: before the first
    /// `ClientDBInfo` (an all-zero id, whose bytes occur elsewhere too) and after.
    #[test]
    fn a_request_written_in_is_its_full_encode() {
        let cluster =
            ClusterFile::parse("desc:abc@10.0.0.1:4500,10.0.0.2:4500:tls,coord.example:4500")
                .unwrap();
        let (coordinators, hostnames) = wire_coordinators(&cluster);
        let first = Uid {
            first: 0x1111,
            second: 0x2222,
        };
        let mut req = OpenDatabaseCoordRequest {
            issues: Vec::new(),
            supported_versions: alloc::vec![ClientVersionRef {
                client_version: Bytes::from_static(b"7.3.77"),
                source_version: Bytes::new(),
                protocol_version: Bytes::from_static(b"fdb00b073000000"),
            }],
            trace_log_group: Bytes::from_static(b"group"),
            known_client_info_id: INFO_MARKER,
            cluster_key: Bytes::from(cluster.cluster_key()),
            coordinators,
            reply: ReplyPromise { token: first },
            hostnames,
            internal: false,
        };
        let bytes = crate::serializer::encode(&req);
        let mut encoded = EncodedRequest::new(first, INFO_MARKER, bytes).expect("both located");
        assert!(encoded.info_at.is_some());
        let sends = [
            (first, Uid::default()),
            (Uid::new(5, 6), Uid::default()),
            (Uid::new(7, 8), Uid::new(0xabcd, 0xef01)),
            (Uid::new(9, 10), Uid::new(0xabcd, 0xef01)),
            (Uid::new(11, 12), Uid::new(0x1234, 0x5678)),
        ];
        for (token, known) in sends {
            req.reply = ReplyPromise { token };
            req.known_client_info_id = known;
            let full = crate::serializer::encode(&req);
            assert_eq!(encoded.with(token, known), Some(&full[..]));
        }
    }
}
