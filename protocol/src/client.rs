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

use crate::atomic::MutationType;
use crate::census::Census;
use crate::cluster_file::ClusterFile;
use crate::error::ErrorCode;
use crate::grv::GrvBatcher;
use crate::messages::coordination::ClientDBInfo;
use crate::messages::grv::GetReadVersionReply;
use crate::messages::types::{KeySelector, KeyValue, Version};
use crate::messages::{decode_reply, ErrorOr, NetworkAddress};
use crate::monitor::ClusterMonitor;
use crate::net::{Delivery, Io, Network};
use crate::route::{Loss, Route};
use crate::status::StatusReads;
use crate::time::{Instant, Rng};
use crate::transaction::{
    ConflictRangeType, Ctx, DatabaseOption, RangeOptions, SpecialRead, SpecialWrite, TenantHandle,
    TransactionId, TransactionOption, Transactions,
};

pub(crate) use crate::event::Reply;
use crate::event::{
    Call, ClientError, Committed, Completion, Event, Outcome, RangeResult, Transmit,
};
pub(crate) use crate::grv::{GrvWaiter, Priority};
use crate::ids::{ConnectionId, RequestId};

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
    grv: GrvBatcher,
    txs: Transactions,
    status: StatusReads,
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
            grv: GrvBatcher::default(),
            txs: Transactions::default(),
            status: StatusReads::default(),
        };
        c.drive(now);
        c
    }

    /// Replaces the coordinator list with these addresses, in this order (the connection
    /// string itself stays; see [`Client::set_cluster`] to change it).
    pub fn set_coordinators(&mut self, now: Instant, coordinators: Vec<NetworkAddress>) {
        self.now = now;
        self.monitor.set_coordinators(&mut io!(self), coordinators);
        self.drive(now);
    }

    /// Switches to another connection string (a re-read cluster file, say): the coordinator
    /// request in flight is abandoned and the new coordinators are asked at once.
    pub fn set_cluster(&mut self, now: Instant, cluster: ClusterFile) {
        self.now = now;
        self.monitor.set_cluster(&mut io!(self), cluster);
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
        self.monitor
            .handle_resolved(&mut io!(self), host, port, addrs);
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
            self.txs.next_timer(),
            self.status.poll_timeout(),
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
                let Some(a) = self.grv.on_reply(batch, message) else {
                    return;
                };
                for w in a.waiters {
                    match w {
                        GrvWaiter::Request(req) => self.events.push_back(Event::Complete(
                            Completion::new(req, a.result.clone().map(Reply::Version)),
                        )),
                        GrvWaiter::Tx(tx) => {
                            self.txs.on_tx_read_version(tx, a.result.clone(), a.locked)
                        }
                    }
                }
            }
            Route::CommittedVersion(op) => {
                let r = match decode_reply::<GetReadVersionReply>(message) {
                    Ok(ErrorOr::Ok(r)) => Ok(r.version),
                    Ok(ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
                    Err(e) => Err(ClientError::Decode(e)),
                };
                self.with_txs(|txs, cx| txs.on_watch_committed(cx, op, r))
            }
            Route::Locations { key, reverse } => {
                self.with_txs(|txs, cx| txs.on_locations(cx, key, reverse, message))
            }
            Route::Storage(op) => self.with_txs(|txs, cx| txs.on_storage_reply(cx, op, message)),
            Route::Commit(op) => self.with_txs(|txs, cx| txs.on_commit_reply(cx, op, message)),
            Route::Metrics { op, part, epoch } => {
                self.with_txs(|txs, cx| txs.on_metrics_reply(cx, op, part, epoch, message))
            }
            Route::TenantId(h) => self.txs.on_tenant_id_reply(h, message),
            Route::Status { op, part } => self.status.on_reply(&mut io!(self), op, part, message),
        }
    }

    /// A request will get no reply: retry it, fail it over or fail it, as libfdb_c does.
    fn lose(&mut self, route: Route, why: Loss) {
        match route {
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
            Route::Status { op, part } => self.status.on_lost(&mut io!(self), op, part),
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
            txs,
            ..
        } = self;
        let mut cx = Ctx {
            now: *now,
            rng,
            net,
            events,
            grv,
            info: monitor.info(),
            next_req,
        };
        f(txs, &mut cx)
    }

    /// New proxies: what was sent to the old ones is re-sent (read versions, locations) or
    /// may have been committed (`tryCommit` throws `request_maybe_delivered` on
    /// `onProxiesChanged`).
    fn fail_over_from_old_proxies(&mut self) {
        let stale = self.net.forget_where(|r| {
            matches!(
                r,
                Route::Grv(_) | Route::Locations { .. } | Route::Commit(_) | Route::TenantId(_)
            )
        });
        for route in stale {
            self.lose(route, Loss::ProxiesChanged);
        }
    }

    /// Sends whatever can be sent now.
    fn drive(&mut self, now: Instant) {
        self.now = now;
        let mut io = io!(self);
        self.monitor.poll(&mut io);
        self.status.poll(&mut io, &self.monitor);
        // Operations first: they may queue read versions to send right below.
        if self.monitor.info().is_some() {
            self.with_txs(|txs, cx| txs.run_ready_ops(cx));
        }
        self.grv.flush(&mut io!(self), self.monitor.info());
    }
}

