//! The transaction API of [`Client`]: each call lends the transactions a `Ctx` and then
//! sends whatever the call made ready.

use alloc::vec::Vec;
use bytes::Bytes;

use super::Client;
use crate::atomic::MutationType;
use crate::census::Census;
use crate::error::ErrorCode;
use crate::event::{Call, ClientError, Committed, MappedRangeResult, Outcome, RangeResult};
use crate::ids::RequestId;
use crate::messages::types::{KeyRange, KeySelector, KeyValue, Version};
use crate::time::Instant;
use crate::transaction::{
    ConflictRangeType, Ctx, DatabaseOption, RangeOptions, SpecialRead, SpecialWrite, TenantHandle,
    TransactionId, TransactionOption, Transactions,
};

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
        let r = self.txs.set_option(tx, opt);
        self.written(r)
    }

    /// Uses `version` instead of asking a GRV proxy.
    pub fn set_read_version(
        &mut self,
        tx: TransactionId,
        version: Version,
    ) -> Result<(), ClientError> {
        let r = self.txs.set_read_version(tx, version);
        self.written(r)
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
            let read = SpecialRead::Get(Bytes::copy_from_slice(key));
            if let Some(call) = self.cluster_module_read(now, tx, read) {
                return call;
            }
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
            let read = SpecialRead::Range(begin.clone(), end.clone(), opts);
            if let Some(call) = self.cluster_module_read(now, tx, read) {
                return call;
            }
        }
        self.call(now, |txs, cx| {
            txs.get_range(cx, tx, begin, end, opts, snapshot)
        })
    }

    /// One batch of a mapped range read (`fdb_transaction_get_mapped_range`): the rows between
    /// two selectors, each with what the storage server read for it through `mapper` (a
    /// packed tuple; fdbserver applies it). As in libfdb_c it refuses snapshot reads and
    /// read-your-writes-disabled transactions (`unsupported_operation`), and fails with
    /// `get_mapped_range_reads_your_writes` when the range or a mapped key or range holds a
    /// write of the transaction; it adds read conflict ranges for the range and for every
    /// mapped key and range.
    #[allow(clippy::too_many_arguments)]
    pub fn get_mapped_range(
        &mut self,
        now: Instant,
        tx: TransactionId,
        begin: KeySelector,
        end: KeySelector,
        mapper: Bytes,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Call<MappedRangeResult> {
        self.call(now, |txs, cx| {
            txs.get_mapped_range(cx, tx, begin, end, mapper, opts, snapshot)
        })
    }

    /// Where the connection record is, shown at `\xff\xff/cluster_file_path`: the path of
    /// the cluster file the database was opened from, or (`None`, opened from a connection
    /// string) the id of libfdb_c's memory record, a random UID
    /// (`ClusterConnectionMemoryRecord`'s `randomUniqueID()`, as `UID::toString` writes it).
    pub fn set_cluster_file_path(&mut self, path: Option<&str>) {
        let location = match path {
            Some(p) => Bytes::copy_from_slice(p.as_bytes()),
            None => Bytes::from(alloc::string::ToString::to_string(&self.rng.uid())),
        };
        self.txs.special.cluster_file_path = Some(location);
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
        let covered = alloc::vec![tenant_module()];
        self.get_range_with_rows(now, tx, begin, end, opts, tenants, covered)
    }

    /// A special-key range read in the management or configuration module
    /// (`\xff\xff/management/`, `\xff\xff/configuration/`) answered with `rows`: the
    /// module's rows in `covered` as the caller read them from the database (each part as
    /// libfdb_c's module for it builds them). A read reaching a part of those modules outside
    /// `covered` fails with `special_keys_no_module_found`; selectors, limits and direction
    /// apply as to any special-key read.
    #[allow(clippy::too_many_arguments)]
    pub fn get_range_with_rows(
        &mut self,
        now: Instant,
        tx: TransactionId,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        rows: Vec<KeyValue>,
        covered: Vec<KeyRange>,
    ) -> Call<RangeResult> {
        self.refresh_special();
        let read = SpecialRead::Range(begin, end, opts);
        self.call(now, |txs, cx| {
            txs.special_read_with_rows(cx, tx, read, &rows, &covered)
        })
    }

    /// A special-key point read answered with rows of the management or configuration module
    /// (see [`Client::get_range_with_rows`]).
    pub fn get_with_rows(
        &mut self,
        now: Instant,
        tx: TransactionId,
        key: &[u8],
        rows: Vec<KeyValue>,
        covered: Vec<KeyRange>,
    ) -> Call<Option<Bytes>> {
        self.refresh_special();
        let read = SpecialRead::Get(Bytes::copy_from_slice(key));
        self.call(now, |txs, cx| {
            txs.special_read_with_rows(cx, tx, read, &rows, &covered)
        })
    }

    /// The special-key writes `tx` holds (left in place), and whether the transaction reads
    /// its own writes: the management modules show them in their reads.
    pub fn special_writes(
        &self,
        tx: TransactionId,
    ) -> Result<(Vec<SpecialWrite>, bool), ClientError> {
        self.txs.special_writes(tx)
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
        let covered = alloc::vec![tenant_module()];
        self.get_with_rows(now, tx, key, tenants, covered)
    }

    /// The writes into the special key space's write modules this client serves (the
    /// tenant module and the management parts, with `special_key_space_enable_writes`), taken
    /// out of the transaction: a driver carries them
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
        let r = self.txs.set(tx, key, value);
        self.written(r)
    }

    /// [`Client::set`] with the key and value in one buffer, `key | 0x00 | value`
    /// (`key_len` bytes of key): the key, its write-conflict range end (`key | 0x00`) and
    /// the value are slices of it, so a set costs one buffer instead of three. A buffer
    /// without the zero byte after the key fails with `client_invalid_operation`.
    pub fn set_packed(
        &mut self,
        tx: TransactionId,
        packed: Bytes,
        key_len: usize,
    ) -> Result<(), ClientError> {
        let r = self.txs.set_packed(tx, packed, key_len);
        self.written(r)
    }

    /// Removes `key`.
    pub fn clear(&mut self, tx: TransactionId, key: &[u8]) -> Result<(), ClientError> {
        let r = self.txs.clear(tx, key);
        self.written(r)
    }

    /// Removes every key in `[begin, end)`.
    pub fn clear_range(
        &mut self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
    ) -> Result<(), ClientError> {
        let r = self.txs.clear_range(tx, begin, end);
        self.written(r)
    }

    /// An atomic operation on `key` with operand `param`.
    pub fn atomic_op(
        &mut self,
        tx: TransactionId,
        key: &[u8],
        param: &[u8],
        op: MutationType,
    ) -> Result<(), ClientError> {
        let r = self.txs.atomic_op(tx, key, param, op.code());
        self.written(r)
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
        let r = self.txs.atomic_op(tx, key, param, code);
        self.written(r)
    }

    /// Adds a read or write conflict range by hand.
    pub fn add_conflict_range(
        &mut self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        kind: ConflictRangeType,
    ) -> Result<(), ClientError> {
        let r = self.txs.add_conflict_range(tx, begin, end, kind);
        self.written(r)
    }

    /// Commits.
    pub fn commit(&mut self, now: Instant, tx: TransactionId) -> Call<Committed> {
        self.call(now, |txs, cx| txs.commit(cx, tx))
    }

    /// Whether a commit or an `on_error` backoff of `tx` is still running: a write made now
    /// may change how it ends (a driver that buffers writes sends them at once meanwhile).
    pub fn commit_or_backoff_pending(&self, tx: TransactionId) -> bool {
        self.txs.commit_or_backoff_pending(tx)
    }

    /// The versionstamp of a committed transaction.
    pub fn versionstamp(&self, tx: TransactionId) -> Option<[u8; 10]> {
        self.txs.versionstamp(tx)
    }

    /// The version a transaction committed at (`-1` if it wrote nothing).
    pub fn committed_version(&self, tx: TransactionId) -> Option<Version> {
        self.txs.committed_version(tx)
    }

    /// `fdb_transaction_get_approximate_size`: about how many bytes the commit would carry,
    /// or the error of a failed write the transaction is holding.
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
        self.start_part(now, |parts, req| parts.status.start(req))
    }

    /// Asks each of `coordinators` who leads cluster `key` (a coordinators change's
    /// reachability check, see `quorum_check`): `true` once all answered, `false` if one did
    /// not within 5 s.
    pub fn check_coordinators(
        &mut self,
        now: Instant,
        key: &str,
        coordinators: &[crate::cluster_file::NetworkAddress],
    ) -> Call<bool> {
        let key = Bytes::copy_from_slice(key.as_bytes());
        let wire = coordinators
            .iter()
            .map(crate::monitor::wire_address)
            .collect();
        self.start_part(now, |parts, req| parts.quorum_checks.start(req, key, wire))
    }

    /// `checkSafeExclusions`: whether the processes `exclusions` name can be marked failed,
    /// as the commit proxies (the data distributor's storage teams) and the coordinators'
    /// fault tolerance judge (see `exclusion_check`). An error the proxy answers with fails
    /// the call.
    pub fn check_safe_exclusions(
        &mut self,
        now: Instant,
        exclusions: Vec<crate::messages::AddressExclusion>,
    ) -> Call<bool> {
        self.start_part(now, |parts, req| {
            parts.exclusion_checks.start(req, exclusions)
        })
    }

    /// What the core holds for the application right now (see [`Census`]).
    pub fn census(&self) -> Census {
        let (transactions, requests, watches) = self.txs.census();
        Census {
            transactions,
            requests,
            watches,
            status_reads: self.parts.len(),
        }
    }

    /// Gives up on a request: no event will come for it.
    pub fn cancel(&mut self, now: Instant, req: RequestId) {
        self.now = now;
        if !self.parts.cancel(req) {
            self.txs.cancel(req);
        }
    }

    /// A special-key read of a module filled from the cluster (`\xff\xff/cluster_id`, the
    /// metrics, the worker interfaces, the global configuration): asks the cluster, then
    /// answers from the transaction's special key space (see `special_cluster`,
    /// `global_config`). `None`: not such a read.
    fn cluster_module_read<T: Outcome>(
        &mut self,
        now: Instant,
        tx: TransactionId,
        read: SpecialRead,
    ) -> Option<Call<T>> {
        let global_config = crate::global_config::is_module_read(&read);
        // Only `\xff\xff/cluster_id` supports tenants (`supportsTenants`).
        let in_tenants = match crate::special_cluster::cluster_read(&read) {
            _ if global_config => false,
            Some((module, _)) => module.0 == crate::special_cluster::CLUSTER_ID_KEY,
            None => return None,
        };
        if !self.txs.exists(tx) {
            return None;
        }
        if self.txs.in_tenant(tx) && !in_tenants {
            return Some(self.refused(now, ErrorCode::ILLEGAL_TENANT_ACCESS));
        }
        Some(self.start_part(now, |parts, req| match global_config {
            true => parts.global_config.start(req, tx, read),
            false => {
                parts.cluster_reads.start(req, tx, &read);
            }
        }))
    }

    /// A request of one of the parts beside the transactions: `start` it, then send what
    /// it made ready.
    fn start_part<T: Outcome>(
        &mut self,
        now: Instant,
        start: impl FnOnce(&mut super::Parts, RequestId),
    ) -> Call<T> {
        self.now = now;
        let req = self.new_request_id();
        start(&mut self.parts, req);
        self.drive(now);
        Call::new(req)
    }

    /// After a write or option: what a use during the commit finished fails now.
    fn written(&mut self, r: Result<(), ClientError>) -> Result<(), ClientError> {
        self.deliver_trips();
        r
    }

    /// A call that fails with `code` as soon as it is polled, having asked nobody.
    fn refused<T: Outcome>(&mut self, now: Instant, code: ErrorCode) -> Call<T> {
        self.call(now, |_, cx| {
            let req = cx.new_request();
            cx.finish(req, Err(ClientError::Fdb(code)));
            req
        })
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

/// `\xff\xff/management/tenant/`, as a range.
fn tenant_module() -> KeyRange {
    let (b, e) = crate::transaction::TENANT_MANAGEMENT_RANGE;
    KeyRange {
        begin: Bytes::from_static(b),
        end: Bytes::from_static(e),
    }
}
