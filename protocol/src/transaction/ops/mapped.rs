//! `get_mapped_range` (RYW's `getMappedRange`): a range read whose storage servers also read,
//! for every row, the key or range the mapper derives from it. The client only sends the
//! mapper; fdbserver parses and applies it. What the client owns is RYW's part: the checks
//! before the read (no snapshot reads, no read-your-writes-disabled transactions), NativeAPI's
//! `getRange` walk with `GetMappedKeyValuesRequest`s (always as a snapshot read), and after
//! it the read conflict ranges of the range and of every mapped key and range, each of which
//! must be untouched by the transaction's writes (`get_mapped_range_reads_your_writes`).

use bytes::Bytes;

use super::native::{NativeKey, NativeRange};
use super::range::{Progress, ReadOp};
use crate::error::ErrorCode;
use crate::event::{ClientError, MappedRangeResult, Reply};
use crate::ids::{RequestId, TransactionId};
use crate::messages::storage::{MappedKeyValue, MappedReqAndResult};
use crate::messages::types::KeySelector;
use crate::ryw::range_read::{
    fdb_key_after, range_conflict_of, remove_or_equal, update_conflict_map_unmodified,
    NativeResult, ReadShape,
};
use crate::ryw::{RangeSet, WriteMap};
use crate::transaction::scan::{range_limits, NativeOp, RangeOptions, ReadKind};
use crate::transaction::state::Tx;
use crate::transaction::{fdb, Ctx, Transactions};

impl Transactions {
    /// Reads one batch of the rows between two selectors, each with what `mapper` makes of
    /// it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn get_mapped_range(
        &mut self,
        cx: &mut Ctx<'_>,
        tx: TransactionId,
        begin: KeySelector,
        end: KeySelector,
        mapper: Bytes,
        opts: RangeOptions,
        snapshot: bool,
    ) -> RequestId {
        // The read's start is its checks, then the op (no wrapper: the arguments are many).
        let req = cx.new_request();
        match ReadOp::check_mapped(self, tx, begin, end, mapper, &opts, snapshot) {
            Err(e) => cx.finish(req, Err(e)),
            Ok(None) => cx.finish(req, Ok(Reply::Mapped(MappedRangeResult::default()))),
            Ok(Some(kind)) => ReadOp::insert(self, cx, req, tx, snapshot, kind),
        }
        req
    }
}

/// The mapped read's steps; the rest are the range read's.
impl ReadOp {
    /// `fdb_transaction_get_mapped_range`'s and RYW `getMappedRange`'s checks, in their
    /// order: the read to run, or `None` for no rows without a read.
    fn check_mapped(
        txs: &mut Transactions,
        tx: TransactionId,
        mut begin: KeySelector,
        mut end: KeySelector,
        mapper: Bytes,
        opts: &RangeOptions,
        snapshot: bool,
    ) -> Result<Option<ReadKind>, ClientError> {
        // `validate_and_update_parameters`, as for `get_range`.
        txs.check_range_args(tx, opts)?;
        // The special key space has no mapped reads.
        if crate::transaction::special::is_special_range(&begin.key, &end.key) {
            return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
        }
        txs.check_usable(tx)?;
        let t = txs.tx_ref(tx)?;
        let max = t.max_read_key();
        if begin.key.as_ref() > max || end.key.as_ref() > max {
            return fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE);
        }
        let limits = range_limits(opts);
        if limits.is_reached() {
            return Ok(None);
        }
        remove_or_equal(&mut begin);
        remove_or_equal(&mut end);
        if begin.offset >= end.offset && begin.key >= end.key {
            return Ok(None);
        }
        // Serializable reads only, through RYW only.
        if snapshot || t.options.ryw_disabled {
            return fdb(ErrorCode::UNSUPPORTED_OPERATION);
        }
        let reverse = opts.reverse;
        Ok(Some(ReadKind::Mapped {
            end_resolved: !(reverse && end.offset > 1),
            begin,
            end,
            mapper,
            reverse,
            limits,
            result: None,
        }))
    }

    /// Runs a mapped read's RYW part: resolve a reverse read's end, start NativeAPI's walk, and
    /// when it is done add the conflict ranges and give the rows (`None`: run the NativeAPI
    /// read it set up).
    pub(super) fn mapped_step(
        t: &mut Tx,
        kind: &mut ReadKind,
        native: &mut Option<NativeOp>,
    ) -> Option<Progress> {
        let ReadKind::Mapped {
            begin,
            end,
            mapper,
            reverse,
            limits,
            end_resolved,
            result,
        } = kind
        else {
            return Some(Progress::Failed(ClientError::Fdb(
                ErrorCode::INTERNAL_ERROR,
            )));
        };
        if !*end_resolved {
            *native = Some(NativeOp::Key(NativeKey::new(end.clone())));
            return None;
        }
        let Some(r) = result.take() else {
            // `getRangeInternal`: nothing to read between these selectors.
            if limits.is_reached() || (begin.offset >= end.offset && begin.key >= end.key) {
                return Some(Progress::Done(Reply::Mapped(MappedRangeResult::default())));
            }
            *native = Some(NativeOp::Mapped {
                range: NativeRange::new(begin.clone(), end.clone(), *limits, *reverse),
                mapper: mapper.clone(),
            });
            return None;
        };
        let max = Bytes::from_static(t.max_read_key());
        if let Err(e) = add_conflicts(
            &t.writes,
            begin,
            end,
            *reverse,
            &r,
            &max,
            &mut t.read_conflicts,
        ) {
            return Some(Progress::Failed(e));
        }
        Some(Progress::Done(Reply::Mapped(MappedRangeResult {
            rows: r.rows,
            more: r.more,
        })))
    }

    /// A reverse read's end, resolved by NativeAPI's `getKey` (a snapshot read: no conflict
    /// range), kept inside the readable keys (`readThrough`).
    pub(super) fn mapped_end_resolved(t: &Tx, kind: &mut ReadKind, key: Bytes) {
        if let ReadKind::Mapped {
            end, end_resolved, ..
        } = kind
        {
            let max = t.max_read_key();
            *end = if key.as_ref() > max {
                KeySelector::first_greater_or_equal(Bytes::from_static(max))
            } else {
                KeySelector::first_greater_or_equal(key)
            };
            *end_resolved = true;
        }
    }

    /// Whether a mapped reply's rows come in read order. A point mapper's middle rows carry no
    /// key (fdbserver keeps only the first and last, for the continuation), so only the keys
    /// present are checked.
    pub(super) fn mapped_in_order(rows: &[MappedKeyValue], reverse: bool) -> bool {
        let mut last: Option<&Bytes> = None;
        for (i, m) in rows.iter().enumerate() {
            let k = &m.kv.key;
            if k.is_empty() && i != 0 {
                continue;
            }
            if let Some(l) = last {
                let ordered = if reverse { l > k } else { l < k };
                if !ordered {
                    return false;
                }
            }
            last = Some(k);
        }
        true
    }
}

