//! The client state machine: cluster bootstrap, connections, read versions and the routing of
//! every request and reply, without IO. Transactions (`crate::transaction`) and the status
//! read (`crate::status`) are operations of this same [`Client`].
//!
//! # Driving it
//!
//! A driver owns the sockets and the clock and does exactly this, in a loop:
//!
//! 1. `poll_event()` until `None`. On [`Event::Connect`] open a TCP connection to `addr` and
//!    report [`Client::handle_connected`] or [`Client::handle_connect_failed`]; on
//!    [`Event::Close`] drop that socket (also one still connecting: the core gives a connect
//!    [`CONNECT_TIMEOUT`]). On [`Event::Resolve`] look the host name up (DNS, off the core)
//!    and report every address with [`Client::handle_resolved`] (none when the lookup
//!    failed). On [`Event::ClusterFileChanged`] a driver that read a cluster file writes
//!    [`ClusterFile::file_contents`] back to it; on [`Event::CoordinatorsUnreachable`] it reads
//!    the file again and hands it to [`Client::set_cluster`] if it differs from
//!    [`Client::confirmed_cluster`].
//!    [`Event::Complete`] finishes an application request (a transaction call, a read
//!    version, a status read); the rest is information.
//! 2. `poll_transmit()` until `None`, writing each [`Transmit`] to its connection's socket.
//! 3. Wait for readable sockets, application calls, or the deadline `poll_timeout()`.
//!    Feed socket bytes with [`Client::handle_input`] (a closed socket: `handle_closed`), call
//!    [`Client::handle_timeout`] once the deadline passes, and go back to 1.
//!
//! Time is whatever monotonic clock the driver likes, passed in as [`Instant`]; randomness
//! (reply tokens, coordinator order, jitter) comes from the seed in [`ClientConfig`]. The same
//! inputs therefore always give the same outputs.
//!
//! # The parts
//!
//! [`Client`] is a thin composition; each part owns its state: the network (`net`: peers,
//! backoff, failure monitor, reply routing), the cluster monitor (`monitor`: coordinators, the
//! `ClientDBInfo` long poll, forwards), the read-version batcher (`grv`), the transactions, and
//! the parts beside them (status reads, safety checks, the special-key modules filled from the
//! cluster, the global configuration view), each a `crate::part::Part` in the list in
//! `parts.rs`. Replies come back from the network with the route their request was sent with,
//! and the client hands each to the part it names.
//!
//! New proxies in `ClientDBInfo` re-send read versions and location lookups in flight, and
//! turn commits in flight into `commit_unknown_result`, as NativeAPI's `onProxiesChanged` does.

mod calls;
mod parts;
mod special_keys;

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use bytes::Bytes;

use crate::cluster_file::ClusterFile;
use crate::error::ErrorCode;
use crate::framing::ProtocolVersion;
use crate::global_config::TRANSACTION_TAG_SAMPLE_RATE;
use crate::grv::GrvBatcher;
use crate::knobs::Knobs;
use crate::messages::coordination::ClientDBInfo;
use crate::messages::grv::GetReadVersionReply;
use crate::messages::types::Version;
use crate::messages::{decode_reply, ErrorOr, NetworkAddress};
use crate::monitor::ClusterMonitor;
use crate::net::{Delivery, Io, Network};
use crate::part::PartCx;
use crate::route::{Loss, PartId, Route};
use crate::tag_throttle::{TagThrottles, READ_TAG_SAMPLE_RATE};
use crate::time::{Instant, Rng};
use crate::transaction::{Ctx, Given, Transactions};
use crate::version::Protocol;

pub(crate) use crate::event::Reply;
use crate::event::{Call, ClientError, Completion, Event, Outcome, Transmit};
pub(crate) use crate::grv::{GrvWaiter, Priority};
use crate::ids::{ConnectionId, RequestId};
use parts::Parts;
pub use special_keys::{route_key, route_range, system_key_module, SpecialModule};

