//! The table of parts the two modules hold, the system keys they stand for, and the small
//! helpers over keys and writes that both the read and the commit path use. A leaf: it
//! imports nothing of the folder, so every other file may build on it.

use bytes::Bytes;
use fdb_protocol::{KeyValue, SpecialWrite, TENANT_MANAGEMENT_RANGE};

pub(super) const MANAGEMENT: (&[u8], &[u8]) = (b"\xff\xff/management/", b"\xff\xff/management0");

/// The parts of the two modules libfdb_c 7.3 registers (API version 730).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Part {
    Options,
    /// An exclusion list: by address (`locality` false) or locality, failed or not.
    Exclusion {
        failed: bool,
        locality: bool,
    },
    DbLocked,
    ConsistencyCheck,
    Maintenance,
    DataDistribution,
    /// `\xff\xff/configuration/process/class_type/` (`source` false) or `class_source/`:
    /// each worker's process class, by address.
    ProcessClass {
        source: bool,
    },
    /// `\xff\xff/configuration/coordinators/`: the connection string's description and
    /// coordinators.
    Coordinators,
    Tenant,
    /// `in_progress_exclusion/`: the excluded servers and logs still holding data.
    InProgress,
    /// A version kept in a system key, shown in decimal (`min_required_commit_version`,
    /// `version_epoch`).
    VersionKey(&'static [u8]),
    /// `auto_coordinators`: the coordinators `coordinators auto` would set.
    AutoCoordinators,
}

/// The parts, by key order.
#[rustfmt::skip]
pub(super) const PARTS: [(&[u8], &[u8], Part); 17] = [
    (b"\xff\xff/configuration/coordinators/", b"\xff\xff/configuration/coordinators0", Part::Coordinators),
    (b"\xff\xff/configuration/process/class_source/", b"\xff\xff/configuration/process/class_source0", Part::ProcessClass { source: true }),
    (b"\xff\xff/configuration/process/class_type/", b"\xff\xff/configuration/process/class_type0", Part::ProcessClass { source: false }),
    (b"\xff\xff/management/auto_coordinators", b"\xff\xff/management/auto_coordinators\x00", Part::AutoCoordinators),
    (b"\xff\xff/management/consistency_check_suspended", b"\xff\xff/management/consistency_check_suspended\x00", Part::ConsistencyCheck),
    (b"\xff\xff/management/data_distribution/", b"\xff\xff/management/data_distribution0", Part::DataDistribution),
    (b"\xff\xff/management/db_locked", b"\xff\xff/management/db_locked\x00", Part::DbLocked),
    (b"\xff\xff/management/excluded/", b"\xff\xff/management/excluded0", Part::Exclusion { failed: false, locality: false }),
    (b"\xff\xff/management/excluded_locality/", b"\xff\xff/management/excluded_locality0", Part::Exclusion { failed: false, locality: true }),
    (b"\xff\xff/management/failed/", b"\xff\xff/management/failed0", Part::Exclusion { failed: true, locality: false }),
    (b"\xff\xff/management/failed_locality/", b"\xff\xff/management/failed_locality0", Part::Exclusion { failed: true, locality: true }),
    (b"\xff\xff/management/in_progress_exclusion/", b"\xff\xff/management/in_progress_exclusion0", Part::InProgress),
    (b"\xff\xff/management/maintenance/", b"\xff\xff/management/maintenance0", Part::Maintenance),
    (b"\xff\xff/management/min_required_commit_version", b"\xff\xff/management/min_required_commit_version\x00", Part::VersionKey(MIN_REQUIRED_COMMIT_VERSION_KEY)),
    (b"\xff\xff/management/options/", b"\xff\xff/management/options0", Part::Options),
    (TENANT_MANAGEMENT_RANGE.0, TENANT_MANAGEMENT_RANGE.1, Part::Tenant),
    (b"\xff\xff/management/version_epoch", b"\xff\xff/management/version_epoch\x00", Part::VersionKey(VERSION_EPOCH_KEY)),
];

