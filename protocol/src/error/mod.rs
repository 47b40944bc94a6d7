//! FoundationDB error codes and client retry classification, as of FDB 7.3.77.
//!
//! The code table mirrors `flow/include/flow/error_definitions.h`. The
//! classification predicates mirror, code for code, what libfdb_c 7.3 does:
//!
//! * `fdb_error_predicate` in `bindings/c/fdb_c.cpp` (the `retryable`,
//!   `maybe_committed` and `retryable_not_committed` predicates, option codes
//!   50000..=50002 in `fdbclient/vexillographer/fdb.options`);
//! * `Transaction::onError` and `Transaction::getBackoff` in
//!   `fdbclient/NativeAPI.actor.cpp`, wrapped by
//!   `MultiVersionTransaction::onError` in
//!   `fdbclient/MultiVersionTransaction.actor.cpp`;
//! * the read-path and load-balancer loops in `fdbclient/NativeAPI.actor.cpp`
//!   and `fdbrpc/include/fdbrpc/LoadBalance.actor.h`, which swallow some errors
//!   before a user ever sees them.
//!
//! Note that the predicates and `onError` do not agree exactly; see
//! [`ErrorCode::on_error_action`] for the differences.
//!
//! Descriptions are short paraphrases, not FDB's own message strings.

use core::fmt;
use core::time::Duration;

/// A FoundationDB error code.
///
/// Flow's `Error` stores its code as a `uint16_t` and serializes exactly that
/// field (`flow/include/flow/Error.h`), so `u16` is the wire representation.
/// Any value is representable; codes missing from the table are simply
/// "unknown" (`name()` returns `None`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ErrorCode(pub u16);

/// One row of the error table.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ErrorInfo {
    /// The numeric code.
    pub code: ErrorCode,
    /// FDB's snake_case identifier (the `ERROR(name, ...)` macro argument).
    pub name: &'static str,
    /// A short description of the condition.
    pub description: &'static str,
}

/// What `fdb_transaction_on_error` does with an error in libfdb_c 7.3.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum OnErrorAction {
    /// Reset the transaction and sleep `uniform(0, 1) * backoff`, then grow
    /// `backoff` by `BACKOFF_GROWTH_RATE` (capped by the transaction's max
    /// retry delay, or by `RESOURCE_CONSTRAINED_MAX_BACKOFF` when
    /// [`ErrorCode::uses_resource_constrained_backoff`]). For `tag_throttled`
    /// the pre-jitter delay is raised towards the tag's throttle duration
    /// (at most `TAG_THROTTLE_RECHECK_INTERVAL`).
    /// Source: `Transaction::onError` / `Transaction::getBackoff`,
    /// `fdbclient/NativeAPI.actor.cpp`.
    RetryWithBackoff,
    /// Reset the transaction and sleep
    /// `min(FUTURE_VERSION_RETRY_DELAY, max_retry_delay)` without jitter and
    /// without growing the backoff. Used for `transaction_too_old` and
    /// `future_version`: a fresh read version fixes these, so backing off
    /// exponentially would only add latency.
    /// Source: `Transaction::onError`, `fdbclient/NativeAPI.actor.cpp`.
    RetryAfterFutureVersionDelay,
    /// Retry at once, with a new transaction that keeps only the persistent
    /// options. Only `cluster_version_changed`, the multi-version client's own
    /// error: NativeAPI's `onError` rethrows it (so libfdb_c does too when it
    /// bypasses the multi-version client, as it does with no external client
    /// and no `disable_client_bypass`), while the multi-version client, which
    /// this client is (it follows a cluster's upgrade), swaps in a new
    /// transaction and reports success at once.
    /// Source: `MultiVersionTransaction::onError`,
    /// `fdbclient/MultiVersionTransaction.actor.cpp`.
    RetryImmediately,
    /// `onError(success)` is a usage bug: it fails with
    /// `client_invalid_operation` (2000) instead of the passed code.
    /// Source: `Transaction::onError`, `fdbclient/NativeAPI.actor.cpp`.
    FailWithClientInvalidOperation,
    /// `onError` rethrows the error unchanged; the retry loop must stop.
    Fatal,
}

/// Default client knob values relevant to retries, from
/// `fdbclient/ClientKnobs.cpp` and `flow/Knobs.cpp` at 7.3.77 (simulation
/// BUGGIFY randomization ignored).
pub mod knobs {
    use core::time::Duration;

    pub use crate::knobs::{
        BACKOFF_GROWTH_RATE, DEFAULT_BACKOFF, DEFAULT_MAX_BACKOFF, RESOURCE_CONSTRAINED_MAX_BACKOFF,
    };
    pub use crate::knobs::{FUTURE_VERSION_RETRY_DELAY, WRONG_SHARD_SERVER_DELAY};
    /// `TAG_THROTTLE_RECHECK_INTERVAL` = 5 s: longest a `tag_throttled` retry
    /// waits for a known throttle to expire.
    pub const TAG_THROTTLE_RECHECK_INTERVAL: Duration = Duration::from_secs(5);
    pub use crate::knobs::{GRV_ERROR_RETRY_DELAY, WATCH_POLLING_TIME};
    /// `watchValue` trusts a fire version only if the committed version it then reads is
    /// less than this far ahead (`MAX_VERSIONS_IN_FLIGHT`-sized); further means a recovery
    /// happened in between, and the watch starts over from the newer version.
    pub const WATCH_MAX_VERSION_GAP: i64 = 50_000_000;
    /// `LOAD_BALANCE_START_BACKOFF` = 0.01 s (`flow/Knobs.cpp`).
    pub const LOAD_BALANCE_START_BACKOFF: Duration = Duration::from_millis(10);
    /// `LOAD_BALANCE_MAX_BACKOFF` = 5 s (`flow/Knobs.cpp`).
    pub const LOAD_BALANCE_MAX_BACKOFF: Duration = Duration::from_secs(5);
    /// `LOAD_BALANCE_BACKOFF_RATE` = 2.0 (`flow/Knobs.cpp`).
    pub const LOAD_BALANCE_BACKOFF_RATE: u32 = 2;
}

macro_rules! error_codes {
    ($($konst:ident = $code:literal, $name:literal, $desc:literal;)*) => {
        impl ErrorCode {
            $(
                #[doc = concat!("`", $name, "` (", stringify!($code), "): ", $desc, ".")]
                pub const $konst: ErrorCode = ErrorCode($code);
            )*
        }

        /// Every error in `error_definitions.h`, sorted by code.
        static TABLE: &[ErrorInfo] = &[
            $(ErrorInfo { code: ErrorCode($code), name: $name, description: $desc },)*
        ];
    };
}

impl ErrorCode {
    /// The code a default-constructed flow `Error` carries (`invalid_error_code`
    /// in `flow/include/flow/Error.h`). Not a real error; it is not in the table.
    pub const INVALID: ErrorCode = ErrorCode(0xffff);

    /// Wraps a raw code. Never fails: unknown codes are kept as-is.
    pub const fn from_code(code: u16) -> ErrorCode {
        ErrorCode(code)
    }

    /// The raw numeric code.
    pub const fn code(self) -> u16 {
        self.0
    }

