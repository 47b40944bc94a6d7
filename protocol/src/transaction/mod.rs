//! Transactions: reads at a read version, buffered writes, conflict ranges, commit, the
//! `on_error` retry rules and watches (`fdbclient/NativeAPI.actor.cpp`,
//! `ReadYourWrites.actor.cpp`).
//!
//! [`Transactions`] owns every transaction's state and, as parts of their own, where reads go
//! (`replicas::Routing`: the location cache, lookups, replica choice) and the operations in
//! flight (`ops::OpTable`: the operations, their timers, the ready list); the client hands it
//! a [`Ctx`] (time, randomness, the network, the read-version batcher, the cluster's proxies)
//! whenever it acts. Each asynchronous call is an operation that finishes with one
//! [`Event::Complete`](crate::Event::Complete); writes are synchronous. Each kind of operation
//! is one file under `ops/`, from its call to its completion; beside them live the options,
//! per-transaction state and writes, routing, tenants and the special keys.
//!
//! What goes on the wire follows libfdb_c 7.3: each transaction has a random span trace id
//! carried by its location, storage and commit requests; reads locate the shard through a
//! commit proxy (cached), then ask one of the shard's storage servers; a commit carries the read
//! conflict ranges, the write conflict ranges and the mutations in read-your-writes order, plus
//! a random `\xff/SC/` key when nothing read could conflict with what it writes.

mod actor_lineage;
mod db_options;
mod idempotency;
mod log;
mod ops;
mod options;
mod range_option;
mod replicas;
mod routing;
mod scan;
mod slab_map;
mod special;
mod special_writes;
mod state;
mod tenant;
#[cfg(test)]
mod tests;
mod tracing;

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec::Vec;

use crate::error::ErrorCode;
use crate::event::{ClientError, Completion, Event, Reply};
use crate::grv::GrvBatcher;
use crate::knobs::Knobs;
use crate::messages::coordination::{ClientDBInfo, CommitProxyInterface};
use crate::messages::{ErrorOr, NetworkAddress};
use crate::net::{Io, Network};
use crate::tag_throttle::TagThrottles;
use crate::time::{Instant, Rng};
use crate::uid::Uid;
use ops::wait::Timer;
use state::Tx;

pub(crate) use crate::ids::{RequestId, TransactionId};
pub use db_options::DatabaseOption;
pub use idempotency::{find_id_in_row, id_row_key, EXPIRED_VERSION_KEY, ID_ROWS_PREFIX};
pub use ops::watch::{ABSOLUTE_MAX_WATCHES, MAX_OUTSTANDING_WATCHES};
pub use options::{ConflictRangeType, TransactionOption};
pub use range_option::{Prefix, RangeOption};
pub use scan::{RangeCursor, RangeOptions, StreamingMode, REPLY_BYTE_LIMIT};
pub use special::CONFLICTING_KEYS_PREFIX;
pub(crate) use special::{is_special_key, is_special_range};
pub(crate) use special::{Given, SpecialRead};
pub use special_writes::{SpecialWrite, TENANT_MANAGEMENT_RANGE};
pub use state::check_conflict_range;
pub use tenant::{tenant_prefix, TenantHandle};
pub use tracing::TRACING_MODULE;

/// What the transactions act with: the time, the client's randomness, the network, the event
/// queue, the read-version batcher, the cluster's proxies and the request counter.
pub(crate) struct Ctx<'a> {
    pub(crate) now: Instant,
    pub(crate) rng: &'a mut Rng,
    pub(crate) net: &'a mut Network,
    pub(crate) events: &'a mut VecDeque<Event>,
    pub(crate) grv: &'a mut GrvBatcher,
    pub(crate) throttles: &'a mut TagThrottles,
    pub(crate) info: Option<&'a ClientDBInfo>,
    pub(crate) next_req: &'a mut u64,
    pub(crate) internal: &'a mut Internal,
    /// The fraction of reads sent with the transaction's read tags (the global
    /// configuration's `transactionTagSampleRate`, else `READ_TAG_SAMPLE_RATE`).
    pub(crate) read_tag_sample_rate: f64,
}

