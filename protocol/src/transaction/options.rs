//! Transaction options: every `FDBTransactionOption` of 7.3 (`fdb.options`), what the
//! application may set, and what a transaction keeps of them.
//!
//! Each option is implemented, accepted as the no-op it also is in libfdb_c 7.3.77
//! (`Transaction::setOption` ignores it), or refused with `unsupported_operation` when this
//! client lacks the machinery behind it (see [`TransactionOption::check_supported`]: today
//! `check_writes_enable`).

use super::fdb;
use crate::error::ErrorCode;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use super::Transactions;
use crate::event::ClientError;
use crate::grv::Priority;
use crate::ids::TransactionId;
use crate::knobs::Knobs;
use crate::messages::storage::ReadOptions;
use crate::messages::types::SpanContext;
use crate::uid::Uid;

/// `ReadType` (`FDBTypes.h`): the storage server's read priority.
pub(super) mod read_type {
    pub(crate) const LOW: i32 = 2;
    pub(crate) const NORMAL: i32 = 3;
    pub(crate) const HIGH: i32 = 4;
}

/// `MAX_TAGS_PER_TRANSACTION`.
pub(super) const MAX_TAGS_PER_TRANSACTION: usize = 5;
/// `MAX_TRANSACTION_TAG_LENGTH`.
pub(super) const MAX_TRANSACTION_TAG_LENGTH: usize = 255;

/// The longest `debug_transaction_identifier` (`Transaction::setOption`).
const MAX_DEBUG_IDENTIFIER: usize = 100;

