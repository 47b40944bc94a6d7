//! Versions from wall-clock times, through the cluster's timekeeper map
//! (`\xff\x02/timeKeeper/map/`: packed unix seconds → the version then), which the cluster
//! controller writes about every 10 s.

use futures::TryStreamExt;

use crate::binding_error::FdbBindingError;
use crate::future::FdbValue;
use crate::keyselector::KeySelector;
use crate::options::TransactionOption;
use crate::transaction::{RangeOption, Transaction};
use crate::tuple::{pack, unpack};

const MAP: &[u8] = b"\xff\x02/timeKeeper/map/";

/// Which side of the timestamp the version is taken from.
pub enum HintMode {
    /// The version of the last entry before the timestamp.
    BeforeTimestamp,
    /// The version of the first entry at or after the timestamp.
    AfterTimestamp,
}

/// A version near `unix_timestamp_as_seconds` (`None` when the map has no entry on that
/// side). Sets `read_system_keys` and `read_lock_aware` on the transaction.
pub async fn hint_version_from_timestamp(
    trx: &Transaction,
    unix_timestamp_as_seconds: u64,
    mode: HintMode,
    snapshot: bool,
) -> Result<Option<u64>, FdbBindingError> {
    trx.set_option(TransactionOption::ReadSystemKeys)?;
    trx.set_option(TransactionOption::ReadLockAware)?;
    let mut at = MAP.to_vec();
    at.extend_from_slice(&pack(&unix_timestamp_as_seconds));
    let mut end = MAP.to_vec();
    end.push(0xff);
    let mut range = match mode {
        HintMode::AfterTimestamp => RangeOption::from((
            KeySelector::first_greater_or_equal(at),
            KeySelector::first_greater_or_equal(end),
        )),
        HintMode::BeforeTimestamp => RangeOption::from((
            KeySelector::first_greater_or_equal(MAP),
            KeySelector::first_greater_or_equal(at),
        ))
        .rev(),
    };
    range.limit = Some(1);
    let first: Option<FdbValue> = trx.get_ranges_keyvalues(range, snapshot).try_next().await?;
    match first {
        Some(kv) => Ok(Some(unpack(kv.value())?)),
        None => Ok(None),
    }
}
