//! `get_key`, whole: the checks when it is called, then a key selector resolved by RYW's walk
//! over the snapshot cache and the write map (which asks NativeAPI's range read for what it
//! does not know) or, with read-your-writes off, by NativeAPI's `getKey`; the key found, kept
//! inside the readable keys, and its read conflict range. The requests, their replies and
//! NativeAPI's walks are the range read's (`range.rs`, `native.rs`), shared with `get_range`.

use bytes::Bytes;

use super::native::{NativeKey, NativeRange};
use super::range::ReadOp;
use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::ids::{RequestId, TransactionId};
use crate::messages::types::{KeyRange, KeySelector};
use crate::ryw::range_read::{key_conflict, update_conflict_map, KeyRead, Step};
use crate::transaction::scan::{NativeOp, ReadKind};
use crate::transaction::state::Tx;
use crate::transaction::{fdb, Ctx, Transactions};

impl Transactions {
    /// Resolves a key selector.
    pub(crate) fn get_key(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        sel: KeySelector,
        snapshot: bool,
    ) -> RequestId {
        ReadOp::start_key(self, cx, tx, sel, snapshot)
    }
}

/// The key read's own steps; the rest are the range read's.
impl ReadOp {
    /// Starts a `get_key`: the checks, then RYW's walk or NativeAPI's `getKey`.
    fn start_key(
        txs: &mut Transactions,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        sel: KeySelector,
        snapshot: bool,
    ) -> RequestId {
        let req = cx.new_request();
        // The writes as they are now are the ones the read sees.
        let (max, writes) = match txs.txs.get(&tx) {
            Some(t) => (
                Bytes::from_static(t.max_read_key()),
                t.writes_seen(snapshot),
            ),
            None => {
                cx.finish(req, fdb(ErrorCode::TRANSACTION_CANCELLED));
                return req;
            }
        };
        if let Err(e) = txs.check_usable(tx) {
            cx.finish(req, Err(e));
            return req;
        }
        if sel.key.as_ref() > max.as_ref() {
            cx.finish(req, fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE));
            return req;
        }
        let kind = if let Some(writes) = writes {
            ReadKind::RywKey {
                read: KeyRead::new(sel.clone(), max),
                sel,
                writes,
            }
        } else {
            ReadKind::NativeKey { sel, result: None }
        };
        ReadOp::insert(txs, cx, req, tx, snapshot, kind);
        req
    }

    /// A key selector's resolution once nothing is in flight: `None` after setting the NativeAPI
    /// read it waits for, else the key found (or why there is none).
    pub(super) fn key_step(
        t: &mut Tx,
        snapshot: bool,
        kind: &mut ReadKind,
        native: &mut Option<NativeOp>,
        max: Bytes,
    ) -> Option<Result<Bytes, ClientError>> {
        match kind {
            ReadKind::RywKey {
                sel,
                read: kr,
                writes,
            } => match kr.step(&t.cache, writes) {
                Err(_) => Some(fdb(ErrorCode::ACCESSED_UNREADABLE)),
                Ok(Step::Native(n)) => {
                    *native = Some(NativeOp::Range(NativeRange::new(
                        n.begin, n.end, n.limits, n.reverse,
                    )));
                    None
                }
                Ok(Step::Done(key)) => {
                    if !snapshot {
                        match key_conflict(sel, &key) {
                            Ok((b, e)) => {
                                update_conflict_map(writes, &b, &e, &mut t.read_conflicts)
                            }
                            Err(_) => return Some(fdb(ErrorCode::INVERTED_RANGE)),
                        }
                    }
                    Some(Ok(key))
                }
            },
            ReadKind::NativeKey { sel, result } => match result.take() {
                None => {
                    *native = Some(NativeOp::Key(NativeKey::new(sel.clone())));
                    None
                }
                Some(rep) => {
                    if !snapshot {
                        // `getKeyAndConflictRange`, with the key as storage gave it: RYW's
                        // range, where an empty or inverted one adds nothing.
                        if let Ok((b, e)) = key_conflict(sel, &rep) {
                            if b < e {
                                t.native.extra_read_conflicts.push(KeyRange::new(b, e));
                            }
                        }
                    }
                    // `readThrough` keeps the answer inside the readable keys.
                    Some(Ok(if rep > max { max } else { rep }))
                }
            },
            _ => unreachable!("only a key selector's read steps here"),
        }
    }

    /// The NativeAPI read a key selector's resolution waited for finished: RYW's walk takes its
    /// rows, NativeAPI's `getKey` its key.
    pub(super) fn key_native_done(t: &mut Tx, kind: &mut ReadKind, native: NativeOp) {
        match (kind, native) {
            (ReadKind::RywKey { read, .. }, NativeOp::Range(mut n)) => {
                read.feed(&mut t.cache, n.take_result())
            }
            (ReadKind::NativeKey { result, .. }, NativeOp::Key(k)) => {
                *result = Some(k.result().cloned().unwrap_or_default());
            }
            _ => {}
        }
    }
}