    /// All known errors, sorted by code.
    pub fn all() -> &'static [ErrorInfo] {
        TABLE
    }

    /// The table row for this code, if FDB 7.3 defines it.
    pub fn info(self) -> Option<&'static ErrorInfo> {
        TABLE
            .binary_search_by_key(&self.0, |e| e.code.0)
            .ok()
            .map(|i| &TABLE[i])
    }

    /// Whether FDB 7.3 defines this code.
    pub fn is_known(self) -> bool {
        self.info().is_some()
    }

    /// FDB's snake_case name, e.g. `"not_committed"`.
    pub fn name(self) -> Option<&'static str> {
        self.info().map(|e| e.name)
    }

    /// A short description of the error.
    pub fn description(self) -> Option<&'static str> {
        self.info().map(|e| e.description)
    }

    /// Looks a code up by FDB's snake_case name (linear scan).
    pub fn from_name(name: &str) -> Option<ErrorCode> {
        TABLE.iter().find(|e| e.name == name).map(|e| e.code)
    }

    /// `fdb_error_predicate(FDB_ERROR_PREDICATE_MAYBE_COMMITTED, code)`:
    /// the transaction may have committed, so blindly retrying is only safe
    /// for idempotent transactions.
    /// Source: `bindings/c/fdb_c.cpp`.
    pub const fn is_maybe_committed(self) -> bool {
        matches!(
            self,
            Self::COMMIT_UNKNOWN_RESULT | Self::CLUSTER_VERSION_CHANGED
        )
    }

    /// `fdb_error_predicate(FDB_ERROR_PREDICATE_RETRYABLE_NOT_COMMITTED, code)`:
    /// the transaction definitely did not commit and may be retried.
    /// Source: `bindings/c/fdb_c.cpp`.
    ///
    /// `commit_unknown_result_fatal` (1022) is deliberately absent from every
    /// predicate: once idempotency ids may have expired the outcome can
    /// never be resolved, so a retry could apply the transaction twice.
    pub const fn is_retryable_not_committed(self) -> bool {
        matches!(
            self,
            Self::NOT_COMMITTED
                | Self::TRANSACTION_TOO_OLD
                | Self::FUTURE_VERSION
                | Self::DATABASE_LOCKED
                | Self::GRV_PROXY_MEMORY_LIMIT_EXCEEDED
                | Self::COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED
                | Self::BATCH_TRANSACTION_THROTTLED
                | Self::PROCESS_BEHIND
                | Self::TAG_THROTTLED
                | Self::PROXY_TAG_THROTTLED
        )
    }

    /// `fdb_error_predicate(FDB_ERROR_PREDICATE_RETRYABLE, code)`: defined in
    /// `bindings/c/fdb_c.cpp` as maybe-committed OR retryable-not-committed.
    ///
    /// This is *not* identical to "`onError` retries it": `onError` also
    /// retries `blob_granule_request_failed` (1079), which this predicate
    /// rejects. Use [`ErrorCode::on_error_action`] to drive a retry loop.
    pub const fn is_retryable(self) -> bool {
        self.is_maybe_committed() || self.is_retryable_not_committed()
    }

    /// What libfdb_c's `fdb_transaction_on_error` does with this code.
    ///
    /// Sources: `Transaction::onError` (`fdbclient/NativeAPI.actor.cpp`) for
    /// everything except `cluster_version_changed`, which NativeAPI rethrows
    /// and `MultiVersionTransaction::onError`
    /// (`fdbclient/MultiVersionTransaction.actor.cpp`) retries immediately.
    /// The read-your-writes layer above (`RYWImpl::onError`,
    /// `fdbclient/ReadYourWrites.actor.cpp`) only adds the `retry_limit`
    /// check and turns a `broken_promise` from a concurrent reset into
    /// `transaction_cancelled`; it does not change per-code behaviour.
    pub const fn on_error_action(self) -> OnErrorAction {
        match self {
            Self::SUCCESS => OnErrorAction::FailWithClientInvalidOperation,
            Self::NOT_COMMITTED
            | Self::COMMIT_UNKNOWN_RESULT
            | Self::DATABASE_LOCKED
            | Self::COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED
            | Self::GRV_PROXY_MEMORY_LIMIT_EXCEEDED
            | Self::PROCESS_BEHIND
            | Self::BATCH_TRANSACTION_THROTTLED
            | Self::TAG_THROTTLED
            | Self::BLOB_GRANULE_REQUEST_FAILED
            | Self::PROXY_TAG_THROTTLED => OnErrorAction::RetryWithBackoff,
            Self::TRANSACTION_TOO_OLD | Self::FUTURE_VERSION => {
                OnErrorAction::RetryAfterFutureVersionDelay
            }
            Self::CLUSTER_VERSION_CHANGED => OnErrorAction::RetryImmediately,
            _ => OnErrorAction::Fatal,
        }
    }

    /// Whether `onError` retries this code at all (any retry action).
    pub const fn on_error_retries(self) -> bool {
        matches!(
            self.on_error_action(),
            OnErrorAction::RetryWithBackoff
                | OnErrorAction::RetryAfterFutureVersionDelay
                | OnErrorAction::RetryImmediately
        )
    }

    /// Whether the backoff growth after this error is capped by
    /// `RESOURCE_CONSTRAINED_MAX_BACKOFF` (30 s) instead of the transaction's
    /// `max_retry_delay` (default 1 s). True for the two proxy memory-limit
    /// errors: an overloaded proxy needs clients to back off much further.
    /// Source: `Transaction::getBackoff`, `fdbclient/NativeAPI.actor.cpp`.
    /// (`DatabaseContext::updateBackoff` applies the same 30 s cap to the
    /// database-wide backoff when a location lookup gets
    /// `commit_proxy_memory_limit_exceeded`.)
    pub const fn uses_resource_constrained_backoff(self) -> bool {
        matches!(
            self,
            Self::COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED | Self::GRV_PROXY_MEMORY_LIMIT_EXCEEDED
        )
    }

    /// The transaction backoff to store for the *next* retry after this error
    /// was handled with [`OnErrorAction::RetryWithBackoff`]:
    /// `min(current * BACKOFF_GROWTH_RATE, cap)` where `cap` is
    /// `RESOURCE_CONSTRAINED_MAX_BACKOFF` or `max_retry_delay`.
    /// The sleep for *this* retry is `uniform(0, 1) * current` (before
    /// growth). Neither `onError`'s internal `reset()` nor this function
    /// resets the backoff; only a user-level reset restores `DEFAULT_BACKOFF`.
    /// Source: `Transaction::getBackoff`, `fdbclient/NativeAPI.actor.cpp`.
    /// With knobs set, [`crate::knobs::Knobs`]' values stand for these.
    pub fn next_backoff(self, current: Duration, max_retry_delay: Duration) -> Duration {
        crate::knobs::Knobs::default().next_backoff(self, current, max_retry_delay)
    }

    /// Errors that NativeAPI's key/range read actors (`getValue`, `getKey`,
    /// `getRange`, `getExactRange`, `watchValue`, ...) and the load balancer
    /// below them swallow and retry internally, so they normally never reach
    /// the user or `onError` (which would treat them as fatal):
    ///
    /// * `wrong_shard_server` (1001), `all_alternatives_failed` (1006):
    ///   the cached shard location is stale; invalidate the location cache
    ///   and re-read after `WRONG_SHARD_SERVER_DELAY`
    ///   (`fdbclient/NativeAPI.actor.cpp`). `all_alternatives_failed` is
    ///   raised by `allAlternativesFailedDelay` (`fdbrpc/LoadBalance.actor.cpp`)
    ///   precisely to force that location refresh.
    /// * `broken_promise` (1100), `request_maybe_delivered` (1030): the
    ///   replica went away; `loadBalance` tries the next alternative. Reads
    ///   are not at-most-once; for at-most-once requests (commits)
    ///   `request_maybe_delivered` is surfaced instead
    ///   (`fdbrpc/include/fdbrpc/LoadBalance.actor.h`).
    /// * `server_overloaded` (1211): `loadBalance` tries another replica.
    ///
    /// `process_behind` (1037) is also retried across replicas, but is
    /// surfaced once all replicas were tried, so it is not included here
    /// (it is retryable via `onError`). Range *streams* additionally retry
    /// `connection_failed` (1026) per shard; that is not included either.
    pub const fn is_internal_retry_in_reads(self) -> bool {
        matches!(
            self,
            Self::WRONG_SHARD_SERVER
                | Self::ALL_ALTERNATIVES_FAILED
                | Self::BROKEN_PROMISE
                | Self::REQUEST_MAYBE_DELIVERED
                | Self::SERVER_OVERLOADED
        )
    }

    /// The subset of [`ErrorCode::is_internal_retry_in_reads`] that means the
    /// client's shard location cache is stale and must be invalidated before
    /// retrying. Source: read actors in `fdbclient/NativeAPI.actor.cpp`.
    pub const fn invalidates_location_cache(self) -> bool {
        matches!(
            self,
            Self::WRONG_SHARD_SERVER | Self::ALL_ALTERNATIVES_FAILED
        )
    }
}

