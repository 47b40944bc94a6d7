//! The commit of writes into `\xff\xff/global_config/` (libfdb_c's `globalConfigCommitActor`
//! and `GlobalConfig::applyChanges`): each set becomes a set of `\xff/globalConfig/k/<name>`
//! to the value written, as written (libfdb_c does not tuple-pack it; a value that is not a
//! tuple is then left out of every client's view), each clear a clear there; the commit's
//! mutations go to a history key ending in the commit's versionstamp, the oldest history
//! entries are cleared so that three stay, and `\xff/globalConfig/v` gets the versionstamp,
//! which makes the cluster controller send the history to every client.

use fdb_protocol::messages::commit::MutationRef;
use fdb_protocol::{
    history_value, MutationType, SpecialWrite, TransactionOption, GLOBAL_CONFIG_HISTORY_PREFIX,
    GLOBAL_CONFIG_KEYS_PREFIX, GLOBAL_CONFIG_MODULE, GLOBAL_CONFIG_VERSION_KEY,
};

use crate::driver::Driver;
use crate::error::Error;
use crate::transaction::Transaction;

/// `kGlobalConfigMaxHistorySize`.
const MAX_HISTORY: usize = 3;
/// `CLIENT_KNOBS->TOO_MANY`.
const TOO_MANY: usize = 1_000_000;

/// Carries out the module's writes among `writes` in `tx`, before its commit.
pub(crate) async fn commit_global_config<D: Driver>(
    tx: &Transaction<D>,
    writes: &[SpecialWrite],
) -> Result<(), Error> {
    let prefix = GLOBAL_CONFIG_MODULE.0;
    let ours: Vec<&SpecialWrite> = writes
        .iter()
        .filter(|w| w.begin.starts_with(prefix))
        .collect();
    if ours.is_empty() {
        return Ok(());
    }
    tx.set_option(TransactionOption::AccessSystemKeys)?;
    let mut history_end = GLOBAL_CONFIG_HISTORY_PREFIX.to_vec();
    *history_end.last_mut().expect("not empty") += 1;
    let history = tx
        .get_range(GLOBAL_CONFIG_HISTORY_PREFIX, &history_end, TOO_MANY)
        .await?;
    if history.len() >= MAX_HISTORY {
        for kv in &history[..history.len() - (MAX_HISTORY - 1)] {
            tx.clear(&kv.key);
        }
    }
    let bare = |k: &[u8]| bytes::Bytes::copy_from_slice(&k[prefix.len()..]);
    let system = |k: &[u8]| [GLOBAL_CONFIG_KEYS_PREFIX, &k[prefix.len()..]].concat();
    let mut mutations = Vec::new();
    for w in &ours {
        if let Some(v) = &w.value {
            tx.set(system(&w.begin), v);
            mutations.push(MutationRef {
                kind: 0, // MutationRef::SetValue
                param1: bare(&w.begin),
                param2: v.clone(),
            });
        }
    }
    for w in &ours {
        // A clear reaching the module's end (`global_config0`) is not the module's.
        if w.value.is_none() && w.end.starts_with(prefix) {
            tx.clear_range(system(&w.begin), system(&w.end));
            mutations.push(MutationRef {
                kind: 1, // MutationRef::ClearRange
                param1: bare(&w.begin),
                param2: bare(&w.end),
            });
        }
    }
    // The versionstamp goes at the end of the history key (its offset after it).
    let offset = u32::try_from(GLOBAL_CONFIG_HISTORY_PREFIX.len()).expect("short");
    let key = [
        GLOBAL_CONFIG_HISTORY_PREFIX,
        &[0u8; 10],
        &offset.to_le_bytes(),
    ]
    .concat();
    // The history carries the cluster's protocol version, the one the client speaks.
    let protocol = crate::driver::query(tx.driver(), |c, _| c.protocol()).await?;
    tx.atomic_op(
        key,
        history_value(mutations, protocol),
        MutationType::SetVersionstampedKey,
    );
    tx.atomic_op(
        GLOBAL_CONFIG_VERSION_KEY,
        b"0123456789\x00\x00\x00\x00",
        MutationType::SetVersionstampedValue,
    );
    Ok(())
}