/// The transaction API: each call lends the transactions a `Ctx` and then sends whatever the
/// call made ready.
impl Client {
    /// Starts a transaction.
    pub fn create_transaction(&mut self, now: Instant) -> TransactionId {
        self.now = now;
        self.with_txs(|txs, cx| txs.create_transaction(cx))
    }

    /// A transaction the application created at `created` (earlier than now): a driver that
    /// hands the core its transactions lazily keeps the `timeout` option counting from the
    /// application's call, as libfdb_c does.
    pub fn create_transaction_at(&mut self, now: Instant, created: Instant) -> TransactionId {
        self.now = now;
        self.with_txs(|txs, cx| txs.create_transaction_at(cx, created))
    }

    /// Opens a tenant (`fdb_database_open_tenant`): its id is looked up at a commit proxy
    /// once, and every transaction created in it waits for that id. A name starting with
    /// `\xff` fails those transactions with `invalid_tenant_name`.
    pub fn open_tenant(&mut self, now: Instant, name: &[u8]) -> TenantHandle {
        self.now = now;
        self.with_txs(|txs, cx| txs.open_tenant(cx, name))
    }

    /// Forgets a tenant handle (its transactions must be gone).
    pub fn close_tenant(&mut self, tenant: TenantHandle) {
        self.txs.close_tenant(tenant);
    }

    /// The tenant's id, once the lookup finished (`None` before).
    pub fn tenant_id(&self, tenant: TenantHandle) -> Option<Result<i64, ErrorCode>> {
        self.txs.tenant_id(tenant)
    }

    /// A transaction in a tenant ([`Client::create_transaction_at`] otherwise): the keys it
    /// reads and writes are the tenant's.
    pub fn create_tenant_transaction_at(
        &mut self,
        now: Instant,
        created: Instant,
        tenant: TenantHandle,
    ) -> TransactionId {
        self.now = now;
        let tx = self.with_txs(|txs, cx| txs.create_transaction_at(cx, created));
        self.txs.bind_tenant(tx, tenant);
        tx
    }

    /// Database-wide defaults for new transactions (libfdb_c's `transaction_timeout`,
    /// `transaction_retry_limit`, ... database options): applied to every transaction when
    /// it is created and when it is reset.
    pub fn set_transaction_defaults(&mut self, defaults: Vec<TransactionOption>) {
        self.txs.set_transaction_defaults(defaults);
    }

    /// Sets a database option (`fdb_database_set_option`): a transaction default, or a limit
    /// of the client's caches. Refused options fail with `unsupported_operation`.
    pub fn set_database_option(&mut self, opt: DatabaseOption) -> Result<(), ClientError> {
        self.txs.set_database_option(opt)
    }

    /// Ends a transaction; its unfinished requests fail with `transaction_cancelled`.
    pub fn destroy_transaction(&mut self, now: Instant, tx: TransactionId) {
        self.now = now;
        self.with_txs(|txs, cx| txs.destroy_transaction(cx, tx));
    }

