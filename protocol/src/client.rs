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
//!    the file again and hands a changed one to [`Client::set_cluster`].
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
//! status reads. Replies come back from the network with the route their request was sent
//! with, and the client hands each to the part it names.
//!
//! New proxies in `ClientDBInfo` re-send read versions and location lookups in flight, and
//! turn commits in flight into `commit_unknown_result`, as NativeAPI's `onProxiesChanged` does.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use bytes::Bytes;

use crate::cluster_file::ClusterFile;
use crate::messages::coordination::{ClientDBInfo, CommitProxyInterface};
use crate::messages::NetworkAddress;
use crate::monitor::ClusterMonitor;
use crate::net::{Delivery, Io, Network};
use crate::route::{Loss, Route};
use crate::serializer::Message;
use crate::time::{Instant, Rng};
use crate::uid::Uid;

pub use crate::event::{ClientError, Event, Reply, Transmit};
pub(crate) use crate::grv::GrvWaiter;
pub use crate::grv::{Priority, MAX_GRV_BATCH};
pub use crate::ids::{ConnectionId, RequestId};
pub use crate::monitor::{
    COORDINATOR_RECONNECTION_DELAY, MAX_COMMIT_PROXY_CONNECTIONS, MAX_GRV_PROXY_CONNECTIONS,
};
pub use crate::net::{
    CONNECT_TIMEOUT, INITIAL_RECONNECTION_TIME, MAX_RECONNECTION_TIME, RECONNECTION_RESET_TIME,
    RECONNECTION_TIME_GROWTH_RATE,
};

/// Settings of a [`Client`].
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The cluster to connect to.
    pub cluster: ClusterFile,
    /// Seeds all randomness.
    pub seed: u64,
    /// Sent to coordinators for their client statistics.
    pub trace_log_group: Bytes,
    /// The client version announced to the cluster.
    pub client_version: Bytes,
}

impl ClientConfig {
    /// Settings for `cluster` with libfdb_c 7.3.77's defaults.
    pub fn new(cluster: ClusterFile, seed: u64) -> Self {
        ClientConfig {
            cluster,
            seed,
            trace_log_group: Bytes::from_static(b"default"),
            client_version: Bytes::from_static(b"7.3.77"),
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
    grv: crate::grv::GrvBatcher,
    pub(crate) engine: crate::transaction::Engine,
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
        );
        let mut c = Client {
            rng,
            now,
            next_req: 1,
            events: VecDeque::new(),
            net: Network::default(),
            monitor,
            grv: crate::grv::GrvBatcher::default(),
            engine: crate::transaction::Engine::default(),
        };
        c.drive(now);
        c
    }

    /// Replaces the coordinator list with these addresses, in this order (the connection
    /// string itself stays; see [`Client::set_cluster`] to change it).
    pub fn set_coordinators(&mut self, now: Instant, coordinators: Vec<NetworkAddress>) {
        self.now = now;
        let mut io = Io {
            now,
            rng: &mut self.rng,
            net: &mut self.net,
            events: &mut self.events,
        };
        self.monitor.set_coordinators(&mut io, coordinators);
        self.drive(now);
    }

    /// Switches to another connection string (a re-read cluster file, say): the coordinator
    /// request in flight is abandoned and the new coordinators are asked at once.
    pub fn set_cluster(&mut self, now: Instant, cluster: ClusterFile) {
        self.now = now;
        let mut io = Io {
            now,
            rng: &mut self.rng,
            net: &mut self.net,
            events: &mut self.events,
        };
        self.monitor.set_cluster(&mut io, cluster);
        self.drive(now);
    }

    /// The connection string in use (changes when a coordinator forwards us).
    pub fn cluster(&self) -> &ClusterFile {
        self.monitor.cluster()
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
        let mut io = Io {
            now,
            rng: &mut self.rng,
            net: &mut self.net,
            events: &mut self.events,
        };
        self.monitor.handle_resolved(&mut io, host, port, addrs);
        self.drive(now);
    }