/// Requests the core makes for itself through the application's machinery (the reads that
/// settle an idempotent commit's unknown outcome): their completions go back to
/// [`Transactions`], never to the application.
#[derive(Debug, Default)]
pub(crate) struct Internal {
    ids: BTreeSet<RequestId>,
    done: VecDeque<(RequestId, Result<Reply, ClientError>)>,
}

impl Ctx<'_> {
    /// The network part of this context, reborrowed: what an operation sends with.
    pub(crate) fn io(&mut self) -> Io<'_> {
        Io {
            now: self.now,
            rng: self.rng,
            net: self.net,
            events: self.events,
        }
    }

    /// `DatabaseContext::sampleReadTags`: whether this read carries the transaction's read
    /// tags. Every read draws, tagged or not, and a sampled read of a transaction without
    /// `auto_throttle_tag`s sends an empty tag set.
    pub(crate) fn sample_read_tags(&mut self) -> bool {
        let rate = self.read_tag_sample_rate;
        rate > 0.0 && self.rng.random01() <= rate
    }

    /// Finishes application request `req`.
    pub(crate) fn finish(&mut self, req: RequestId, result: Result<Reply, ClientError>) {
        if self.internal.ids.remove(&req) {
            self.internal.done.push_back((req, result));
            return;
        }
        self.events
            .push_back(Event::Complete(Completion::new(req, result)));
    }

    /// Marks the request the next call makes as the core's own: its completion comes back
    /// through [`Transactions::settle_internal`]. Returns its id.
    pub(crate) fn next_request_internal(&mut self) -> RequestId {
        let id = RequestId(*self.next_req);
        self.internal.ids.insert(id);
        id
    }

    /// A new request id (for operations the core starts itself, like dummy commits).
    pub(crate) fn new_request(&mut self) -> RequestId {
        let id = RequestId(*self.next_req);
        *self.next_req += 1;
        id
    }

    /// A commit proxy to send stream `stream` to (see `CommitProxyInterface`), skipping
    /// proxies whose endpoint is gone; `None` while there is none (wait for the cluster).
    pub(crate) fn pick_commit_proxy(&mut self, stream: u32) -> Option<CommitProxyInterface> {
        let proxies = &self.info?.commit_proxies;
        let i = self.net.failures().pick_among(
            proxies.len(),
            |i| {
                (
                    proxies[i].commit.endpoint.address(),
                    proxies[i].stream(stream),
                )
            },
            self.rng,
        )?;
        Some(proxies[i].clone())
    }

    /// The first commit proxy the cluster names (`commit_on_first_proxy`).
    pub(crate) fn first_commit_proxy(&self) -> Option<CommitProxyInterface> {
        self.info?.commit_proxies.first().cloned()
    }

    /// A GRV proxy's read-version endpoint (see [`crate::grv::grv_endpoint`]).
    pub(crate) fn grv_endpoint(&mut self) -> Option<(NetworkAddress, Uid)> {
        let info = self.info?;
        crate::grv::grv_endpoint(&mut self.io(), info)
    }
}

pub use crate::knobs::{
    KEY_SIZE_LIMIT, SYSTEM_KEY_SIZE_LIMIT, TRANSACTION_SIZE_LIMIT, VALUE_SIZE_LIMIT,
};
/// `TenantAPI::PREFIX_SIZE`: reads and clears allow keys this much longer than writes.
pub const TENANT_PREFIX_SIZE: usize = 8;

