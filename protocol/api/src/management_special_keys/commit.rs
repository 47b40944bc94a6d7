//! The commit path: the writes into the management parts carried out part by part in key
//! order before the commit, with the small parts (consistency check, lock, data
//! distribution) here and the larger ones in files of their own.

use fdb_protocol::error::ErrorCode;
use fdb_protocol::{ConflictRangeType, MutationType, SpecialWrite, TransactionOption};

use super::coordinators::commit_coordinators;
use super::errors::{api_error, api_failure};
use super::exclusion::commit_exclusion;
use super::maintenance::commit_maintenance;
use super::parts::{
    write_at, writes_in, Part, CONSISTENCY_CHECK_SUSPENDED_KEY, DATA_DISTRIBUTION_MODE_KEY,
    DATA_DISTRIBUTION_MODE_LOCK, DB_LOCKED_KEY, MIN_REQUIRED_COMMIT_VERSION_KEY,
    MOVE_KEYS_LOCK_OWNER_KEY, MOVE_KEYS_LOCK_WRITE_KEY, PARTS, REBALANCE_DD_IGNORE_KEY,
    VERSIONS_PER_SECOND, VERSION_EPOCH_KEY,
};
use super::setclass::commit_process_class;
use super::values::{parse_uid, random_uid, uid_bytes};
use crate::driver::Driver;
use crate::error::Error;
use crate::transaction::Transaction;

/// Carries out the writes into the management parts (all but the tenant module's), in key
/// order, before the commit (`SpecialKeySpace::commit`).
pub(crate) async fn commit_writes<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
) -> Result<(), Error> {
    for (pb, pe, part) in PARTS {
        if writes_in(writes, pb, pe).next().is_none() {
            continue;
        }
        let msg = match part {
            Part::Exclusion { failed, locality } => {
                commit_exclusion(tx, writes, (pb, pe), failed, locality).await?
            }
            Part::DbLocked => commit_lock(tx, writes, pb).await?,
            Part::ConsistencyCheck => {
                tx.set_options([
                    TransactionOption::PrioritySystemImmediate,
                    TransactionOption::LockAware,
                    TransactionOption::AccessSystemKeys,
                ])?;
                let suspended = write_at(writes, pb).is_some_and(|w| w.value.is_some());
                tx.set(CONSISTENCY_CHECK_SUSPENDED_KEY, [u8::from(suspended)]);
                None
            }
            Part::Maintenance => commit_maintenance(tx, writes, (pb, pe)).await?,
            Part::ProcessClass { source: false } => {
                commit_process_class(tx, writes, (pb, pe)).await?
            }
            Part::DataDistribution => commit_data_distribution(tx, writes, (pb, pe)),
            Part::Coordinators => commit_coordinators(tx, writes, pb).await?,
            Part::VersionKey(key) => commit_version_key(tx, writes, pb, key).await?,
            // The options are for the other parts; the tenant module commits on its own.
            Part::Options
            | Part::Tenant
            | Part::ProcessClass { source: true }
            | Part::InProgress
            | Part::AutoCoordinators => None,
        };
        if let Some(msg) = msg {
            return Err(api_failure(tx, msg).await);
        }
    }
    Ok(())
}

/// `LockDatabaseImpl::commit`: a set locks the database with the UID written (nothing if it
/// holds that lock already), a clear unlocks it.
async fn commit_lock<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
    key: &[u8],
) -> Result<Option<String>, Error> {
    let id = write_at(writes, key).and_then(|w| w.value.clone());
    let uid = match &id {
        Some(v) => match parse_uid(v) {
            Some(uid) => Some(uid),
            None => {
                let msg = format!("Invalid UID hex string: {}", String::from_utf8_lossy(v));
                return Ok(Some(api_error("lock", &msg)));
            }
        },
        None => None,
    };
    tx.set_option(TransactionOption::LockAware)?;
    tx.set_option(TransactionOption::AccessSystemKeys)?;
    let held = tx.get(DB_LOCKED_KEY).await?;
    match (uid, held) {
        (Some((a, b)), Some(v)) => {
            if v.get(10..26) != Some(&uid_bytes(a, b)[..]) {
                return Err(ErrorCode::DATABASE_LOCKED.into());
            }
        }
        (Some((a, b)), None) => {
            // The versionstamp goes in front of the UID (`0123456789` holds its place).
            let param = [&b"0123456789"[..], &uid_bytes(a, b), &[0, 0, 0, 0]].concat();
            tx.atomic_op(DB_LOCKED_KEY, param, MutationType::SetVersionstampedValue);
            tx.add_conflict_range(b"", b"\xff", ConflictRangeType::Write)?;
        }
        (None, Some(_)) => tx.clear(DB_LOCKED_KEY),
        (None, None) => {}
    }
    Ok(None)
}