    /// `fdb_transaction_cancel`: unfinished requests and every later call fail with
    /// `transaction_cancelled` until the transaction is reset.
    pub fn cancel_transaction(&mut self, now: Instant, tx: TransactionId) {
        self.now = now;
        self.with_txs(|txs, cx| txs.cancel_transaction(cx, tx));
    }

    /// Returns a transaction to its initial state, options included.
    pub fn reset_transaction(&mut self, now: Instant, tx: TransactionId) {
        self.now = now;
        self.with_txs(|txs, cx| txs.reset_transaction(cx, tx));
    }

    /// Sets a transaction option.
    pub fn set_option(
        &mut self,
        now: Instant,
        tx: TransactionId,
        opt: TransactionOption,
    ) -> Result<(), ClientError> {
        self.now = now;
        self.txs.set_option(tx, opt)
    }

    /// Uses `version` instead of asking a GRV proxy.
    pub fn set_read_version(
        &mut self,
        tx: TransactionId,
        version: Version,
    ) -> Result<(), ClientError> {
        self.txs.set_read_version(tx, version)
    }

    /// The transaction's read version.
    pub fn tx_read_version(&mut self, now: Instant, tx: TransactionId) -> Call<Version> {
        self.call(now, |txs, cx| txs.tx_read_version(cx, tx))
    }

    /// Reads `key`. A snapshot read adds no read conflict range. `\xff\xff/status/json` is
    /// the status document (see [`Client::status_json`]).
    pub fn get(
        &mut self,
        now: Instant,
        tx: TransactionId,
        key: &[u8],
        snapshot: bool,
    ) -> Call<Option<Bytes>> {
        if key == crate::status::STATUS_JSON_KEY && self.txs.exists(tx) {
            return self.status_json(now);
        }
        if crate::transaction::is_special_key(key) {
            self.refresh_special();
        }
        self.call(now, |txs, cx| txs.get(cx, tx, key, snapshot))
    }

    /// Resolves a key selector.
    pub fn get_key(
        &mut self,
        now: Instant,
        tx: TransactionId,
        sel: KeySelector,
        snapshot: bool,
    ) -> Call<Bytes> {
        self.call(now, |txs, cx| txs.get_key(cx, tx, sel, snapshot))
    }