/// Every transaction of a client and what they share: their operations, timers, the location
/// cache and what is known of storage servers.
#[derive(Debug)]
pub(crate) struct Transactions {
    /// What the special keys show of the client (kept current by the client).
    pub(crate) special: special::SpecialContext,
    /// Where reads go: the location cache, lookups in flight and what is known of servers.
    routing: replicas::Routing,
    /// The operations in flight, their timers and the ready list.
    table: ops::OpTable,
    next_tx: u64,
    txs: slab_map::SlabMap<TransactionId, Tx>,
    /// Options every new transaction starts with.
    defaults: Vec<TransactionOption>,
    /// `snapshot_ryw_enable` / `_disable` on the database: a counter (1 at API 300 and
    /// later) each new or reset transaction starts its own from.
    snapshot_ryw: i32,
    /// Tenant handles and their id lookups.
    tenants: BTreeMap<TenantHandle, tenant::TenantSlot>,
    next_tenant: u64,
    /// The tenant each tenant transaction belongs to (kept across resets).
    tx_tenants: BTreeMap<TransactionId, TenantHandle>,
    /// Transactions a use during their commit just finished ([`Transactions::deliver_trips`]).
    trips: Vec<TransactionId>,
    /// Idempotent commits whose unknown outcome is being read back, by the request in flight.
    status_checks: BTreeMap<RequestId, idempotency::StatusCheck>,
    /// The limits, backoffs and defaults the program's knobs set.
    knobs: Knobs,
}

impl Default for Transactions {
    fn default() -> Self {
        Transactions::new(Knobs::default())
    }
}

impl Transactions {
    /// No transactions yet, with the limits and defaults `knobs` set.
    pub(crate) fn new(knobs: Knobs) -> Self {
        Transactions {
            special: special::SpecialContext::default(),
            routing: replicas::Routing::new(&knobs),
            table: ops::OpTable::new(&knobs),
            next_tx: 0,
            txs: slab_map::SlabMap::default(),
            defaults: Vec::new(),
            snapshot_ryw: 1,
            tenants: BTreeMap::new(),
            next_tenant: 0,
            tx_tenants: BTreeMap::new(),
            trips: Vec::new(),
            status_checks: BTreeMap::new(),
            knobs,
        }
    }

    /// The transactions, requests and watches held (the core's [`crate::Census`]).
    pub(crate) fn census(&self) -> (usize, usize, usize) {
        (self.txs.len(), self.table.ops.len(), self.table.watches)
    }

    /// Whether `tx` is a live transaction.
    pub(crate) fn exists(&self, tx: TransactionId) -> bool {
        self.txs.contains_key(&tx)
    }

    pub(crate) fn next_timer(&self) -> Option<Instant> {
        self.table.next_timer()
    }
}

fn fdb<T>(e: ErrorCode) -> Result<T, ClientError> {
    Err(ClientError::Fdb(e))
}

fn storage_error<T>(
    r: Result<ErrorOr<T>, crate::serializer::DecodeError>,
) -> Result<T, ClientError> {
    match r {
        Ok(ErrorOr::Ok(v)) => Ok(v),
        Ok(ErrorOr::Err(e)) => Err(ClientError::Fdb(e)),
        Err(e) => Err(ClientError::Decode(e)),
    }
}

impl Transactions {
    // ----- transactions -----

    /// Starts a transaction.
    pub(crate) fn create_transaction(&mut self, cx: &mut Ctx<'_>) -> TransactionId {
        self.next_tx += 1;
        let id = TransactionId(self.next_tx);
        let trace = cx.rng.uid();
        let mut t = Tx::new(trace, cx.now, &self.knobs);
        t.new_span(cx.rng);
        self.txs.insert(id, t);
        self.apply_defaults(id);
        id
    }

    /// A transaction the application created at `created` (earlier than now): a driver that
    /// hands the core its transactions lazily keeps the `timeout` option counting from the
    /// application's call, as libfdb_c does.
    pub(crate) fn create_transaction_at(
        &mut self,
        cx: &mut Ctx<'_>,
        created: Instant,
    ) -> TransactionId {
        let id = self.create_transaction(cx);
        let mut deadline = None;
        if let Some(t) = self.txs.get_mut(&id) {
            t.created = created.min(cx.now);
            // A default timeout counts from the application's call too.
            if let Some(d) = t.options.timeout {
                if t.created + d <= cx.now {
                    t.timed_out = true;
                } else {
                    deadline = Some(t.created + d);
                }
            }
        }
        if let Some(at) = deadline {
            self.arm_deadline(at, id);
        }
        id
    }