/// Transaction options (`FDBTransactionOption`, `fdb.options` at 7.3.77, and the two 7.4.6
/// adds), by FDB's names.
/// Durations and counts are typed; [`TransactionOption::from_code`] reads the C API's form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransactionOption {
    /// `causal_write_risky` (10): no self-conflict key is added, so after a fault the
    /// transaction may commit twice.
    CausalWriteRisky,
    /// `causal_read_risky` (20): the read version may lag the latest commit after a fault.
    CausalReadRisky,
    /// `causal_read_disable` (21): accepted; it has no effect in libfdb_c 7.3 either.
    CausalReadDisable,
    /// `include_port_in_address` (23): accepted; addresses include the port since API 630.
    IncludePortInAddress,
    /// `next_write_no_write_conflict_range` (30).
    NextWriteNoWriteConflictRange,
    /// `commit_on_first_proxy` (40): commit through the first commit proxy, without load
    /// balancing.
    CommitOnFirstProxy,
    /// `check_writes_enable` (50): refused (the write checker is not implemented).
    CheckWritesEnable,
    /// `read_your_writes_disable` (51).
    ReadYourWritesDisable,
    /// `read_ahead_disable` (52): accepted; deprecated, and this client reads no ahead.
    ReadAheadDisable,
    /// `read_server_side_cache_enable` (507).
    ReadServerSideCacheEnable,
    /// `read_server_side_cache_disable` (508): storage servers do not cache what is read.
    ReadServerSideCacheDisable,
    /// `read_priority_normal` (509).
    ReadPriorityNormal,
    /// `read_priority_low` (510).
    ReadPriorityLow,
    /// `read_priority_high` (511).
    ReadPriorityHigh,
    /// `durability_datacenter` (110): accepted; no effect in libfdb_c 7.3.
    DurabilityDatacenter,
    /// `durability_risky` (120): accepted; no effect in libfdb_c 7.3.
    DurabilityRisky,
    /// `durability_dev_null_is_web_scale` (130): accepted; deprecated, no effect.
    DurabilityDevNullIsWebScale,
    /// `priority_system_immediate` (200).
    PrioritySystemImmediate,
    /// `priority_batch` (201).
    PriorityBatch,
    /// `initialize_new_database` (300): read version 0 and `causal_write_risky`.
    InitializeNewDatabase,
    /// `access_system_keys` (301): read and write keys in `\xff`.
    AccessSystemKeys,
    /// `read_system_keys` (302): read keys in `\xff`.
    ReadSystemKeys,
    /// `raw_access` (303): accepted; this client's transactions always see the raw key space.
    RawAccess,
    /// `bypass_storage_quota` (304): the commit carries `FLAG_BYPASS_STORAGE_QUOTA`.
    BypassStorageQuota,
    /// `debug_dump` (400): the commit's mutations are logged (`tracing`, target
    /// `fdb_protocol::transaction`).
    DebugDump,
    /// `debug_retry_logging` (401): each retry is logged under this name.
    DebugRetryLogging(String),
    /// `transaction_logging_enable` (402): deprecated; `debug_transaction_identifier` then
    /// `log_transaction`.
    TransactionLoggingEnable(String),
    /// `debug_transaction_identifier` (403): at most 100 bytes, not empty, and fixed once set.
    DebugTransactionIdentifier(String),
    /// `log_transaction` (404): the commit is logged with the identifier (which must be set
    /// first).
    LogTransaction,
    /// `transaction_logging_max_field_length` (405): logged keys and values are cut to this
    /// length; -1 for no limit (0 is refused).
    TransactionLoggingMaxFieldLength(i32),
    /// `server_request_tracing` (406): reads and the commit carry a random debug id.
    ServerRequestTracing,
    /// `timeout` (500): fail with `transaction_timed_out` this long after the transaction
    /// was created; zero clears it. Survives `on_error`.
    Timeout(Duration),
    /// `retry_limit` (501): how many `on_error` retries; `None` = unlimited. Survives
    /// `on_error`.
    RetryLimit(Option<u32>),
    /// `max_retry_delay` (502): the cap of `on_error`'s backoff. Survives `on_error`.
    MaxRetryDelay(Duration),
    /// `size_limit` (503): the most bytes a commit may carry (32 to 10,000,000).
    SizeLimit(usize),
    /// `idempotency_id` (504): 16 to 255 bytes naming the commit, so that after
    /// `commit_unknown_result` the client can read back whether it committed (the proxy writes
    /// the id under `\xff\x02/idmp/`); other lengths fail with `invalid_option`. Not
    /// persistent.
    IdempotencyId(Vec<u8>),
    /// `automatic_idempotency` (505): a random 16-byte id unless one is set, which the client
    /// also asks the proxy to expire once the commit is known.
    AutomaticIdempotency,
    /// `snapshot_ryw_enable` (600): adds one to the transaction's snapshot-RYW counter
    /// (which starts at the database's, 1 by default).
    SnapshotRywEnable,
    /// `snapshot_ryw_disable` (601): takes one from it; at zero or less, snapshot reads do not
    /// see the transaction's own writes (they read through RYW's snapshot cache alone).
    SnapshotRywDisable,
    /// `lock_aware` (700): reads and commits work on a locked database.
    LockAware,
    /// `used_during_commit_protection_disable` (701): a call made while the commit runs fails
    /// alone, without failing the commit and the calls after it.
    UsedDuringCommitProtectionDisable,
    /// `read_lock_aware` (702): reads work on a locked database; a commit with writes fails
    /// with `transaction_read_only`.
    ReadLockAware,
    /// `first_in_batch` (710): the commit carries `FLAG_FIRST_IN_BATCH`.
    FirstInBatch,
    /// `use_provisional_proxies` (711): the read version request carries
    /// `FLAG_USE_PROVISIONAL_PROXIES` (this client never waits out provisional proxies).
    UseProvisionalProxies,
    /// `report_conflicting_keys` (712): a conflict shows the conflicting read ranges in
    /// `\xff\xff/transaction/conflicting_keys/`.
    ReportConflictingKeys,
    /// `special_key_space_relaxed` (713): special-key range reads may span modules.
    SpecialKeySpaceRelaxed,
    /// `special_key_space_enable_writes` (714): writes reach the special key space (where this
    /// client has no write module: they fail with `special_keys_no_write_module_found`, or
    /// `unsupported_operation` inside one of FDB's management modules).
    SpecialKeySpaceEnableWrites,
    /// `tag` (800): a transaction tag (at most 255 bytes, at most 5 tags a transaction:
    /// `tag_too_long`, `too_many_tags`), sent with the read version request and the commit; a
    /// GRV reply that throttles it fails the transaction with `tag_throttled`, and the
    /// database remembers the throttle for later transactions with the tag (see
    /// `tag_throttle.rs`).
    Tag(Vec<u8>),
    /// `auto_throttle_tag` (801): as `tag`, and also one of the read tags storage servers
    /// count for their busiest-tag reports, sent with a sampled fraction of the reads
    /// (the global configuration's `config/transaction_tag_sample_rate`, by default 1%).
    AutoThrottleTag(Vec<u8>),
    /// `span_parent` (900): the 33-byte serialized span context the transaction's spans
    /// continue (8-byte protocol version, 16-byte trace id, 8-byte span id, 1 flag byte).
    SpanParent(Vec<u8>),
    /// `expensive_clear_cost_estimation_enable` (1000): accepted; it only refines the commit
    /// cost of tagged transactions, and tags are refused.
    ExpensiveClearCostEstimationEnable,
    /// `bypass_unreadable` (1100): a point read of a key a versionstamped operation made
    /// unreadable does not fail with `accessed_unreadable`: it gets the operation's
    /// parameter (a versionstamped value) or storage's value (a versionstamped key's range).
    /// Range reads and selectors still fail, as in RYW.
    BypassUnreadable,
    /// `use_grv_cache` (1101): as in libfdb_c 7.3.77 without a multi-version client's
    /// external clients, refused: its `setOption` wants the cluster's shared state
    /// (`sharedStatePtr`), which only those set up, so the transaction's next operation
    /// fails with `invalid_option` (the option itself is accepted, its error deferred).
    UseGrvCache,
    /// `skip_grv_cache` (1102): accepted; there is no read version cache to skip.
    SkipGrvCache,
    /// `authorization_token` (2000): a JSON Web Token (its `tenants` claim names the tenant
    /// ids it grants) sent with every tenant request, as an untrusted client needs it.
    AuthorizationToken(String),
    /// `enable_replica_consistency_check` (4000, FDB 7.4): each storage read that a replica
    /// answered is asked again of other replicas of its shard, and the answers compared;
    /// with the next option only (libfdb_c checks nothing while it is 0).
    EnableReplicaConsistencyCheck,
    /// `consistency_check_required_replicas` (4001, FDB 7.4): how many other replicas that
    /// check asks: a count, `-1` every one (any unreachable, failing or late fails the read),
    /// or `-2` every one reachable, best effort.
    ConsistencyCheckRequiredReplicas(i64),
}