    /// Reads one batch of the rows between two selectors.
    pub fn get_range(
        &mut self,
        now: Instant,
        tx: TransactionId,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Call<RangeResult> {
        if crate::transaction::is_special_key(&begin.key) {
            self.refresh_special();
        }
        self.call(now, |txs, cx| {
            txs.get_range(cx, tx, begin, end, opts, snapshot)
        })
    }

    /// The path of the cluster file the database was opened from, shown at
    /// `\xff\xff/cluster_file_path` (`None`: opened from a connection string).
    pub fn set_cluster_file_path(&mut self, path: Option<&str>) {
        self.txs.special.cluster_file_path = path.map(|p| Bytes::copy_from_slice(p.as_bytes()));
    }

    /// The special keys show the connection string in use (it changes with forwards).
    fn refresh_special(&mut self) {
        let cs = alloc::string::ToString::to_string(self.monitor.cluster());
        if self.txs.special.connection_string != cs.as_bytes() {
            self.txs.special.connection_string = Bytes::from(cs);
        }
    }

    /// A special-key range read that reaches the tenant module
    /// (`\xff\xff/management/tenant/`), answered with `tenants`: the module's rows as the
    /// caller read them from the database (each `\xff\xff/management/tenant/map/<name>` and
    /// the tenant's JSON, as libfdb_c's `TenantRangeImpl` builds them). Selectors, limits and
    /// direction apply as to any special-key read.
    pub fn get_range_with_tenants(
        &mut self,
        now: Instant,
        tx: TransactionId,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        tenants: Vec<KeyValue>,
    ) -> Call<RangeResult> {
        self.refresh_special();
        let read = SpecialRead::Range(begin, end, opts);
        self.call(now, |txs, cx| {
            txs.special_read_with_tenants(cx, tx, read, &tenants)
        })
    }

    /// A special-key point read answered with the tenant module's rows (see
    /// [`Client::get_range_with_tenants`]).
    pub fn get_with_tenants(
        &mut self,
        now: Instant,
        tx: TransactionId,
        key: &[u8],
        tenants: Vec<KeyValue>,
    ) -> Call<Option<Bytes>> {
        self.refresh_special();
        let read = SpecialRead::Get(Bytes::copy_from_slice(key));
        self.call(now, |txs, cx| {
            txs.special_read_with_tenants(cx, tx, read, &tenants)
        })
    }

    /// The writes into the special key space's tenant module (with
    /// `special_key_space_enable_writes`), taken out of the transaction: a driver carries them
    /// out as ordinary writes before it commits, as libfdb_c's `SpecialKeySpace::commit`
    /// does. A commit that still holds some fails with `unsupported_operation`.
    pub fn take_special_writes(
        &mut self,
        tx: TransactionId,
    ) -> Result<Vec<SpecialWrite>, ClientError> {
        self.txs.take_special_writes(tx)
    }

    /// Sets what `\xff\xff/error_message` reads until the transaction is reset: why a
    /// special-key commit failed with `special_keys_api_failure`.
    pub fn set_special_error_message(&mut self, tx: TransactionId, msg: Bytes) {
        self.txs.set_special_error(tx, msg);
    }

    /// Sets `key` to `value`.
    pub fn set(&mut self, tx: TransactionId, key: &[u8], value: &[u8]) -> Result<(), ClientError> {
        self.txs.set(tx, key, value)
    }

    /// [`Client::set`] with buffers the caller already owns: nothing is copied.
    pub fn set_bytes(
        &mut self,
        tx: TransactionId,
        key: Bytes,
        value: Bytes,
    ) -> Result<(), ClientError> {
        self.txs.set_bytes(tx, key, value)
    }

    /// [`Client::set_bytes`] with the key and value in one buffer, `key | 0x00 | value`
    /// (`key_len` bytes of key): the key, its write-conflict range end (`key | 0x00`) and
    /// the value are slices of it, so a set costs one buffer instead of three. A buffer
    /// without the zero byte after the key fails with `client_invalid_operation`.
    pub fn set_packed(
        &mut self,
        tx: TransactionId,
        packed: Bytes,
        key_len: usize,
    ) -> Result<(), ClientError> {
        self.txs.set_packed(tx, packed, key_len)
    }

    /// Removes `key`.
    pub fn clear(&mut self, tx: TransactionId, key: &[u8]) -> Result<(), ClientError> {
        self.txs.clear(tx, key)
    }

    /// Removes every key in `[begin, end)`.
    pub fn clear_range(
        &mut self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
    ) -> Result<(), ClientError> {
        self.txs.clear_range(tx, begin, end)
    }

    /// An atomic operation on `key` with operand `param`.
    pub fn atomic_op(
        &mut self,
        tx: TransactionId,
        key: &[u8],
        param: &[u8],
        op: MutationType,
    ) -> Result<(), ClientError> {
        self.txs.atomic_op(tx, key, param, op.code())
    }

    /// An atomic operation by its raw API code, as `fdb_transaction_atomic_op` takes it (for
    /// replaying another client's calls): a code that is no atomic op fails with
    /// `invalid_mutation_type`, after the key's legal-range check, as in libfdb_c.
    pub fn atomic_op_code(
        &mut self,
        tx: TransactionId,
        key: &[u8],
        param: &[u8],
        code: u8,
    ) -> Result<(), ClientError> {
        self.txs.atomic_op(tx, key, param, code)
    }

    /// Adds a read or write conflict range by hand.
    pub fn add_conflict_range(
        &mut self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        kind: ConflictRangeType,
    ) -> Result<(), ClientError> {
        self.txs.add_conflict_range(tx, begin, end, kind)
    }

    /// Commits.
    pub fn commit(&mut self, now: Instant, tx: TransactionId) -> Call<Committed> {
        self.call(now, |txs, cx| txs.commit(cx, tx))
    }

    /// The versionstamp of a committed transaction.
    pub fn versionstamp(&self, tx: TransactionId) -> Option<[u8; 10]> {
        self.txs.versionstamp(tx)
    }

    /// The version a transaction committed at (`-1` if it wrote nothing).
    pub fn committed_version(&self, tx: TransactionId) -> Option<Version> {
        self.txs.committed_version(tx)
    }

    /// About how many bytes the commit would carry.
    pub fn approximate_size(&self, tx: TransactionId) -> usize {
        self.txs.approximate_size(tx)
    }

    /// `fdb_transaction_get_approximate_size`: [`Client::approximate_size`], or the error of
    /// a failed write the transaction is holding.
    pub fn get_approximate_size(&self, tx: TransactionId) -> Result<i64, ClientError> {
        self.txs.get_approximate_size(tx)
    }

    /// `fdb_transaction_get_versionstamp`: finishes with the transaction's 10-byte
    /// versionstamp once its commit succeeds; with `no_commit_version` (2021) if it wrote
    /// nothing, `transaction_invalid_version` (2020) if the commit failed,
    /// `transaction_cancelled` if it is reset, cancelled or destroyed first, and
    /// `used_during_commit` if asked after the commit started.
    pub fn get_versionstamp(&mut self, now: Instant, tx: TransactionId) -> Call<Bytes> {
        self.call(now, |txs, cx| txs.get_versionstamp(cx, tx))
    }

    /// `fdb_transaction_on_error`: finishes with `()` after the backoff (the transaction is
    /// then reset and can run again), or with the error if it must not retry. As in
    /// libfdb_c, only the read version and NativeAPI's mutations are dropped at once: during
    /// the backoff the transaction still reads its own writes, a read already in flight
    /// finishes normally, and what is still pending when the backoff ends fails with
    /// `transaction_cancelled`.
    pub fn on_error(&mut self, now: Instant, tx: TransactionId, code: ErrorCode) -> Call<()> {
        self.call(now, |txs, cx| txs.on_error(cx, tx, code))
    }

    /// Watches `key`: fires once its value differs from the one this transaction sees, after
    /// the transaction commits.
    pub fn watch(&mut self, now: Instant, tx: TransactionId, key: &[u8]) -> Call<Version> {
        self.call(now, |txs, cx| txs.watch(cx, tx, key))
    }

    /// `get_estimated_range_size_bytes`: the storage servers' estimate of `[begin, end)`.
    pub fn get_estimated_range_size_bytes(
        &mut self,
        now: Instant,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
    ) -> Call<i64> {
        self.call(now, |txs, cx| {
            txs.get_estimated_range_size_bytes(cx, tx, begin, end)
        })
    }

    /// `get_addresses_for_key`: the addresses (`ip:port`, `:tls` for TLS) of the storage
    /// servers holding `key`; empty for a key at or past `\xff\xff`.
    pub fn get_addresses_for_key(
        &mut self,
        now: Instant,
        tx: TransactionId,
        key: &[u8],
    ) -> Call<Vec<alloc::string::String>> {
        self.call(now, |txs, cx| txs.get_addresses_for_key(cx, tx, key))
    }

    /// `get_range_split_points`: keys cutting `[begin, end)` into chunks of about
    /// `chunk_size` bytes.
    pub fn get_range_split_points(
        &mut self,
        now: Instant,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        chunk_size: i64,
    ) -> Call<Vec<Bytes>> {
        self.call(now, |txs, cx| {
            txs.get_range_split_points(cx, tx, begin, end, chunk_size)
        })
    }

    /// Reads `\xff\xff/status/json`: the JSON document.
    pub fn status_json(&mut self, now: Instant) -> Call<Option<Bytes>> {
        self.now = now;
        let req = self.new_request_id();
        self.status.start(req);
        self.drive(now);
        Call::new(req)
    }

    /// What the core holds for the application right now (see [`Census`]).
    pub fn census(&self) -> Census {
        let (transactions, requests, watches) = self.txs.census();
        Census {
            transactions,
            requests,
            watches,
            status_reads: self.status.len(),
        }
    }

    /// Gives up on a request: no event will come for it.
    pub fn cancel(&mut self, now: Instant, req: RequestId) {
        self.now = now;
        if !self.status.cancel(req) {
            self.txs.cancel(req);
        }
    }

    /// A transaction call that starts a request: run it, then send what it made ready.
    fn call<T: Outcome>(
        &mut self,
        now: Instant,
        f: impl FnOnce(&mut Transactions, &mut Ctx<'_>) -> RequestId,
    ) -> Call<T> {
        self.now = now;
        let req = self.with_txs(f);
        self.drive(now);
        Call::new(req)
    }
}
