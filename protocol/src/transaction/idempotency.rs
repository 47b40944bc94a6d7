//! Idempotency ids (`idempotency_id`, `automatic_idempotency`): a commit that names itself, so
//! that `commit_unknown_result` can be settled by reading whether it committed.
//!
//! The commit proxy writes the ids of each batch's committed transactions in one row per
//! commit version and high byte of the batch index, under `\xff\x02/idmp/`. The client puts
//! `\xff/SC/` + id in both conflict lists (so the dummy commit after an unknown outcome stops
//! the original from committing later), and once that dummy committed it reads the rows the
//! commit could have landed in (`determineCommitStatus`): found is success with the
//! versionstamp, missing is `transaction_too_old`, and a window the cluster may already have
//! purged is `commit_unknown_result_fatal`. With `automatic_idempotency` the client also tells
//! the proxy to expire the row once it knows the commit's outcome.

use alloc::vec::Vec;
use bytes::Bytes;

use super::ops::commit::CommitOp;
use super::ops::OpId;
use super::{Ctx, Transactions};
use crate::error::ErrorCode;
use crate::event::{ClientError, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::messages::commit::{ExpireIdempotencyIdRequest, IdempotencyIdsExpiredVersion};
use crate::messages::types::{KeySelector, Version};
use crate::ryw::key_after;
use crate::serializer::decode_root;

use super::scan::{RangeOptions, StreamingMode};

/// Where the proxies keep the committed ids: this prefix, the commit version (8 bytes
/// big-endian), the high byte of the batch index.
pub const ID_ROWS_PREFIX: &[u8] = b"\xff\x02/idmp/";
/// The newest commit version whose ids may have been purged (`idempotencyIdsExpiredVersion`).
pub const EXPIRED_VERSION_KEY: &[u8] = b"\xff\x02/idmpExpiredVersion";
/// How far past its read version a commit can land (`MAX_WRITE_TRANSACTION_LIFE_VERSIONS`,
/// which `determineCommitStatus` uses as the end of the window it scans).
const COMMIT_WINDOW_VERSIONS: Version = 5_000_000;
/// `CLIENT_KNOBS->TOO_MANY`: the row limit of that scan.
const TOO_MANY: usize = 1_000_000;

/// The key of the row holding the ids committed at `version` with batch indexes whose high
/// byte is `high`.
pub fn id_row_key(version: Version, high: u8) -> Vec<u8> {
    let mut k = Vec::with_capacity(ID_ROWS_PREFIX.len() + 9);
    k.extend_from_slice(ID_ROWS_PREFIX);
    k.extend_from_slice(&version.to_be_bytes());
    k.push(high);
    k
}

/// Where `id` committed, if the row (`key`, `value`) names it: the commit version and the
/// batch index. The value is a `BinaryWriter` with `IncludeVersion`: the protocol version
/// (8 bytes), a timestamp (i64), then per id its length (one byte), the id and the low byte
/// of its batch index (`kvContainsIdempotencyId`). A malformed row names nothing.
pub fn find_id_in_row(key: &[u8], value: &[u8], id: &[u8]) -> Option<(Version, u16)> {
    let rest = key.strip_prefix(ID_ROWS_PREFIX)?;
    if rest.len() != 9 {
        return None;
    }
    let version = Version::from_be_bytes(rest[..8].try_into().ok()?);
    let high = rest[8];
    let mut entries = value.get(16..)?;
    while let Some((&len, tail)) = entries.split_first() {
        let len = usize::from(len);
        let candidate = tail.get(..len)?;
        let low = *tail.get(len)?;
        if candidate == id {
            return Some((version, u16::from(high) << 8 | u16::from(low)));
        }
        entries = &tail[len + 1..];
    }
    None
}

/// One `determineCommitStatus` in progress.
#[derive(Debug)]
pub(super) struct StatusCheck {
    /// The application's commit it settles.
    parent: RequestId,
    /// The transaction it reads with (system keys, lock-aware).
    tx: TransactionId,
    id: Bytes,
    min: Version,
    step: Step,
}

#[derive(Debug)]
enum Step {
    ExpiredVersion,
    Rows,
    /// `on_error` after a failed read; then it starts over.
    Retry,
}

impl Transactions {
    /// The id `tx`'s commit carries: the one set, or with `automatic_idempotency` a random
    /// 16-byte one drawn now (NativeAPI draws it when the option is set; both are fresh per
    /// attempt, as `on_error` drops the options).
    pub(super) fn commit_idempotency_id(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
    ) -> Option<Bytes> {
        let t = self.txs.get_mut(&tx)?;
        if t.options.idempotency_id.is_none() && t.options.automatic_idempotency {
            let id = cx.rng.uid().to_bytes();
            t.options.idempotency_id = Some(Bytes::copy_from_slice(&id));
        }
        t.options.idempotency_id.clone()
    }

    /// After a successful commit with `automatic_idempotency`: the proxy may forget the id.
    pub(super) fn expire_idempotency_id(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        version: Version,
        batch_index: u16,
    ) {
        let Some(sent) = self.txs.get_mut(&tx).and_then(|t| t.idempotency.take()) else {
            return;
        };
        if let Some((addr, token, tenant)) = sent.expire_to {
            let msg = ExpireIdempotencyIdRequest {
                commit_version: version,
                batch_index_high_byte: (batch_index >> 8) as u8,
                tenant,
            };
            cx.io().send_one_way(&addr, token, &msg);
        }
    }

    /// Whether `tx`'s commit in flight carried an id: then an unknown outcome is settled by
    /// reading the ids' rows once the dummy commit went through.
    pub(super) fn has_idempotency_id(&self, tx: TransactionId) -> bool {
        self.txs.get(&tx).is_some_and(|t| t.idempotency.is_some())
    }

    /// `determineCommitStatus` for the application's commit `parent` of `parent_tx`.
    pub(super) fn start_status_check(
        &mut self,
        cx: &mut Ctx<'_>,
        parent: RequestId,
        parent_tx: TransactionId,
    ) {
        let Some(sent) = self.txs.get(&parent_tx).and_then(|t| t.idempotency.clone()) else {
            return;
        };
        let lock_aware = self.txs[&parent_tx].options.lock_aware;
        let tx = self.create_transaction(cx);
        if let Some(t) = self.txs.get_mut(&tx) {
            t.options.read_system_keys = true;
            t.options.lock_aware = true;
            t.options.read_only = !lock_aware;
        }
        let check = StatusCheck {
            parent,
            tx,
            id: sent.id,
            min: sent.read_snapshot,
            step: Step::ExpiredVersion,
        };
        self.status_step(cx, check);
    }

    /// Issues the read (or the `on_error`) of the check's step.
    fn status_step(&mut self, cx: &mut Ctx<'_>, check: StatusCheck) {
        let want = cx.next_request_internal();
        let req = match check.step {
            Step::ExpiredVersion => self.get(cx, check.tx, EXPIRED_VERSION_KEY, false),
            Step::Rows => {
                let begin = id_row_key(check.min, 0);
                let end = id_row_key(check.min + COMMIT_WINDOW_VERSIONS + 1, 0);
                self.status_rows(cx, check.tx, begin, end)
            }
            Step::Retry => unreachable!("a retry is issued by `status_retry`"),
        };
        debug_assert_eq!(req, want);
        self.status_checks.insert(req, check);
    }

    fn status_rows(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        begin: impl Into<Bytes>,
        end: impl Into<Bytes>,
    ) -> RequestId {
        let opts = RangeOptions {
            limit: TOO_MANY,
            mode: StreamingMode::WantAll,
            ..RangeOptions::default()
        };
        self.get_range(
            cx,
            tx,
            KeySelector::first_greater_or_equal(begin.into()),
            KeySelector::first_greater_or_equal(end.into()),
            opts,
            false,
        )
    }

    /// Hands the core's own completions back to what asked for them.
    pub(crate) fn settle_internal(&mut self, cx: &mut Ctx<'_>) {
        while let Some((req, result)) = cx.internal.done.pop_front() {
            if let Some(check) = self.status_checks.remove(&req) {
                self.on_status_step(cx, check, result);
            }
        }
    }

    fn on_status_step(
        &mut self,
        cx: &mut Ctx<'_>,
        mut check: StatusCheck,
        result: Result<Reply, ClientError>,
    ) {
        if !self.table.ops.contains_key(&check.parent) {
            // The application gave up on the commit.
            self.txs.remove(&check.tx);
            return;
        }
        let outcome: Result<Option<(Version, u16)>, ClientError> = match (&check.step, result) {
            (Step::ExpiredVersion, Ok(Reply::Value(v))) => {
                let expired = match v {
                    None => 0,
                    Some(b) => match decode_root::<IdempotencyIdsExpiredVersion>(&b) {
                        Ok(e) => e.expired,
                        Err(e) => {
                            return self.end_status_check(cx, check, Err(ClientError::Decode(e)))
                        }
                    },
                };
                if expired >= check.min {
                    return self.end_status_check(
                        cx,
                        check,
                        Err(ClientError::Fdb(ErrorCode::COMMIT_UNKNOWN_RESULT_FATAL)),
                    );
                }
                check.step = Step::Rows;
                return self.status_step(cx, check);
            }
            (Step::Rows, Ok(Reply::Range(r))) => {
                let found = r
                    .rows
                    .iter()
                    .find_map(|kv| find_id_in_row(&kv.key, &kv.value, &check.id));
                match (found, r.rows.last()) {
                    (Some(at), _) => Ok(Some(at)),
                    // A batch short of the whole window: read on from after its last row.
                    (None, Some(last)) if r.more() => {
                        let begin = key_after(&last.key);
                        let end = id_row_key(check.min + COMMIT_WINDOW_VERSIONS + 1, 0);
                        let want = cx.next_request_internal();
                        let req = self.status_rows(cx, check.tx, begin, end);
                        debug_assert_eq!(req, want);
                        self.status_checks.insert(req, check);
                        return;
                    }
                    (None, _) => Ok(None),
                }
            }
            (Step::Retry, Ok(_)) => {
                check.step = Step::ExpiredVersion;
                return self.status_step(cx, check);
            }
            (Step::ExpiredVersion | Step::Rows, Err(ClientError::Fdb(code))) => {
                // `wait(tr.onError(e))`: retried as any transaction would be.
                check.step = Step::Retry;
                let want = cx.next_request_internal();
                let req = self.on_error(cx, check.tx, code);
                debug_assert_eq!(req, want);
                self.status_checks.insert(req, check);
                return;
            }
            (_, Err(e)) => Err(e),
            (_, Ok(_)) => Err(ClientError::Fdb(ErrorCode::INTERNAL_ERROR)),
        };
        self.end_status_check(cx, check, outcome)
    }

    /// Finishes the application's commit with what the check found.
    fn end_status_check(
        &mut self,
        cx: &mut Ctx<'_>,
        check: StatusCheck,
        outcome: Result<Option<(Version, u16)>, ClientError>,
    ) {
        self.txs.remove(&check.tx);
        let Some(parent_tx) = self.table.ops.get(&check.parent).map(|o| o.tx) else {
            return;
        };
        if let Some(t) = self.txs.get_mut(&parent_tx) {
            t.idempotency = None;
        }
        let commit = OpId {
            req: check.parent,
            tx: parent_tx,
        };
        match outcome {
            // libfdb_c sends the versionstamp but leaves the committed version unset
            // (`invalidVersion`) on this path; watches start from the version found.
            Ok(Some((version, batch))) => {
                let mut stamp = [0u8; 10];
                stamp[..8].copy_from_slice(&version.to_be_bytes());
                stamp[8..].copy_from_slice(&batch.to_be_bytes());
                CommitOp::succeeded(self, cx, commit, -1, version, stamp);
            }
            Ok(None) => CommitOp::fail(
                self,
                cx,
                commit,
                ClientError::Fdb(ErrorCode::TRANSACTION_TOO_OLD),
            ),
            Err(e) => CommitOp::fail(self, cx, commit, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ids: &[(&[u8], u8)]) -> Vec<u8> {
        let mut v = 0x0FDB_00B0_7300_0000u64.to_le_bytes().to_vec();
        v.extend_from_slice(&1_796_221_608i64.to_le_bytes());
        for (id, low) in ids {
            v.push(id.len() as u8);
            v.extend_from_slice(id);
            v.push(*low);
        }
        v
    }

    #[test]
    fn an_id_is_found_with_its_version_and_batch_index() {
        let key = id_row_key(100_664_661, 2);
        let value = row(&[(&[7u8; 16], 5), (&[9u8; 20], 6)]);
        assert_eq!(
            find_id_in_row(&key, &value, &[9u8; 20]),
            Some((100_664_661, 0x0206))
        );
        assert_eq!(
            find_id_in_row(&key, &value, &[7u8; 16]),
            Some((100_664_661, 0x0205))
        );
        // A prefix or a substring of a stored id is not the id.
        assert_eq!(find_id_in_row(&key, &value, &[9u8; 16]), None);
        assert_eq!(find_id_in_row(&key, &value, &[8u8; 16]), None);
    }

    #[test]
    fn a_malformed_row_names_nothing_and_never_panics() {
        let key = id_row_key(1, 0);
        let value = row(&[(&[7u8; 16], 5)]);
        for cut in 0..value.len() {
            assert_eq!(find_id_in_row(&key, &value[..cut], &[7u8; 16]), None);
        }
        assert_eq!(
            find_id_in_row(&key[..key.len() - 1], &value, &[7u8; 16]),
            None
        );
        assert_eq!(find_id_in_row(b"\xff\x02/idmq", &value, &[7u8; 16]), None);
        let mut long = value.clone();
        long[16] = 200;
        assert_eq!(find_id_in_row(&key, &long, &[7u8; 16]), None);
    }
}