impl TransactionOption {
    /// The option's code in `fdb.options`.
    pub fn code(&self) -> i32 {
        use TransactionOption as O;
        match self {
            O::CausalWriteRisky => 10,
            O::CausalReadRisky => 20,
            O::CausalReadDisable => 21,
            O::IncludePortInAddress => 23,
            O::NextWriteNoWriteConflictRange => 30,
            O::CommitOnFirstProxy => 40,
            O::CheckWritesEnable => 50,
            O::ReadYourWritesDisable => 51,
            O::ReadAheadDisable => 52,
            O::ReadServerSideCacheEnable => 507,
            O::ReadServerSideCacheDisable => 508,
            O::ReadPriorityNormal => 509,
            O::ReadPriorityLow => 510,
            O::ReadPriorityHigh => 511,
            O::DurabilityDatacenter => 110,
            O::DurabilityRisky => 120,
            O::DurabilityDevNullIsWebScale => 130,
            O::PrioritySystemImmediate => 200,
            O::PriorityBatch => 201,
            O::InitializeNewDatabase => 300,
            O::AccessSystemKeys => 301,
            O::ReadSystemKeys => 302,
            O::RawAccess => 303,
            O::BypassStorageQuota => 304,
            O::DebugDump => 400,
            O::DebugRetryLogging(_) => 401,
            O::TransactionLoggingEnable(_) => 402,
            O::DebugTransactionIdentifier(_) => 403,
            O::LogTransaction => 404,
            O::TransactionLoggingMaxFieldLength(_) => 405,
            O::ServerRequestTracing => 406,
            O::Timeout(_) => 500,
            O::RetryLimit(_) => 501,
            O::MaxRetryDelay(_) => 502,
            O::SizeLimit(_) => 503,
            O::IdempotencyId(_) => 504,
            O::AutomaticIdempotency => 505,
            O::SnapshotRywEnable => 600,
            O::SnapshotRywDisable => 601,
            O::LockAware => 700,
            O::UsedDuringCommitProtectionDisable => 701,
            O::ReadLockAware => 702,
            O::FirstInBatch => 710,
            O::UseProvisionalProxies => 711,
            O::ReportConflictingKeys => 712,
            O::SpecialKeySpaceRelaxed => 713,
            O::SpecialKeySpaceEnableWrites => 714,
            O::Tag(_) => 800,
            O::AutoThrottleTag(_) => 801,
            O::SpanParent(_) => 900,
            O::ExpensiveClearCostEstimationEnable => 1000,
            O::BypassUnreadable => 1100,
            O::UseGrvCache => 1101,
            O::SkipGrvCache => 1102,
            O::EnableReplicaConsistencyCheck => 4000,
            O::ConsistencyCheckRequiredReplicas(_) => 4001,
            O::AuthorizationToken(_) => 2000,
        }
    }