/// fdbcli's `advanceversion` (`AdvanceVersionImpl::commit`) and `versionepoch`
/// (`VersionEpochImpl::commit`): each sets or clears its system key. A set of either makes
/// the cluster recover, which its commit usually sees as `commit_unknown_result`.
async fn commit_version_key<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
    pb: &[u8],
    key: &[u8],
) -> Result<Option<String>, Error> {
    let written = write_at(writes, pb).and_then(|w| w.value.clone());
    tx.set_option(TransactionOption::AccessSystemKeys)?;
    if key == VERSION_EPOCH_KEY {
        match written {
            // Taken as 8 little-endian bytes, as fdbcli writes it (it reads back in
            // decimal); fewer cannot be read.
            Some(v) => {
                let epoch = v.get(..8).ok_or(ErrorCode::SERIALIZATION_FAILED)?;
                tx.set_option(TransactionOption::LockAware)?;
                tx.set(VERSION_EPOCH_KEY, epoch);
            }
            None => tx.clear(VERSION_EPOCH_KEY),
        }
        return Ok(None);
    }
    let Some(v) = written else {
        tx.clear(MIN_REQUIRED_COMMIT_VERSION_KEY);
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&v);
    let Ok(version) = text.parse::<i64>() else {
        let msg = format!("Invalid version(int64_t) argument: {text}");
        return Ok(Some(api_error("advanceversion", &msg)));
    };
    if tx.get(VERSION_EPOCH_KEY).await?.is_some() {
        let msg = "Illegal to modify the version while the version epoch is enabled";
        return Ok(Some(api_error("advanceversion", msg)));
    }
    tx.set_option(TransactionOption::LockAware)?;
    // The cluster must have a thousand years of versions left after it.
    const MAX_ALLOWED: i64 = i64::MAX - 1 - VERSIONS_PER_SECOND * 3600 * 24 * 365 * 1000;
    if version > MAX_ALLOWED {
        let msg = "The given version is larger than the maximum allowed \
                   value(2**63-1-version_per_second*3600*24*365*1000)";
        return Ok(Some(api_error("advanceversion", msg)));
    }
    if tx.get_read_version().await? > version {
        let msg = "Current read version is larger than the given version";
        return Ok(Some(api_error("advanceversion", msg)));
    }
    tx.set(MIN_REQUIRED_COMMIT_VERSION_KEY, (version + 1).to_le_bytes());
    Ok(None)
}

/// `DataDistributionImpl::commit`: `mode` to 0, 1 or 2, `rebalance_ignored` to its value;
/// clears clear them.
fn commit_data_distribution<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
    (pb, pe): (&[u8], &[u8]),
) -> Option<String> {
    let _ = tx.set_option(TransactionOption::AccessSystemKeys);
    let mode_key = [pb, b"mode"].concat();
    let ignored_key = [pb, b"rebalance_ignored"].concat();
    let single = |w: &SpecialWrite, k: &[u8]| {
        w.begin.as_ref() == k && w.end.len() == k.len() + 1 && w.end.starts_with(k)
    };
    let mut msg = None;
    for w in writes_in(writes, pb, pe) {
        let Some(v) = &w.value else {
            if w.begin.as_ref() <= mode_key.as_slice() && mode_key.as_slice() < w.end.as_ref() {
                tx.clear(DATA_DISTRIBUTION_MODE_KEY);
            } else if w.begin.as_ref() <= ignored_key.as_slice()
                && ignored_key.as_slice() < w.end.as_ref()
            {
                tx.clear(REBALANCE_DD_IGNORE_KEY);
            }
            continue;
        };
        if single(w, &mode_key) {
            match std::str::from_utf8(v).ok().and_then(|s| s.parse::<i32>().ok()) {
                Some(mode @ 0..=2) => {
                    let (a, b) = DATA_DISTRIBUTION_MODE_LOCK;
                    tx.set(MOVE_KEYS_LOCK_OWNER_KEY, uid_bytes(a, b));
                    let (a, b) = random_uid();
                    tx.set(MOVE_KEYS_LOCK_WRITE_KEY, uid_bytes(a, b));
                    tx.set(DATA_DISTRIBUTION_MODE_KEY, mode.to_le_bytes());
                }
                Some(_) => {
                    msg = Some(api_error(
                        "datadistribution",
                        "Please set the value of the data_distribution/mode to 0(disable) or 1(enable), other values are not allowed",
                    ))
                }
                None => {
                    let m = format!(
                        "Invalid datadistribution mode(int): {}",
                        String::from_utf8_lossy(v)
                    );
                    msg = Some(api_error("datadistribution", &m));
                }
            }
        } else if single(w, &ignored_key) {
            tx.set(REBALANCE_DD_IGNORE_KEY, v);
        } else {
            msg = Some(api_error(
                "datadistribution",
                "Changing invalid keys, please read the documentation to check valid keys in the range",
            ));
        }
    }
    msg
}
