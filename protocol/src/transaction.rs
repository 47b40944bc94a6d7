//! Transactions: reads at a read version, buffered writes, conflict ranges, commit, the
//! `on_error` retry rules and watches (`fdbclient/NativeAPI.actor.cpp`,
//! `ReadYourWrites.actor.cpp`), as operations of the sans-IO [`Client`].
//!
//! Every asynchronous call returns a [`RequestId`] and finishes with one
//! [`Event::Complete`](crate::client::Event::Complete). Writes are synchronous: they only touch
//! the transaction's write map until commit.
//!
//! What goes on the wire follows libfdb_c 7.3: each transaction has a random span trace id
//! carried by its location, storage and commit requests; reads locate the shard through a
//! commit proxy (cached), then ask one of the shard's storage servers; a commit carries the read
//! conflict ranges, the write conflict ranges and the mutations in read-your-writes order, plus
//! a random `\xff/SC/` key when nothing read could conflict with what it writes.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::atomic;
use crate::client::{Client, ClientError, GrvWaiter, Pending, Priority, Reply, RequestId};
use crate::error::{knobs, ErrorCode, OnErrorAction};
use crate::location::{LocationCache, Shard};
use crate::messages::commit::{
    mutation_type as mt, CommitID, CommitTransactionRef, CommitTransactionRequest,
    GetKeyServerLocationsReply, GetKeyServerLocationsRequest,
};
use crate::messages::coordination::CommitProxyInterface;
use crate::messages::grv::GetReadVersionRequest;
use crate::messages::storage::{
    GetKeyValuesReply, GetKeyValuesRequest, GetValueReply, GetValueRequest, StorageServerInterface,
    WatchValueReply, WatchValueRequest,
};
use crate::messages::types::{
    KeyRange, KeySelector, KeyValue, SpanContext, TenantInfo, Version, VersionVector,
};
use crate::messages::{decode_reply, ErrorOr, ReplyPromise};
use crate::ryw::{apply_ops, key_after, Lookup, RangeSet, SnapshotCache, WriteMap};
use crate::time::Instant;
use crate::uid::Uid;

// A child module: it uses the engine's private ops, timers and location cache.
#[path = "metrics.rs"]
mod metrics;

/// The special key range of the conflicting read ranges of a failed commit.
pub const CONFLICTING_KEYS_PREFIX: &[u8] = b"\xff\xff/transaction/conflicting_keys/";
/// `KEY_SIZE_LIMIT`.
pub const KEY_SIZE_LIMIT: usize = 10_000;
/// `SYSTEM_KEY_SIZE_LIMIT`: keys in `\xff` may be longer.
pub const SYSTEM_KEY_SIZE_LIMIT: usize = 30_000;
/// `TenantAPI::PREFIX_SIZE`: reads and clears allow keys this much longer than writes.
pub const TENANT_PREFIX_SIZE: usize = 8;
/// `VALUE_SIZE_LIMIT`.
pub const VALUE_SIZE_LIMIT: usize = 100_000;
/// `TRANSACTION_SIZE_LIMIT`: the default `size_limit`.
pub const TRANSACTION_SIZE_LIMIT: usize = 10_000_000;
/// `REPLY_BYTE_LIMIT`: the most a storage server returns per range request.
pub const REPLY_BYTE_LIMIT: i32 = 80_000;
/// `DEFAULT_MAX_OUTSTANDING_WATCHES`.
pub const MAX_OUTSTANDING_WATCHES: usize = 10_000;
/// `LOCATION_CACHE` lookups ask for up to this many shards at once.
const LOCATION_LIMIT: i32 = 100;
/// Byte limits of the `iterator` streaming mode, by iteration (`fdb_c.cpp`).
const ITERATION_PROGRESSION: [i32; 10] = [
    4096, 6144, 9216, 13824, 20736, 31104, 46656, 69984, 80000, 120000,
];

/// A transaction of a [`Client`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TransactionId(pub u64);

/// How eagerly a range read fetches (`FDBStreamingMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StreamingMode {
    /// As much as possible per batch: libfdb_c reads it as `Serial` (80,000 bytes a batch).
    WantAll,
    /// Growing batches as the caller iterates (the default).
    #[default]
    Iterator,
    /// Exactly `limit` rows in one batch.
    Exact,
    Small,
    Medium,
    Large,
    Serial,
}

impl StreamingMode {
    /// The byte limit of one batch (`None`: unlimited).
    pub fn byte_limit(self, iteration: u32) -> Option<usize> {
        match self {
            StreamingMode::Exact => None,
            // fdb_c.cpp `validate_and_update_parameters` turns WANT_ALL into SERIAL.
            StreamingMode::WantAll => Some(80000),
            StreamingMode::Iterator => {
                let i = (iteration.max(1) as usize).min(ITERATION_PROGRESSION.len());
                Some(ITERATION_PROGRESSION[i - 1] as usize)
            }
            StreamingMode::Small => Some(256),
            StreamingMode::Medium => Some(1000),
            StreamingMode::Large => Some(4096),
            StreamingMode::Serial => Some(80000),
        }
    }
}

/// Limits of one `get_range` call (`fdb_transaction_get_range`'s arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeOptions {
    /// Most rows; 0 = no limit.
    pub limit: usize,
    /// Most bytes; 0 = no limit.
    pub target_bytes: usize,
    pub mode: StreamingMode,
    /// 1-based call count, for [`StreamingMode::Iterator`].
    pub iteration: u32,
    pub reverse: bool,
}

impl Default for RangeOptions {
    fn default() -> Self {
        RangeOptions {
            limit: 0,
            target_bytes: 0,
            mode: StreamingMode::Iterator,
            iteration: 1,
            reverse: false,
        }
    }
}

/// One batch of a range read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RangeResult {
    pub rows: Vec<KeyValue>,
    /// More rows may follow: call again from after the last row.
    pub more: bool,
}

/// A whole range read done batch by batch, as the bindings' range iterators call
/// `fdb_transaction_get_range`: each batch continues after the last row (before it when
/// reading in reverse), the `iterator` mode's iteration count grows, and `limit` bounds the
/// total. A driver loops on [`RangeCursor::next_request`] / [`RangeCursor::feed`].
#[derive(Clone, Debug)]
pub struct RangeCursor {
    begin: KeySelector,
    end: KeySelector,
    opts: RangeOptions,
    /// The caller's limit on all rows (0: none).
    total: usize,
    rows: Vec<KeyValue>,
    done: bool,
}

impl RangeCursor {
    pub fn new(begin: KeySelector, end: KeySelector, mut opts: RangeOptions) -> Self {
        opts.iteration = opts.iteration.max(1);
        RangeCursor {
            begin,
            end,
            total: opts.limit,
            opts,
            rows: Vec::new(),
            done: false,
        }
    }

    /// The arguments of the next `get_range` batch, or `None` when the read is complete.
    pub fn next_request(&self) -> Option<(KeySelector, KeySelector, RangeOptions)> {
        (!self.done).then(|| (self.begin.clone(), self.end.clone(), self.opts))
    }

    /// Takes one batch's result.
    pub fn feed(&mut self, batch: RangeResult) {
        let last = batch.rows.last().map(|kv| kv.key.clone());
        self.rows.extend(batch.rows);
        if self.total > 0 && self.rows.len() >= self.total {
            self.rows.truncate(self.total);
            self.done = true;
            return;
        }
        let Some(last) = last.filter(|_| batch.more) else {
            self.done = true;
            return;
        };
        if self.opts.reverse {
            self.end = KeySelector::first_greater_or_equal(last);
        } else {
            self.begin = KeySelector::first_greater_than(last);
        }
        if self.total > 0 {
            self.opts.limit = self.total - self.rows.len();
        }
        self.opts.iteration += 1;
    }

    /// Every row read.
    pub fn into_rows(self) -> Vec<KeyValue> {
        self.rows
    }
}

/// Transaction options (`FDBTransactionOption`) that change what the client does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionOption {
    /// Fail with `transaction_timed_out` this long after the transaction was created.
    Timeout(Duration),
    /// How many `on_error` retries; `None` = unlimited.
    RetryLimit(Option<u32>),
    MaxRetryDelay(Duration),
    SizeLimit(usize),
    ReadYourWritesDisable,
    NextWriteNoWriteConflictRange,
    CausalReadRisky,
    CausalWriteRisky,
    PriorityBatch,
    PrioritySystemImmediate,
    AccessSystemKeys,
    ReadSystemKeys,
    ReportConflictingKeys,
    /// Works on a locked database (`lock_aware`).
    LockAware,
}

/// Which conflict range [`Client::add_conflict_range`] adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConflictRangeType {
    Read,
    Write,
}

#[derive(Clone, Debug)]
struct TxOptions {
    timeout: Option<Duration>,
    retry_limit: Option<u32>,
    max_retry_delay: Duration,
    size_limit: usize,
    ryw_disabled: bool,
    next_write_no_conflict: bool,
    causal_read_risky: bool,
    causal_write_risky: bool,
    priority: Priority,
    access_system_keys: bool,
    read_system_keys: bool,
    report_conflicting_keys: bool,
    lock_aware: bool,
}

impl TxOptions {
    /// NativeAPI's `rawAccess`: system key access implies it.
    fn raw_access(&self) -> bool {
        self.read_system_keys || self.access_system_keys
    }
}

impl Default for TxOptions {
    fn default() -> Self {
        TxOptions {
            timeout: None,
            retry_limit: None,
            max_retry_delay: knobs::DEFAULT_MAX_BACKOFF,
            size_limit: TRANSACTION_SIZE_LIMIT,
            ryw_disabled: false,
            next_write_no_conflict: false,
            causal_read_risky: false,
            causal_write_risky: false,
            priority: Priority::Default,
            access_system_keys: false,
            read_system_keys: false,
            report_conflicting_keys: false,
            lock_aware: false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadVersion {
    None,
    Pending,
    Ready(Version),
    Failed(ErrorCode),
}

/// The state of one transaction.
#[derive(Debug)]
pub(crate) struct Tx {
    options: TxOptions,
    read_version: ReadVersion,
    writes: WriteMap,
    read_conflicts: RangeSet,
    write_conflicts: RangeSet,
    trace_id: Uid,
    backoff: Duration,
    retries: u32,
    created: Instant,
    timed_out: bool,
    /// Set by `commit` and kept until `reset` / `on_error` (RYW's `commitStarted`): the
    /// transaction then refuses further use with `used_during_commit`.
    committing: bool,
    committed: Option<(Version, Option<[u8; 10]>)>,
    /// Watches waiting for this transaction to commit.
    watches: Vec<RequestId>,
    /// The first failed write, reported by the next read or commit.
    deferred: Option<ClientError>,
    /// Why the transaction is finished until reset (RYW's `resetPromise`): a use after the
    /// commit started (`used_during_commit`), or an `on_error` that refused to retry
    /// (`transaction_cancelled`). Every read, commit and `on_error` then fails with it.
    finished: Option<ErrorCode>,
    /// The first error of a read the transaction started: RYW's commit waits for every read
    /// (`reading`), so the commit fails with it.
    read_failed: Option<ClientError>,
    /// A read reached the transaction since it was reset (RYW's `reading`): reading your
    /// writes can no longer be disabled.
    read_started: bool,
    /// What was read from storage so far.
    cache: SnapshotCache,
    /// The key the last commit attempt both read and wrote: the dummy transaction after
    /// `commit_unknown_result` commits on it.
    self_conflict: Option<Bytes>,
    /// The read conflict ranges the last commit sent (to name the conflicting ones).
    sent_read_conflicts: Vec<KeyRange>,
    /// With `report_conflicting_keys`, the read conflict ranges that made the last commit
    /// fail (`\xff\xff/transaction/conflicting_keys/`).
    conflicting: Option<RangeSet>,
}

impl Tx {
    fn new(trace_id: Uid, now: Instant) -> Tx {
        Tx {
            options: TxOptions::default(),
            read_version: ReadVersion::None,
            writes: WriteMap::new(),
            read_conflicts: RangeSet::new(),
            write_conflicts: RangeSet::new(),
            trace_id,
            backoff: knobs::DEFAULT_BACKOFF,
            retries: 0,
            created: now,
            timed_out: false,
            committing: false,
            committed: None,
            watches: Vec::new(),
            deferred: None,
            read_started: false,
            read_failed: None,
            finished: None,
            cache: SnapshotCache::default(),
            self_conflict: None,
            sent_read_conflicts: Vec::new(),
            conflicting: None,
        }
    }

    fn max_read_key(&self) -> &'static [u8] {
        if self.options.read_system_keys || self.options.access_system_keys {
            b"\xff\xff"
        } else {
            b"\xff"
        }
    }

    fn max_write_key(&self) -> &'static [u8] {
        if self.options.access_system_keys {
            b"\xff\xff"
        } else {
            b"\xff"
        }
    }
}

/// A range scan over resolved keys `[lo, hi)`, merged with the transaction's writes.
#[derive(Debug)]
struct Scan {
    lo: Bytes,
    hi: Bytes,
    reverse: bool,
    /// Rows still wanted (`None`: no limit).
    rows_left: Option<usize>,
    /// Bytes still wanted (`None`: no limit).
    bytes_left: Option<usize>,
    /// Forward: next key to read; reverse: end of what is left.
    cursor: Bytes,
    out: Vec<KeyValue>,
    more: bool,
    /// The chunk `[a, b)` of the request in flight.
    chunk: Option<(Bytes, Bytes)>,
    /// The read reached this far (for conflict ranges).
    read_to: Bytes,
    /// Set once the scan is over.
    done: bool,
    /// With a byte limit, a batch ends at the first reply that brought rows
    /// (`GetRangeLimits::hasSatisfiedMinRows`).
    byte_limited: bool,
    /// The scan was cut short where the transaction's writes become unreadable: reaching
    /// that end with rows still wanted is `accessed_unreadable`.
    cut_at_unreadable: bool,
}

impl Scan {
    fn new(lo: Bytes, hi: Bytes, reverse: bool, rows: Option<usize>, bytes: Option<usize>) -> Scan {
        let cursor = if reverse { hi.clone() } else { lo.clone() };
        Scan {
            read_to: cursor.clone(),
            lo,
            hi,
            reverse,
            rows_left: rows,
            bytes_left: bytes,
            cursor,
            out: Vec::new(),
            more: false,
            chunk: None,
            done: false,
            byte_limited: bytes.is_some(),
            cut_at_unreadable: false,
        }
    }