    /// The current cluster information, once known.
    pub fn cluster_info(&self) -> Option<&ClientDBInfo> {
        self.monitor.info()
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
            self.engine.next_timer(),
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
        self.fire_timers(now);
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

    /// Asks for a read version. The answer comes as [`Event::Complete`] with
    /// [`Reply::Version`].
    pub fn get_read_version(&mut self, now: Instant, priority: Priority) -> RequestId {
        self.now = now;
        let id = self.new_request_id();
        self.queue_grv(priority.flags(), GrvWaiter::Request(id));
        self.drive(now);
        id
    }

    pub(crate) fn new_request_id(&mut self) -> RequestId {
        let id = RequestId(self.next_req);
        self.next_req += 1;
        id
    }

    pub(crate) fn queue_grv(&mut self, flags: u32, waiter: GrvWaiter) {
        self.grv.queue(flags, waiter);
    }

    pub(crate) fn finish(&mut self, req: RequestId, result: Result<Reply, ClientError>) {
        self.events.push_back(Event::Complete { req, result });
    }

    /// Sends `msg` to endpoint `dest` at `addr`, its reply (on token `reply`) taking `route`.
    pub(crate) fn send<M: Message>(
        &mut self,
        now: Instant,
        addr: &NetworkAddress,
        dest: Uid,
        msg: &M,
        reply: Uid,
        route: Route,
    ) {
        self.net.send(
            now,
            &mut self.rng,
            &mut self.events,
            addr,
            dest,
            msg,
            reply,
            route,
        );
    }

    /// A commit proxy to send stream `stream` to (see `CommitProxyInterface`), skipping
    /// proxies whose endpoint is gone; `None` while there is none (wait for the cluster).
    pub(crate) fn pick_commit_proxy(&mut self, stream: u32) -> Option<CommitProxyInterface> {
        let proxies = &self.monitor.info()?.commit_proxies;
        let endpoints: Vec<(NetworkAddress, Uid)> = proxies
            .iter()
            .map(|p| {
                (
                    p.commit.endpoint.addresses.address.clone(),
                    p.stream(stream),
                )
            })
            .collect();
        let i = self.net.failures().pick(&endpoints, &mut self.rng)?;
        Some(self.monitor.info()?.commit_proxies[i].clone())
    }

    /// A GRV proxy's read-version endpoint (see [`crate::grv::grv_endpoint`]).
    pub(crate) fn grv_endpoint(&mut self) -> Option<(NetworkAddress, Uid)> {
        let Client {
            rng,
            now,
            net,
            events,
            monitor,
            ..
        } = self;
        let info = monitor.info()?;
        let mut io = Io {
            now: *now,
            rng,
            net,
            events,
        };
        crate::grv::grv_endpoint(&mut io, info)
    }

    /// Every coordinator: how the cluster file names it, and its address if known.
    pub(crate) fn coordinator_targets(
        &self,
    ) -> Vec<(alloc::string::String, Option<NetworkAddress>)> {
        self.monitor.coordinator_targets()
    }

    /// Hands every reply and loss the network has to the part its route names.
    fn deliver(&mut self) {
        while let Some(d) = self.net.poll_delivery() {
            match d {
                Delivery::Reply(route, message) => self.complete(route, &message),
                Delivery::Lost(route, why) => self.lose(route, why),
            }
        }
    }

    fn complete(&mut self, route: Route, message: &Bytes) {
        match route {
            Route::OpenDatabase => {
                let mut io = Io {
                    now: self.now,
                    rng: &mut self.rng,
                    net: &mut self.net,
                    events: &mut self.events,
                };
                if let Some(update) = self.monitor.on_reply(&mut io, message) {
                    if update.proxies_changed {
                        // The location cache stays: libfdb_c keeps it across proxy changes
                        // and relies on `wrong_shard_server` / failed endpoints to correct it.
                        self.fail_over_from_old_proxies();
                    }
                    self.wake_cluster_waiters();
                }
            }
            Route::Grv(batch) => {
                let Some(a) = self.grv.on_reply(batch, message) else {
                    return;
                };
                for w in a.waiters {
                    match w {
                        GrvWaiter::Request(req) => {
                            self.finish(req, a.result.clone().map(Reply::Version))
                        }
                        GrvWaiter::Tx(tx) => {
                            self.on_tx_read_version(tx, a.result.clone(), a.locked)
                        }
                    }
                }
            }
            Route::CommittedVersion(op) => {
                let r = match crate::messages::decode_reply::<
                    crate::messages::grv::GetReadVersionReply,
                >(message)
                {
                    Ok(crate::messages::ErrorOr::Ok(r)) => Ok(r.version),
                    Ok(crate::messages::ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
                    Err(e) => Err(ClientError::Decode(e)),
                };
                self.on_watch_committed(op, r)
            }
            Route::Locations { key, reverse } => self.on_locations(key, reverse, message),
            Route::Storage(op) => self.on_storage_reply(op, message),
            Route::Commit(op) => self.on_commit_reply(op, message),
            Route::Status { op, part } => self.on_status_reply(op, part, message),
            Route::Metrics { op, part, epoch } => self.on_metrics_reply(op, part, epoch, message),
        }
    }

    /// A request will get no reply: retry it, fail it over or fail it, as libfdb_c does.
    fn lose(&mut self, route: Route, why: Loss) {
        match route {
            Route::OpenDatabase => {
                let mut io = Io {
                    now: self.now,
                    rng: &mut self.rng,
                    net: &mut self.net,
                    events: &mut self.events,
                };
                self.monitor.on_lost(&mut io);
            }
            Route::Grv(batch) => {
                tracing::debug!(?why, "read version lost");
                self.grv.on_lost(batch);
            }
            Route::CommittedVersion(op) => self.on_watch_confirm_lost(op),
            Route::Locations { key, reverse } => {
                tracing::debug!(?why, "re-sending key location lookup");
                self.engine.locating.remove(&(key, reverse));
                // Whoever waited for it asks again (another proxy, or the same one once it
                // is reachable).
                self.wake_cluster_waiters();
            }
            Route::Storage(op) => {
                tracing::debug!(?why, op = op.0, "storage request lost, failing over");
                self.on_storage_lost(op)
            }
            Route::Commit(op) => {
                // Even an endpoint-not-found commit surfaces as `commit_unknown_result`:
                // `basicLoadBalance` with `AtMostOnce` turns it into
                // `request_maybe_delivered`, which `tryCommit` reports that way.
                tracing::info!(?why, op = op.0, "commit outcome unknown");
                self.on_commit_lost(op)
            }
            Route::Status { op, part } => self.on_status_lost(op, part),
            Route::Metrics { op, part, epoch } => self.on_metrics_lost(op, part, epoch),
        }
    }

    /// New proxies: what was sent to the old ones is re-sent (read versions, locations) or
    /// may have been committed (`tryCommit` throws `request_maybe_delivered` on
    /// `onProxiesChanged`).
    fn fail_over_from_old_proxies(&mut self) {
        let stale = self.net.forget_where(|r| {
            matches!(
                r,
                Route::Grv(_) | Route::Locations { .. } | Route::Commit(_)
            )
        });
        for route in stale {
            self.lose(route, Loss::ProxiesChanged);
        }
    }

    /// Sends whatever can be sent now.
    pub(crate) fn drive(&mut self, now: Instant) {
        let Client {
            rng,
            net,
            events,
            monitor,
            ..
        } = self;
        let mut io = Io {
            now,
            rng,
            net,
            events,
        };
        monitor.poll(&mut io);
        // Operations first: they may queue read versions to send right below.
        if self.monitor.info().is_some() {
            self.run_ready_ops();
        }
        let Client {
            rng,
            net,
            events,
            monitor,
            grv,
            ..
        } = self;
        let mut io = Io {
            now,
            rng,
            net,
            events,
        };
        grv.flush(&mut io, monitor.info());
    }
}