    /// The option as `fdb_transaction_set_option(code, value)` gives it (integers as 8
    /// little-endian bytes, strings as bytes). `invalid_option` for a code neither 7.3 nor 7.4
    /// define, `invalid_option_value` for a missing, extra or malformed value.
    pub fn from_code(code: i32, value: Option<&[u8]>) -> Result<TransactionOption, ErrorCode> {
        use TransactionOption as O;
        let none = |o: O| match value {
            None => Ok(o),
            Some(_) => Err(ErrorCode::INVALID_OPTION_VALUE),
        };
        let int = || -> Result<i64, ErrorCode> {
            let v = value.ok_or(ErrorCode::INVALID_OPTION_VALUE)?;
            let b: [u8; 8] = v.try_into().map_err(|_| ErrorCode::INVALID_OPTION_VALUE)?;
            Ok(i64::from_le_bytes(b))
        };
        let bytes = || {
            value
                .map(<[u8]>::to_vec)
                .ok_or(ErrorCode::INVALID_OPTION_VALUE)
        };
        let string = || {
            let v = value.ok_or(ErrorCode::INVALID_OPTION_VALUE)?;
            String::from_utf8(v.to_vec()).map_err(|_| ErrorCode::INVALID_OPTION_VALUE)
        };
        let millis = |v: i64| -> Result<Duration, ErrorCode> {
            if !(0..=i32::MAX as i64).contains(&v) {
                return Err(ErrorCode::INVALID_OPTION_VALUE);
            }
            Ok(Duration::from_millis(v as u64))
        };
        match code {
            10 => none(O::CausalWriteRisky),
            20 => none(O::CausalReadRisky),
            21 => none(O::CausalReadDisable),
            23 => none(O::IncludePortInAddress),
            30 => none(O::NextWriteNoWriteConflictRange),
            40 => none(O::CommitOnFirstProxy),
            50 => none(O::CheckWritesEnable),
            51 => none(O::ReadYourWritesDisable),
            52 => none(O::ReadAheadDisable),
            507 => Ok(O::ReadServerSideCacheEnable),
            508 => Ok(O::ReadServerSideCacheDisable),
            509 => Ok(O::ReadPriorityNormal),
            510 => Ok(O::ReadPriorityLow),
            511 => Ok(O::ReadPriorityHigh),
            110 => none(O::DurabilityDatacenter),
            120 => none(O::DurabilityRisky),
            130 => none(O::DurabilityDevNullIsWebScale),
            200 => none(O::PrioritySystemImmediate),
            201 => none(O::PriorityBatch),
            300 => none(O::InitializeNewDatabase),
            301 => none(O::AccessSystemKeys),
            302 => none(O::ReadSystemKeys),
            303 => none(O::RawAccess),
            304 => Ok(O::BypassStorageQuota),
            400 => none(O::DebugDump),
            401 => Ok(O::DebugRetryLogging(match value {
                Some(_) => string()?,
                None => String::new(),
            })),
            402 => Ok(O::TransactionLoggingEnable(string()?)),
            403 => Ok(O::DebugTransactionIdentifier(string()?)),
            404 => none(O::LogTransaction),
            405 => {
                let v = int()?;
                let v = i32::try_from(v).map_err(|_| ErrorCode::INVALID_OPTION_VALUE)?;
                Ok(O::TransactionLoggingMaxFieldLength(v))
            }
            406 => none(O::ServerRequestTracing),
            500 => Ok(O::Timeout(millis(int()?)?)),
            501 => {
                let v = int()?;
                if !(-1..=i32::MAX as i64).contains(&v) {
                    return Err(ErrorCode::INVALID_OPTION_VALUE);
                }
                Ok(O::RetryLimit((v >= 0).then_some(v as u32)))
            }
            502 => Ok(O::MaxRetryDelay(millis(int()?)?)),
            503 => {
                let v = int()?;
                let v = usize::try_from(v).map_err(|_| ErrorCode::INVALID_OPTION_VALUE)?;
                Ok(O::SizeLimit(v))
            }
            504 => Ok(O::IdempotencyId(bytes()?)),
            505 => none(O::AutomaticIdempotency),
            600 => none(O::SnapshotRywEnable),
            601 => none(O::SnapshotRywDisable),
            700 => none(O::LockAware),
            701 => none(O::UsedDuringCommitProtectionDisable),
            702 => none(O::ReadLockAware),
            710 => none(O::FirstInBatch),
            711 => none(O::UseProvisionalProxies),
            712 => none(O::ReportConflictingKeys),
            713 => none(O::SpecialKeySpaceRelaxed),
            714 => none(O::SpecialKeySpaceEnableWrites),
            800 => Ok(O::Tag(bytes()?)),
            801 => Ok(O::AutoThrottleTag(bytes()?)),
            900 => Ok(O::SpanParent(bytes()?)),
            1000 => none(O::ExpensiveClearCostEstimationEnable),
            1100 => none(O::BypassUnreadable),
            1101 => none(O::UseGrvCache),
            1102 => none(O::SkipGrvCache),
            2000 => Ok(O::AuthorizationToken(string()?)),
            4000 => none(O::EnableReplicaConsistencyCheck),
            4001 => Ok(O::ConsistencyCheckRequiredReplicas(int()?)),
            _ => Err(ErrorCode::INVALID_OPTION),
        }
    }

