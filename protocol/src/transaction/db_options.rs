//! Database options: every `FDBDatabaseOption` of 7.3 (`fdb.options`). Most are defaults for
//! the transactions created afterwards (`defaultFor`); the rest size the client's caches.

use alloc::string::String;
use core::time::Duration;

use super::{fdb, Transactions, ABSOLUTE_MAX_WATCHES};
use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::knobs::Knobs;
use crate::transaction::TransactionOption;

/// Database options (`FDBDatabaseOption`, `fdb.options` at 7.3.77), by FDB's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseOption {
    /// `location_cache_size` (10): the most shard locations cached (at least one is kept).
    LocationCacheSize(usize),
    /// `max_watches` (20): the most watches outstanding at once (at most 1,000,000); fewer
    /// does not cancel watches already set.
    MaxWatches(usize),
    /// `machine_id` (21): the zone id of the fdbserver processes on this client's machine.
    /// Kept, but with 7.3's knobs it changes no replica choice, as in libfdb_c.
    MachineId(String),
    /// `datacenter_id` (22): the datacenter id (`--locality-dcid`) of the fdbserver processes
    /// in this client's datacenter: reads go to a replica there while one is healthy.
    DatacenterId(String),
    /// `snapshot_ryw_enable` (26): adds one to the database's snapshot-RYW counter (1 to
    /// start with), which new transactions start their own from.
    SnapshotRywEnable,
    /// `snapshot_ryw_disable` (27): takes one from it; at zero or less, snapshot reads of the
    /// transactions created afterwards do not see their own writes.
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
    /// `transaction_automatic_idempotency` (506): default `automatic_idempotency`.
    TransactionAutomaticIdempotency,
    /// `transaction_bypass_unreadable` (700): default `bypass_unreadable`.
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

impl DatabaseOption {
    /// Whether the option would be accepted, with nothing changed: `unsupported_operation`
    /// for one this client refuses, `invalid_option_value` for a value out of range. A
    /// transaction default is checked as the transaction option would be, so a bad default
    /// fails here and not in every transaction.
    pub fn check(&self) -> Result<(), ClientError> {
        self.check_with(&Knobs::default())
    }

    /// [`DatabaseOption::check`] under `knobs` (`transaction_size_limit` bounds the default
    /// `size_limit`).
    pub fn check_with(&self, knobs: &Knobs) -> Result<(), ClientError> {
        use DatabaseOption as D;
        if let Some(t) = self.transaction_default() {
            t.check_supported()?;
            return check_default_value(knobs, &t);
        }
        match self {
            D::LocationCacheSize(n) if *n > i32::MAX as usize => {
                fdb(ErrorCode::INVALID_OPTION_VALUE)
            }
            D::MaxWatches(n) if *n > ABSOLUTE_MAX_WATCHES => fdb(ErrorCode::INVALID_OPTION_VALUE),
            D::UseConfigDatabase | D::TestCausalReadRisky(_) => {
                fdb(ErrorCode::UNSUPPORTED_OPERATION)
            }
            _ => Ok(()),
        }
    }

    /// The option as `fdb_database_set_option(code, value)` gives it (integers as 8
    /// little-endian bytes, strings as bytes): `invalid_option` for a code 7.3 does not
    /// define, `invalid_option_value` for a missing, extra or malformed value.
    pub fn from_code(code: i32, value: Option<&[u8]>) -> Result<DatabaseOption, ErrorCode> {
        use DatabaseOption as D;
        let bad = ErrorCode::INVALID_OPTION_VALUE;
        let none = |o: D| value.map_or(Ok(o), |_| Err(bad));
        let int = || -> Result<i64, ErrorCode> {
            let b: [u8; 8] = value.ok_or(bad)?.try_into().map_err(|_| bad)?;
            Ok(i64::from_le_bytes(b))
        };
        let count = || usize::try_from(int()?).map_err(|_| bad);
        let string = || String::from_utf8(value.ok_or(bad)?.to_vec()).map_err(|_| bad);
        let millis = || match int()? {
            v @ 0..=0x7fff_ffff => Ok(Duration::from_millis(v as u64)),
            _ => Err(bad),
        };
        Ok(match code {
            10 => D::LocationCacheSize(count()?),
            20 => D::MaxWatches(count()?),
            21 => D::MachineId(string()?),
            22 => D::DatacenterId(string()?),
            26 => none(D::SnapshotRywEnable)?,
            27 => none(D::SnapshotRywDisable)?,
            405 => D::TransactionLoggingMaxFieldLength(i32::try_from(int()?).map_err(|_| bad)?),
            500 => D::TransactionTimeout(millis()?),
            501 => match int()? {
                -1 => D::TransactionRetryLimit(None),
                v @ 0..=0x7fff_ffff => D::TransactionRetryLimit(Some(v as u32)),
                _ => return Err(bad),
            },
            502 => D::TransactionMaxRetryDelay(millis()?),
            503 => D::TransactionSizeLimit(count()?),
            504 => none(D::TransactionCausalReadRisky)?,
            505 => none(D::TransactionIncludePortInAddress)?,
            506 => none(D::TransactionAutomaticIdempotency)?,
            700 => none(D::TransactionBypassUnreadable)?,
            701 => none(D::TransactionUsedDuringCommitProtectionDisable)?,
            702 => none(D::TransactionReportConflictingKeys)?,
            800 => none(D::UseConfigDatabase)?,
            900 => {
                let v = int()?;
                D::TestCausalReadRisky(u8::try_from(v).map_err(|_| bad)?)
            }
            _ => return Err(ErrorCode::INVALID_OPTION),
        })
    }
}

impl Transactions {
    /// Applies a database option, after [`DatabaseOption::check`].
    pub(crate) fn set_database_option(&mut self, opt: DatabaseOption) -> Result<(), ClientError> {
        use DatabaseOption as D;
        opt.check_with(&self.knobs)?;
        if let Some(t) = opt.transaction_default() {
            self.set_transaction_default(t);
            return Ok(());
        }
        match opt {
            D::LocationCacheSize(n) => self.routing.locations.set_capacity(n),
            D::MaxWatches(n) => self.table.max_watches = n,
            D::SnapshotRywEnable => self.snapshot_ryw = self.snapshot_ryw.saturating_add(1),
            D::SnapshotRywDisable => self.snapshot_ryw = self.snapshot_ryw.saturating_sub(1),
            D::MachineId(id) => self.routing.locality.zone_id = Some(id.into_bytes().into()),
            D::DatacenterId(id) => self.routing.locality.dc_id = Some(id.into_bytes().into()),
            // Accepted with nothing to change, or refused by `check`.
            _ => {}
        }
        Ok(())
    }
}

/// The value checks of a transaction option that need no transaction.
fn check_default_value(knobs: &Knobs, t: &TransactionOption) -> Result<(), ClientError> {
    use TransactionOption as T;
    let bad = match t {
        T::SizeLimit(n) => !(32..=knobs.transaction_size_limit).contains(n),
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