    /// Arms `tx`'s `timeout` deadline, at `at`.
    fn arm_deadline(&mut self, at: Instant, tx: TransactionId) {
        self.table.add_timer(at, Timer::Deadline(tx));
    }

    /// Ends a transaction; its unfinished requests fail with `transaction_cancelled`.
    pub(crate) fn destroy_transaction(&mut self, cx: &mut Ctx<'_>, tx: TransactionId) {
        self.cancel_tx_ops(cx, tx, ErrorCode::TRANSACTION_CANCELLED);
        self.txs.remove(&tx);
        self.tx_tenants.remove(&tx);
    }

    /// `fdb_transaction_cancel`: its unfinished requests fail with `transaction_cancelled`,
    /// and so does every call after, until the transaction is reset.
    pub(crate) fn cancel_transaction(&mut self, cx: &mut Ctx<'_>, tx: TransactionId) {
        self.cancel_tx_ops(cx, tx, ErrorCode::TRANSACTION_CANCELLED);
        self.fail_backoffs(cx, tx, ErrorCode::TRANSACTION_CANCELLED);
        if let Some(t) = self.txs.get_mut(&tx) {
            t.finished = Some(ErrorCode::TRANSACTION_CANCELLED);
            // A commit in flight failed with the rest: later calls see the cancel.
            t.committing = false;
        }
    }

    /// Returns a transaction to its initial state, options included.
    pub(crate) fn reset_transaction(&mut self, cx: &mut Ctx<'_>, tx: TransactionId) {
        self.cancel_tx_ops(cx, tx, ErrorCode::TRANSACTION_CANCELLED);
        let trace = cx.rng.uid();
        if let Some(t) = self.txs.get_mut(&tx) {
            // NativeAPI's reset keeps the conflicting keys of the last commit that reported
            // them (`TransactionState::cloneAndReset`): they stay readable until a commit
            // conflicts again.
            let conflicting = t.conflicting.take();
            *t = Tx::new(trace, cx.now, &self.knobs);
            t.new_span(cx.rng);
            t.conflicting = conflicting;
        }
        self.apply_defaults(tx);
    }

    /// `on_error(cluster_version_changed)` as libfdb_c's multi-version client answers it
    /// (`MultiVersionTransaction::onError`, `updateTransaction`): at once, with no backoff,
    /// the transaction becomes a new one of the same database or tenant that keeps only
    /// the persistent options (timeout, retry_limit, max_retry_delay, authorization_token).
    /// So the retry does not count against `retry_limit`, the timeout counts again from now,
    /// and a transaction that was cancelled, timed out or refused by `on_error` runs again.
    /// What was pending, a sleeping `on_error` too, fails with `transaction_cancelled`, as
    /// the replaced transaction's requests do when libfdb_c destroys it.
    pub(crate) fn replace_transaction(&mut self, cx: &mut Ctx<'_>, tx: TransactionId) {
        let Some(kept) = self.txs.get(&tx).map(|t| t.options.clone()) else {
            return;
        };
        self.fail_backoffs(cx, tx, ErrorCode::TRANSACTION_CANCELLED);
        self.reset_transaction(cx, tx);
        let Some(t) = self.txs.get_mut(&tx) else {
            return;
        };
        // A new transaction has no last commit to name conflicting keys of.
        t.conflicting = None;
        t.options.timeout = kept.timeout;
        t.options.retry_limit = kept.retry_limit;
        t.options.max_retry_delay = kept.max_retry_delay;
        t.options.auth_token = kept.auth_token;
        if let Some(d) = t.options.timeout {
            let at = t.created + d;
            self.arm_deadline(at, tx);
        }
    }
}