    /// Whether this client implements the option: `unsupported_operation` for the ones it
    /// refuses (said at once, like libfdb_c's `invalid_option` for an unknown option, and not
    /// remembered by the transaction).
    pub fn check_supported(&self) -> Result<(), ClientError> {
        use TransactionOption as O;
        match self {
            O::CheckWritesEnable => fdb(ErrorCode::UNSUPPORTED_OPERATION),
            _ => Ok(()),
        }
    }

    /// Whether the option survives `on_error` (`persistent` in `fdb.options`).
    pub fn is_persistent(&self) -> bool {
        matches!(
            self,
            TransactionOption::Timeout(_)
                | TransactionOption::RetryLimit(_)
                | TransactionOption::MaxRetryDelay(_)
                | TransactionOption::AuthorizationToken(_)
        )
    }
}

/// Which conflict range [`crate::Client::add_conflict_range`] adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConflictRangeType {
    /// A read conflict range: the commit fails if another commit wrote into it meanwhile.
    Read,
    /// A write conflict range: other transactions that read it conflict with this commit.
    Write,
}

/// What a transaction keeps of its options.
#[derive(Clone, Debug)]
pub(super) struct TxOptions {
    pub(super) timeout: Option<Duration>,
    pub(super) retry_limit: Option<u32>,
    pub(super) max_retry_delay: Duration,
    pub(super) size_limit: usize,
    pub(super) ryw_disabled: bool,
    pub(super) next_write_no_conflict: bool,
    pub(super) causal_read_risky: bool,
    pub(super) causal_write_risky: bool,
    pub(super) priority: Priority,
    pub(super) access_system_keys: bool,
    /// `raw_access`: the transaction works on the raw key space, not a tenant's.
    pub(super) raw_access: bool,
    pub(super) read_system_keys: bool,
    pub(super) report_conflicting_keys: bool,
    pub(super) lock_aware: bool,
    /// `read_lock_aware` without `lock_aware`: commits with writes are refused.
    pub(super) read_only: bool,
    pub(super) commit_on_first_proxy: bool,
    pub(super) first_in_batch: bool,
    pub(super) bypass_storage_quota: bool,
    pub(super) use_provisional_proxies: bool,
    /// `used_during_commit_protection_disable`.
    pub(super) no_commit_protection: bool,
    pub(super) special_key_space_relaxed: bool,
    pub(super) special_key_space_writes: bool,
    /// `authorization_token`, persistent.
    pub(super) auth_token: Option<bytes::Bytes>,
    /// The read options sent to storage servers, once any option asked for them
    /// (NativeAPI's `readOptions`).
    pub(super) read_options: Option<ReadOptions>,
    /// `server_request_tracing`: a debug id is drawn for the requests.
    pub(super) server_request_tracing: bool,
    pub(super) span_parent: Option<SpanContext>,
    pub(super) debug_dump: bool,
    pub(super) debug_identifier: Option<String>,
    pub(super) log_transaction: bool,
    pub(super) max_field_length: i32,
    /// `debug_retry_logging`'s transaction name.
    pub(super) retry_logging: Option<String>,
    /// RYW's `snapshotRywEnabled` counter: snapshot reads see the writes while it is above 0.
    pub(super) snapshot_ryw: i32,
    pub(super) bypass_unreadable: bool,
    /// `tags`: sent with the read version request and the commit.
    pub(super) tags: Vec<bytes::Bytes>,
    /// `readTags` (`auto_throttle_tag`), kept for the read requests' `tags`.
    pub(super) read_tags: Vec<bytes::Bytes>,
    /// `idempotency_id`, or the one `automatic_idempotency` drew at the commit.
    pub(super) idempotency_id: Option<bytes::Bytes>,
    /// `automatic_idempotency`: the commit draws its id and has it expired afterwards.
    pub(super) automatic_idempotency: bool,
    /// `enable_replica_consistency_check`.
    pub(super) replica_check: bool,
    /// `consistency_check_required_replicas` (0: no check even when enabled).
    pub(super) required_replicas: i64,
}

