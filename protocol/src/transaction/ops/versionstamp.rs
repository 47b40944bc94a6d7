//! `get_versionstamp`, whole: refused while the transaction is committing, finished or
//! failed; otherwise parked until the transaction's commit settles it with the commit's
//! versionstamp, `no_commit_version` (it wrote nothing) or `transaction_invalid_version`
//! (it failed).

use bytes::Bytes;

use super::{OpKind, OpTable, Wait};
use crate::error::ErrorCode;
use crate::event::{ClientError, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::transaction::{Ctx, Transactions};

/// A `get_versionstamp` waiting for its transaction's commit: [`OpKind::Versionstamp`].
#[derive(Debug)]
pub(in crate::transaction) struct VersionstampOp;

impl Transactions {
    /// `get_versionstamp`: finishes with the 10-byte versionstamp once the transaction
    /// commits (`Reply::Key`); with `no_commit_version` if the commit wrote nothing, with
    /// `transaction_invalid_version` if it failed, with `transaction_cancelled` if the
    /// transaction is reset, cancelled or dropped first (RYW's `getVersionstamp`: a future
    /// of NativeAPI's `versionstampPromise` or of the reset).
    pub(crate) fn get_versionstamp(&mut self, cx: &mut Ctx<'_>, tx: TransactionId) -> RequestId {
        VersionstampOp::start(self, cx, tx)
    }
}

/// The versionstamp's steps.
impl VersionstampOp {
    /// The checks, then the op, parked until the commit.
    fn start(txs: &mut Transactions, cx: &mut Ctx<'_>, tx: TransactionId) -> RequestId {
        let req = cx.new_request();
        // `ThreadSafeTransaction` checks the deferred error first, then RYW whether the
        // commit started (which finishes the transaction), then the reset future.
        let refused = match txs.txs.get(&tx).map(|t| t.deferred.clone()) {
            None => Some(ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED)),
            Some(Some(e)) => Some(e),
            Some(None) => match txs.check_not_committing(tx) {
                Err(e) => Some(e),
                Ok(()) => txs
                    .txs
                    .get(&tx)
                    .and_then(|t| t.finished.map(ClientError::Fdb)),
            },
        };
        match refused {
            Some(e) => cx.finish(req, Err(e)),
            None => txs.insert_op(cx, req, tx, OpKind::Versionstamp(VersionstampOp)),
        }
        req
    }

    /// Runnable only by its commit.
    pub(super) fn advance(table: &mut OpTable, req: RequestId) {
        table.set_wait(req, Wait::Commit)
    }

    /// Finishes every `get_versionstamp` of `tx` with the commit's outcome (none is a read:
    /// finishing them touches no transaction).
    pub(super) fn settle(
        table: &mut OpTable,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        outcome: Result<[u8; 10], ErrorCode>,
    ) {
        let waiting =
            table.ids_where(|op| op.tx == tx && matches!(op.kind, OpKind::Versionstamp(_)));
        for id in waiting {
            let r = match outcome {
                Ok(stamp) => Ok(Reply::Key(Bytes::copy_from_slice(&stamp))),
                Err(e) => Err(ClientError::Fdb(e)),
            };
            table.finish(cx, id, r);
        }
    }
}
