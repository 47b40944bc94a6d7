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
use crate::messages::types::{KeySelector, Version};
use crate::time::Instant;
use crate::transaction::{
    ConflictRangeType, Ctx, DatabaseOption, RangeOptions, TenantHandle, TransactionId,
    TransactionOption, Transactions,
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

    /// Reads `key`. A snapshot read adds no read conflict range. A special key goes where
    /// [`route_key`](super::special_keys::route_key) sends it (`\xff\xff/status/json` is the
    /// status document, see [`Client::status_json`]).
    pub fn get(
        &mut self,
        now: Instant,
        tx: TransactionId,
        key: &[u8],
        snapshot: bool,
    ) -> Call<Option<Bytes>> {
        let module = super::special_keys::route_key(key);
        self.get_routed(now, tx, key, snapshot, module)
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

    /// Reads one batch of the rows between two selectors (a special-key read goes where
    /// [`route_range`](super::special_keys::route_range) sends it).
    pub fn get_range(
        &mut self,
        now: Instant,
        tx: TransactionId,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Call<RangeResult> {
        let module = super::special_keys::route_range(&begin, &end);
        self.get_range_routed(now, tx, begin, end, opts, snapshot, module)
    }

    /// One batch of a mapped range read (`fdb_transaction_get_mapped_range`): the rows between
    /// two selectors, each with what the storage server read for it through `mapper` (a
    /// packed tuple; fdbserver applies it). As in libfdb_c it refuses snapshot reads and
    /// read-your-writes-disabled transactions (`unsupported_operation`), and fails with
    /// `get_mapped_range_reads_your_writes` when the range or a mapped key or range holds a
    /// write of the transaction; it adds read conflict ranges for the range and for every
    /// mapped key and range.
    #[allow(clippy::too_many_arguments)]
    // `Transactions::get_mapped_range`'s arguments: this is its public door, nothing to fold.
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
    // `Transactions::add_conflict_range`'s arguments: this is its public door, nothing to fold.
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

    /// A request of one of the parts beside the transactions: `start` it, then send what
    /// it made ready.
    pub(super) fn start_part<T: Outcome>(
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
    pub(super) fn refused<T: Outcome>(&mut self, now: Instant, code: ErrorCode) -> Call<T> {
        self.call(now, |_, cx| {
            let req = cx.new_request();
            cx.finish(req, Err(ClientError::Fdb(code)));
            req
        })
    }

    /// A transaction call that starts a request: run it, then send what it made ready.
    pub(super) fn call<T: Outcome>(
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