/// The [`Io`] the parts act with, borrowed field by field from a [`Client`] so that the part
/// called (another field) can be borrowed beside it.
macro_rules! io {
    ($client:expr) => {
        Io {
            now: $client.now,
            rng: &mut $client.rng,
            net: &mut $client.net,
            events: &mut $client.events,
        }
    };
}

/// Settings of a [`Client`].
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The cluster to connect to.
    pub cluster: ClusterFile,
    /// Seeds all randomness.
    pub seed: u64,
    /// Sent to coordinators for their client statistics.
    pub trace_log_group: Bytes,
    /// The client version announced to the cluster; empty: the libfdb_c release of the
    /// protocol spoken ([`Protocol::release`]), as the multi-version client announces the
    /// library it uses.
    pub client_version: Bytes,
    /// The protocol spoken until the coordinators say otherwise (see [`crate::version`]).
    pub protocol: Protocol,
    /// The knobs the program set (libfdb_c's defaults unless it set any).
    pub knobs: Knobs,
}

impl ClientConfig {
    /// Settings for `cluster` with libfdb_c's defaults, speaking 7.3 until the cluster says
    /// otherwise.
    pub fn new(cluster: ClusterFile, seed: u64) -> Self {
        ClientConfig {
            cluster,
            seed,
            trace_log_group: Bytes::from_static(b"default"),
            client_version: Bytes::new(),
            protocol: Protocol::V7_3,
            knobs: Knobs::default(),
        }
    }
}

/// The client protocol core. See the module docs for the driver contract.
pub struct Client {
    pub(crate) rng: Rng,
    pub(crate) now: Instant,
    pub(crate) next_req: u64,
    pub(crate) events: VecDeque<Event>,
    net: Network,
    monitor: ClusterMonitor,
    grv: GrvBatcher,
    /// The tag throttles learnt from read version replies (`DatabaseContext::throttledTags`).
    throttles: TagThrottles,
    txs: Transactions,
    /// The core's own requests in flight (see [`crate::transaction::Internal`]).
    internal: crate::transaction::Internal,
    /// The parts beside the transactions (`parts`).
    parts: Parts,
    /// The protocol of a cluster this client cannot speak, once a coordinator told it: every
    /// request fails with `incompatible_client` until the cluster speaks one it can.
    unsupported: Option<ProtocolVersion>,
}

impl Client {
    /// Creates the core and starts bootstrapping at once (the first event asks for a
    /// connection to a coordinator).
    pub fn new(cfg: ClientConfig, now: Instant) -> Self {
        let mut rng = Rng::new(cfg.seed);
        let monitor = ClusterMonitor::new(
            cfg.cluster,
            cfg.trace_log_group,
            cfg.client_version,
            now,
            &mut rng,
            cfg.knobs.coordinator_reconnection_delay,
        );
        let mut c = Client {
            rng,
            now,
            next_req: 1,
            events: VecDeque::new(),
            net: Network::new(cfg.protocol, &cfg.knobs),
            monitor,
            grv: GrvBatcher::new(&cfg.knobs),
            throttles: TagThrottles::default(),
            txs: Transactions::new(cfg.knobs),
            internal: Default::default(),
            parts: Parts::default(),
            unsupported: None,
        };
        c.drive(now);
        c
    }

    /// Switches to another connection string (a re-read cluster file, say): the coordinator
    /// request in flight is abandoned and the new coordinators are asked at once. A
    /// connection string of another cluster (another `description:id`) also forgets the read
    /// versions seen, under which reads at a set read version are refused.
    pub fn set_cluster(&mut self, now: Instant, cluster: ClusterFile) {
        self.now = now;
        if cluster.cluster_key() != self.monitor.cluster().cluster_key() {
            self.grv.forget_floor();
        }
        self.monitor.set_cluster(&mut io!(self), cluster);
        self.drive(now);
    }

    /// The connection string in use (changes when a coordinator forwards us).
    pub fn cluster(&self) -> &ClusterFile {
        self.monitor.cluster()
    }