// The system keys the parts stand for (`fdbclient/SystemData.cpp`).
pub(super) const CONF_PREFIX: &[u8] = b"\xff/conf/";
pub(super) const DB_LOCKED_KEY: &[u8] = b"\xff/dbLocked";
/// The version the cluster's next recovery starts above (fdbcli's `advanceversion`).
pub(super) const MIN_REQUIRED_COMMIT_VERSION_KEY: &[u8] = b"\xff/minRequiredCommitVersion";
/// The clock time versions count from (fdbcli's `versionepoch`).
pub(super) const VERSION_EPOCH_KEY: &[u8] = b"\xff/versionEpoch";
pub(super) const CONSISTENCY_CHECK_SUSPENDED_KEY: &[u8] = b"\xff\x02/ConsistencyCheck/Suspend";
pub(super) const HEALTHY_ZONE_KEY: &[u8] = b"\xff\x02/healthyZone";
pub(super) const IGNORE_SS_FAILURES_ZONE: &[u8] = b"IgnoreSSFailures";
pub(super) const REBALANCE_DD_IGNORE_KEY: &[u8] = b"\xff\x02/rebalanceDDIgnored";
pub(super) const DATA_DISTRIBUTION_MODE_KEY: &[u8] = b"\xff/dataDistributionMode";
pub(super) const MOVE_KEYS_LOCK_OWNER_KEY: &[u8] = b"\xff/moveKeysLock/Owner";
pub(super) const MOVE_KEYS_LOCK_WRITE_KEY: &[u8] = b"\xff/moveKeysLock/Write";
/// `dataDistributionModeLock`, `UID(6345, 3425)`.
pub(super) const DATA_DISTRIBUTION_MODE_LOCK: (u64, u64) = (6345, 3425);
/// `CLIENT_KNOBS->CORE_VERSIONSPERSECOND`.
pub(super) const VERSIONS_PER_SECOND: i64 = 1_000_000;
/// `LocalityData::ExcludeLocalityPrefix`.
pub(super) const LOCALITY_PREFIX: &str = "locality_";
pub(super) const SERVER_LIST: (&[u8], &[u8]) = (b"\xff/serverList/", b"\xff/serverList0");
pub(super) const LOGS_KEY: &[u8] = b"\xff/logs";
pub(super) const WORKER_LIST: (&[u8], &[u8]) = (b"\xff/worker/", b"\xff/worker0");
pub(super) const PROCESS_CLASSES: (&[u8], &[u8]) = (b"\xff/processClass/", b"\xff/processClass0");
/// `processClassChangeKey`: changed with every `setclass`.
pub(super) const PROCESS_CLASS_CHANGE_KEY: &[u8] = b"\xff/processClassChanges";
/// `ProtocolVersion::withProcessClassValue()`, the version a process class value starts with.
pub(super) const PROCESS_CLASS_VALUE_VERSION: u64 = 0x0FDB_00B0_6201_0001;

pub(super) fn row(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> KeyValue {
    KeyValue {
        key: Bytes::from(key.into()),
        value: Bytes::from(value.into()),
    }
}

/// `key` with `from` replaced by `to` (`from` must begin it).
pub(super) fn swap_prefix(key: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    [to, key.strip_prefix(from).unwrap_or(b"")].concat()
}

/// The write covering `key`, if any (`getSpecialKeySpaceWriteMap()[key]`).
pub(super) fn write_at<'a>(writes: &'a [SpecialWrite], key: &[u8]) -> Option<&'a SpecialWrite> {
    writes
        .iter()
        .find(|w| w.begin.as_ref() <= key && key < w.end.as_ref())
}

/// The writes into `[b, e)`.
pub(super) fn writes_in<'a>(
    writes: &'a [SpecialWrite],
    b: &'a [u8],
    e: &'a [u8],
) -> impl Iterator<Item = &'a SpecialWrite> + 'a {
    writes
        .iter()
        .filter(move |w| b <= w.begin.as_ref() && w.end.as_ref() <= e)
}