impl TxOptions {
    /// NativeAPI's `rawAccess`: system key access implies it.
    pub(super) fn raw_access(&self) -> bool {
        self.read_system_keys || self.access_system_keys
    }

    /// `TagSet::addTag`: the length is checked first, then the count (before a repeated tag
    /// is recognised, so a sixth tag fails even when it repeats one).
    fn add_tag(&mut self, tag: Vec<u8>, read_too: bool) -> Result<(), ClientError> {
        if tag.len() > MAX_TRANSACTION_TAG_LENGTH {
            return fdb(ErrorCode::TAG_TOO_LONG);
        }
        if self.tags.len() >= MAX_TAGS_PER_TRANSACTION
            || (read_too && self.read_tags.len() >= MAX_TAGS_PER_TRANSACTION)
        {
            return fdb(ErrorCode::TOO_MANY_TAGS);
        }
        let tag = bytes::Bytes::from(tag);
        if read_too && !self.read_tags.contains(&tag) {
            self.read_tags.push(tag.clone());
        }
        if !self.tags.contains(&tag) {
            self.tags.push(tag);
        }
        Ok(())
    }

    fn read_options_mut(&mut self) -> &mut ReadOptions {
        self.read_options.get_or_insert(ReadOptions {
            read_type: read_type::NORMAL,
            cache_result: true,
            debug_id: None,
            consistency_check_start_version: None,
            lock_aware: false,
        })
    }
}

impl TxOptions {
    /// A new transaction's options, with the limits `knobs` set.
    pub(super) fn new(knobs: &Knobs) -> Self {
        TxOptions {
            timeout: None,
            retry_limit: None,
            max_retry_delay: knobs.default_max_backoff,
            size_limit: knobs.transaction_size_limit,
            ryw_disabled: false,
            next_write_no_conflict: false,
            causal_read_risky: false,
            causal_write_risky: false,
            priority: Priority::Default,
            access_system_keys: false,
            raw_access: false,
            read_system_keys: false,
            report_conflicting_keys: false,
            lock_aware: false,
            read_only: false,
            commit_on_first_proxy: false,
            first_in_batch: false,
            bypass_storage_quota: false,
            use_provisional_proxies: false,
            no_commit_protection: false,
            special_key_space_relaxed: false,
            special_key_space_writes: false,
            auth_token: None,
            read_options: None,
            server_request_tracing: false,
            span_parent: None,
            debug_dump: false,
            debug_identifier: None,
            log_transaction: false,
            max_field_length: 0,
            retry_logging: None,
            snapshot_ryw: 1,
            bypass_unreadable: false,
            tags: Vec::new(),
            read_tags: Vec::new(),
            idempotency_id: None,
            automatic_idempotency: false,
            replica_check: false,
            required_replicas: 0,
        }
    }
}

impl Transactions {
    /// Database-wide defaults for new transactions (libfdb_c's `transaction_timeout`,
    /// `transaction_retry_limit`, ... database options): applied to every transaction when
    /// it is created and when it is reset.
    pub(crate) fn set_transaction_defaults(&mut self, defaults: Vec<TransactionOption>) {
        self.defaults = defaults;
    }

    /// One database-wide default, replacing an earlier one with the same code (libfdb_c's
    /// `transactionDefaults.addOption`).
    pub(crate) fn set_transaction_default(&mut self, opt: TransactionOption) {
        let code = opt.code();
        self.defaults.retain(|o| o.code() != code);
        self.defaults.push(opt);
    }

    pub(super) fn apply_defaults(&mut self, tx: TransactionId) {
        if let Some(t) = self.txs.get_mut(&tx) {
            t.options.snapshot_ryw = self.snapshot_ryw;
        }
        for opt in self.defaults.clone() {
            let _ = self.set_option(tx, opt);
        }
    }

    /// Sets a transaction option. A refused option also fails the next read or the commit,
    /// as libfdb_c's `fdb_transaction_set_option` defers it; an option this client does not
    /// support is refused at once and not remembered.
    pub(crate) fn set_option(
        &mut self,
        tx: TransactionId,
        opt: TransactionOption,
    ) -> Result<(), ClientError> {
        opt.check_supported()?;
        if let Some(e) = self.skipped(tx) {
            return Err(e);
        }
        let r = self.set_option_inner(tx, opt);
        self.defer(tx, r)
    }

