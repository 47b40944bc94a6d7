//! The special keys a transaction serves from its own state:
//! `\xff\xff/transaction/conflicting_keys/`.

use alloc::vec::Vec;
use bytes::Bytes;

use super::scan::RangeOptions;
use super::Transactions;
use crate::event::RangeResult;
use crate::ids::TransactionId;
use crate::messages::types::KeyValue;

/// The special key range of the conflicting read ranges of a failed commit.
pub const CONFLICTING_KEYS_PREFIX: &[u8] = b"\xff\xff/transaction/conflicting_keys/";

impl Transactions {
    /// Reads `\xff\xff/transaction/conflicting_keys/...`: after a commit failed with
    /// `report_conflicting_keys`, each conflicting read range `[b, e)` shows as
    /// `prefix+b = "1"` and `prefix+e = "0"` (FDB's `ConflictingKeysImpl`).
    pub(super) fn conflicting_keys(
        &self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        opts: RangeOptions,
    ) -> RangeResult {
        let mut rows = Vec::new();
        if let Some(set) = self.txs.get(&tx).and_then(|t| t.conflicting.as_ref()) {
            for r in set.ranges() {
                for (k, v) in [(&r.begin, &b"1"[..]), (&r.end, &b"0"[..])] {
                    let mut key = CONFLICTING_KEYS_PREFIX.to_vec();
                    key.extend_from_slice(k);
                    if begin <= key.as_slice() && key.as_slice() < end {
                        rows.push(KeyValue {
                            key: Bytes::from(key),
                            value: Bytes::from_static(v),
                        });
                    }
                }
            }
        }
        if opts.reverse {
            rows.reverse();
        }
        let more = opts.limit > 0 && rows.len() > opts.limit;
        if opts.limit > 0 {
            rows.truncate(opts.limit);
        }
        RangeResult { rows, more }
    }
}
