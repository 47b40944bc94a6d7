//! Database options: every `FDBDatabaseOption` of 7.3 (`fdb.options`). Most are defaults for
//! the transactions created afterwards (`defaultFor`); the rest size the client's caches.

use alloc::string::String;
use core::time::Duration;

use super::{fdb, Transactions, ABSOLUTE_MAX_WATCHES};
use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::transaction::TransactionOption;

/// Database options (`FDBDatabaseOption`, `fdb.options` at 7.3.77), by FDB's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseOption {
    /// `location_cache_size` (10): the most shard locations cached (at least one is kept).
    LocationCacheSize(usize),
    /// `max_watches` (20): the most watches outstanding at once (at most 1,000,000); fewer
    /// does not cancel watches already set.
    MaxWatches(usize),
    /// `machine_id` (21): refused (locality-aware load balancing is not implemented).
    MachineId(String),
    /// `datacenter_id` (22): refused, as `machine_id`.
    DatacenterId(String),
    /// `snapshot_ryw_enable` (26): accepted; snapshot reads always see the writes here.
    SnapshotRywEnable,
    /// `snapshot_ryw_disable` (27): refused, as the transaction option.
    SnapshotRywDisable,
    /// `transaction_logging_max_field_length` (405): default of the transaction option.
    TransactionLoggingMaxFieldLength(i32),
    /// `transaction_timeout` (500): default `timeout`.
    TransactionTimeout(Duration),
    /// `transaction_retry_limit` (501): default `retry_limit`.
    TransactionRetryLimit(Option<u32>),
    /// `transaction_max_retry_delay` (502): default `max_retry_delay`.
    TransactionMaxRetryDelay(Duration),
    /// `transaction_size_limit` (503): default `size_limit`.
    TransactionSizeLimit(usize),
    /// `transaction_causal_read_risky` (504): default `causal_read_risky`.
    TransactionCausalReadRisky,
    /// `transaction_include_port_in_address` (505): default `include_port_in_address`.
    TransactionIncludePortInAddress,
    /// `transaction_automatic_idempotency` (506): refused, as `automatic_idempotency`.
    TransactionAutomaticIdempotency,
    /// `transaction_bypass_unreadable` (700): refused, as `bypass_unreadable`.
    TransactionBypassUnreadable,
    /// `transaction_used_during_commit_protection_disable` (701): default of the
    /// transaction option.
    TransactionUsedDuringCommitProtectionDisable,
    /// `transaction_report_conflicting_keys` (702): default `report_conflicting_keys`.
    TransactionReportConflictingKeys,
    /// `use_config_database` (800): refused (no configuration database client).
    UseConfigDatabase,
    /// `test_causal_read_risky` (900): refused (a test of FDB's own).
    TestCausalReadRisky(u8),
}

impl DatabaseOption {
    /// The option's code in `fdb.options`.
    pub fn code(&self) -> i32 {
        use DatabaseOption as D;
        match self {
            D::LocationCacheSize(_) => 10,
            D::MaxWatches(_) => 20,
            D::MachineId(_) => 21,
            D::DatacenterId(_) => 22,
            D::SnapshotRywEnable => 26,
            D::SnapshotRywDisable => 27,
            D::TransactionLoggingMaxFieldLength(_) => 405,
            D::TransactionTimeout(_) => 500,
            D::TransactionRetryLimit(_) => 501,
            D::TransactionMaxRetryDelay(_) => 502,
            D::TransactionSizeLimit(_) => 503,
            D::TransactionCausalReadRisky => 504,
            D::TransactionIncludePortInAddress => 505,
            D::TransactionAutomaticIdempotency => 506,
            D::TransactionBypassUnreadable => 700,
            D::TransactionUsedDuringCommitProtectionDisable => 701,
            D::TransactionReportConflictingKeys => 702,
            D::UseConfigDatabase => 800,
            D::TestCausalReadRisky(_) => 900,
        }
    }

    /// The transaction option this one is the default for (`defaultFor`), if any.
    pub fn transaction_default(&self) -> Option<TransactionOption> {
        use DatabaseOption as D;
        use TransactionOption as T;
        Some(match self {
            D::TransactionLoggingMaxFieldLength(n) => T::TransactionLoggingMaxFieldLength(*n),
            D::TransactionTimeout(d) => T::Timeout(*d),
            D::TransactionRetryLimit(n) => T::RetryLimit(*n),
            D::TransactionMaxRetryDelay(d) => T::MaxRetryDelay(*d),
            D::TransactionSizeLimit(n) => T::SizeLimit(*n),
            D::TransactionCausalReadRisky => T::CausalReadRisky,
            D::TransactionIncludePortInAddress => T::IncludePortInAddress,
            D::TransactionAutomaticIdempotency => T::AutomaticIdempotency,
            D::TransactionBypassUnreadable => T::BypassUnreadable,
            D::TransactionUsedDuringCommitProtectionDisable => T::UsedDuringCommitProtectionDisable,
            D::TransactionReportConflictingKeys => T::ReportConflictingKeys,
            _ => return None,
        })
    }
}

impl Transactions {
    /// Applies a database option: `unsupported_operation` for one this client refuses,
    /// `invalid_option_value` for a value out of range. A transaction default is checked as
    /// the transaction option would be, so a bad default fails here and not in every
    /// transaction.
    pub(crate) fn set_database_option(&mut self, opt: DatabaseOption) -> Result<(), ClientError> {
        use DatabaseOption as D;
        if let Some(t) = opt.transaction_default() {
            t.check_supported()?;
            check_default_value(&t)?;
            self.set_transaction_default(t);
            return Ok(());
        }
        match opt {
            D::LocationCacheSize(n) => {
                if n > i32::MAX as usize {
                    return fdb(ErrorCode::INVALID_OPTION_VALUE);
                }
                self.locations.set_capacity(n);
            }
            D::MaxWatches(n) => {
                if n > ABSOLUTE_MAX_WATCHES {
                    return fdb(ErrorCode::INVALID_OPTION_VALUE);
                }
                self.max_watches = n;
            }
            D::SnapshotRywEnable => {}
            D::MachineId(_)
            | D::DatacenterId(_)
            | D::SnapshotRywDisable
            | D::UseConfigDatabase
            | D::TestCausalReadRisky(_) => return fdb(ErrorCode::UNSUPPORTED_OPERATION),
            // Transaction defaults are handled above.
            _ => return fdb(ErrorCode::INTERNAL_ERROR),
        }
        Ok(())
    }
}

/// The value checks of a transaction option that need no transaction.
fn check_default_value(t: &TransactionOption) -> Result<(), ClientError> {
    use TransactionOption as T;
    let bad = match t {
        T::SizeLimit(n) => !(32..=super::TRANSACTION_SIZE_LIMIT).contains(n),
        T::Timeout(d) | T::MaxRetryDelay(d) => d.as_millis() > i32::MAX as u128,
        T::RetryLimit(Some(n)) => *n > i32::MAX as u32,
        T::TransactionLoggingMaxFieldLength(n) => *n == 0 || *n < -1,
        _ => false,
    };
    if bad {
        return fdb(ErrorCode::INVALID_OPTION_VALUE);
    }
    Ok(())
}