    pub(super) fn set_option_inner(
        &mut self,
        tx: TransactionId,
        opt: TransactionOption,
    ) -> Result<(), ClientError> {
        use TransactionOption as O;
        let in_tenant = self.tx_tenants.contains_key(&tx);
        let size_limit = self.knobs.transaction_size_limit;
        let t = self.tx_mut(tx)?;
        // The checks first, in NativeAPI's / RYW's words.
        match &opt {
            // A tenant transaction cannot go raw (`setOption(RAW_ACCESS)`; the system-key
            // options imply raw access): libfdb_c 7.3.77 fails the next read with
            // `invalid_option`.
            O::RawAccess | O::AccessSystemKeys | O::ReadSystemKeys if in_tenant => {
                return fdb(ErrorCode::INVALID_OPTION);
            }
            // RYW refuses to stop reading its writes once it has read or written anything
            // (writes made with it disabled bypass its write map and do not count).
            O::ReadYourWritesDisable
                if t.read_started || (!t.options.ryw_disabled && !t.writes.is_empty()) =>
            {
                return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
            }
            // `extractIntOption(value, 32, TRANSACTION_SIZE_LIMIT)`.
            O::SizeLimit(n) if !(32..=size_limit).contains(n) => {
                return fdb(ErrorCode::INVALID_OPTION_VALUE);
            }
            // `extractIntOption(value, 0, INT_MAX)` of milliseconds.
            O::Timeout(d) | O::MaxRetryDelay(d) if d.as_millis() > i32::MAX as u128 => {
                return fdb(ErrorCode::INVALID_OPTION_VALUE);
            }
            O::RetryLimit(Some(n)) if *n > i32::MAX as u32 => {
                return fdb(ErrorCode::INVALID_OPTION_VALUE);
            }
            // `USE_GRV_CACHE` at API version 710 and later without a shared state.
            O::UseGrvCache => return fdb(ErrorCode::INVALID_OPTION),
            O::InitializeNewDatabase if t.has_read_version() => {
                return fdb(ErrorCode::READ_VERSION_ALREADY_SET);
            }
            O::DebugTransactionIdentifier(id) | O::TransactionLoggingEnable(id) => {
                if id.is_empty() || id.len() > MAX_DEBUG_IDENTIFIER {
                    return fdb(ErrorCode::INVALID_OPTION_VALUE);
                }
                if t.options
                    .debug_identifier
                    .as_ref()
                    .is_some_and(|old| old != id)
                {
                    return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
                }
            }
            O::LogTransaction if t.options.debug_identifier.is_none() => {
                return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
            }
            O::TransactionLoggingMaxFieldLength(n) if *n == 0 || *n < -1 => {
                return fdb(ErrorCode::INVALID_OPTION_VALUE);
            }
            O::SpanParent(b) if b.len() != 33 => return fdb(ErrorCode::INVALID_OPTION_VALUE),
            // `extractIntOption(value, -2, INT64_MAX)`.
            O::ConsistencyCheckRequiredReplicas(n) if *n < -2 => {
                return fdb(ErrorCode::INVALID_OPTION_VALUE);
            }
            // `IdempotencyIdRef` holds 16 to 255 bytes (NativeAPI's `setOption`).
            O::IdempotencyId(id) if !(16..256).contains(&id.len()) => {
                return fdb(ErrorCode::INVALID_OPTION);
            }
            _ => {}
        }
        if let O::InitializeNewDatabase = opt {
            t.start_at_version_zero();
        }
        let is_timeout = matches!(opt, O::Timeout(_));
        let o = &mut t.options;
        match opt {
            O::Timeout(d) => o.timeout = (!d.is_zero()).then_some(d),
            O::RetryLimit(n) => o.retry_limit = n,
            O::MaxRetryDelay(d) => o.max_retry_delay = d,
            O::SizeLimit(n) => o.size_limit = n,
            O::ReadYourWritesDisable => o.ryw_disabled = true,
            O::NextWriteNoWriteConflictRange => o.next_write_no_conflict = true,
            O::CausalReadRisky => o.causal_read_risky = true,
            O::CausalWriteRisky | O::InitializeNewDatabase => o.causal_write_risky = true,
            O::PriorityBatch => o.priority = Priority::Batch,
            O::PrioritySystemImmediate => o.priority = Priority::SystemImmediate,
            O::AccessSystemKeys => o.access_system_keys = true,
            O::ReadSystemKeys => o.read_system_keys = true,
            O::RawAccess => o.raw_access = true,
            O::ReportConflictingKeys => o.report_conflicting_keys = true,
            O::AuthorizationToken(token) => o.auth_token = Some(bytes::Bytes::from(token)),
            O::LockAware => {
                o.lock_aware = true;
                o.read_only = false;
                o.read_options_mut().lock_aware = true;
            }
            O::ReadLockAware => {
                if !o.lock_aware {
                    o.lock_aware = true;
                    o.read_only = true;
                }
                o.read_options_mut().lock_aware = true;
            }
            O::CommitOnFirstProxy => o.commit_on_first_proxy = true,
            O::FirstInBatch => o.first_in_batch = true,
            O::BypassStorageQuota => o.bypass_storage_quota = true,
            O::UseProvisionalProxies => o.use_provisional_proxies = true,
            O::UsedDuringCommitProtectionDisable => o.no_commit_protection = true,
            O::SpecialKeySpaceRelaxed => o.special_key_space_relaxed = true,
            O::SpecialKeySpaceEnableWrites => o.special_key_space_writes = true,
            O::ReadServerSideCacheEnable => o.read_options_mut().cache_result = true,
            O::ReadServerSideCacheDisable => o.read_options_mut().cache_result = false,
            O::ReadPriorityNormal => o.read_options_mut().read_type = read_type::NORMAL,
            O::ReadPriorityLow => o.read_options_mut().read_type = read_type::LOW,
            O::ReadPriorityHigh => o.read_options_mut().read_type = read_type::HIGH,
            O::ServerRequestTracing => o.server_request_tracing = true,
            O::SpanParent(b) => o.span_parent = Some(parse_span_parent(&b)),
            O::DebugDump => o.debug_dump = true,
            O::DebugRetryLogging(name) => o.retry_logging = Some(name),
            O::DebugTransactionIdentifier(id) => o.debug_identifier = Some(id),
            O::TransactionLoggingEnable(id) => {
                o.debug_identifier = Some(id);
                o.log_transaction = true;
            }
            O::LogTransaction => o.log_transaction = true,
            O::Tag(tag) => o.add_tag(tag, false)?,
            O::AutoThrottleTag(tag) => o.add_tag(tag, true)?,
            O::SnapshotRywEnable => o.snapshot_ryw = o.snapshot_ryw.saturating_add(1),
            O::SnapshotRywDisable => o.snapshot_ryw = o.snapshot_ryw.saturating_sub(1),
            O::BypassUnreadable => o.bypass_unreadable = true,
            O::TransactionLoggingMaxFieldLength(n) => o.max_field_length = n,
            // No effect, as in libfdb_c 7.3.77 (or nothing here to change).
            O::CausalReadDisable
            | O::IncludePortInAddress
            | O::ReadAheadDisable
            | O::DurabilityDatacenter
            | O::DurabilityRisky
            | O::DurabilityDevNullIsWebScale
            | O::ExpensiveClearCostEstimationEnable
            | O::SkipGrvCache => {}
            O::IdempotencyId(id) => {
                o.idempotency_id = Some(bytes::Bytes::from(id));
                o.automatic_idempotency = false;
            }
            O::AutomaticIdempotency => o.automatic_idempotency = true,
            // Refused above.
            O::UseGrvCache => return fdb(ErrorCode::INVALID_OPTION),
            O::EnableReplicaConsistencyCheck => o.replica_check = true,
            O::ConsistencyCheckRequiredReplicas(n) => o.required_replicas = n,
            // Refused by `check_supported` before getting here.
            O::CheckWritesEnable => return fdb(ErrorCode::UNSUPPORTED_OPERATION),
        }
        if let (true, Some(d)) = (is_timeout, t.options.timeout) {
            let at = t.created + d;
            self.arm_deadline(at, tx);
        }
        Ok(())
    }

    /// The read options of `tx`'s storage requests, drawing the `server_request_tracing`
    /// debug id on first use.
    pub(super) fn read_options(
        &mut self,
        rng: &mut crate::time::Rng,
        tx: TransactionId,
    ) -> Option<ReadOptions> {
        let t = self.txs.get_mut(&tx)?;
        if t.options.server_request_tracing {
            let o = t.options.read_options_mut();
            if o.debug_id.is_none() {
                o.debug_id = Some(rng.uid());
            }
        }
        t.options.read_options.clone()
    }
}

/// `span_parent`'s 33 bytes (`BinaryReader` with `IncludeVersion`): the protocol version,
/// then the trace id's two halves, the span id and the flags, little-endian.
fn parse_span_parent(b: &[u8]) -> SpanContext {
    let u64_at = |i: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(a)
    };
    SpanContext {
        trace_id: Uid::new(u64_at(8), u64_at(16)),
        span_id: u64_at(24),
        flags: b[32],
    }
}