    fn limits_reached(&self) -> bool {
        self.rows_left == Some(0) || (self.bytes_left == Some(0) && !self.out.is_empty())
    }

    /// Takes merged rows of chunk `[a, b)` (in scan order), stopping at the limits. Only rows
    /// that came with a storage reply can end a byte-limited batch early.
    fn take(&mut self, rows: Vec<KeyValue>, a: &Bytes, b: &Bytes, from_storage: bool) {
        for kv in rows {
            if self.limits_reached() {
                self.more = true;
                break;
            }
            if let Some(r) = &mut self.rows_left {
                *r -= 1;
            }
            if let Some(bl) = &mut self.bytes_left {
                // `GetRangeLimits::decrement`: key + value + 8 per row.
                *bl = bl.saturating_sub(kv.key.len() + kv.value.len() + 8);
            }
            self.read_to = if self.reverse {
                kv.key.clone()
            } else {
                key_after(&kv.key)
            };
            self.out.push(kv);
        }
        if !self.more {
            self.read_to = if self.reverse { a.clone() } else { b.clone() };
            self.cursor = self.read_to.clone();
            if self.limits_reached() && !self.at_end() {
                self.more = true;
            }
        }
        if self.byte_limited && !self.out.is_empty() && from_storage {
            if !self.more && !self.at_end() {
                self.more = true;
            }
            self.done = true;
        }
        if self.more || self.at_end() {
            self.done = true;
        }
    }

    fn at_end(&self) -> bool {
        if self.reverse {
            self.cursor <= self.lo
        } else {
            self.cursor >= self.hi
        }
    }

    /// The read conflict range this scan covered.
    fn conflict(&self) -> (Bytes, Bytes) {
        if self.reverse {
            (self.read_to.clone(), self.hi.clone())
        } else {
            (self.lo.clone(), self.read_to.clone())
        }
    }
}

/// What a `get_key` resolves: a selector against the merged view.
#[derive(Debug)]
struct KeyResolve {
    sel: KeySelector,
    scan: Scan,
}

// Ops live in a map and are few at a time; boxing the range state would only add a hop.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum OpKind {
    ReadVersion,
    Get {
        key: Bytes,
        snapshot: bool,
    },
    GetKey {
        snapshot: bool,
        resolve: KeyResolve,
    },
    Range {
        snapshot: bool,
        begin: KeySelector,
        end: KeySelector,
        /// Resolved begin/end keys once known.
        begin_key: Option<Bytes>,
        end_key: Option<Bytes>,
        /// A selector being resolved before the scan can start.
        resolving: Option<(bool, KeyResolve)>,
        opts: RangeOptions,
        scan: Option<Scan>,
    },
    Commit,
    Watch {
        key: Bytes,
        /// The value the watch compares against, once known.
        value: Option<Option<Bytes>>,
        /// The version from which to watch, once the transaction committed.
        version: Option<Version>,
        /// The value read is in flight.
        reading: bool,
    },
    /// `on_error` sleeping before the retry.
    Backoff,
    /// A `\xff\xff/status/json` read.
    Status(alloc::boxed::Box<crate::status::StatusOp>),
    /// `get_estimated_range_size_bytes` or `get_range_split_points`.
    Metrics(alloc::boxed::Box<metrics::MetricsOp>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// Runnable.
    Ready,
    ReadVersion,
    Location,
    Reply,
    Timer,
    /// A watch waiting for its transaction to commit.
    Commit,
    /// Waiting for the cluster to name its commit proxies.
    Cluster,
    /// A commit whose outcome is unknown, waiting for its dummy transaction.
    Dummy,
}

#[derive(Debug)]
pub(crate) struct Op {
    tx: TransactionId,
    kind: OpKind,
    wait: Wait,
    /// Load-balancing: which replica of the shard to try next.
    attempt: usize,
    start: usize,
    /// A watch outlives its transaction once armed.
    detached: bool,
    /// The storage server of the request in flight, and when it was sent.
    server: Option<(Uid, Instant)>,
    /// How many times the shard was looked up again (grows the relocation delay).
    relocations: u32,
    /// For the dummy commit after `commit_unknown_result`: the user's commit it stands for.
    dummy_for: Option<RequestId>,
}

impl Op {
    fn new(tx: TransactionId, kind: OpKind, wait: Wait, start: usize, detached: bool) -> Op {
        Op {
            tx,
            kind,
            wait,
            attempt: 0,
            start,
            detached,
            server: None,
            relocations: 0,
            dummy_for: None,
        }
    }
}

/// What the client learned about one storage server (`QueueModel` and the failure monitor,
/// much simplified): a smoothed latency, and whether its connection failed recently.
#[derive(Clone, Copy, Debug, Default)]
struct ServerStats {
    latency: Option<Duration>,
    failed_until: Option<Instant>,
}

/// What a request needs of a storage server: its id (for load balancing), address, and the
/// token its streams derive from.
#[derive(Clone, Debug)]
struct Replica {
    id: Uid,
    addr: crate::messages::NetworkAddress,
    base: Uid,
}

impl Replica {
    fn stream(&self, index: u32) -> Uid {
        self.base.adjusted(index)
    }
}

/// `run_ready_ops` gives up after this many rounds (each round advances every runnable op once;
/// real work needs a handful).
const MAX_READY_ROUNDS: u32 = 10_000;

/// A replica whose connection failed is avoided this long, if another one is available.
const FAILED_SERVER_AVOIDANCE: Duration = Duration::from_secs(1);
/// The relocation delay grows from `WRONG_SHARD_SERVER_DELAY` up to this.
const MAX_RELOCATION_DELAY: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Op(RequestId),
    Deadline(TransactionId),
    /// Retry the dummy commit of this user commit.
    Dummy(RequestId),
}

/// Transaction state inside the [`Client`].
#[derive(Debug, Default)]
pub(crate) struct Engine {
    pub(crate) locations: LocationCache,
    /// Location lookups in flight: `(key, reverse)`.
    pub(crate) locating: BTreeSet<(Bytes, bool)>,
    next_tx: u64,
    txs: BTreeMap<TransactionId, Tx>,
    ops: BTreeMap<RequestId, Op>,
    timers: BTreeMap<(Instant, u64), Timer>,
    timer_seq: u64,
    watches: usize,
    servers: BTreeMap<Uid, ServerStats>,
    /// Reused by `run_ready_ops`.
    scratch: Vec<RequestId>,
    /// Options every new transaction starts with.
    defaults: Vec<TransactionOption>,
}

impl Engine {
    pub(crate) fn next_timer(&self) -> Option<Instant> {
        self.timers.keys().next().map(|(t, _)| *t)
    }

    fn add_timer(&mut self, at: Instant, t: Timer) {
        self.timer_seq += 1;
        self.timers.insert((at, self.timer_seq), t);
    }
}

fn fdb<T>(e: ErrorCode) -> Result<T, ClientError> {
    Err(ClientError::Fdb(e))
}