/// `addConflictRangeAndMustUnmodified`: the range read's conflict range, then each row's
/// mapped key or range, in row order; the first part the transaction wrote fails the read.
fn add_conflicts(
    writes: &WriteMap,
    begin: &KeySelector,
    end: &KeySelector,
    reverse: bool,
    r: &NativeResult<MappedKeyValue>,
    max: &Bytes,
    out: &mut RangeSet,
) -> Result<(), ClientError> {
    let inverted = |_| ClientError::Fdb(ErrorCode::INVERTED_RANGE);
    let written = |_| ClientError::Fdb(ErrorCode::GET_MAPPED_RANGE_READS_YOUR_WRITES);
    let shape = ReadShape {
        first: r.rows.first().map(|m| &m.kv.key),
        last: r.rows.last().map(|m| &m.kv.key),
        more: r.more,
        read_to_begin: r.read_to_begin,
        read_through_end: r.read_through_end,
    };
    let (b, e) = range_conflict_of(begin, end, reverse, &shape, max).map_err(inverted)?;
    update_conflict_map_unmodified(writes, &b, &e, out).map_err(written)?;
    for row in &r.rows {
        match &row.mapped {
            MappedReqAndResult::Value(v) => {
                let after = fdb_key_after(&v.key);
                update_conflict_map_unmodified(writes, &v.key, &after, out).map_err(written)?;
            }
            MappedReqAndResult::Range(g) => {
                let rows = &g.result.data;
                let shape = ReadShape {
                    first: rows.first().map(|kv| &kv.key),
                    last: rows.last().map(|kv| &kv.key),
                    more: g.result.more,
                    read_to_begin: g.result.read_to_begin,
                    read_through_end: g.result.read_through_end,
                };
                // The mapped ranges are read forwards.
                let (b, e) =
                    range_conflict_of(&g.begin, &g.end, false, &shape, max).map_err(inverted)?;
                update_conflict_map_unmodified(writes, &b, &e, out).map_err(written)?;
            }
        }
    }
    Ok(())
}

/// A mapped row counts against the limits by its primary row alone, as
/// `GetRangeLimits::decrement` counts a `MappedKeyValueRef`.
impl crate::ryw::range_read::Row for MappedKeyValue {
    fn key(&self) -> &Bytes {
        &self.kv.key
    }
    fn size(&self) -> usize {
        self.kv.key.len() + self.kv.value.len()
    }
}