    /// The last connection string confirmed: the one the client started with or was given
    /// ([`Client::set_cluster`]), or a forward's once one of its coordinators answered (the
    /// one [`Event::ClusterFileChanged`] carried). While a forward waits for that answer it
    /// differs from [`Client::cluster`]. A driver compares a re-read cluster file with this,
    /// not with the string in use: the file holds the old string until the forward is
    /// confirmed, and is not a change made by someone else (libfdb_c's intermediate record is
    /// never out of date).
    pub fn confirmed_cluster(&self) -> &ClusterFile {
        self.monitor.confirmed_cluster()
    }

    /// The driver resolved `host:port` (asked by [`Event::Resolve`]); `addrs` is empty if the
    /// lookup failed. Like `Hostname::resolve`, one of the addresses is picked at random.
    pub fn handle_resolved(
        &mut self,
        now: Instant,
        host: &str,
        port: u16,
        addrs: &[core::net::IpAddr],
    ) {
        self.now = now;
        self.monitor
            .handle_resolved(&mut io!(self), host, port, addrs);
        self.drive(now);
    }

    /// The protocol the client speaks now (see [`crate::version`]).
    pub fn protocol(&self) -> Protocol {
        self.net.protocol()
    }

    /// The current cluster information, once known.
    pub fn cluster_info(&self) -> Option<&ClientDBInfo> {
        self.monitor.info()
    }

    /// libfdb_c's client status at `now` (see [`crate::client_status`]).
    pub fn client_status(&self, now: Instant) -> crate::client_status::ClientStatus {
        crate::client_status::build(
            now,
            &self.monitor,
            &self.net,
            self.txs.known_storage_servers(),
        )
    }

