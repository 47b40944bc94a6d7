//! What the debugging options log, through `tracing` (this client writes no trace files):
//! `debug_dump` and `log_transaction` at commit, `debug_retry_logging` at each retry.

use bytes::Bytes;

use super::state::Tx;
use crate::error::ErrorCode;
use crate::messages::commit::MutationRef;

/// A key or value as logged: cut to `transaction_logging_max_field_length` when positive.
fn field(b: &Bytes, max: i32) -> Bytes {
    match usize::try_from(max) {
        Ok(n) if n > 0 && b.len() > n => b.slice(..n),
        _ => b.clone(),
    }
}

/// Logs a commit about to be sent, as the options ask.
pub(super) fn log_commit(t: &Tx, mutations: &[MutationRef]) {
    let max = t.options.max_field_length;
    if t.options.debug_dump {
        for m in mutations {
            tracing::info!(
                kind = m.kind,
                param1 = ?field(&m.param1, max),
                param2 = ?field(&m.param2, max),
                "transaction mutation (debug_dump)"
            );
        }
    }
    if let (true, Some(id)) = (t.options.log_transaction, &t.options.debug_identifier) {
        tracing::info!(
            identifier = %id,
            mutations = mutations.len(),
            read_conflict_ranges = t.read_conflicts.ranges().count(),
            write_conflict_ranges = t.write_conflicts.ranges().count(),
            "transaction commit (log_transaction)"
        );
        for m in mutations {
            tracing::info!(
                identifier = %id,
                kind = m.kind,
                param1 = ?field(&m.param1, max),
                param2 = ?field(&m.param2, max),
                "transaction mutation (log_transaction)"
            );
        }
    }
}

/// Logs a retry `on_error` is about to make, under `debug_retry_logging`'s name.
pub(super) fn log_retry(t: &Tx, code: ErrorCode) {
    if let Some(name) = &t.options.retry_logging {
        tracing::info!(
            transaction = %name,
            retries = t.retries,
            error = %code,
            "transaction retry (debug_retry_logging)"
        );
    }
}