/// `KeySelectorRef::removeOrEqual`: `or_equal` folded into the key.
fn normalize(sel: &KeySelector) -> (Bytes, i32) {
    if sel.or_equal {
        (key_after(&sel.key), sel.offset)
    } else {
        (sel.key.clone(), sel.offset)
    }
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

/// The check `fdb_transaction_add_conflict_range` makes before anything else and returns at
/// once (its only synchronous error): a driver refuses an inverted range the same way.
pub fn check_conflict_range(begin: &[u8], end: &[u8]) -> Result<(), ClientError> {
    if begin > end {
        return fdb(ErrorCode::INVERTED_RANGE);
    }
    Ok(())
}

/// The longest key a set or an atomic op may write (`getMaxWriteKeySize`): with raw access
/// (which read_system_keys and access_system_keys imply) room for a tenant prefix too.
fn check_write_size(key: &[u8], raw_access: bool) -> Result<(), ClientError> {
    let limit = if key.starts_with(b"\xff") {
        SYSTEM_KEY_SIZE_LIMIT
    } else if raw_access {
        KEY_SIZE_LIMIT + TENANT_PREFIX_SIZE
    } else {
        KEY_SIZE_LIMIT
    };
    if key.len() > limit {
        return fdb(ErrorCode::KEY_TOO_LARGE);
    }
    Ok(())
}

/// The longest key a read, a clear or a conflict range considers (`getMaxKeySize`: the write
/// limit with room for a tenant prefix): anything longer cannot exist.
fn max_key_size(key: &[u8]) -> usize {
    if key.starts_with(b"\xff") {
        SYSTEM_KEY_SIZE_LIMIT
    } else {
        KEY_SIZE_LIMIT + TENANT_PREFIX_SIZE
    }
}

/// A range end longer than any key, cut to one byte past the longest key (the same range of
/// keys that can exist), as RYW does for clears and conflict ranges.
fn truncate_key(key: &[u8]) -> &[u8] {
    let max = max_key_size(key);
    if key.len() > max {
        &key[..max + 1]
    } else {
        key
    }
}

impl Client {
    // ----- transactions -----

    /// Starts a transaction.
    pub fn create_transaction(&mut self, now: Instant) -> TransactionId {
        self.now = now;
        self.engine.next_tx += 1;
        let id = TransactionId(self.engine.next_tx);
        let trace = self.rng.uid();
        self.engine.txs.insert(id, Tx::new(trace, now));
        self.apply_defaults(now, id);
        id
    }

    /// Database-wide defaults for new transactions (libfdb_c's `transaction_timeout`,
    /// `transaction_retry_limit`, ... database options): applied to every transaction when
    /// it is created and when it is reset.
    pub fn set_transaction_defaults(&mut self, defaults: Vec<TransactionOption>) {
        self.engine.defaults = defaults;
    }

    fn apply_defaults(&mut self, now: Instant, tx: TransactionId) {
        for opt in self.engine.defaults.clone() {
            let _ = self.set_option(now, tx, opt);
        }
    }

    /// A transaction the application created at `created` (earlier than now): a driver that
    /// hands the core its transactions lazily keeps the `timeout` option counting from the
    /// application's call, as libfdb_c does.
    pub fn create_transaction_at(&mut self, now: Instant, created: Instant) -> TransactionId {
        let id = self.create_transaction(now);
        let mut deadline = None;
        if let Some(t) = self.engine.txs.get_mut(&id) {
            t.created = created.min(now);
            // A default timeout counts from the application's call too.
            if let Some(d) = t.options.timeout {
                if t.created + d <= now {
                    t.timed_out = true;
                } else {
                    deadline = Some(t.created + d);
                }
            }
        }
        if let Some(at) = deadline {
            self.engine.add_timer(at, Timer::Deadline(id));
        }
        id
    }

    /// Ends a transaction; its unfinished requests fail with `transaction_cancelled`.
    pub fn destroy_transaction(&mut self, now: Instant, tx: TransactionId) {
        self.now = now;
        self.cancel_tx_ops(tx, ErrorCode::TRANSACTION_CANCELLED);
        self.engine.txs.remove(&tx);
    }

    /// Returns a transaction to its initial state, options included.
    pub fn reset_transaction(&mut self, now: Instant, tx: TransactionId) {
        self.now = now;
        self.cancel_tx_ops(tx, ErrorCode::TRANSACTION_CANCELLED);
        let trace = self.rng.uid();
        if let Some(t) = self.engine.txs.get_mut(&tx) {
            *t = Tx::new(trace, now);
        }
        self.apply_defaults(now, tx);
    }

    /// Sets a transaction option. A refused option also fails the next read or the commit,
    /// as libfdb_c's `fdb_transaction_set_option` defers it.
    pub fn set_option(
        &mut self,
        now: Instant,
        tx: TransactionId,
        opt: TransactionOption,
    ) -> Result<(), ClientError> {
        if let Some(e) = self.skipped(tx) {
            return Err(e);
        }
        let r = self.set_option_inner(now, tx, opt);
        self.defer(tx, r)
    }

    fn set_option_inner(
        &mut self,
        now: Instant,
        tx: TransactionId,
        opt: TransactionOption,
    ) -> Result<(), ClientError> {
        self.now = now;
        let t = self.tx_mut(tx)?;
        match opt {
            // RYW refuses to stop reading its writes once it has read or written anything
            // (writes made with it disabled bypass its write map and do not count).
            TransactionOption::ReadYourWritesDisable
                if t.read_started
                    || (!t.options.ryw_disabled
                        && (!t.writes.is_empty() || !t.write_conflicts.is_empty())) =>
            {
                return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
            }
            // `extractIntOption(value, 32, TRANSACTION_SIZE_LIMIT)`.
            TransactionOption::SizeLimit(n) if !(32..=TRANSACTION_SIZE_LIMIT).contains(&n) => {
                return fdb(ErrorCode::INVALID_OPTION_VALUE);
            }
            _ => {}
        }
        let o = &mut t.options;
        match opt {
            TransactionOption::Timeout(d) => o.timeout = (!d.is_zero()).then_some(d),
            TransactionOption::RetryLimit(n) => o.retry_limit = n,
            TransactionOption::MaxRetryDelay(d) => o.max_retry_delay = d,
            TransactionOption::SizeLimit(n) => o.size_limit = n,
            TransactionOption::ReadYourWritesDisable => o.ryw_disabled = true,
            TransactionOption::NextWriteNoWriteConflictRange => o.next_write_no_conflict = true,
            TransactionOption::CausalReadRisky => o.causal_read_risky = true,
            TransactionOption::CausalWriteRisky => o.causal_write_risky = true,
            TransactionOption::PriorityBatch => o.priority = Priority::Batch,
            TransactionOption::PrioritySystemImmediate => o.priority = Priority::SystemImmediate,
            TransactionOption::AccessSystemKeys => o.access_system_keys = true,
            TransactionOption::ReadSystemKeys => o.read_system_keys = true,
            TransactionOption::ReportConflictingKeys => o.report_conflicting_keys = true,
            TransactionOption::LockAware => o.lock_aware = true,
        }
        if let TransactionOption::Timeout(d) = opt {
            if !d.is_zero() {
                let at = t.created + d;
                self.engine.add_timer(at, Timer::Deadline(tx));
            }
        }
        Ok(())
    }

    /// Uses `version` instead of asking a GRV proxy.
    pub fn set_read_version(
        &mut self,
        tx: TransactionId,
        version: Version,
    ) -> Result<(), ClientError> {
        let t = self.tx_mut(tx)?;
        t.read_version = ReadVersion::Ready(version);
        Ok(())
    }

    /// The transaction's read version.
    pub fn tx_read_version(&mut self, now: Instant, tx: TransactionId) -> RequestId {
        self.now = now;
        let req = self.new_request_id();
        // Even after the commit (RYW's `getReadVersion` looks only at `resetPromise`).
        if let Some(t) = self.engine.txs.get(&tx) {
            let e = t.deferred.clone().or(t.finished.map(ClientError::Fdb));
            if let Some(e) = e {
                self.finish(req, Err(e));
                return req;
            }
        }
        self.insert_op(req, tx, OpKind::ReadVersion);
        self.drive(now);
        req
    }

    /// Reads `key`. A snapshot read adds no read conflict range.
    pub fn get(
        &mut self,
        now: Instant,
        tx: TransactionId,
        key: &[u8],
        snapshot: bool,
    ) -> RequestId {
        self.now = now;
        let req = self.new_request_id();
        if key == crate::status::STATUS_JSON_KEY && self.engine.txs.contains_key(&tx) {
            // A special key: the status document, not a stored value.
            self.insert_status_op(req);
            self.drive(now);
            return req;
        }
        if let Err(e) = self.check_read_key(tx, key) {
            self.finish(req, Err(e));
            return req;
        }
        if key.len() > max_key_size(key) {
            // No key that long exists: absent, without a read or a conflict range.
            self.finish(req, Ok(Reply::Value(None)));
            return req;
        }
        self.insert_op(
            req,
            tx,
            OpKind::Get {
                key: Bytes::copy_from_slice(key),
                snapshot,
            },
        );
        self.drive(now);
        req
    }

    /// Resolves a key selector.
    pub fn get_key(
        &mut self,
        now: Instant,
        tx: TransactionId,
        sel: KeySelector,
        snapshot: bool,
    ) -> RequestId {
        self.now = now;
        let req = self.new_request_id();
        let max = match self.engine.txs.get(&tx) {
            Some(t) => Bytes::from_static(t.max_read_key()),
            None => {
                self.finish(req, fdb(ErrorCode::TRANSACTION_CANCELLED));
                return req;
            }
        };
        if let Err(e) = self.check_usable(tx) {
            self.finish(req, Err(e));
            return req;
        }
        if sel.key.as_ref() > max.as_ref() {
            self.finish(req, fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE));
            return req;
        }
        // A selector already past either end of the database answers that end without a
        // read (and without fetching a read version), as RYW's getKey does; it still counts
        // as a read.
        let (k, offset) = normalize(&sel);
        let end = if offset >= 1 && k.as_ref() >= max.as_ref() {
            Some(max.clone())
        } else if offset <= 0 && k.is_empty() {
            Some(Bytes::new())
        } else {
            None
        };
        if let Some(key) = end {
            if let Some(t) = self.engine.txs.get_mut(&tx) {
                t.read_started = true;
            }
            self.finish(req, Ok(Reply::Key(key)));
            return req;
        }
        let resolve = Self::key_resolve(sel, max);
        self.insert_op(req, tx, OpKind::GetKey { snapshot, resolve });
        self.drive(now);
        req
    }

    /// Reads `\xff\xff/transaction/conflicting_keys/...`: after a commit failed with
    /// `report_conflicting_keys`, each conflicting read range `[b, e)` shows as
    /// `prefix+b = "1"` and `prefix+e = "0"` (FDB's `ConflictingKeysImpl`).
    fn conflicting_keys(
        &self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        opts: RangeOptions,
    ) -> RangeResult {
        let mut rows = Vec::new();
        if let Some(set) = self
            .engine
            .txs
            .get(&tx)
            .and_then(|t| t.conflicting.as_ref())
        {
            for r in set.ranges() {
                for (k, v) in [(&r.begin, &b"1"[..]), (&r.end, &b"0"[..])] {
                    let mut key = CONFLICTING_KEYS_PREFIX.to_vec();
                    key.extend_from_slice(k);
                    if begin <= key.as_slice() && key.as_slice() < end {
                        rows.push(KeyValue {
                            key: Bytes::from(key),
                            value: Bytes::from_static(v),
                        });
                    }
                }
            }
        }
        if opts.reverse {
            rows.reverse();
        }
        let more = opts.limit > 0 && rows.len() > opts.limit;
        if opts.limit > 0 {
            rows.truncate(opts.limit);
        }
        RangeResult { rows, more }
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
    ) -> RequestId {
        self.now = now;
        let req = self.new_request_id();
        // `fdb_transaction_get_range` checks its arguments before the transaction's state.
        if opts.mode == StreamingMode::Exact && opts.limit == 0 && opts.target_bytes == 0 {
            self.finish(req, fdb(ErrorCode::EXACT_MODE_WITHOUT_LIMITS));
            return req;
        }
        if opts.mode == StreamingMode::Iterator && opts.iteration == 0 {
            self.finish(req, fdb(ErrorCode::CLIENT_INVALID_OPERATION));
            return req;
        }
        if let Some(e) = self.engine.txs.get(&tx).and_then(|t| t.deferred.clone()) {
            self.finish(req, Err(e));
            return req;
        }
        // A special key range, readable even after the commit (RYW's special key space).
        if begin.key.starts_with(CONFLICTING_KEYS_PREFIX) && self.engine.txs.contains_key(&tx) {
            let (b, _) = normalize(&begin);
            let (e, _) = normalize(&end);
            let r = self.conflicting_keys(tx, &b, &e, opts);
            self.finish(req, Ok(Reply::Range(r)));
            return req;
        }
        if let Err(e) = self.check_usable(tx) {
            self.finish(req, Err(e));
            return req;
        }
        let max = self
            .engine
            .txs
            .get(&tx)
            .map_or(&b""[..], |t| t.max_read_key());
        if begin.key.as_ref() > max || end.key.as_ref() > max {
            self.finish(req, fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE));
            return req;
        }
        // RYW `getRange`: selectors that cannot enclose a key give no rows at once, without a
        // read (no conflict range; it does not count as a read either).
        let ((bk, bo), (ek, eo)) = (normalize(&begin), normalize(&end));
        if bo >= eo && bk >= ek {
            self.finish(req, Ok(Reply::Range(RangeResult::default())));
            return req;
        }
        self.insert_op(
            req,
            tx,
            OpKind::Range {
                snapshot,
                begin,
                end,
                begin_key: None,
                end_key: None,
                resolving: None,
                opts,
                scan: None,
            },
        );
        self.drive(now);
        req
    }

    /// Sets `key` to `value`.
    pub fn set(&mut self, tx: TransactionId, key: &[u8], value: &[u8]) -> Result<(), ClientError> {
        self.set_bytes(
            tx,
            Bytes::copy_from_slice(key),
            Bytes::copy_from_slice(value),
        )
    }

    /// [`Client::set`] with buffers the caller already owns: nothing is copied.
    pub fn set_bytes(
        &mut self,
        tx: TransactionId,
        key: Bytes,
        value: Bytes,
    ) -> Result<(), ClientError> {
        if let Some(e) = self.skipped(tx) {
            return Err(e);
        }
        let r = self.set_inner(tx, key, value);
        self.defer(tx, r)
    }

    fn set_inner(
        &mut self,
        tx: TransactionId,
        key: Bytes,
        value: Bytes,
    ) -> Result<(), ClientError> {
        let conflict = self.take_write_conflict(tx)?;
        self.check_write(tx, &key)?;
        check_write_size(&key, self.tx_ref(tx)?.options.raw_access())?;
        if value.len() > VALUE_SIZE_LIMIT {
            return fdb(ErrorCode::VALUE_TOO_LARGE);
        }
        let t = self.tx_mut(tx)?;
        if conflict {
            let end = key_after(&key);
            t.write_conflicts.insert_owned(key.clone(), end);
        }
        t.writes.set(key, value);
        Ok(())
    }

    /// Removes `key`.
    pub fn clear(&mut self, tx: TransactionId, key: &[u8]) -> Result<(), ClientError> {
        if let Some(e) = self.skipped(tx) {
            return Err(e);
        }
        let r = self.clear_inner(tx, key);
        self.defer(tx, r)
    }

    fn clear_inner(&mut self, tx: TransactionId, key: &[u8]) -> Result<(), ClientError> {
        let conflict = self.take_write_conflict(tx)?;
        self.check_write(tx, key)?;
        // No key that long exists: clearing it does nothing (RYW's `clear(key)`).
        if key.len() > max_key_size(key) {
            return Ok(());
        }
        let end = key_after(key);
        let t = self.tx_mut(tx)?;
        t.writes.clear_range(key, &end);
        if conflict {
            t.write_conflicts.insert(key, &end);
        }
        Ok(())
    }

    /// Removes every key in `[begin, end)`.
    pub fn clear_range(
        &mut self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
    ) -> Result<(), ClientError> {
        if let Some(e) = self.skipped(tx) {
            return Err(e);
        }
        let r = self.clear_range_inner(tx, begin, end);
        self.defer(tx, r)
    }

    fn clear_range_inner(
        &mut self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
    ) -> Result<(), ClientError> {
        // libfdb_c checks the order first (`ThreadSafeTransaction::clear`), then RYW's rules:
        // either end beyond the legal range fails (nothing is clamped), and ends longer than
        // any key are cut to one byte past the longest key.
        if begin > end {
            return fdb(ErrorCode::INVERTED_RANGE);
        }
        let conflict = self.take_write_conflict(tx)?;
        let t = self.tx_mut(tx)?;
        Self::check_not_committing(t)?;
        let max = t.max_write_key();
        if begin > max || end > max {
            return fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE);
        }
        let (begin, end) = (truncate_key(begin), truncate_key(end));
        let t = self.tx_mut(tx)?;
        if begin < end {
            t.writes.clear_range(begin, end);
            if conflict {
                t.write_conflicts.insert(begin, end);
            }
        }
        Ok(())
    }

    /// An atomic operation (`mutation_type`: ADD_VALUE, AND, OR, XOR, APPEND_IF_FITS, MAX, MIN,
    /// SET_VERSIONSTAMPED_KEY, SET_VERSIONSTAMPED_VALUE, BYTE_MIN, BYTE_MAX, COMPARE_AND_CLEAR).
    pub fn atomic_op(
        &mut self,
        tx: TransactionId,
        key: &[u8],
        param: &[u8],
        kind: u8,
    ) -> Result<(), ClientError> {
        if let Some(e) = self.skipped(tx) {
            return Err(e);
        }
        let r = self.atomic_op_inner(tx, key, param, kind);
        self.defer(tx, r)
    }

    fn atomic_op_inner(
        &mut self,
        tx: TransactionId,
        key: &[u8],
        param: &[u8],
        kind: u8,
    ) -> Result<(), ClientError> {
        // RYW's order: the legal range, then the mutation type, then the sizes.
        let conflict = self.take_write_conflict(tx)?;
        self.check_write(tx, key)?;
        let valid = atomic::is_atomic_op(kind)
            || kind == mt::SET_VERSIONSTAMPED_KEY
            || kind == mt::SET_VERSIONSTAMPED_VALUE;
        if !valid {
            return fdb(ErrorCode::INVALID_MUTATION_TYPE);
        }
        check_write_size(key, self.tx_ref(tx)?.options.raw_access())?;
        // Since API 510 `and` and `min` mean their V2 forms.
        let kind = match kind {
            mt::AND => mt::AND_V2,
            mt::MIN => mt::MIN_V2,
            k => k,
        };
        if param.len() > VALUE_SIZE_LIMIT {
            return fdb(ErrorCode::VALUE_TOO_LARGE);
        }
        let t = self.tx_mut(tx)?;
        let read_version = match t.read_version {
            ReadVersion::Ready(v) => v,
            _ => 0,
        };
        match kind {
            mt::SET_VERSIONSTAMPED_KEY => {
                let Some(pos) = atomic::versionstamp_offset(key) else {
                    return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
                };
                // libfdb_c fills the placeholder with the read version it knows (zeros
                // otherwise) and never adds a write conflict range for the key.
                let mut k = key.to_vec();
                atomic::place_versionstamp(&mut k[pos..pos + 10], read_version, 0);
                let stem = &key[..key.len() - 4];
                let mut lo = stem.to_vec();
                atomic::place_versionstamp(&mut lo[pos..pos + 10], read_version, 0);
                let mut hi = stem.to_vec();
                hi[pos..pos + 10].fill(0xff);
                hi.push(0);
                t.writes.set_versionstamped_key(
                    Bytes::from(k),
                    Bytes::copy_from_slice(param),
                    KeyRange::new(lo, hi),
                );
            }
            mt::SET_VERSIONSTAMPED_VALUE => {
                if atomic::versionstamp_offset(param).is_none() {
                    return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
                }
                t.writes.set_versionstamped_value(
                    Bytes::copy_from_slice(key),
                    Bytes::copy_from_slice(param),
                );
                if conflict {
                    t.write_conflicts.insert(key, &key_after(key));
                }
            }
            _ => {
                t.writes.atomic_op(
                    Bytes::copy_from_slice(key),
                    kind,
                    Bytes::copy_from_slice(param),
                );
                if conflict {
                    t.write_conflicts.insert(key, &key_after(key));
                }
            }
        }
        Ok(())
    }

    /// Adds a read or write conflict range by hand. An inverted range is refused at once and
    /// not remembered (see [`check_conflict_range`]); other errors also fail the next read or
    /// the commit.
    pub fn add_conflict_range(
        &mut self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        kind: ConflictRangeType,
    ) -> Result<(), ClientError> {
        check_conflict_range(begin, end)?;
        if let Some(e) = self.skipped(tx) {
            return Err(e);
        }
        let r = self.add_conflict_range_inner(tx, begin, end, kind);
        self.defer(tx, r)
    }

    fn add_conflict_range_inner(
        &mut self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        kind: ConflictRangeType,
    ) -> Result<(), ClientError> {
        let t = self.tx_mut(tx)?;
        Self::check_not_committing(t)?;
        let max = match kind {
            ConflictRangeType::Read => t.max_read_key(),
            ConflictRangeType::Write => t.max_write_key(),
        };
        if begin > max || end > max {
            return fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE);
        }
        let (begin, end) = (truncate_key(begin), truncate_key(end));
        if begin >= end {
            return Ok(());
        }
        match kind {
            // RYW's `updateConflictMap`: not over what the transaction itself wrote.
            ConflictRangeType::Read if !t.options.ryw_disabled => {
                for (b, e) in t.writes.unmodified(begin, end) {
                    t.read_conflicts.insert_owned(b, e);
                }
            }
            ConflictRangeType::Read => t.read_conflicts.insert(begin, end),
            ConflictRangeType::Write => t.write_conflicts.insert(begin, end),
        }
        Ok(())
    }

    /// Commits. Finishes with [`Reply::Committed`].
    pub fn commit(&mut self, now: Instant, tx: TransactionId) -> RequestId {
        self.now = now;
        let req = self.new_request_id();
        match self.engine.txs.get_mut(&tx) {
            None => {
                self.finish(req, fdb(ErrorCode::TRANSACTION_CANCELLED));
                return req;
            }
            // A failed write fails the commit before it starts (the transaction is not
            // marked as committing, as in `ThreadSafeTransaction::commit`).
            Some(t) if t.deferred.is_some() => {
                let e = t.deferred.clone().expect("checked");
                self.finish(req, Err(e));
                return req;
            }
            Some(t) if t.committing => {
                let e = Self::check_not_committing(t);
                self.finish(req, e.map(|_| Reply::Retry));
                return req;
            }
            Some(t) if t.finished.is_some() => {
                let e = t.finished.expect("checked");
                self.finish(req, fdb(e));
                return req;
            }
            Some(t) => {
                t.committing = true;
                if let Some(e) = t.read_failed.clone() {
                    self.insert_op(req, tx, OpKind::Commit);
                    self.fail_commit(req, tx, e);
                    return req;
                }
            }
        }
        self.insert_op(req, tx, OpKind::Commit);
        self.drive(now);
        req
    }

    /// The versionstamp of a committed transaction.
    pub fn versionstamp(&self, tx: TransactionId) -> Option<[u8; 10]> {
        self.engine.txs.get(&tx)?.committed?.1
    }

    /// The version a transaction committed at (`-1` if it wrote nothing).
    pub fn committed_version(&self, tx: TransactionId) -> Option<Version> {
        Some(self.engine.txs.get(&tx)?.committed?.0)
    }

    /// About how many bytes the commit would carry.
    pub fn approximate_size(&self, tx: TransactionId) -> usize {
        self.engine.txs.get(&tx).map_or(0, Self::commit_size)
    }

    /// `fdb_transaction_on_error`: finishes with [`Reply::Retry`] after the backoff (the
    /// transaction is then reset and can run again), or with the error if it must not retry.
    pub fn on_error(&mut self, now: Instant, tx: TransactionId, code: ErrorCode) -> RequestId {
        self.now = now;
        let req = self.new_request_id();
        let Some(t) = self.engine.txs.get_mut(&tx) else {
            self.finish(req, fdb(ErrorCode::TRANSACTION_CANCELLED));
            return req;
        };
        // A finished transaction fails with what finished it; an `on_error` that refuses to
        // retry finishes the transaction: everything but `reset` then fails with
        // `transaction_cancelled` (RYW's `onError`).
        if let Some(e) = t.finished {
            self.finish(req, fdb(e));
            return req;
        }
        let action = code.on_error_action();
        let retry_ok = t.options.retry_limit.is_none_or(|n| t.retries < n);
        let refuse = match action {
            OnErrorAction::FailWithClientInvalidOperation => {
                Some(ErrorCode::CLIENT_INVALID_OPERATION)
            }
            OnErrorAction::Fatal => Some(code),
            _ if !retry_ok || t.timed_out => Some(code),
            _ => None,
        };
        if let Some(e) = refuse {
            t.finished = Some(ErrorCode::TRANSACTION_CANCELLED);
            self.finish(req, fdb(e));
            return req;
        }
        let delay = match action {
            // (Refused above.)
            OnErrorAction::FailWithClientInvalidOperation
            | OnErrorAction::Fatal
            | OnErrorAction::RetryImmediately => Duration::ZERO,
            OnErrorAction::RetryAfterFutureVersionDelay => {
                knobs::FUTURE_VERSION_RETRY_DELAY.min(t.options.max_retry_delay)
            }
            OnErrorAction::RetryWithBackoff => {
                let d = t.backoff.mul_f64(self.rng.random01());
                t.backoff = code.next_backoff(t.backoff, t.options.max_retry_delay);
                d
            }
        };
        t.retries += 1;
        // Reset now, keeping options, backoff, retry count and the timeout clock.
        let keep_opts = t.options.clone();
        let (backoff, retries, created, timed_out) = (t.backoff, t.retries, t.created, t.timed_out);
        self.cancel_tx_ops(tx, ErrorCode::TRANSACTION_CANCELLED);
        let trace = self.rng.uid();
        if let Some(t) = self.engine.txs.get_mut(&tx) {
            *t = Tx::new(trace, created);
            t.backoff = backoff;
            t.retries = retries;
            t.timed_out = timed_out;
        }
        // RYW's `resetRyow`: the options return to the database's defaults, except the
        // persistent ones (fdb.options: timeout, retry_limit, max_retry_delay); size_limit,
        // read_your_writes_disable, report_conflicting_keys, ... must be set again.
        self.apply_defaults(now, tx);
        if let Some(t) = self.engine.txs.get_mut(&tx) {
            t.options.timeout = keep_opts.timeout;
            t.options.retry_limit = keep_opts.retry_limit;
            t.options.max_retry_delay = keep_opts.max_retry_delay;
        }
        self.engine
            .ops
            .insert(req, Op::new(tx, OpKind::Backoff, Wait::Timer, 0, true));
        self.engine.add_timer(now + delay, Timer::Op(req));
        req
    }

    /// Watches `key`: fires once its value differs from the one this transaction sees, after
    /// the transaction commits.
    pub fn watch(&mut self, now: Instant, tx: TransactionId, key: &[u8]) -> RequestId {
        self.now = now;
        let req = self.new_request_id();
        let check = self.check_read_key(tx, key).and_then(|_| {
            let t = self.tx_ref(tx)?;
            if t.options.ryw_disabled {
                return fdb(ErrorCode::WATCHES_DISABLED);
            }
            if self.engine.watches >= MAX_OUTSTANDING_WATCHES {
                return fdb(ErrorCode::TOO_MANY_WATCHES);
            }
            Ok(())
        });
        if let Err(e) = check {
            self.finish(req, Err(e));
            return req;
        }
        self.engine.watches += 1;
        let value = match self.engine.txs.get(&tx).map(|t| t.writes.lookup(key)) {
            Some(Lookup::Known(v)) => Some(v),
            _ => None,
        };
        self.insert_op(
            req,
            tx,
            OpKind::Watch {
                key: Bytes::copy_from_slice(key),
                value,
                version: None,
                reading: false,
            },
        );
        if let Some(t) = self.engine.txs.get_mut(&tx) {
            t.watches.push(req);
        }
        self.drive(now);
        req
    }

    /// Gives up on a request: no event will come for it.
    pub fn cancel(&mut self, now: Instant, req: RequestId) {
        self.now = now;
        if let Some(op) = self.engine.ops.remove(&req) {
            if matches!(op.kind, OpKind::Watch { .. }) {
                self.engine.watches -= 1;
            }
        }
    }

    // ----- helpers -----

    /// Like libfdb_c, a failed write is remembered and fails the next read or the commit.
    /// Once an error is deferred, libfdb_c runs no further write, option or conflict range
    /// of the transaction (`doOnMainThreadVoid` returns early while `deferredError` is set):
    /// they are skipped, and answer the deferred error.
    fn skipped(&self, tx: TransactionId) -> Option<ClientError> {
        self.engine.txs.get(&tx)?.deferred.clone()
    }

    fn defer(&mut self, tx: TransactionId, r: Result<(), ClientError>) -> Result<(), ClientError> {
        if let Err(e) = &r {
            if let Some(t) = self.engine.txs.get_mut(&tx) {
                if t.deferred.is_none() {
                    t.deferred = Some(e.clone());
                }
            }
        }
        r
    }

    fn tx_ref(&self, tx: TransactionId) -> Result<&Tx, ClientError> {
        self.engine
            .txs
            .get(&tx)
            .ok_or(ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED))
    }

    fn tx_mut(&mut self, tx: TransactionId) -> Result<&mut Tx, ClientError> {
        self.engine
            .txs
            .get_mut(&tx)
            .ok_or(ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED))
    }

    fn check_read_key(&mut self, tx: TransactionId, key: &[u8]) -> Result<(), ClientError> {
        self.check_usable(tx)?;
        let t = self.tx_ref(tx)?;
        if t.timed_out {
            return fdb(ErrorCode::TRANSACTION_TIMED_OUT);
        }
        if key >= t.max_read_key() {
            return fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE);
        }
        Ok(())
    }

    /// A failed write fails every later read and commit, before any other check
    /// (`ThreadSafeTransaction` checks the deferred error first); a transaction whose commit
    /// has started is done until it is reset.
    fn check_usable(&mut self, tx: TransactionId) -> Result<(), ClientError> {
        let t = self.tx_mut(tx)?;
        if let Some(e) = &t.deferred {
            return Err(e.clone());
        }
        Self::check_not_committing(t)?;
        if let Some(e) = t.finished {
            return fdb(e);
        }
        Ok(())
    }

    /// RYW's `checkUsedDuringCommit`: once the commit started, any use fails, and the first
    /// one finishes the transaction with `used_during_commit` (if nothing else did before).
    fn check_not_committing(t: &mut Tx) -> Result<(), ClientError> {
        if t.committing {
            t.finished.get_or_insert(ErrorCode::USED_DURING_COMMIT);
            return fdb(ErrorCode::USED_DURING_COMMIT);
        }
        Ok(())
    }

    /// RYW's first checks of a write: not after commit, not beyond the legal range.
    fn check_write(&mut self, tx: TransactionId, key: &[u8]) -> Result<(), ClientError> {
        let t = self.tx_mut(tx)?;
        Self::check_not_committing(t)?;
        if key >= t.max_write_key() {
            return fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE);
        }
        Ok(())
    }

    /// Whether the write about to be made adds its write conflict range: RYW consumes
    /// `next_write_no_write_conflict_range` as each write starts, even one that then fails.
    fn take_write_conflict(&mut self, tx: TransactionId) -> Result<bool, ClientError> {
        let t = self.tx_mut(tx)?;
        Ok(!core::mem::take(&mut t.options.next_write_no_conflict))
    }

    /// NativeAPI's `getSize`, checked against `size_limit`: the mutations and both conflict
    /// range lists, each element counting `sizeof(KeyRangeRef)` (24 bytes in libfdb_c 7.3.77)
    /// besides its keys.
    fn commit_size(t: &Tx) -> usize {
        const PER_RANGE: usize = 24;
        let conflicts: usize = t
            .read_conflicts
            .ranges()
            .chain(t.write_conflicts.ranges())
            .map(|r| r.begin.len() + r.end.len() + PER_RANGE)
            .sum();
        t.writes.approximate_size() + conflicts
    }

    fn key_resolve(sel: KeySelector, max: Bytes) -> KeyResolve {
        let (key, offset) = normalize(&sel);
        if offset > 0 {
            let scan = Scan::new(key.clone(), max, false, Some(offset as usize), None);
            KeyResolve { sel, scan }
        } else {
            let rows = (1 - offset as i64) as usize;
            let scan = Scan::new(Bytes::new(), key.clone(), true, Some(rows), None);
            KeyResolve { sel, scan }
        }
    }

    fn insert_op(&mut self, req: RequestId, tx: TransactionId, kind: OpKind) {
        if matches!(
            kind,
            OpKind::Get { .. } | OpKind::GetKey { .. } | OpKind::Range { .. }
        ) {
            if let Some(t) = self.engine.txs.get_mut(&tx) {
                t.read_started = true;
            }
        }
        let start = self.rng.next_u64() as usize;
        self.engine
            .ops
            .insert(req, Op::new(tx, kind, Wait::Ready, start, false));
    }

    /// Fails every unfinished request of `tx`.
    fn cancel_tx_ops(&mut self, tx: TransactionId, err: ErrorCode) {
        let ids: Vec<RequestId> = self
            .engine
            .ops
            .iter()
            .filter(|(_, op)| op.tx == tx && !op.detached)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.fail_op(id, ClientError::Fdb(err));
        }
    }

    fn fail_op(&mut self, req: RequestId, err: ClientError) {
        if let Some(op) = self.engine.ops.remove(&req) {
            if matches!(op.kind, OpKind::Watch { .. }) {
                self.engine.watches -= 1;
            }
            let read = matches!(
                op.kind,
                OpKind::Get { .. } | OpKind::GetKey { .. } | OpKind::Range { .. }
            );
            if read && err.code() != ErrorCode::TRANSACTION_CANCELLED {
                if let Some(t) = self.engine.txs.get_mut(&op.tx) {
                    t.read_failed.get_or_insert(err.clone());
                }
            }
            self.finish(req, Err(err));
        }
    }

    fn succeed_op(&mut self, req: RequestId, reply: Reply) {
        if let Some(op) = self.engine.ops.remove(&req) {
            if matches!(op.kind, OpKind::Watch { .. }) {
                self.engine.watches -= 1;
            }
            self.finish(req, Ok(reply));
        }
    }

    pub(crate) fn fire_timers(&mut self, now: Instant) {
        while let Some((&(at, seq), _)) = self.engine.timers.iter().next() {
            if at > now {
                break;
            }
            let t = self.engine.timers.remove(&(at, seq)).expect("present");
            match t {
                Timer::Op(req) => {
                    let backoff = match self.engine.ops.get_mut(&req) {
                        Some(op) if matches!(op.kind, OpKind::Backoff) => true,
                        Some(op) => {
                            op.wait = Wait::Ready;
                            false
                        }
                        None => false,
                    };
                    if backoff {
                        self.succeed_op(req, Reply::Retry);
                    }
                }
                Timer::Dummy(parent) => {
                    let key = self
                        .engine
                        .ops
                        .get(&parent)
                        .and_then(|o| self.engine.txs.get(&o.tx))
                        .and_then(|t| t.self_conflict.clone());
                    if let Some(key) = key {
                        self.start_dummy(parent, key);
                    }
                }
                Timer::Deadline(tx) => {
                    let due =
                        self.engine.txs.get(&tx).is_some_and(|t| {
                            t.options.timeout.is_some_and(|d| t.created + d <= now)
                        });
                    if due {
                        if let Some(t) = self.engine.txs.get_mut(&tx) {
                            t.timed_out = true;
                        }
                        self.cancel_tx_ops(tx, ErrorCode::TRANSACTION_TIMED_OUT);
                    }
                }
            }
        }
    }

    /// Runs every runnable operation until none can progress.
    pub(crate) fn run_ready_ops(&mut self) {
        // One scratch list, reused: this runs on every input and every call.
        let mut ready = core::mem::take(&mut self.engine.scratch);
        let mut rounds = 0u32;
        loop {
            rounds += 1;
            if rounds > MAX_READY_ROUNDS {
                // An operation that stays runnable without progress is a bug; fail it rather
                // than spin the driver's thread forever.
                for &id in &ready {
                    if self
                        .engine
                        .ops
                        .get(&id)
                        .is_some_and(|o| o.wait == Wait::Ready)
                    {
                        self.fail_op(id, ClientError::Fdb(ErrorCode::INTERNAL_ERROR));
                    }
                }
                break;
            }
            ready.clear();
            ready.extend(
                self.engine
                    .ops
                    .iter()
                    .filter(|(_, op)| op.wait == Wait::Ready)
                    .map(|(id, _)| *id),
            );
            if ready.is_empty() {
                break;
            }
            for &id in &ready {
                self.advance(id);
            }
        }
        self.engine.scratch = ready;
    }

    pub(crate) fn insert_status_op(&mut self, req: RequestId) {
        let kind = OpKind::Status(alloc::boxed::Box::default());
        self.engine
            .ops
            .insert(req, Op::new(TransactionId(0), kind, Wait::Ready, 0, true));
    }

    pub(crate) fn status_state(&mut self, req: RequestId) -> Option<&mut crate::status::StatusOp> {
        match &mut self.engine.ops.get_mut(&req)?.kind {
            OpKind::Status(st) => Some(st),
            _ => None,
        }
    }

    pub(crate) fn status_timer(&mut self, req: RequestId, at: Instant) {
        self.engine.add_timer(at, Timer::Op(req));
    }

    pub(crate) fn status_wait(&mut self, req: RequestId) {
        self.set_wait(req, Wait::Reply);
    }

    pub(crate) fn finish_status(&mut self, req: RequestId, reply: Reply) {
        self.succeed_op(req, reply);
    }

    fn set_wait(&mut self, req: RequestId, wait: Wait) {
        if let Some(op) = self.engine.ops.get_mut(&req) {
            op.wait = wait;
        }
    }

    /// The transaction's read version, asking for one if needed (`None`: wait).
    fn read_version_for(
        &mut self,
        req: RequestId,
        tx: TransactionId,
        for_commit: bool,
    ) -> Option<Result<Version, ClientError>> {
        let t = self.engine.txs.get_mut(&tx)?;
        match t.read_version {
            ReadVersion::Ready(v) => Some(Ok(v)),
            ReadVersion::Failed(e) => Some(fdb(e)),
            ReadVersion::Pending => {
                self.set_wait(req, Wait::ReadVersion);
                None
            }
            ReadVersion::None => {
                t.read_version = ReadVersion::Pending;
                let mut flags = t.options.priority.flags();
                // A transaction that only writes asks for a causally risky read version at
                // commit (`Transaction::commitMutations`), as the captures show.
                if for_commit || t.options.causal_read_risky {
                    flags |= GetReadVersionRequest::FLAG_CAUSAL_READ_RISKY;
                }
                self.queue_grv(flags, GrvWaiter::Tx(tx));
                self.set_wait(req, Wait::ReadVersion);
                None
            }
        }
    }

    pub(crate) fn on_tx_read_version(
        &mut self,
        tx: TransactionId,
        result: Result<Version, ClientError>,
        locked: bool,
    ) {
        if let Some(t) = self.engine.txs.get_mut(&tx) {
            // A locked database refuses transactions that are not lock-aware
            // (`extractReadVersion`).
            let result = match result {
                Ok(_) if locked && !t.options.lock_aware => {
                    Err(ClientError::Fdb(ErrorCode::DATABASE_LOCKED))
                }
                r => r,
            };
            if t.read_version == ReadVersion::Pending {
                t.read_version = match result {
                    Ok(v) => ReadVersion::Ready(v),
                    Err(e) => ReadVersion::Failed(e.code()),
                };
            }
        }
        for op in self.engine.ops.values_mut() {
            if op.tx == tx && op.wait == Wait::ReadVersion {
                op.wait = Wait::Ready;
            }
        }
    }

    fn advance(&mut self, req: RequestId) {
        let Some(op) = self.engine.ops.get(&req) else {
            return;
        };
        let tx = op.tx;
        if !op.detached {
            match self.engine.txs.get(&tx) {
                None => {
                    return self.fail_op(req, ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED))
                }
                Some(t) if t.timed_out => {
                    return self.fail_op(req, ClientError::Fdb(ErrorCode::TRANSACTION_TIMED_OUT))
                }
                Some(t) if t.deferred.is_some() => {
                    let e = t.deferred.clone().expect("checked");
                    if matches!(op.kind, OpKind::Commit) {
                        return self.fail_commit(req, tx, e);
                    }
                    return self.fail_op(req, e);
                }
                _ => {}
            }
        }
        match &op.kind {
            OpKind::ReadVersion => match self.read_version_for(req, tx, false) {
                Some(Ok(v)) => self.succeed_op(req, Reply::Version(v)),
                Some(Err(e)) => self.fail_op(req, e),
                None => {}
            },
            OpKind::Get { .. } => self.advance_get(req, tx),
            OpKind::GetKey { .. } => self.advance_get_key(req, tx),
            OpKind::Range { .. } => self.advance_range(req, tx),
            OpKind::Commit => self.advance_commit(req, tx),
            OpKind::Watch { .. } => self.advance_watch(req, tx),
            OpKind::Backoff => self.set_wait(req, Wait::Timer),
            OpKind::Status(_) => self.advance_status(req),
            OpKind::Metrics(_) => self.advance_metrics(req, tx),
        }
    }

    // ----- point reads -----

    fn advance_get(&mut self, req: RequestId, tx: TransactionId) {
        let Some(OpKind::Get { key, snapshot }) = self.engine.ops.get(&req).map(|o| &o.kind) else {
            return;
        };
        let (key, snapshot) = (key.clone(), *snapshot);
        let t = &self.engine.txs[&tx];
        if !t.options.ryw_disabled {
            match t.writes.lookup(&key) {
                Lookup::Known(v) => return self.succeed_op(req, Reply::Value(v)),
                Lookup::Unreadable => {
                    return self.fail_op(req, ClientError::Fdb(ErrorCode::ACCESSED_UNREADABLE))
                }
                _ => {}
            }
        }
        let version = match self.read_version_for(req, tx, false) {
            Some(Ok(v)) => v,
            Some(Err(e)) => return self.fail_op(req, e),
            None => return,
        };
        let _ = snapshot;
        let t = &self.engine.txs[&tx];
        if !t.options.ryw_disabled {
            if let Some(v) = t.cache.get(&key) {
                return self.finish_get(req, v);
            }
        }
        self.send_get_value(req, tx, key, version);
    }

    /// Sends a `GetValueRequest` for `key` to a replica of its shard (or looks the shard up
    /// first); `false` if the op now waits for the lookup.
    fn send_get_value(
        &mut self,
        req: RequestId,
        tx: TransactionId,
        key: Bytes,
        version: Version,
    ) -> bool {
        let Some(server) = self.pick_server(req, tx, &key, false) else {
            return false;
        };
        let token = self.rng.uid();
        let msg = GetValueRequest {
            key,
            version,
            tags: None,
            reply: ReplyPromise { token },
            span_context: self.span(tx),
            tenant_info: TenantInfo::none(),
            options: None,
            ss_latest_commit_versions: VersionVector::empty(-1),
        };
        self.set_wait(req, Wait::Reply);
        self.send(
            self.now,
            &server.addr,
            server.stream(StorageServerInterface::GET_VALUE),
            &msg,
            token,
            Pending::Storage { op: req },
        );
        true
    }

    fn span(&mut self, tx: TransactionId) -> SpanContext {
        let trace_id = self
            .engine
            .txs
            .get(&tx)
            .map(|t| t.trace_id)
            .unwrap_or_default();
        SpanContext {
            trace_id,
            span_id: self.rng.next_u64(),
            flags: 0,
        }
    }

    /// The replica to ask for `key` (keys before it when `reverse`), or `None` after asking a
    /// commit proxy where the key lives (the op then waits).
    fn pick_server(
        &mut self,
        req: RequestId,
        tx: TransactionId,
        key: &[u8],
        reverse: bool,
    ) -> Option<Replica> {
        if let Some(r) = self.choose_replica(req, key, reverse) {
            return Some(r);
        }
        self.set_wait(req, Wait::Location);
        self.request_location(tx, key, reverse);
        None
    }

    /// Load balancing over the replicas of the shard holding `key` (keys before it when
    /// `reverse`), or `None` if that shard's location is not cached: the first attempt goes
    /// to the healthy replica with the lowest smoothed latency (untried ones first, so every
    /// replica gets measured); retries rotate through the others. Replicas whose connection
    /// failed recently are avoided while another is available. Nothing is cloned or
    /// allocated: this runs for every read.
    fn choose_replica(&mut self, req: RequestId, key: &[u8], reverse: bool) -> Option<Replica> {
        let now = self.now;
        let engine = &mut self.engine;
        let shard = if reverse {
            engine.locations.lookup_before(key)
        } else {
            engine.locations.lookup(key)
        }?;
        let servers = &shard.servers;
        let n = servers.len();
        let (start, attempt) = engine
            .ops
            .get(&req)
            .map_or((0, 0), |o| (o.start, o.attempt));
        let stats = &engine.servers;
        let at = |j: usize| start.wrapping_add(attempt).wrapping_add(j) % n;
        let healthy = |i: usize| {
            stats
                .get(&servers[i].unique_id)
                .and_then(|s| s.failed_until)
                .is_none_or(|t| t <= now)
        };
        let any_healthy = (0..n).any(|j| healthy(at(j)));
        let mut candidates = (0..n).map(at).filter(|&i| !any_healthy || healthy(i));
        let pick = if attempt == 0 {
            candidates.min_by_key(|&i| {
                stats
                    .get(&servers[i].unique_id)
                    .and_then(|s| s.latency)
                    .unwrap_or(Duration::ZERO)
            })
        } else {
            candidates.next()
        }?;
        let s = &servers[pick];
        let replica = Replica {
            id: s.unique_id,
            addr: s.get_value.endpoint.addresses.address.clone(),
            base: s.get_value.endpoint.token,
        };
        if let Some(op) = engine.ops.get_mut(&req) {
            op.server = Some((replica.id, now));
        }
        Some(replica)
    }

    /// A reply came from the op's server: update its latency.
    fn server_answered(&mut self, req: RequestId) {
        let now = self.now;
        let Some((id, sent)) = self.engine.ops.get_mut(&req).and_then(|o| o.server.take()) else {
            return;
        };
        let s = self.engine.servers.entry(id).or_default();
        let lat = now.saturating_since(sent);
        s.latency = Some(match s.latency {
            Some(old) => (old * 4 + lat) / 5,
            None => lat,
        });
        s.failed_until = None;
    }

    fn shard_of(&self, key: &[u8], reverse: bool) -> Option<&Shard> {
        if reverse {
            self.engine.locations.lookup_before(key)
        } else {
            self.engine.locations.lookup(key)
        }
    }

    fn request_location(&mut self, tx: TransactionId, key: &[u8], reverse: bool) {
        let k = (Bytes::copy_from_slice(key), reverse);
        if self.engine.locating.contains(&k) {
            return;
        }
        // Skips proxies whose endpoint is gone; with none left, wait for new proxies.
        let Some(proxy) = self.pick_commit_proxy(CommitProxyInterface::GET_KEY_SERVERS_LOCATIONS)
        else {
            return;
        };
        let addr = proxy.commit.endpoint.addresses.address.clone();
        let dest = proxy.stream(CommitProxyInterface::GET_KEY_SERVERS_LOCATIONS);
        let min_version = match self.engine.txs.get(&tx).map(|t| t.read_version) {
            Some(ReadVersion::Ready(v)) => v,
            _ => -1,
        };
        let token = self.rng.uid();
        let msg = GetKeyServerLocationsRequest {
            begin: k.0.clone(),
            end: None,
            limit: LOCATION_LIMIT,
            reverse,
            reply: ReplyPromise { token },
            span_context: self.span(tx),
            tenant: TenantInfo::none(),
            min_tenant_version: min_version,
        };
        self.engine.locating.insert(k.clone());
        self.send(
            self.now,
            &addr,
            dest,
            &msg,
            token,
            Pending::Locations {
                key: k.0,
                reverse: k.1,
            },
        );
    }

    pub(crate) fn on_locations(&mut self, key: Bytes, reverse: bool, message: &Bytes) {
        self.engine.locating.remove(&(key, reverse));
        match decode_reply::<GetKeyServerLocationsReply>(message) {
            Ok(ErrorOr::Ok(r)) => {
                for loc in r.results {
                    self.engine.locations.insert(Shard {
                        begin: loc.range.begin,
                        end: loc.range.end,
                        servers: loc.servers,
                    });
                }
                self.wake(Wait::Location);
            }
            Ok(ErrorOr::Err(e)) => {
                // A proxy that cannot answer fails the waiting reads (as the location actor
                // surfaces proxy errors); memory-limit errors are retryable by on_error.
                let waiting: Vec<RequestId> = self
                    .engine
                    .ops
                    .iter()
                    .filter(|(_, o)| o.wait == Wait::Location)
                    .map(|(id, _)| *id)
                    .collect();
                for id in waiting {
                    self.fail_op(id, ClientError::Fdb(e));
                }
            }
            Err(e) => {
                let waiting: Vec<RequestId> = self
                    .engine
                    .ops
                    .iter()
                    .filter(|(_, o)| o.wait == Wait::Location)
                    .map(|(id, _)| *id)
                    .collect();
                for id in waiting {
                    self.fail_op(id, ClientError::Decode(e.clone()));
                }
            }
        }
    }

    pub(crate) fn wake_cluster_waiters(&mut self) {
        self.wake(Wait::Cluster);
        // Lookups sent to proxies that went away will never be answered.
        self.wake(Wait::Location);
    }

    fn wake(&mut self, wait: Wait) {
        for op in self.engine.ops.values_mut() {
            if op.wait == wait {
                op.wait = Wait::Ready;
            }
        }
    }

    /// The shard's location was wrong or all its replicas failed: forget it and try again
    /// after `WRONG_SHARD_SERVER_DELAY`.
    fn relocate(&mut self, req: RequestId, key: &[u8], reverse: bool) {
        if reverse {
            self.engine.locations.invalidate_before(key);
        } else {
            self.engine.locations.invalidate(key);
        }
        let mut delay = knobs::WRONG_SHARD_SERVER_DELAY;
        if let Some(op) = self.engine.ops.get_mut(&req) {
            op.attempt = 0;
            op.wait = Wait::Timer;
            // Repeated failures back off (`allAlternativesFailedDelay`).
            for _ in 0..op.relocations.min(16) {
                delay = (delay * 2).min(MAX_RELOCATION_DELAY);
            }
            op.relocations += 1;
        }
        let at = self.now + delay;
        self.engine.add_timer(at, Timer::Op(req));
    }

    /// The key an op's storage request was about, for relocation.
    fn op_key(&self, req: RequestId) -> Option<(Bytes, bool)> {
        match &self.engine.ops.get(&req)?.kind {
            OpKind::Get { key, .. } | OpKind::Watch { key, .. } => Some((key.clone(), false)),
            OpKind::GetKey { resolve, .. } => {
                Some((resolve.scan.cursor.clone(), resolve.scan.reverse))
            }
            OpKind::Range {
                resolving: Some((_, r)),
                ..
            } => Some((r.scan.cursor.clone(), r.scan.reverse)),
            OpKind::Range { scan: Some(s), .. } => Some((s.cursor.clone(), s.reverse)),
            _ => None,
        }
    }

    pub(crate) fn on_storage_lost(&mut self, req: RequestId) {
        // Try the next replica; after all of them, relocate (`all_alternatives_failed`).
        let Some((key, reverse)) = self.op_key(req) else {
            return;
        };
        let n = self.shard_of(&key, reverse).map_or(1, |s| s.servers.len());
        let until = self.now + FAILED_SERVER_AVOIDANCE;
        let Some(op) = self.engine.ops.get_mut(&req) else {
            return;
        };
        if let Some((id, _)) = op.server.take() {
            self.engine.servers.entry(id).or_default().failed_until = Some(until);
        }
        let Some(op) = self.engine.ops.get_mut(&req) else {
            return;
        };
        op.attempt += 1;
        if op.attempt >= n {
            self.relocate(req, &key, reverse);
        } else {
            op.wait = Wait::Ready;
        }
    }

    pub(crate) fn on_storage_reply(&mut self, req: RequestId, message: &Bytes) {
        self.server_answered(req);
        let Some(op) = self.engine.ops.get(&req) else {
            return;
        };
        match &op.kind {
            OpKind::Get { .. } => {
                let r = storage_error(decode_reply::<GetValueReply>(message)).and_then(|r| match r
                    .error
                {
                    Some(e) => fdb(e),
                    None => Ok(r.value),
                });
                self.on_get_reply(req, r);
            }
            OpKind::Watch { value: None, .. } => {
                let r = storage_error(decode_reply::<GetValueReply>(message)).and_then(|r| match r
                    .error
                {
                    Some(e) => fdb(e),
                    None => Ok(r.value),
                });
                self.on_watch_value(req, r);
            }
            OpKind::Watch { .. } => {
                let r = storage_error(decode_reply::<WatchValueReply>(message)).map(|r| r.version);
                self.on_watch_reply(req, r);
            }
            OpKind::GetKey { .. } | OpKind::Range { .. } => {
                let r =
                    storage_error(decode_reply::<GetKeyValuesReply>(message)).and_then(|r| match r
                        .error
                    {
                        Some(e) => fdb(e),
                        None => Ok(r),
                    });
                self.on_range_reply(req, r);
            }
            _ => {}
        }
    }

    /// Handles the read errors the client retries by itself; `true` if it did.
    fn retried_read_error(&mut self, req: RequestId, e: &ClientError) -> bool {
        let ClientError::Fdb(code) = e else {
            return false;
        };
        if *code == ErrorCode::WRONG_SHARD_SERVER || *code == ErrorCode::ALL_ALTERNATIVES_FAILED {
            if let Some((key, reverse)) = self.op_key(req) {
                self.relocate(req, &key, reverse);
                return true;
            }
        }
        if *code == ErrorCode::BROKEN_PROMISE
            || *code == ErrorCode::REQUEST_MAYBE_DELIVERED
            || *code == ErrorCode::SERVER_OVERLOADED
        {
            self.on_storage_lost(req);
            return true;
        }
        false
    }

    fn on_get_reply(&mut self, req: RequestId, r: Result<Option<Bytes>, ClientError>) {
        let value = match r {
            Ok(v) => v,
            Err(e) => {
                if !self.retried_read_error(req, &e) {
                    self.fail_op(req, e);
                }
                return;
            }
        };
        if let Some(op) = self.engine.ops.get(&req) {
            if let (OpKind::Get { key, .. }, Some(t)) = (&op.kind, self.engine.txs.get_mut(&op.tx))
            {
                if !t.options.ryw_disabled {
                    t.cache.insert_point(key, value.clone());
                }
            }
        }
        self.finish_get(req, value);
    }

    /// Completes a get with the stored value: applies the writes, adds the conflict range.
    fn finish_get(&mut self, req: RequestId, value: Option<Bytes>) {
        let Some(op) = self.engine.ops.get(&req) else {
            return;
        };
        let tx = op.tx;
        let OpKind::Get { key, snapshot } = &op.kind else {
            return;
        };
        let (key, snapshot) = (key.clone(), *snapshot);
        let Some(t) = self.engine.txs.get_mut(&tx) else {
            return self.fail_op(req, ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED));
        };
        let value = if t.options.ryw_disabled {
            value
        } else {
            match t.writes.lookup(&key) {
                Lookup::Known(v) => v,
                Lookup::Dependent(ops) => apply_ops(value, ops),
                Lookup::Unmodified | Lookup::Unreadable => value,
            }
        };
        if !snapshot {
            // Only what the writes do not decide can conflict (`updateConflictMap`).
            let decided =
                !t.options.ryw_disabled && matches!(t.writes.lookup(&key), Lookup::Known(_));
            if !decided {
                t.read_conflicts.insert(&key, &key_after(&key));
            }
        }
        self.succeed_op(req, Reply::Value(value));
    }

    // ----- range reads and selectors -----

    /// Advances a scan: sends the next storage request or finishes. `Ok(true)`: done.
    fn step_scan(
        &mut self,
        req: RequestId,
        tx: TransactionId,
        scan: &mut Scan,
        byte_limit: Option<i32>,
    ) -> Result<bool, ClientError> {
        let version = match self.read_version_for(req, tx, false) {
            Some(Ok(v)) => v,
            Some(Err(e)) => return Err(e),
            None => return Ok(false),
        };
        let ryw = !self.engine.txs[&tx].options.ryw_disabled;
        loop {
            if scan.done || scan.at_end() {
                if scan.cut_at_unreadable && scan.at_end() && !scan.more && !scan.limits_reached() {
                    return Err(ClientError::Fdb(ErrorCode::ACCESSED_UNREADABLE));
                }
                scan.done = true;
                return Ok(true);
            }
            let reverse = scan.reverse;
            if ryw {
                let t = &self.engine.txs[&tx];
                let (ra, rb) = if reverse {
                    (scan.lo.clone(), scan.cursor.clone())
                } else {
                    (scan.cursor.clone(), scan.hi.clone())
                };
                if let Some(u) = t.writes.first_unreadable(&ra, &rb, reverse) {
                    if u == if reverse { rb.clone() } else { ra.clone() } {
                        return Err(ClientError::Fdb(ErrorCode::ACCESSED_UNREADABLE));
                    }
                    // Read up to it; needing more fails there.
                    if reverse {
                        scan.lo = u;
                    } else {
                        scan.hi = u;
                    }
                    scan.cut_at_unreadable = true;
                    continue;
                }
                // Answer from the writes (all cleared) or from what was already read.
                let local = if t.writes.fully_cleared(&ra, &rb) {
                    Some((ra, rb, Vec::new()))
                } else if reverse {
                    t.cache
                        .known
                        .containing_before(&scan.cursor)
                        .map(|(kb, _)| {
                            let a = core::cmp::max(kb.clone(), scan.lo.clone());
                            let rows = t.cache.rows_in(&a, &scan.cursor);
                            (a, scan.cursor.clone(), rows)
                        })
                } else {
                    t.cache.known.containing(&scan.cursor).map(|(_, ke)| {
                        let b = core::cmp::min(ke.clone(), scan.hi.clone());
                        let rows = t.cache.rows_in(&scan.cursor, &b);
                        (scan.cursor.clone(), b, rows)
                    })
                };
                if let Some((a, b, stored)) = local {
                    let mut rows = t.writes.merge(&a, &b, &stored);
                    if reverse {
                        rows.reverse();
                    }
                    scan.take(rows, &a, &b, false);
                    continue;
                }
            }
            let Some((shard_begin, shard_end)) = self
                .shard_of(&scan.cursor, reverse)
                .map(|sh| (sh.begin.clone(), sh.end.clone()))
            else {
                let cursor = scan.cursor.clone();
                self.set_wait(req, Wait::Location);
                self.request_location(tx, &cursor, reverse);
                return Ok(false);
            };
            let (a, b) = if reverse {
                (
                    core::cmp::max(scan.lo.clone(), shard_begin),
                    scan.cursor.clone(),
                )
            } else {
                (
                    scan.cursor.clone(),
                    core::cmp::min(scan.hi.clone(), shard_end),
                )
            };
            // Stop the request where the cache already knows the keys.
            let t = &self.engine.txs[&tx];
            let (a, b) = if !ryw {
                (a, b)
            } else if reverse {
                match t.cache.known.prev_end_before(&b) {
                    Some(e) if *e > a => (e.clone(), b),
                    _ => (a, b),
                }
            } else {
                match t.cache.known.next_begin_after(&a) {
                    Some(nb) if *nb < b => (a, nb.clone()),
                    _ => (a, b),
                }
            };
            let rows_limit = scan
                .rows_left
                .map_or(REPLY_BYTE_LIMIT, |r| r.min(i32::MAX as usize) as i32);
            let bytes_limit = match (scan.bytes_left, byte_limit) {
                // A storage reply carries at most REPLY_BYTE_LIMIT whatever the caller asked.
                (Some(b), _) => b.min(REPLY_BYTE_LIMIT as usize) as i32,
                (None, Some(b)) => b,
                (None, None) => REPLY_BYTE_LIMIT,
            };
            let cursor = scan.cursor.clone();
            let server = self
                .choose_replica(req, &cursor, reverse)
                .expect("the shard was found above");
            let token = self.rng.uid();
            let msg = GetKeyValuesRequest {
                begin: KeySelector::first_greater_or_equal(a.clone()),
                end: KeySelector::first_greater_or_equal(b.clone()),
                version,
                limit: if reverse { -rows_limit } else { rows_limit },
                limit_bytes: bytes_limit,
                tags: None,
                reply: ReplyPromise { token },
                span_context: self.span(tx),
                tenant_info: TenantInfo::none(),
                options: None,
                ss_latest_commit_versions: VersionVector::empty(-1),
            };
            scan.chunk = Some((a, b));
            let addr = server.addr.clone();
            let dest = server.stream(StorageServerInterface::GET_KEY_VALUES);
            self.set_wait(req, Wait::Reply);
            self.send(
                self.now,
                &addr,
                dest,
                &msg,
                token,
                Pending::Storage { op: req },
            );
            return Ok(false);
        }
    }

    /// Feeds a storage reply into a scan.
    fn feed_scan(
        &mut self,
        tx: TransactionId,
        scan: &mut Scan,
        reply: GetKeyValuesReply,
    ) -> Result<(), ClientError> {
        let Some((a, b)) = scan.chunk.take() else {
            return Ok(());
        };
        let mut rows = reply.data.0;
        // A server must answer inside the chunk, in order; anything else would corrupt the
        // merge and the cache, so it is refused.
        let in_chunk = rows.iter().all(|kv| a <= kv.key && kv.key < b);
        let ordered = rows.windows(2).all(|w| {
            if scan.reverse {
                w[0].key > w[1].key
            } else {
                w[0].key < w[1].key
            }
        });
        if !in_chunk || !ordered {
            return Err(ClientError::Decode(
                crate::serializer::DecodeError::InvalidValue("range reply outside its request"),
            ));
        }
        // The part of the chunk the reply covers.
        let (ca, cb) = if reply.more && !rows.is_empty() {
            if scan.reverse {
                (rows.last().expect("non-empty").key.clone(), b.clone())
            } else {
                (a.clone(), key_after(&rows.last().expect("non-empty").key))
            }
        } else {
            (a, b)
        };
        let Some(t) = self.engine.txs.get_mut(&tx) else {
            return Ok(());
        };
        if !t.options.ryw_disabled {
            if scan.reverse {
                let mut asc = rows.clone();
                asc.reverse();
                t.cache.insert_range(&ca, &cb, &asc);
            } else {
                t.cache.insert_range(&ca, &cb, &rows);
            }
        }
        if !t.options.ryw_disabled && t.writes.touches(&ca, &cb) {
            if scan.reverse {
                rows.reverse();
            }
            rows = t.writes.merge(&ca, &cb, &rows);
            if scan.reverse {
                rows.reverse();
            }
        }
        scan.take(rows, &ca, &cb, true);
        Ok(())
    }

    fn scan_conflict(&mut self, tx: TransactionId, begin: &[u8], end: &[u8]) {
        let Some(t) = self.engine.txs.get_mut(&tx) else {
            return;
        };
        // Never past the readable keys: a selector resolved to the end gives `[sel, end\0)`,
        // and a read conflict range past `\xff\xff` makes the commit proxy drop the commit
        // (broken_promise, seen on a real 7.3.77 cluster).
        let end = core::cmp::min(end, t.max_read_key());
        if begin >= end {
            return;
        }
        if t.options.ryw_disabled {
            t.read_conflicts.insert(begin, end);
            return;
        }
        for (b, e) in t.writes.undecided(begin, end) {
            t.read_conflicts.insert(&b, &e);
        }
    }

    /// The key a finished selector scan resolved to.
    fn resolved_key(r: &KeyResolve, max: &[u8]) -> Bytes {
        let (_, offset) = normalize(&r.sel);
        let want = if offset > 0 {
            offset as usize
        } else {
            (1 - offset as i64) as usize
        };
        if r.scan.out.len() >= want {
            r.scan.out[want - 1].key.clone()
        } else if offset > 0 {
            Bytes::copy_from_slice(max)
        } else {
            Bytes::new()
        }
    }

    /// `addConflictRange` for a resolved selector.
    fn key_conflict(&mut self, tx: TransactionId, r: &KeyResolve, result: &Bytes) {
        let (_, offset) = normalize(&r.sel);
        let sel_key = if r.sel.or_equal {
            key_after(&r.sel.key)
        } else {
            r.sel.key.clone()
        };
        if offset <= 0 {
            self.scan_conflict(tx, result, &sel_key);
        } else {
            self.scan_conflict(tx, &sel_key, &key_after(result));
        }
    }

    fn advance_get_key(&mut self, req: RequestId, tx: TransactionId) {
        let Some(op) = self.engine.ops.get_mut(&req) else {
            return;
        };
        let OpKind::GetKey { snapshot, resolve } = &mut op.kind else {
            return;
        };
        let snapshot = *snapshot;
        let mut r = core::mem::replace(
            resolve,
            Self::key_resolve(KeySelector::default(), Bytes::new()),
        );
        let res = self.step_scan(req, tx, &mut r.scan, None);
        self.finish_key_step(req, tx, snapshot, r, res);
    }

    fn finish_key_step(
        &mut self,
        req: RequestId,
        tx: TransactionId,
        snapshot: bool,
        r: KeyResolve,
        res: Result<bool, ClientError>,
    ) {
        match res {
            Err(e) => self.fail_op(req, e),
            Ok(false) => {
                if let Some(OpKind::GetKey { resolve, .. }) =
                    self.engine.ops.get_mut(&req).map(|o| &mut o.kind)
                {
                    *resolve = r;
                }
            }
            Ok(true) => {
                let max = self
                    .engine
                    .txs
                    .get(&tx)
                    .map_or(&b"\xff"[..], |t| t.max_read_key());
                let key = Self::resolved_key(&r, max);
                if !snapshot {
                    self.key_conflict(tx, &r, &key);
                }
                self.succeed_op(req, Reply::Key(key));
            }
        }
    }

    fn advance_range(&mut self, req: RequestId, tx: TransactionId) {
        let max = Bytes::from_static(self.engine.txs[&tx].max_read_key());
        let Some(op) = self.engine.ops.get_mut(&req) else {
            return;
        };
        let OpKind::Range {
            snapshot,
            begin,
            end,
            begin_key,
            end_key,
            resolving,
            opts,
            scan: _,
        } = &mut op.kind
        else {
            return;
        };
        let snapshot = *snapshot;
        let opts = *opts;
        // 1. Resolve selectors that are not plain `first_greater_or_equal`.
        if begin_key.is_none() || end_key.is_none() {
            for (is_begin, sel, slot) in [
                (true, begin.clone(), &mut *begin_key),
                (false, end.clone(), &mut *end_key),
            ] {
                if slot.is_none() {
                    let (k, offset) = normalize(&sel);
                    if offset == 1 {
                        *slot = Some(if k > max { max.clone() } else { k });
                    } else if resolving.is_none() {
                        *resolving = Some((is_begin, Self::key_resolve(sel, max.clone())));
                    }
                }
            }
        }
        if let Some((is_begin, mut r)) = resolving.take() {
            let res = self.step_scan(req, tx, &mut r.scan, None);
            match res {
                Err(e) => return self.fail_op(req, e),
                Ok(false) => {
                    if let Some(OpKind::Range { resolving, .. }) =
                        self.engine.ops.get_mut(&req).map(|o| &mut o.kind)
                    {
                        *resolving = Some((is_begin, r));
                    }
                    return;
                }
                Ok(true) => {
                    let key = Self::resolved_key(&r, &max);
                    if !snapshot {
                        self.key_conflict(tx, &r, &key);
                    }
                    if let Some(OpKind::Range {
                        begin_key, end_key, ..
                    }) = self.engine.ops.get_mut(&req).map(|o| &mut o.kind)
                    {
                        if is_begin {
                            *begin_key = Some(key);
                        } else {
                            *end_key = Some(key);
                        }
                    }
                    // Continue with the other selector or the scan.
                    self.set_wait(req, Wait::Ready);
                    return;
                }
            }
        }
        let Some(op) = self.engine.ops.get_mut(&req) else {
            return;
        };
        let OpKind::Range {
            begin_key,
            end_key,
            scan,
            ..
        } = &mut op.kind
        else {
            return;
        };
        let (Some(b), Some(e)) = (begin_key.clone(), end_key.clone()) else {
            return;
        };
        if b >= e {
            return self.succeed_op(req, Reply::Range(RangeResult::default()));
        }
        let mut s = match scan.take() {
            Some(s) => s,
            None => {
                let rows = (opts.limit > 0).then_some(opts.limit);
                let byte_limit = match opts.mode.byte_limit(opts.iteration) {
                    Some(m) if opts.target_bytes > 0 => Some(m.min(opts.target_bytes)),
                    Some(m) => Some(m),
                    None if opts.target_bytes > 0 => Some(opts.target_bytes),
                    None => None,
                };
                Scan::new(b, e, opts.reverse, rows, byte_limit)
            }
        };
        let res = self.step_scan(req, tx, &mut s, None);
        match res {
            Err(e) => self.fail_op(req, e),
            Ok(false) => {
                if let Some(OpKind::Range { scan, .. }) =
                    self.engine.ops.get_mut(&req).map(|o| &mut o.kind)
                {
                    *scan = Some(s);
                }
            }
            Ok(true) => {
                if !snapshot {
                    let (cb, ce) = s.conflict();
                    self.scan_conflict(tx, &cb, &ce);
                }
                let result = RangeResult {
                    rows: s.out,
                    more: s.more,
                };
                self.succeed_op(req, Reply::Range(result));
            }
        }
    }

    fn on_range_reply(&mut self, req: RequestId, r: Result<GetKeyValuesReply, ClientError>) {
        let reply = match r {
            Ok(r) => r,
            Err(e) => {
                if !self.retried_read_error(req, &e) {
                    self.fail_op(req, e);
                }
                return;
            }
        };
        let Some(op) = self.engine.ops.get_mut(&req) else {
            return;
        };
        let tx = op.tx;
        op.attempt = 0;
        op.wait = Wait::Ready;
        // Take the scan out, feed it, put it back; the op then runs again.
        let mut kind = core::mem::replace(&mut op.kind, OpKind::Backoff);
        let fed = match &mut kind {
            OpKind::GetKey { resolve, .. } => self.feed_scan(tx, &mut resolve.scan, reply),
            OpKind::Range {
                resolving: Some((_, r)),
                ..
            } => self.feed_scan(tx, &mut r.scan, reply),
            OpKind::Range { scan: Some(s), .. } => self.feed_scan(tx, s, reply),
            _ => Ok(()),
        };
        if let Some(op) = self.engine.ops.get_mut(&req) {
            op.kind = kind;
        }
        if let Err(e) = fed {
            self.fail_op(req, e);
        }
    }

    // ----- commit -----

    fn advance_commit(&mut self, req: RequestId, tx: TransactionId) {
        let t = &self.engine.txs[&tx];
        let read_only = t.writes.is_empty() && t.write_conflicts.is_empty();
        if read_only {
            // Nothing to send (`Transaction::commit` of a read-only transaction). Its watches
            // start from its read version.
            let v = if t.watches.is_empty() {
                None
            } else {
                match self.read_version_for(req, tx, false) {
                    Some(Ok(v)) => Some(v),
                    Some(Err(e)) => return self.fail_commit(req, tx, e),
                    None => return,
                }
            };
            if let Some(t) = self.engine.txs.get_mut(&tx) {
                t.committed = Some((-1, None));
            }
            self.arm_watches(tx, v);
            return self.succeed_op(
                req,
                Reply::Committed {
                    version: -1,
                    versionstamp: None,
                },
            );
        }
        let size = Self::commit_size(t);
        if size > t.options.size_limit {
            return self.fail_commit(req, tx, ClientError::Fdb(ErrorCode::TRANSACTION_TOO_LARGE));
        }
        let version = match self.read_version_for(req, tx, true) {
            Some(Ok(v)) => v,
            Some(Err(e)) => return self.fail_commit(req, tx, e),
            None => return,
        };
        let Some(proxy) = self.pick_commit_proxy(CommitProxyInterface::COMMIT) else {
            return self.set_wait(req, Wait::Cluster);
        };
        let t = &self.engine.txs[&tx];
        let mut read_conflicts: Vec<KeyRange> = t.read_conflicts.ranges().collect();
        let mut write_conflicts: Vec<KeyRange> = t.write_conflicts.ranges().collect();
        let mutations = t.writes.mutations();
        let report = t.options.report_conflicting_keys;
        let lock_aware = t.options.lock_aware;
        let causal_write_risky = t.options.causal_write_risky;
        let intersects = write_conflicts
            .iter()
            .any(|w| t.read_conflicts.intersects(&w.begin, &w.end));
        let mut self_conflict = None;
        if !causal_write_risky && !intersects {
            // `makeSelfConflicting`: a random key in both lists lets a retry after
            // `commit_unknown_result` conflict with this attempt if it did commit.
            let mut k = b"\xff/SC/".to_vec();
            k.extend_from_slice(&self.rng.uid().to_bytes());
            let r = KeyRange::new(k.clone(), key_after(&k));
            read_conflicts.push(r.clone());
            write_conflicts.push(r);
            self_conflict = Some(Bytes::from(k));
        } else if !causal_write_risky {
            // The first key both read and written serves the same purpose.
            self_conflict = write_conflicts.iter().find_map(|w| {
                read_conflicts
                    .iter()
                    .find(|r| r.begin < w.end && w.begin < r.end)
                    .map(|r| core::cmp::max(&r.begin, &w.begin).clone())
            });
        }
        if report {
            if let Some(t) = self.engine.txs.get_mut(&tx) {
                t.sent_read_conflicts = read_conflicts.clone();
            }
        }
        let token = self.rng.uid();
        let span = self.span(tx);
        let msg = CommitTransactionRequest {
            transaction: CommitTransactionRef {
                read_conflict_ranges: read_conflicts,
                write_conflict_ranges: write_conflicts,
                mutations,
                read_snapshot: version,
                report_conflicting_keys: report,
                lock_aware,
                span_context: None,
                tenant_ids: None,
            },
            reply: ReplyPromise { token },
            flags: if lock_aware {
                CommitTransactionRequest::FLAG_IS_LOCK_AWARE
            } else {
                0
            },
            debug_id: None,
            commit_cost_estimation: None,
            tag_set: None,
            span_context: span,
            tenant_info: TenantInfo::none(),
            idempotency_id: Bytes::new(),
        };
        if let Some(t) = self.engine.txs.get_mut(&tx) {
            t.self_conflict = self_conflict;
        }
        let ep = proxy.commit.endpoint;
        self.set_wait(req, Wait::Reply);
        self.send(
            self.now,
            &ep.addresses.address,
            ep.token,
            &msg,
            token,
            Pending::Commit { op: req },
        );
    }

    fn fail_commit(&mut self, req: RequestId, tx: TransactionId, e: ClientError) {
        if let Some(t) = self.engine.txs.get_mut(&tx) {
            let watches = core::mem::take(&mut t.watches);
            for w in watches {
                self.fail_op(w, e.clone());
            }
        }
        self.fail_op(req, e);
    }

    pub(crate) fn on_commit_reply(&mut self, req: RequestId, message: &Bytes) {
        let Some((tx, dummy_for)) = self.engine.ops.get(&req).map(|o| (o.tx, o.dummy_for)) else {
            return;
        };
        if let Some(parent) = dummy_for {
            let ok = matches!(
                decode_reply::<CommitID>(message),
                Ok(ErrorOr::Ok(ref id)) if id.version != crate::messages::types::INVALID_VERSION
            );
            return self.on_dummy_done(req, tx, parent, ok);
        }
        match decode_reply::<CommitID>(message) {
            Ok(ErrorOr::Err(e))
                if e == ErrorCode::COMMIT_UNKNOWN_RESULT
                    || e == ErrorCode::REQUEST_MAYBE_DELIVERED =>
            {
                self.outcome_unknown(req, tx)
            }
            Ok(ErrorOr::Ok(id)) if id.version == crate::messages::types::INVALID_VERSION => {
                // With `report_conflicting_keys` a conflict comes back as a `CommitID` without
                // a version, naming the read conflict ranges that conflicted (`tryCommit`).
                if let Some(t) = self.engine.txs.get_mut(&tx) {
                    let mut set = RangeSet::new();
                    for i in id.conflicting_kr_indices.iter().flatten() {
                        if let Some(r) = usize::try_from(*i)
                            .ok()
                            .and_then(|i| t.sent_read_conflicts.get(i))
                        {
                            set.insert(&r.begin, &r.end);
                        }
                    }
                    t.conflicting = Some(set);
                }
                self.fail_commit(req, tx, ClientError::Fdb(ErrorCode::NOT_COMMITTED))
            }
            Ok(ErrorOr::Ok(id)) => {
                let stamp = id.versionstamp();
                if let Some(t) = self.engine.txs.get_mut(&tx) {
                    t.committed = Some((id.version, Some(stamp)));
                }
                self.arm_watches(tx, Some(id.version));
                self.succeed_op(
                    req,
                    Reply::Committed {
                        version: id.version,
                        versionstamp: Some(stamp),
                    },
                );
            }
            Ok(ErrorOr::Err(e)) => self.fail_commit(req, tx, ClientError::Fdb(e)),
            Err(e) => self.fail_commit(req, tx, ClientError::Decode(e)),
        }
    }

    pub(crate) fn on_commit_lost(&mut self, req: RequestId) {
        // The request may or may not have reached the proxy.
        let Some((tx, dummy_for)) = self.engine.ops.get(&req).map(|o| (o.tx, o.dummy_for)) else {
            return;
        };
        match dummy_for {
            Some(parent) => self.on_dummy_done(req, tx, parent, false),
            None => self.outcome_unknown(req, tx),
        }
    }

    /// The commit may have happened and may even still be in flight. Like `tryCommit`, first
    /// commit a dummy transaction that reads and writes the commit's self-conflicting key: once
    /// it commits, the original can no longer commit later. Then report
    /// `commit_unknown_result`.
    fn outcome_unknown(&mut self, req: RequestId, tx: TransactionId) {
        let key = self
            .engine
            .txs
            .get(&tx)
            .and_then(|t| t.self_conflict.clone());
        let Some(key) = key else {
            return self.fail_commit(req, tx, ClientError::Fdb(ErrorCode::COMMIT_UNKNOWN_RESULT));
        };
        self.set_wait(req, Wait::Dummy);
        self.start_dummy(req, key);
    }

    fn start_dummy(&mut self, parent: RequestId, key: Bytes) {
        let now = self.now;
        let dummy = self.create_transaction(now);
        if let Some(t) = self.engine.txs.get_mut(&dummy) {
            t.options.access_system_keys = true;
            t.options.causal_write_risky = true;
            let end = key_after(&key);
            t.read_conflicts.insert(&key, &end);
            t.write_conflicts.insert(&key, &end);
            t.committing = true;
        }
        let req = self.new_request_id();
        self.insert_op(req, dummy, OpKind::Commit);
        if let Some(op) = self.engine.ops.get_mut(&req) {
            op.dummy_for = Some(parent);
            op.detached = true;
        }
    }

    fn on_dummy_done(&mut self, req: RequestId, dummy: TransactionId, parent: RequestId, ok: bool) {
        let key = self
            .engine
            .txs
            .get(&dummy)
            .and_then(|t| t.read_conflicts.ranges().next().map(|r| r.begin));
        self.engine.ops.remove(&req);
        self.engine.txs.remove(&dummy);
        let Some(parent_tx) = self.engine.ops.get(&parent).map(|o| o.tx) else {
            return; // the user gave up on the commit
        };
        match (ok, key) {
            (false, Some(key)) => {
                // Try again until it commits, as `commitDummyTransaction` loops on `onError`.
                let at = self.now + knobs::DEFAULT_BACKOFF;
                self.engine.add_timer(at, Timer::Dummy(parent));
                if let Some(t) = self.engine.txs.get_mut(&parent_tx) {
                    t.self_conflict = Some(key);
                }
            }
            _ => self.fail_commit(
                parent,
                parent_tx,
                ClientError::Fdb(ErrorCode::COMMIT_UNKNOWN_RESULT),
            ),
        }
    }

    // ----- watches -----

    fn arm_watches(&mut self, tx: TransactionId, version: Option<Version>) {
        let Some(t) = self.engine.txs.get_mut(&tx) else {
            return;
        };
        let watches = core::mem::take(&mut t.watches);
        for w in watches {
            if let Some(op) = self.engine.ops.get_mut(&w) {
                op.detached = true;
                if let OpKind::Watch { version: v, .. } = &mut op.kind {
                    *v = version;
                }
                op.wait = Wait::Ready;
            }
        }
    }

    fn advance_watch(&mut self, req: RequestId, tx: TransactionId) {
        let Some(op) = self.engine.ops.get(&req) else {
            return;
        };
        let OpKind::Watch {
            key,
            value,
            version,
            reading,
        } = &op.kind
        else {
            return;
        };
        let (key, value, version, reading) = (key.clone(), value.clone(), *version, *reading);
        let Some(value) = value else {
            if reading {
                self.set_wait(req, Wait::Reply);
                return;
            }
            // Learn the value to compare with: a snapshot read at the read version, or at the
            // commit version once committed.
            let at = match version {
                Some(v) => v,
                None => match self.read_version_for(req, tx, false) {
                    Some(Ok(v)) => v,
                    Some(Err(e)) => return self.fail_op(req, e),
                    None => return,
                },
            };
            return self.send_watch_read(req, tx, key, at);
        };
        let Some(version) = version else {
            self.set_wait(req, Wait::Commit);
            return;
        };
        let Some(server) = self.pick_server(req, tx, &key, false) else {
            return;
        };
        let token = self.rng.uid();
        let msg = WatchValueRequest {
            key,
            value,
            version,
            tags: None,
            debug_id: None,
            reply: ReplyPromise { token },
            span_context: self.span(tx),
            tenant_info: TenantInfo::none(),
        };
        let addr = server.addr.clone();
        let dest = server.stream(StorageServerInterface::WATCH_VALUE);
        self.set_wait(req, Wait::Reply);
        self.send(
            self.now,
            &addr,
            dest,
            &msg,
            token,
            Pending::Storage { op: req },
        );
    }

    /// Reads the watched key's current value with a GetValue (reply handled as a watch reply).
    fn send_watch_read(&mut self, req: RequestId, tx: TransactionId, key: Bytes, version: Version) {
        if self.send_get_value(req, tx, key, version) {
            if let Some(OpKind::Watch { reading, .. }) =
                self.engine.ops.get_mut(&req).map(|o| &mut o.kind)
            {
                *reading = true;
            }
        }
    }

    fn on_watch_value(&mut self, req: RequestId, r: Result<Option<Bytes>, ClientError>) {
        if let Some(OpKind::Watch { reading, .. }) =
            self.engine.ops.get_mut(&req).map(|o| &mut o.kind)
        {
            *reading = false;
        }
        let v = match r {
            Ok(v) => v,
            Err(e) => {
                if !self.retried_read_error(req, &e) {
                    self.fail_op(req, e);
                }
                return;
            }
        };
        let Some(op) = self.engine.ops.get(&req) else {
            return;
        };
        let tx = op.tx;
        let OpKind::Watch { key, .. } = &op.kind else {
            return;
        };
        // The transaction's own view: its atomic ops over the stored value.
        let v = match self.engine.txs.get(&tx).map(|t| t.writes.lookup(key)) {
            Some(Lookup::Known(known)) => known,
            Some(Lookup::Dependent(ops)) => apply_ops(v, ops),
            _ => v,
        };
        if let Some(op) = self.engine.ops.get_mut(&req) {
            if let OpKind::Watch { value, .. } = &mut op.kind {
                *value = Some(v);
            }
            op.wait = Wait::Ready;
        }
    }

    fn on_watch_reply(&mut self, req: RequestId, r: Result<Version, ClientError>) {
        match r {
            Ok(v) => self.succeed_op(req, Reply::WatchFired(v)),
            Err(e) => {
                if self.retried_read_error(req, &e) {
                    return;
                }
                let code = e.code();
                if code == ErrorCode::TIMED_OUT
                    || code == ErrorCode::PROCESS_BEHIND
                    || code == ErrorCode::FUTURE_VERSION
                {
                    // The storage server let the watch lapse: ask again shortly.
                    if let Some(op) = self.engine.ops.get_mut(&req) {
                        op.wait = Wait::Timer;
                    }
                    let at = self.now + knobs::WRONG_SHARD_SERVER_DELAY;
                    self.engine.add_timer(at, Timer::Op(req));
                } else {
                    self.fail_op(req, e);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn kv(k: &'static [u8]) -> KeyValue {
        KeyValue {
            key: Bytes::from_static(k),
            value: Bytes::new(),
        }
    }

    #[test]
    fn range_cursor_continues_after_the_last_row_and_counts_the_limit() {
        let begin = KeySelector::first_greater_or_equal(Bytes::from_static(b"a"));
        let end = KeySelector::first_greater_or_equal(Bytes::from_static(b"z"));
        let opts = RangeOptions {
            limit: 3,
            iteration: 0,
            ..RangeOptions::default()
        };
        let mut c = RangeCursor::new(begin.clone(), end.clone(), opts);
        let (b, e, o) = c.next_request().unwrap();
        assert_eq!((b, e, o.limit, o.iteration), (begin, end.clone(), 3, 1));
        c.feed(RangeResult {
            rows: vec![kv(b"b"), kv(b"c")],
            more: true,
        });
        let (b, e, o) = c.next_request().unwrap();
        assert_eq!(b, KeySelector::first_greater_than(Bytes::from_static(b"c")));
        assert_eq!((e, o.limit, o.iteration), (end, 1, 2));
        c.feed(RangeResult {
            rows: vec![kv(b"d"), kv(b"e")],
            more: true,
        });
        assert!(c.next_request().is_none(), "the limit is reached");
        assert_eq!(c.into_rows(), vec![kv(b"b"), kv(b"c"), kv(b"d")]);
    }

    #[test]
    fn range_cursor_in_reverse_moves_the_end_and_stops_without_more() {
        let begin = KeySelector::first_greater_or_equal(Bytes::from_static(b"a"));
        let end = KeySelector::first_greater_or_equal(Bytes::from_static(b"z"));
        let opts = RangeOptions {
            reverse: true,
            ..RangeOptions::default()
        };
        let mut c = RangeCursor::new(begin.clone(), end, opts);
        c.feed(RangeResult {
            rows: vec![kv(b"y"), kv(b"x")],
            more: true,
        });
        let (b, e, o) = c.next_request().unwrap();
        assert_eq!(b, begin);
        assert_eq!(
            e,
            KeySelector::first_greater_or_equal(Bytes::from_static(b"x"))
        );
        assert_eq!((o.limit, o.iteration), (0, 2));
        c.feed(RangeResult {
            rows: vec![kv(b"b")],
            more: false,
        });
        assert!(c.next_request().is_none());
        assert_eq!(c.into_rows(), vec![kv(b"y"), kv(b"x"), kv(b"b")]);
    }
}