    /// The next event for the driver or application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Bytes to write, for connections the driver has reported connected.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.net.poll_transmit()
    }

    /// The earliest time at which [`Client::handle_timeout`] must run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.net.poll_timeout(),
            self.monitor.poll_timeout(),
            self.txs.next_timer(),
            self.parts.poll_timeout(),
            self.grv.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Lets time pass.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        self.net
            .handle_timeout(now, &mut self.rng, &mut self.events);
        self.deliver();
        self.with_txs(|txs, cx| txs.fire_timers(cx));
        self.grv.on_timeout(now);
        self.drive(now);
    }

    /// The driver connected `conn`.
    pub fn handle_connected(&mut self, conn: ConnectionId, now: Instant) {
        self.now = now;
        self.net.handle_connected(conn);
    }

    /// The driver could not connect `conn`.
    pub fn handle_connect_failed(&mut self, conn: ConnectionId, now: Instant) {
        self.handle_closed(conn, now);
    }

    /// The driver saw `conn` close.
    pub fn handle_closed(&mut self, conn: ConnectionId, now: Instant) {
        self.now = now;
        self.net.handle_closed(now, &mut self.events, conn);
        self.deliver();
        self.drive(now);
    }

    /// Bytes read from `conn`.
    pub fn handle_input(&mut self, conn: ConnectionId, now: Instant, data: &[u8]) {
        self.now = now;
        self.net.handle_input(now, &mut self.events, conn, data);
        self.deliver();
        self.drive(now);
    }

    /// Asks for a read version.
    pub fn get_read_version(&mut self, now: Instant, priority: Priority) -> Call<Version> {
        self.now = now;
        let id = self.new_request_id();
        self.grv.queue(priority.flags(), GrvWaiter::Request(id));
        self.drive(now);
        Call::new(id)
    }

    pub(crate) fn new_request_id(&mut self) -> RequestId {
        let id = RequestId(self.next_req);
        self.next_req += 1;
        id
    }

    /// Hands every reply and loss the network has to the part its route names.
    fn deliver(&mut self) {
        while let Some(d) = self.net.poll_delivery() {
            match d {
                Delivery::Reply(route, message) => self.complete(route, &message),
                Delivery::Lost(route, why) => self.lose(route, why),
                Delivery::Incompatible {
                    conn,
                    addr,
                    version,
                } => self.on_incompatible_peer(conn, addr, version),
                Delivery::Compatible { addr } => self.on_compatible_peer(&addr),
            }
        }
    }

    fn complete(&mut self, route: Route, message: &Bytes) {
        match route {
            Route::OpenDatabase => {
                if let Some(update) = self.monitor.on_reply(&mut io!(self), message) {
                    if update.proxies_changed {
                        // The location cache stays: libfdb_c keeps it across proxy changes
                        // and relies on `wrong_shard_server` / failed endpoints to correct it.
                        self.fail_over_from_old_proxies();
                    }
                    self.with_txs(|txs, _| txs.wake_cluster_waiters());
                }
            }
            Route::Grv(batch) => {
                let Some(a) = self.grv.on_reply(self.now, batch, message) else {
                    return;
                };
                if a.result.is_ok() {
                    let now = self.now;
                    self.throttles.learn(now, a.priority, &a.tags, &a.throttles);
                }
                for w in a.waiters {
                    match w {
                        GrvWaiter::Request(req) => self.events.push_back(Event::Complete(
                            Completion::new(req, a.result.clone().map(Reply::Version)),
                        )),
                        GrvWaiter::Tx(tx) => {
                            let (r, mv) = (a.result.clone(), a.metadata_version.clone());
                            let throttles = &mut self.throttles;
                            self.txs
                                .on_tx_read_version(self.now, tx, r, a.locked, mv, throttles)
                        }
                    }
                }
            }
            Route::CommittedVersion(op) => {
                let r = match decode_reply::<GetReadVersionReply>(message) {
                    Ok(ErrorOr::Ok(r)) => {
                        self.grv.served(r.version);
                        Ok(r.version)
                    }
                    Ok(ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
                    Err(e) => Err(ClientError::Decode(e)),
                };
                self.with_txs(|txs, cx| txs.on_watch_committed(cx, op, r))
            }
            Route::Locations { key, reverse } => {
                self.with_txs(|txs, cx| txs.on_locations(cx, key, reverse, message))
            }
            Route::Storage(op) => self.with_txs(|txs, cx| txs.on_storage_reply(cx, op, message)),
            Route::ReplicaCheck { op, epoch, .. } => {
                self.with_txs(|txs, cx| txs.on_replica_check_reply(cx, op, epoch, message))
            }
            Route::Commit(op) => self.with_txs(|txs, cx| txs.on_commit_reply(cx, op, message)),
            Route::Metrics { op, part, epoch } => {
                self.with_txs(|txs, cx| txs.on_metrics_reply(cx, op, part, epoch, message))
            }
            Route::TenantId(h) => self.txs.on_tenant_id_reply(h, message),
            Route::Part(part, route) => {
                self.with_part(part, |parts, cx| parts.deliver(cx, route, Ok(message)))
            }
        }
    }

    /// A peer announced another protocol in its ConnectPacket. Only the coordinators decide
    /// which protocol the cluster speaks, as libfdb_c's multi-version client watches them
    /// alone (`getClusterProtocolImpl`). It also sends them a `ProtocolInfoRequest`, but only
    /// to open a connection: fdbserver answers nothing but pings to a peer of another
    /// protocol, so the version in the coordinator's ConnectPacket
    /// (`getCoordinatorProtocolFromConnectPacket`) is what it learns, and what this client
    /// takes. Any other such peer is hung up on and its requests retried.
    fn on_incompatible_peer(
        &mut self,
        conn: ConnectionId,
        addr: NetworkAddress,
        version: ProtocolVersion,
    ) {
        if self.is_coordinator(&addr) {
            self.on_cluster_protocol(conn, version);
        } else {
            self.net
                .close_incompatible(self.now, &mut self.events, conn);
        }
    }

    /// Whether `addr` is one of the coordinators (whose ConnectPacket tells the cluster's
    /// protocol).
    fn is_coordinator(&self, addr: &NetworkAddress) -> bool {
        self.monitor
            .coordinator_addresses()
            .iter()
            .flatten()
            .any(|c| c.ip == addr.ip && c.port == addr.port)
    }

    /// A peer speaks our protocol. From a coordinator after one announced an unsupported
    /// protocol, that means the cluster moved (back) to ours: requests are served again.
    fn on_compatible_peer(&mut self, addr: &NetworkAddress) {
        if self.unsupported.is_none() {
            return;
        }
        if self.is_coordinator(addr) {
            tracing::info!(protocol = %self.net.protocol(), "the cluster speaks this client's protocol again");
            self.unsupported = None;
        }
    }

    /// A coordinator speaks `version`: switch to it, or fail what waits if no supported
    /// protocol matches.
    fn on_cluster_protocol(&mut self, conn: ConnectionId, version: ProtocolVersion) {
        match Protocol::of(version) {
            Some(p) if p == self.net.protocol() => {
                // Not reached (an incompatible ConnectPacket is another protocol): hang up.
                self.net
                    .close_incompatible(self.now, &mut self.events, conn);
            }
            Some(p) => {
                tracing::info!(from = %self.net.protocol(), to = %p, "the cluster's protocol changed");
                self.unsupported = None;
                self.net.set_protocol(&mut self.events, p);
                self.events
                    .push_back(Event::ProtocolChanged { protocol: p });
            }
            None => {
                tracing::warn!(cluster = %version, "the cluster speaks a protocol this client does not");
                self.unsupported = Some(version);
                // Hang up, so the coordinators are asked again (the cluster may move on).
                self.net
                    .close_incompatible(self.now, &mut self.events, conn);
            }
        }
    }

    /// A request will get no reply: retry it, fail it over or fail it, as libfdb_c does.
    fn lose(&mut self, route: Route, why: Loss) {
        match route {
            Route::OpenDatabase if why == Loss::ProtocolChanged => {
                self.monitor.resend_now(&mut io!(self));
            }
            Route::OpenDatabase => {
                self.monitor.on_lost(&mut io!(self));
            }
            Route::Grv(batch) => {
                tracing::debug!(?why, "read version lost");
                self.grv.on_lost(batch);
            }
            Route::CommittedVersion(op) => self.txs.on_watch_confirm_lost(op),
            Route::Locations { key, reverse } => {
                tracing::debug!(?why, "re-sending key location lookup");
                // Whoever waited for it asks again (another proxy, or the same one once it
                // is reachable).
                self.txs.on_locations_lost(key, reverse);
            }
            Route::Storage(op) => {
                tracing::debug!(?why, op = op.0, "storage request lost, failing over");
                self.with_txs(|txs, cx| txs.on_storage_lost(cx, op))
            }
            Route::ReplicaCheck { op, epoch, replica } => {
                self.with_txs(|txs, cx| txs.on_replica_check_lost(cx, op, epoch, replica))
            }
            Route::Commit(op) if why == Loss::ProtocolChanged => {
                // The multi-version client fails a commit of the old protocol's client with
                // `cluster_version_changed` (maybe committed; `on_error` retries at once).
                tracing::info!(op = op.0, "commit cut off by a protocol change");
                self.with_txs(|txs, cx| {
                    txs.fail_request(cx, op, ErrorCode::CLUSTER_VERSION_CHANGED)
                })
            }
            Route::Commit(op) => {
                // Even an endpoint-not-found commit surfaces as `commit_unknown_result`:
                // `basicLoadBalance` with `AtMostOnce` turns it into
                // `request_maybe_delivered`, which `tryCommit` reports that way.
                tracing::info!(?why, op = op.0, "commit outcome unknown");
                self.with_txs(|txs, cx| txs.on_commit_lost(cx, op))
            }
            Route::Metrics { op, part, epoch } => {
                self.with_txs(|txs, cx| txs.on_metrics_lost(cx, op, part, epoch))
            }
            Route::TenantId(h) => {
                tracing::debug!(?why, "re-sending tenant id lookup");
                self.txs.on_tenant_id_lost(h)
            }
            Route::Part(part, route) => {
                self.with_part(part, |parts, cx| parts.deliver(cx, route, Err(why)))
            }
        }
    }

    /// Lends the transactions a [`Ctx`] to act with.
    fn with_txs<R>(&mut self, f: impl FnOnce(&mut Transactions, &mut Ctx<'_>) -> R) -> R {
        let Client {
            rng,
            now,
            next_req,
            events,
            net,
            monitor,
            grv,
            throttles,
            txs,
            internal,
            parts,
            ..
        } = self;
        let mut cx = Ctx {
            now: *now,
            rng,
            net,
            events,
            grv,
            throttles,
            info: monitor.info(),
            next_req,
            internal,
            read_tag_sample_rate: parts
                .global_config
                .get_double(TRANSACTION_TAG_SAMPLE_RATE, READ_TAG_SAMPLE_RATE),
        };
        let r = f(txs, &mut cx);
        txs.settle_internal(&mut cx);
        r
    }

    /// Lends part `part` a [`PartCx`], then hands the transactions the special-key reads it
    /// answered.
    fn with_part(&mut self, part: PartId, f: impl FnOnce(&mut Parts, &mut PartCx<'_>)) {
        let mut answers = Vec::new();
        f(
            &mut self.parts,
            &mut PartCx::new(io!(self), &self.monitor, part, &mut answers),
        );
        for a in answers {
            self.with_txs(|txs, cx| match a.result {
                Ok((rows, covered)) => {
                    let covered = core::slice::from_ref(&covered);
                    let given = Given {
                        rows: &rows,
                        covered,
                    };
                    txs.special_read_given(cx, a.req, a.tx, a.read, given)
                }
                Err(e) => cx.finish(a.req, Err(e)),
            });
        }
    }

    /// Fails what waits on a transaction that a use during its commit just finished (see
    /// `Transactions::check_not_committing`); the calls without a time (writes) run this too,
    /// at the last time the core saw.
    pub(crate) fn deliver_trips(&mut self) {
        if self.txs.has_trips() {
            self.with_txs(|txs, cx| txs.deliver_trips(cx));
        }
    }

    /// New proxies: what was sent to the old ones is re-sent (read versions, locations) or
    /// may have been committed (`tryCommit` throws `request_maybe_delivered` on
    /// `onProxiesChanged`).
    fn fail_over_from_old_proxies(&mut self) {
        let stale = self.net.forget_where(|r| {
            matches!(
                r,
                Route::Grv(_) | Route::Locations { .. } | Route::Commit(_) | Route::TenantId(_)
            ) || matches!(r, Route::Part(part, route) if Parts::asks_proxies(*part, route))
        });
        for route in stale {
            self.lose(route, Loss::ProxiesChanged);
        }
    }

    /// The cluster speaks a protocol this client does not: every request waiting fails with
    /// `incompatible_client`, as libfdb_c's multi-version client with
    /// `fail_incompatible_client` reports it, rather than wait forever.
    fn fail_unsupported(&mut self) {
        let err = ErrorCode::INCOMPATIBLE_CLIENT;
        for w in self.grv.take_queued() {
            match w {
                GrvWaiter::Request(req) => self.events.push_back(Event::Complete(Completion::new(
                    req,
                    Err(ClientError::Fdb(err)),
                ))),
                GrvWaiter::Tx(tx) => {
                    let throttles = &mut self.throttles;
                    self.txs.on_tx_read_version(
                        self.now,
                        tx,
                        Err(ClientError::Fdb(err)),
                        false,
                        None,
                        throttles,
                    )
                }
            }
        }
        self.with_txs(|txs, cx| txs.fail_all(cx, err));
    }

    /// Sends whatever can be sent now.
    fn drive(&mut self, now: Instant) {
        self.now = now;
        self.deliver_trips();
        self.monitor.poll(&mut io!(self));
        for &part in Parts::ALL {
            self.with_part(part, |parts, cx| parts.poll(cx));
        }
        if self.unsupported.is_some() {
            self.fail_unsupported();
        }
        // Operations first: they may queue read versions to send right below.
        if self.monitor.info().is_some() {
            self.with_txs(|txs, cx| txs.run_ready_ops(cx));
        }
        let open_transactions = self.txs.census().0;
        self.grv
            .flush(&mut io!(self), self.monitor.info(), open_transactions);
    }
}