impl From<u16> for ErrorCode {
    fn from(code: u16) -> Self {
        ErrorCode(code)
    }
}

impl From<ErrorCode> for u16 {
    fn from(e: ErrorCode) -> Self {
        e.0
    }
}

/// `fdb_error_t` is a C `int`.
impl From<ErrorCode> for i32 {
    fn from(e: ErrorCode) -> Self {
        i32::from(e.0)
    }
}

impl fmt::Display for ErrorCode {
    /// `"name (code)"`; unknown codes print as `"UNKNOWN_ERROR (code)"`,
    /// matching the name flow's `Error::name()` gives them (`flow/Error.cpp`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name().unwrap_or("UNKNOWN_ERROR"), self.0)
    }
}

impl core::error::Error for ErrorCode {}

error_codes! {
    SUCCESS = 0, "success", "No error";
    END_OF_STREAM = 1, "end_of_stream", "A stream has no more items";
    OPERATION_FAILED = 1000, "operation_failed", "The operation did not succeed";
    WRONG_SHARD_SERVER = 1001, "wrong_shard_server", "This server does not currently serve the requested shard";
    OPERATION_OBSOLETE = 1002, "operation_obsolete", "The result of the operation is no longer needed";
    COLD_CACHE_SERVER = 1003, "cold_cache_server", "The cache server has not warmed up for this range";
    TIMED_OUT = 1004, "timed_out", "The operation took too long";
    COORDINATED_STATE_CONFLICT = 1005, "coordinated_state_conflict", "Coordination state was changed concurrently";
    ALL_ALTERNATIVES_FAILED = 1006, "all_alternatives_failed", "Every replica that could serve the request is unavailable";
    TRANSACTION_TOO_OLD = 1007, "transaction_too_old", "The read version is too old to read at or commit with";
    NO_MORE_SERVERS = 1008, "no_more_servers", "Too few physical servers are available";
    FUTURE_VERSION = 1009, "future_version", "A read asked for a version the server has not yet reached";
    MOVEKEYS_CONFLICT = 1010, "movekeys_conflict", "Data distribution changes collided";
    TLOG_STOPPED = 1011, "tlog_stopped", "The transaction log was stopped";
    SERVER_REQUEST_QUEUE_FULL = 1012, "server_request_queue_full", "The server's request queue has no room";
    NOT_COMMITTED = 1020, "not_committed", "Commit rejected because of a conflict with another transaction";
    COMMIT_UNKNOWN_RESULT = 1021, "commit_unknown_result", "It is unknown whether the commit took effect";
    COMMIT_UNKNOWN_RESULT_FATAL = 1022, "commit_unknown_result_fatal", "Commit outcome cannot be determined because its idempotency id may have expired";
    TRANSACTION_CANCELLED = 1025, "transaction_cancelled", "The transaction was cancelled, aborting the operation";
    CONNECTION_FAILED = 1026, "connection_failed", "The network connection was lost";
    COORDINATORS_CHANGED = 1027, "coordinators_changed", "The set of coordinators changed";
    NEW_COORDINATORS_TIMED_OUT = 1028, "new_coordinators_timed_out", "The new coordinators did not answer in time";
    WATCH_CANCELLED = 1029, "watch_cancelled", "The watch was dropped because the storage server hit its watch limit";
    REQUEST_MAYBE_DELIVERED = 1030, "request_maybe_delivered", "The request might or might not have reached its destination";
    TRANSACTION_TIMED_OUT = 1031, "transaction_timed_out", "The transaction hit its timeout, aborting the operation";
    TOO_MANY_WATCHES = 1032, "too_many_watches", "The limit on outstanding watches was reached";
    LOCALITY_INFORMATION_UNAVAILABLE = 1033, "locality_information_unavailable", "No locality information is available";
    WATCHES_DISABLED = 1034, "watches_disabled", "Watches need read-your-writes to be enabled";
    DEFAULT_ERROR_OR = 1035, "default_error_or", "Placeholder error of a default-constructed ErrorOr";
    ACCESSED_UNREADABLE = 1036, "accessed_unreadable", "An unreadable key was read or written";
    PROCESS_BEHIND = 1037, "process_behind", "The storage process is missing recent mutations";
    DATABASE_LOCKED = 1038, "database_locked", "The database is locked";
    CLUSTER_VERSION_CHANGED = 1039, "cluster_version_changed", "The cluster's protocol version changed";
    EXTERNAL_CLIENT_ALREADY_LOADED = 1040, "external_client_already_loaded", "That external client library is already loaded";
    LOOKUP_FAILED = 1041, "lookup_failed", "A DNS lookup did not succeed";
    COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED = 1042, "commit_proxy_memory_limit_exceeded", "The commit proxy ran out of its commit memory budget";
    SHUTDOWN_IN_PROGRESS = 1043, "shutdown_in_progress", "The operation is unavailable because shutdown has begun";
    SERIALIZATION_FAILED = 1044, "serialization_failed", "An object could not be deserialized";
    CONNECTION_UNREFERENCED = 1048, "connection_unreferenced", "The connection has no remaining peer references";
    CONNECTION_IDLE = 1049, "connection_idle", "The connection was closed after being idle";
    DISK_ADAPTER_RESET = 1050, "disk_adapter_reset", "The disk queue adapter was reset";
    BATCH_TRANSACTION_THROTTLED = 1051, "batch_transaction_throttled", "Batch-priority read version requests are rate limited";
    DD_CANCELLED = 1052, "dd_cancelled", "Data distribution components were cancelled";
    DD_NOT_FOUND = 1053, "dd_not_found", "No data distributor could be found";
    WRONG_CONNECTION_FILE = 1054, "wrong_connection_file", "The connection file does not match";
    VERSION_ALREADY_COMPACTED = 1055, "version_already_compacted", "The requested changes were already compacted";
    LOCAL_CONFIG_CHANGED = 1056, "local_config_changed", "The local configuration file changed; a restart is needed to apply it";
    FAILED_TO_REACH_QUORUM = 1057, "failed_to_reach_quorum", "A quorum of configuration database nodes could not be reached";
    UNSUPPORTED_FORMAT_VERSION = 1058, "unsupported_format_version", "This format version is unsupported";
    UNKNOWN_CHANGE_FEED = 1059, "unknown_change_feed", "No such change feed";
    CHANGE_FEED_NOT_REGISTERED = 1060, "change_feed_not_registered", "The change feed is not registered";
    GRANULE_ASSIGNMENT_CONFLICT = 1061, "granule_assignment_conflict", "Blob granule assignments collided";
    CHANGE_FEED_CANCELLED = 1062, "change_feed_cancelled", "The change feed was cancelled";
    BLOB_GRANULE_FILE_LOAD_ERROR = 1063, "blob_granule_file_load_error", "A blob file could not be loaded while materializing a granule";
    BLOB_GRANULE_TRANSACTION_TOO_OLD = 1064, "blob_granule_transaction_too_old", "The read version predates the available blob granule history";
    BLOB_MANAGER_REPLACED = 1065, "blob_manager_replaced", "A newer blob manager has taken over";
    CHANGE_FEED_POPPED = 1066, "change_feed_popped", "The requested change feed version has already been popped";
    REMOTE_KVS_CANCELLED = 1067, "remote_kvs_cancelled", "The remote key-value store was cancelled";
    PAGE_HEADER_WRONG_PAGE_ID = 1068, "page_header_wrong_page_id", "The page header does not match its on-disk location";
    PAGE_HEADER_CHECKSUM_FAILED = 1069, "page_header_checksum_failed", "The page header checksum is wrong";
    PAGE_HEADER_VERSION_NOT_SUPPORTED = 1070, "page_header_version_not_supported", "The page header version is unsupported";
    PAGE_ENCODING_NOT_SUPPORTED = 1071, "page_encoding_not_supported", "The page encoding type is unknown or unsupported";
    PAGE_DECODING_FAILED = 1072, "page_decoding_failed", "Page contents could not be decoded";
    UNEXPECTED_ENCODING_TYPE = 1073, "unexpected_encoding_type", "The page has an unexpected encoding type";
    ENCRYPTION_KEY_NOT_FOUND = 1074, "encryption_key_not_found", "The encryption key is missing";
    DATA_MOVE_CANCELLED = 1075, "data_move_cancelled", "The data move was cancelled";
    DATA_MOVE_DEST_TEAM_NOT_FOUND = 1076, "data_move_dest_team_not_found", "The destination team for a data move is missing";
    BLOB_WORKER_FULL = 1077, "blob_worker_full", "The blob worker cannot accept more granules";
    GRV_PROXY_MEMORY_LIMIT_EXCEEDED = 1078, "grv_proxy_memory_limit_exceeded", "The GRV proxy ran out of its memory budget";
    BLOB_GRANULE_REQUEST_FAILED = 1079, "blob_granule_request_failed", "A blob granule request did not succeed";
    STORAGE_TOO_MANY_FEED_STREAMS = 1080, "storage_too_many_feed_streams", "A storage server has too many change feed streams";
    STORAGE_ENGINE_NOT_INITIALIZED = 1081, "storage_engine_not_initialized", "The storage engine never finished initializing";
    UNKNOWN_STORAGE_ENGINE = 1082, "unknown_storage_engine", "The storage engine type is unknown";
    DUPLICATE_SNAPSHOT_REQUEST = 1083, "duplicate_snapshot_request", "A repeated snapshot request replaced the earlier one";
    DD_CONFIG_CHANGED = 1084, "dd_config_changed", "The data distribution configuration was modified";
    CONSISTENCY_CHECK_URGENT_TASK_FAILED = 1085, "consistency_check_urgent_task_failed", "An urgent consistency check task failed";
    DATA_MOVE_CONFLICT = 1086, "data_move_conflict", "Data moves collided on a storage server";
    CONSISTENCY_CHECK_URGENT_DUPLICATE_REQUEST = 1087, "consistency_check_urgent_duplicate_request", "An urgent consistency check request was repeated";
    BROKEN_PROMISE = 1100, "broken_promise", "The other side of a promise went away without replying";
    OPERATION_CANCELLED = 1101, "operation_cancelled", "An asynchronous operation was cancelled";
    FUTURE_RELEASED = 1102, "future_released", "The future was released";
    CONNECTION_LEAKED = 1103, "connection_leaked", "A connection object was leaked";
    NEVER_REPLY = 1104, "never_reply", "The request will never be answered";
    RETRY = 1105, "retry", "The operation should be retried";
    RECRUITMENT_FAILED = 1200, "recruitment_failed", "A server could not be recruited";
    MOVE_TO_REMOVED_SERVER = 1201, "move_to_removed_server", "Keys were to be moved to a removed storage server";
    WORKER_REMOVED = 1202, "worker_removed", "A worker shut down normally";
    CLUSTER_RECOVERY_FAILED = 1203, "cluster_recovery_failed", "Cluster recovery did not succeed";
    MASTER_MAX_VERSIONS_IN_FLIGHT = 1204, "master_max_versions_in_flight", "The master has too many versions in flight";
    TLOG_FAILED = 1205, "tlog_failed", "A transaction log died, ending cluster recovery";
    WORKER_RECOVERY_FAILED = 1206, "worker_recovery_failed", "A worker process could not recover";
    PLEASE_REBOOT = 1207, "please_reboot", "The server process is asked to reboot";
    PLEASE_REBOOT_DELETE = 1208, "please_reboot_delete", "The server process is asked to reboot and delete its state";
    COMMIT_PROXY_FAILED = 1209, "commit_proxy_failed", "A commit proxy failed, so the master is terminating";
    RESOLVER_FAILED = 1210, "resolver_failed", "A resolver failed, ending cluster recovery";
    SERVER_OVERLOADED = 1211, "server_overloaded", "The server is too loaded to answer";
    BACKUP_WORKER_FAILED = 1212, "backup_worker_failed", "A backup worker failed, ending cluster recovery";
    TAG_THROTTLED = 1213, "tag_throttled", "A transaction tag is throttled";
    GRV_PROXY_FAILED = 1214, "grv_proxy_failed", "A GRV proxy failed, ending cluster recovery";
    DD_TRACKER_CANCELLED = 1215, "dd_tracker_cancelled", "The data distribution tracker was cancelled";
    FAILED_TO_PROGRESS = 1216, "failed_to_progress", "The process is not making enough progress";
    INVALID_CLUSTER_ID = 1217, "invalid_cluster_id", "The process tried to join a cluster with another cluster ID";
    RESTART_CLUSTER_CONTROLLER = 1218, "restart_cluster_controller", "The cluster controller should restart";
    PLEASE_REBOOT_KV_STORE = 1219, "please_reboot_kv_store", "The storage engine needs a reboot";
    INCOMPATIBLE_SOFTWARE_VERSION = 1220, "incompatible_software_version", "This software cannot handle the database format";
    AUDIT_STORAGE_FAILED = 1221, "audit_storage_failed", "A storage consistency audit failed";
    AUDIT_STORAGE_EXCEEDED_REQUEST_LIMIT = 1222, "audit_storage_exceeded_request_limit", "Too many concurrent storage audit requests";
    PROXY_TAG_THROTTLED = 1223, "proxy_tag_throttled", "The proxy tag throttling time limit was exceeded";
    KEY_VALUE_STORE_DEADLINE_EXCEEDED = 1224, "key_value_store_deadline_exceeded", "A key-value store read or write ran past its deadline";
    STORAGE_QUOTA_EXCEEDED = 1225, "storage_quota_exceeded", "The tenant is over its storage quota";
    AUDIT_STORAGE_ERROR = 1226, "audit_storage_error", "A storage audit found corrupted data";
    MASTER_FAILED = 1227, "master_failed", "The master failed, ending cluster recovery";
    TEST_FAILED = 1228, "test_failed", "A test failed";
    RETRY_CLEAN_UP_DATAMOVE_TOMBSTONE_ADDED = 1229, "retry_clean_up_datamove_tombstone_added", "A data move tombstone needs background cleanup";
    PERSIST_NEW_AUDIT_METADATA_ERROR = 1230, "persist_new_audit_metadata_error", "New audit metadata could not be persisted";
    CANCEL_AUDIT_STORAGE_FAILED = 1231, "cancel_audit_storage_failed", "An audit could not be cancelled";
    AUDIT_STORAGE_CANCELLED = 1232, "audit_storage_cancelled", "The audit was cancelled";
    LOCATION_METADATA_CORRUPTION = 1233, "location_metadata_corruption", "Location metadata is corrupted";
    AUDIT_STORAGE_TASK_OUTDATED = 1234, "audit_storage_task_outdated", "The audit task came from an outdated data distributor";
    STORAGE_REPLICA_COMPARISON_ERROR = 1236, "storage_replica_comparison_error", "Replicas of a shard answered a read differently";
    UNREACHABLE_STORAGE_REPLICA = 1237, "unreachable_storage_replica", "A replica the read had to compare could not be reached";
    PLATFORM_ERROR = 1500, "platform_error", "A platform-level error occurred";
    LARGE_ALLOC_FAILED = 1501, "large_alloc_failed", "A large memory allocation failed";
    PERFORMANCE_COUNTER_ERROR = 1502, "performance_counter_error", "Reading the performance counter failed";
    BAD_ALLOCATOR = 1503, "bad_allocator", "Memory was allocated through a null allocator";
    IO_ERROR = 1510, "io_error", "A disk I/O operation failed";
    FILE_NOT_FOUND = 1511, "file_not_found", "The file does not exist";
    BIND_FAILED = 1512, "bind_failed", "Could not bind the network address";
    FILE_NOT_READABLE = 1513, "file_not_readable", "The file could not be read";
    FILE_NOT_WRITABLE = 1514, "file_not_writable", "The file could not be written";
    NO_CLUSTER_FILE_FOUND = 1515, "no_cluster_file_found", "No cluster file in the current directory or the default location";
    FILE_TOO_LARGE = 1516, "file_too_large", "The file is too big to read";
    NON_SEQUENTIAL_OP = 1517, "non_sequential_op", "Only sequential file operations are allowed";
    HTTP_BAD_RESPONSE = 1518, "http_bad_response", "The HTTP response was malformed";
    HTTP_NOT_ACCEPTED = 1519, "http_not_accepted", "The HTTP request was rejected";
    CHECKSUM_FAILED = 1520, "checksum_failed", "A data checksum did not match";
    IO_TIMEOUT = 1521, "io_timeout", "A disk I/O operation did not finish in time";
    FILE_CORRUPT = 1522, "file_corrupt", "A data file is structurally corrupt";
    HTTP_REQUEST_FAILED = 1523, "http_request_failed", "No HTTP response code, or a failure code, was received";
    HTTP_AUTH_FAILED = 1524, "http_auth_failed", "The HTTP request had bad credentials";
    HTTP_BAD_REQUEST_ID = 1525, "http_bad_request_id", "The HTTP response carried an unexpected X-Request-ID";
    REST_INVALID_URI = 1526, "rest_invalid_uri", "The REST URI is invalid";
    REST_INVALID_REST_CLIENT_KNOB = 1527, "rest_invalid_rest_client_knob", "The REST client knob is invalid";
    REST_CONNECTPOOL_KEY_NOT_FOUND = 1528, "rest_connectpool_key_not_found", "The connection pool has no such key";
    LOCK_FILE_FAILURE = 1529, "lock_file_failure", "The file could not be locked";
    REST_UNSUPPORTED_PROTOCOL = 1530, "rest_unsupported_protocol", "The REST protocol is unsupported";
    REST_MALFORMED_RESPONSE = 1531, "rest_malformed_response", "The REST response is malformed";
    REST_MAX_BASE_CIPHER_LEN = 1532, "rest_max_base_cipher_len", "The base cipher exceeds its maximum length";
    CLIENT_INVALID_OPERATION = 2000, "client_invalid_operation", "The API call is not valid here";
    COMMIT_READ_INCOMPLETE = 2002, "commit_read_incomplete", "Commit attempted while a read was incomplete";
    TEST_SPECIFICATION_INVALID = 2003, "test_specification_invalid", "The test specification is invalid";
    KEY_OUTSIDE_LEGAL_RANGE = 2004, "key_outside_legal_range", "The key is outside the permitted range";
    INVERTED_RANGE = 2005, "inverted_range", "The range's begin key is after its end key";
    INVALID_OPTION_VALUE = 2006, "invalid_option_value", "The option value is invalid";
    INVALID_OPTION = 2007, "invalid_option", "The option is not valid in this context";
    NETWORK_NOT_SETUP = 2008, "network_not_setup", "The network has not been configured yet";
    NETWORK_ALREADY_SETUP = 2009, "network_already_setup", "The network may be configured only once";
    READ_VERSION_ALREADY_SET = 2010, "read_version_already_set", "The transaction's read version was already set";
    VERSION_INVALID = 2011, "version_invalid", "The version is invalid";
    RANGE_LIMITS_INVALID = 2012, "range_limits_invalid", "The range limits are invalid";
    INVALID_DATABASE_NAME = 2013, "invalid_database_name", "The database name must be 'DB'";
    ATTRIBUTE_NOT_FOUND = 2014, "attribute_not_found", "No such attribute";
    FUTURE_NOT_SET = 2015, "future_not_set", "The future is not ready yet";
    FUTURE_NOT_ERROR = 2016, "future_not_error", "The future does not hold an error";
    USED_DURING_COMMIT = 2017, "used_during_commit", "An operation was issued while a commit was in progress";
    INVALID_MUTATION_TYPE = 2018, "invalid_mutation_type", "The atomic mutation type is unknown";
    ATTRIBUTE_TOO_LARGE = 2019, "attribute_too_large", "The attribute does not fit in an int";
    TRANSACTION_INVALID_VERSION = 2020, "transaction_invalid_version", "The transaction has no valid commit version";
    NO_COMMIT_VERSION = 2021, "no_commit_version", "A read-only transaction has no commit version";
    ENVIRONMENT_VARIABLE_NETWORK_OPTION_FAILED = 2022, "environment_variable_network_option_failed", "A network option from an environment variable could not be applied";
    TRANSACTION_READ_ONLY = 2023, "transaction_read_only", "Commit attempted on a read-only transaction";
    INVALID_CACHE_EVICTION_POLICY = 2024, "invalid_cache_eviction_policy", "Only random and LRU cache eviction are supported";
    NETWORK_CANNOT_BE_RESTARTED = 2025, "network_cannot_be_restarted", "The network can be started only once";
    BLOCKED_FROM_NETWORK_THREAD = 2026, "blocked_from_network_thread", "A callback on the network thread would deadlock";
    INVALID_CONFIG_DB_RANGE_READ = 2027, "invalid_config_db_range_read", "The configuration database range read is invalid";
    INVALID_CONFIG_DB_KEY = 2028, "invalid_config_db_key", "The configuration database key is invalid";
    INVALID_CONFIG_PATH = 2029, "invalid_config_path", "The configuration path is invalid";
    MAPPER_BAD_INDEX = 2030, "mapper_bad_index", "A K[] or V[] index in the mapper is not a number or is out of range";
    MAPPER_NO_SUCH_KEY = 2031, "mapper_no_such_key", "A key produced by the mapper is not in the database";
    MAPPER_BAD_RANGE_DECRIPTOR = 2032, "mapper_bad_range_decriptor", "The \"{...}\" range descriptor must end the mapper tuple";
    QUICK_GET_KEY_VALUES_HAS_MORE = 2033, "quick_get_key_values_has_more", "A mapped range query returned too much data";
    QUICK_GET_VALUE_MISS = 2034, "quick_get_value_miss", "A mapped key is not served by the same storage server";
    QUICK_GET_KEY_VALUES_MISS = 2035, "quick_get_key_values_miss", "A mapped range is not served by the same storage server";
    BLOB_GRANULE_NO_RYW = 2036, "blob_granule_no_ryw", "Blob granule reads require read-your-writes to be disabled";
    BLOB_GRANULE_NOT_MATERIALIZED = 2037, "blob_granule_not_materialized", "The blob granule read was not materialized";
    GET_MAPPED_KEY_VALUES_HAS_MORE = 2038, "get_mapped_key_values_has_more", "getMappedRange cannot continue a partial result yet";
    GET_MAPPED_RANGE_READS_YOUR_WRITES = 2039, "get_mapped_range_reads_your_writes", "getMappedRange would read data written earlier in the same transaction";
    CHECKPOINT_NOT_FOUND = 2040, "checkpoint_not_found", "No such checkpoint";
    KEY_NOT_TUPLE = 2041, "key_not_tuple", "The key does not decode as a tuple";
    VALUE_NOT_TUPLE = 2042, "value_not_tuple", "The value does not decode as a tuple";
    MAPPER_NOT_TUPLE = 2043, "mapper_not_tuple", "The mapper does not decode as a tuple";
    INVALID_CHECKPOINT_FORMAT = 2044, "invalid_checkpoint_format", "The checkpoint format is invalid";
    INVALID_THROTTLE_QUOTA_VALUE = 2045, "invalid_throttle_quota_value", "The quota is invalid; reserved throughput may not exceed total throughput";
    FAILED_TO_CREATE_CHECKPOINT = 2046, "failed_to_create_checkpoint", "A checkpoint could not be created";
    FAILED_TO_RESTORE_CHECKPOINT = 2047, "failed_to_restore_checkpoint", "A checkpoint could not be restored";
    FAILED_TO_CREATE_CHECKPOINT_SHARD_METADATA = 2048, "failed_to_create_checkpoint_shard_metadata", "Shard metadata for a checkpoint could not be written to an SST file";
    ADDRESS_PARSE_ERROR = 2049, "address_parse_error", "The address could not be parsed";
    INCOMPATIBLE_PROTOCOL_VERSION = 2100, "incompatible_protocol_version", "The protocol versions are incompatible";
    TRANSACTION_TOO_LARGE = 2101, "transaction_too_large", "The transaction is over the size limit";
    KEY_TOO_LARGE = 2102, "key_too_large", "The key is over the length limit";
    VALUE_TOO_LARGE = 2103, "value_too_large", "The value is over the length limit";
    CONNECTION_STRING_INVALID = 2104, "connection_string_invalid", "The connection string is invalid";
    ADDRESS_IN_USE = 2105, "address_in_use", "The local address is already in use";
    INVALID_LOCAL_ADDRESS = 2106, "invalid_local_address", "The local address is invalid";
    TLS_ERROR = 2107, "tls_error", "A TLS failure occurred";
    UNSUPPORTED_OPERATION = 2108, "unsupported_operation", "The operation is unsupported";
    TOO_MANY_TAGS = 2109, "too_many_tags", "The transaction has too many tags";
    TAG_TOO_LONG = 2110, "tag_too_long", "A transaction tag is too long";
    TOO_MANY_TAG_THROTTLES = 2111, "too_many_tag_throttles", "Too many tag throttles exist";
    SPECIAL_KEYS_CROSS_MODULE_READ = 2112, "special_keys_cross_module_read", "A special key space range read spans modules (see special_key_space_relaxed)";
    SPECIAL_KEYS_NO_MODULE_FOUND = 2113, "special_keys_no_module_found", "A special key space range read touches no module (see special_key_space_relaxed)";
    SPECIAL_KEYS_WRITE_DISABLED = 2114, "special_keys_write_disabled", "Writes to the special key space are off by default (see special_key_space_enable_writes)";
    SPECIAL_KEYS_NO_WRITE_MODULE_FOUND = 2115, "special_keys_no_write_module_found", "A special key space set or clear touches no module";
    SPECIAL_KEYS_CROSS_MODULE_CLEAR = 2116, "special_keys_cross_module_clear", "A special key space clear spans modules";
    SPECIAL_KEYS_API_FAILURE = 2117, "special_keys_api_failure", "An API call through special keys failed; details are in the special error_message key";
    CLIENT_LIB_INVALID_METADATA = 2118, "client_lib_invalid_metadata", "The client library metadata is invalid";
    CLIENT_LIB_ALREADY_EXISTS = 2119, "client_lib_already_exists", "A client library with this identifier is already on the cluster";
    CLIENT_LIB_NOT_FOUND = 2120, "client_lib_not_found", "No client library has this identifier";
    CLIENT_LIB_NOT_AVAILABLE = 2121, "client_lib_not_available", "The client library exists but cannot be downloaded";
    CLIENT_LIB_INVALID_BINARY = 2122, "client_lib_invalid_binary", "The client library binary is invalid";
    NO_EXTERNAL_CLIENT_PROVIDED = 2123, "no_external_client_provided", "No external client library was supplied";
    ALL_EXTERNAL_CLIENTS_FAILED = 2124, "all_external_clients_failed", "Every external client failed";
    INCOMPATIBLE_CLIENT = 2125, "incompatible_client", "No available client supports the cluster's protocol version";
    TENANT_NAME_REQUIRED = 2130, "tenant_name_required", "A tenant must be named to access data in this cluster";
    TENANT_NOT_FOUND = 2131, "tenant_not_found", "No such tenant";
    TENANT_ALREADY_EXISTS = 2132, "tenant_already_exists", "A tenant with this name already exists";
    TENANT_NOT_EMPTY = 2133, "tenant_not_empty", "A tenant that still holds data cannot be deleted";
    INVALID_TENANT_NAME = 2134, "invalid_tenant_name", "Tenant names may not start with \\xff";
    TENANT_PREFIX_ALLOCATOR_CONFLICT = 2135, "tenant_prefix_allocator_conflict", "Keys already exist at the prefix chosen for the tenant";
    TENANTS_DISABLED = 2136, "tenants_disabled", "Tenants are disabled on this cluster";
    ILLEGAL_TENANT_ACCESS = 2138, "illegal_tenant_access", "The tenant access is not allowed";
    INVALID_TENANT_GROUP_NAME = 2139, "invalid_tenant_group_name", "Tenant group names may not start with \\xff";
    INVALID_TENANT_CONFIGURATION = 2140, "invalid_tenant_configuration", "The tenant configuration is invalid";
    CLUSTER_NO_CAPACITY = 2141, "cluster_no_capacity", "The cluster lacks capacity for this operation";
    TENANT_REMOVED = 2142, "tenant_removed", "The tenant has been removed";
    INVALID_TENANT_STATE = 2143, "invalid_tenant_state", "The tenant's current state does not allow this operation";
    TENANT_LOCKED = 2144, "tenant_locked", "The tenant is locked";
    INVALID_CLUSTER_NAME = 2160, "invalid_cluster_name", "Data cluster names may not start with \\xff";
    INVALID_METACLUSTER_OPERATION = 2161, "invalid_metacluster_operation", "A metacluster operation was run on a non-metacluster";
    CLUSTER_ALREADY_EXISTS = 2162, "cluster_already_exists", "A data cluster with this name already exists";
    CLUSTER_NOT_FOUND = 2163, "cluster_not_found", "No such data cluster";
    CLUSTER_NOT_EMPTY = 2164, "cluster_not_empty", "The cluster has to be empty";
    CLUSTER_ALREADY_REGISTERED = 2165, "cluster_already_registered", "The data cluster already belongs to a metacluster";
    METACLUSTER_NO_CAPACITY = 2166, "metacluster_no_capacity", "The metacluster cannot hold more tenants";
    MANAGEMENT_CLUSTER_INVALID_ACCESS = 2167, "management_cluster_invalid_access", "Ordinary transactions may not run against the management cluster";
    TENANT_CREATION_PERMANENTLY_FAILED = 2168, "tenant_creation_permanently_failed", "Tenant creation took too long and was abandoned";
    CLUSTER_REMOVED = 2169, "cluster_removed", "Removal of this cluster from its metacluster is under way";
    CLUSTER_RESTORING = 2170, "cluster_restoring", "The cluster is being restored into the metacluster";
    INVALID_DATA_CLUSTER = 2171, "invalid_data_cluster", "The data cluster being restored does not know its metacluster";
    METACLUSTER_MISMATCH = 2172, "metacluster_mismatch", "The cluster's name or metacluster is not the expected one";
    CONFLICTING_RESTORE = 2173, "conflicting_restore", "Another restore of the same data cluster is running";
    INVALID_METACLUSTER_CONFIGURATION = 2174, "invalid_metacluster_configuration", "The metacluster configuration is invalid";
    API_VERSION_UNSET = 2200, "api_version_unset", "The API version has not been selected";
    API_VERSION_ALREADY_SET = 2201, "api_version_already_set", "The API version can be selected only once";
    API_VERSION_INVALID = 2202, "api_version_invalid", "The API version is invalid";
    API_VERSION_NOT_SUPPORTED = 2203, "api_version_not_supported", "The API version is unsupported";
    API_FUNCTION_MISSING = 2204, "api_function_missing", "A required FDB API function could not be loaded";
    EXACT_MODE_WITHOUT_LIMITS = 2210, "exact_mode_without_limits", "The EXACT streaming mode needs limits";
    INVALID_TUPLE_DATA_TYPE = 2250, "invalid_tuple_data_type", "A packed tuple contains an unknown type code";
    INVALID_TUPLE_INDEX = 2251, "invalid_tuple_index", "The tuple has no element at that index";
    KEY_NOT_IN_SUBSPACE = 2252, "key_not_in_subspace", "The key is not inside the subspace being unpacked";
    MANUAL_PREFIXES_NOT_ENABLED = 2253, "manual_prefixes_not_enabled", "Manual prefixes are disabled, so no prefix may be given";
    PREFIX_IN_PARTITION = 2254, "prefix_in_partition", "A prefix may not be given inside a partition";
    CANNOT_OPEN_ROOT_DIRECTORY = 2255, "cannot_open_root_directory", "The root directory cannot be opened";
    DIRECTORY_ALREADY_EXISTS = 2256, "directory_already_exists", "The directory already exists";
    DIRECTORY_DOES_NOT_EXIST = 2257, "directory_does_not_exist", "The directory does not exist";
    PARENT_DIRECTORY_DOES_NOT_EXIST = 2258, "parent_directory_does_not_exist", "The directory's parent does not exist";
    MISMATCHED_LAYER = 2259, "mismatched_layer", "The directory was created with another layer string";
    INVALID_DIRECTORY_LAYER_METADATA = 2260, "invalid_directory_layer_metadata", "The directory layer metadata is invalid";
    CANNOT_MOVE_DIRECTORY_BETWEEN_PARTITIONS = 2261, "cannot_move_directory_between_partitions", "Directories cannot move across partitions";
    CANNOT_USE_PARTITION_AS_SUBSPACE = 2262, "cannot_use_partition_as_subspace", "A directory partition cannot serve as a subspace";
    INCOMPATIBLE_DIRECTORY_VERSION = 2263, "incompatible_directory_version", "The directory layer version is incompatible";
    DIRECTORY_PREFIX_NOT_EMPTY = 2264, "directory_prefix_not_empty", "Keys already exist at the prefix picked by the automatic allocator";
    DIRECTORY_PREFIX_IN_USE = 2265, "directory_prefix_in_use", "The prefix conflicts with one the directory layer already uses";
    INVALID_DESTINATION_DIRECTORY = 2266, "invalid_destination_directory", "The destination directory is invalid";
    CANNOT_MODIFY_ROOT_DIRECTORY = 2267, "cannot_modify_root_directory", "The root directory cannot be changed";
    INVALID_UUID_SIZE = 2268, "invalid_uuid_size", "A UUID must be 16 bytes";
    INVALID_VERSIONSTAMP_SIZE = 2269, "invalid_versionstamp_size", "A versionstamp must be 12 bytes";
    BACKUP_ERROR = 2300, "backup_error", "A backup failure occurred";
    RESTORE_ERROR = 2301, "restore_error", "A restore failure occurred";
    BACKUP_DUPLICATE = 2311, "backup_duplicate", "The backup request is a duplicate";
    BACKUP_UNNEEDED = 2312, "backup_unneeded", "The backup request is unnecessary";
    BACKUP_BAD_BLOCK_SIZE = 2313, "backup_bad_block_size", "The backup file block size is too small";
    BACKUP_INVALID_URL = 2314, "backup_invalid_url", "The backup container URL is invalid";
    BACKUP_INVALID_INFO = 2315, "backup_invalid_info", "The backup container info is invalid";
    BACKUP_CANNOT_EXPIRE = 2316, "backup_cannot_expire", "Expiring that data would break minimum restorability";
    BACKUP_AUTH_MISSING = 2317, "backup_auth_missing", "No credentials were found for the backup container URL";
    BACKUP_AUTH_UNREADABLE = 2318, "backup_auth_unreadable", "Credentials for backup container URLs could not be read or parsed";
    BACKUP_DOES_NOT_EXIST = 2319, "backup_does_not_exist", "No such backup";
    BACKUP_NOT_FILTERABLE_WITH_KEY_RANGES = 2320, "backup_not_filterable_with_key_ranges", "Backups older than 6.3 cannot be filtered by key range";
    BACKUP_NOT_OVERLAPPED_WITH_KEYS_FILTER = 2321, "backup_not_overlapped_with_keys_filter", "The backup's key ranges do not intersect the key range filter";
    RESTORE_INVALID_VERSION = 2361, "restore_invalid_version", "The restore version is invalid";
    RESTORE_CORRUPTED_DATA = 2362, "restore_corrupted_data", "The backup data is corrupted";
    RESTORE_MISSING_DATA = 2363, "restore_missing_data", "Backup data is missing";
    RESTORE_DUPLICATE_TAG = 2364, "restore_duplicate_tag", "The restore request is a duplicate";
    RESTORE_UNKNOWN_TAG = 2365, "restore_unknown_tag", "No such restore tag";
    RESTORE_UNKNOWN_FILE_TYPE = 2366, "restore_unknown_file_type", "The backup/restore file type is unknown";
    RESTORE_UNSUPPORTED_FILE_VERSION = 2367, "restore_unsupported_file_version", "The backup file version is unsupported";
    RESTORE_BAD_READ = 2368, "restore_bad_read", "An unexpected number of bytes was read";
    RESTORE_CORRUPTED_DATA_PADDING = 2369, "restore_corrupted_data_padding", "The backup file has unexpected padding";
    RESTORE_DESTINATION_NOT_EMPTY = 2370, "restore_destination_not_empty", "The restore destination database is not empty";
    RESTORE_DUPLICATE_UID = 2371, "restore_duplicate_uid", "The restore UID was already used by an aborted restore";
    TASK_INVALID_VERSION = 2381, "task_invalid_version", "The task version is invalid";
    TASK_INTERRUPTED = 2382, "task_interrupted", "The task stopped because of a timeout, an abort, or another worker finishing it";
    INVALID_ENCRYPTION_KEY_FILE = 2383, "invalid_encryption_key_file", "The encryption key file contents are invalid";
    BLOB_RESTORE_MISSING_LOGS = 2384, "blob_restore_missing_logs", "Mutation logs are missing";
    BLOB_RESTORE_CORRUPTED_LOGS = 2385, "blob_restore_corrupted_logs", "Mutation logs are corrupted";
    BLOB_RESTORE_INVALID_MANIFEST_URL = 2386, "blob_restore_invalid_manifest_url", "The manifest URL is invalid";
    BLOB_RESTORE_CORRUPTED_MANIFEST = 2387, "blob_restore_corrupted_manifest", "The manifest is corrupted";
    BLOB_RESTORE_MISSING_MANIFEST = 2388, "blob_restore_missing_manifest", "The manifest is missing";
    KEY_NOT_FOUND = 2400, "key_not_found", "An expected key is absent";
    JSON_MALFORMED = 2401, "json_malformed", "The JSON text is malformed";
    JSON_EOF_EXPECTED = 2402, "json_eof_expected", "The JSON text continues past its expected end";
    SNAP_DISABLE_TLOG_POP_FAILED = 2500, "snap_disable_tlog_pop_failed", "Could not disable transaction log pops";
    SNAP_STORAGE_FAILED = 2501, "snap_storage_failed", "Could not snapshot the storage servers";
    SNAP_TLOG_FAILED = 2502, "snap_tlog_failed", "Could not snapshot the transaction logs";
    SNAP_COORD_FAILED = 2503, "snap_coord_failed", "Could not snapshot the coordinators";
    SNAP_ENABLE_TLOG_POP_FAILED = 2504, "snap_enable_tlog_pop_failed", "Could not re-enable transaction log pops";
    SNAP_PATH_NOT_WHITELISTED = 2505, "snap_path_not_whitelisted", "The snapshot binary path is not on the allow list";
    SNAP_NOT_FULLY_RECOVERED_UNSUPPORTED = 2506, "snap_not_fully_recovered_unsupported", "Snapshots need a fully recovered cluster";
    SNAP_LOG_ANTI_QUORUM_UNSUPPORTED = 2507, "snap_log_anti_quorum_unsupported", "Snapshots are unsupported with a log anti-quorum";
    SNAP_WITH_RECOVERY_UNSUPPORTED = 2508, "snap_with_recovery_unsupported", "A cluster recovery during a snapshot is unsupported";
    SNAP_INVALID_UID_STRING = 2509, "snap_invalid_uid_string", "The UID string must be 32 hex characters";
    ENCRYPT_OPS_ERROR = 2700, "encrypt_ops_error", "An encryption operation failed";
    ENCRYPT_HEADER_METADATA_MISMATCH = 2701, "encrypt_header_metadata_mismatch", "The encryption header metadata does not match";
    ENCRYPT_KEY_NOT_FOUND = 2702, "encrypt_key_not_found", "An expected encryption key is missing";
    ENCRYPT_KEY_TTL_EXPIRED = 2703, "encrypt_key_ttl_expired", "An expected encryption key has expired";
    ENCRYPT_HEADER_AUTHTOKEN_MISMATCH = 2704, "encrypt_header_authtoken_mismatch", "The encryption header authentication token does not match";
    ENCRYPT_UPDATE_CIPHER = 2705, "encrypt_update_cipher", "An attempt was made to update an encryption cipher key";
    ENCRYPT_INVALID_ID = 2706, "encrypt_invalid_id", "The encryption cipher details are invalid";
    ENCRYPT_KEYS_FETCH_FAILED = 2707, "encrypt_keys_fetch_failed", "Fetching encryption keys from the external KMS failed";
    ENCRYPT_INVALID_KMS_CONFIG = 2708, "encrypt_invalid_kms_config", "The encryption/KMS configuration is invalid";
    ENCRYPT_UNSUPPORTED = 2709, "encrypt_unsupported", "Encryption is unsupported";
    ENCRYPT_MODE_MISMATCH = 2710, "encrypt_mode_mismatch", "The encryption mode does not match the configuration";
    ENCRYPT_KEY_CHECK_VALUE_MISMATCH = 2711, "encrypt_key_check_value_mismatch", "The encryption key check value does not match";
    ENCRYPT_MAX_BASE_CIPHER_LEN = 2712, "encrypt_max_base_cipher_len", "The base cipher buffer exceeds its maximum length";
    UNKNOWN_ERROR = 4000, "unknown_error", "An unrecognized error occurred (a non-FDB C++ exception)";
    INTERNAL_ERROR = 4100, "internal_error", "An internal error occurred (a bug)";
    NOT_IMPLEMENTED = 4200, "not_implemented", "This is not implemented yet";
    PERMISSION_DENIED = 6000, "permission_denied", "The client is not authorized for this data";
    UNAUTHORIZED_ATTEMPT = 6001, "unauthorized_attempt", "An untrusted client sent a message to a private endpoint";
    DIGITAL_SIGNATURE_OPS_ERROR = 6002, "digital_signature_ops_error", "A digital signature operation failed";
    AUTHORIZATION_TOKEN_VERIFY_FAILED = 6003, "authorization_token_verify_failed", "The authorization token could not be verified";
    PKEY_DECODE_ERROR = 6004, "pkey_decode_error", "A public or private key could not be decoded";
    PKEY_ENCODE_ERROR = 6005, "pkey_encode_error", "A public or private key could not be encoded";
}

#[cfg(test)]
mod tests;
