//! The special key space (`\xff\xff` .. `\xff\xff\xff`), as libfdb_c 7.3 serves it from the
//! client (`fdbclient/SpecialKeySpace.actor.cpp`, registered in `DatabaseContext`'s
//! constructor).
//!
//! The space is cut into modules (`SpecialKeySpace::moduleToBoundary`); a range read must
//! stay inside one (`special_keys_cross_module_read`, unless `special_key_space_relaxed`) and
//! one that starts outside every module fails with `special_keys_no_module_found`. Key
//! selectors are resolved over the module's rows and clamped to its bounds. A point read is a
//! range read of `[key, keyAfter(key))`: absent inside a module, an error outside.
//!
//! Served here, from the transaction's own state and the client's: the transaction module's
//! `conflicting_keys/`, `read_conflict_range/` and `write_conflict_range/`, and
//! `\xff\xff/connection_string`, `\xff\xff/cluster_file_path` and `\xff\xff/error_message`
//! (why the last special-key commit failed). `\xff\xff/status/json` is a point read of its own
//! ([`crate::Client::status_json`]). The management and configuration modules
//! (`\xff\xff/management/`, `\xff\xff/configuration/`: tenants, exclusions, the lock, ...)
//! are served from rows the caller reads from the database and hands in, with the ranges they
//! cover ([`crate::Client::get_range_with_rows`]); a read reaching a part not covered fails
//! with `special_keys_no_module_found`. `\xff\xff/cluster_id`, the metrics module and
//! `\xff\xff/worker_interfaces/` are served from rows the client asks the cluster for
//! (`crate::special_cluster`), handed in the same way ([`Given`]); `\xff\xff/global_config/`
//! from the client's global configuration view (`crate::global_config`), and
//! `\xff\xff/tracing/` from the transaction's span context (`tracing`). A malformed
//! `\xff\xff/actor_lineage/` read is refused as libfdb_c refuses it (`actor_lineage`); the
//! modules still not served (a well-formed actor lineage read, `actor_profiler_conf/`) fail
//! with `special_keys_no_module_found` rather than answer rows that would be wrong.

use alloc::vec::Vec;
use bytes::Bytes;

use super::scan::{range_limits, RangeOptions};
use super::special_writes::SpecialWrite;
use super::Transactions;
use crate::error::ErrorCode;
use crate::event::{ClientError, RangeResult, Reply};
use crate::ids::TransactionId;
use crate::messages::types::{KeyRange, KeySelector, KeyValue};
use crate::ryw::range_read::remove_or_equal;
use crate::ryw::RangeSet;

/// The special key range of the conflicting read ranges of a failed commit.
pub const CONFLICTING_KEYS_PREFIX: &[u8] = b"\xff\xff/transaction/conflicting_keys/";
const READ_CONFLICT_PREFIX: &[u8] = b"\xff\xff/transaction/read_conflict_range/";
const WRITE_CONFLICT_PREFIX: &[u8] = b"\xff\xff/transaction/write_conflict_range/";
const CONNECTION_STRING_KEY: &[u8] = b"\xff\xff/connection_string";
const CLUSTER_FILE_PATH_KEY: &[u8] = b"\xff\xff/cluster_file_path";
const ERROR_MESSAGE_KEY: &[u8] = b"\xff\xff/error_message";

/// `specialKeys`: where the space begins and ends.
const SPACE: (&[u8], &[u8]) = (b"\xff\xff", b"\xff\xff\xff");

/// Whether this client answers a module's reads itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Served {
    Here,
    /// libfdb_c fills it from the cluster; this client does not.
    NotHere,
}

/// The modules, by key order: `[begin, end)` each.
#[rustfmt::skip]
const MODULES: [(&[u8], &[u8], Served); 14] = [
    (b"\xff\xff/actor_lineage/", b"\xff\xff/actor_lineage0", Served::NotHere),
    (b"\xff\xff/actor_profiler_conf/", b"\xff\xff/actor_profiler_conf0", Served::NotHere),
    (b"\xff\xff/cluster_file_path", b"\xff\xff/cluster_file_path\x00", Served::Here),
    (b"\xff\xff/cluster_id", b"\xff\xff/cluster_id\x00", Served::NotHere),
    (b"\xff\xff/configuration/", b"\xff\xff/configuration0", Served::NotHere),
    (b"\xff\xff/connection_string", b"\xff\xff/connection_string\x00", Served::Here),
    (b"\xff\xff/error_message", b"\xff\xff/error_message\x00", Served::Here),
    (b"\xff\xff/global_config/", b"\xff\xff/global_config0", Served::NotHere),
    (b"\xff\xff/management/", b"\xff\xff/management0", Served::NotHere),
    (b"\xff\xff/metrics/", b"\xff\xff/metrics0", Served::NotHere),
    (b"\xff\xff/status/json", b"\xff\xff/status/json\x00", Served::NotHere),
    (b"\xff\xff/tracing/", b"\xff\xff/tracing0", Served::Here),
    (b"\xff\xff/transaction/", b"\xff\xff/transaction0", Served::Here),
    (b"\xff\xff/worker_interfaces/", b"\xff\xff/worker_interfaces0", Served::NotHere),
];

/// What the client knows that the special keys show.
#[derive(Clone, Debug, Default)]
pub(crate) struct SpecialContext {
    /// `\xff\xff/connection_string`.
    pub(crate) connection_string: Bytes,
    /// `\xff\xff/cluster_file_path`, when the database was opened from a file.
    pub(crate) cluster_file_path: Option<Bytes>,
}

/// `specialKeys.contains(key)`: a point read goes to the special key space.
pub(crate) fn is_special_key(key: &[u8]) -> bool {
    SPACE.0 <= key && key < SPACE.1
}

/// RYW's test for a range read that goes to the special key space.
pub(crate) fn is_special_range(begin: &[u8], end: &[u8]) -> bool {
    is_special_key(begin) && SPACE.0 <= end && end <= SPACE.1
}

/// The module holding `key`, or the gap between modules (`None` as the third field).
fn region_of(key: &[u8]) -> (&'static [u8], &'static [u8], Option<Served>) {
    let mut gap_begin = SPACE.0;
    for (b, e, served) in MODULES {
        if key < b {
            return (gap_begin, b, None);
        }
        if key < e {
            return (b, e, Some(served));
        }
        gap_begin = e;
    }
    (gap_begin, SPACE.1, None)
}

/// `[begin, end)` of `ranges` as the coalesced map RYW keeps shows them under `prefix`: each
/// range's begin as `"1"`, its end as `"0"` (`getReadConflictRangeIntersecting` and its write
/// twin).
fn boundary_rows(
    prefix: &[u8],
    ranges: impl IntoIterator<Item = KeyRange>,
    out: &mut Vec<KeyValue>,
) {
    let mut set = RangeSet::new();
    for r in ranges {
        set.insert_owned(r.begin, r.end);
    }
    for (b, e) in set.iter() {
        for (k, v) in [(b, &b"1"[..]), (e, &b"0"[..])] {
            let mut key = prefix.to_vec();
            key.extend_from_slice(k);
            out.push(KeyValue {
                key: Bytes::from(key),
                value: Bytes::from_static(v),
            });
        }
    }
}

/// Whether the ranges `covered` (in any order) hold all of `[x, y)`.
fn covers(covered: &[KeyRange], x: &[u8], y: &[u8]) -> bool {
    let mut at = x.to_vec();
    while at.as_slice() < y {
        let next = covered
            .iter()
            .filter(|r| r.begin.as_ref() <= at.as_slice() && at.as_slice() < r.end.as_ref())
            .map(|r| r.end.as_ref())
            .max();
        match next {
            Some(end) => at = end.to_vec(),
            None => return false,
        }
    }
    true
}

/// Where a selector lands among `rows` (sorted, all inside `bound`), clamped to `bound`.
fn resolve(sel: &KeySelector, rows: &[KeyValue], bound: (&[u8], &[u8])) -> Bytes {
    let first = rows.partition_point(|kv| kv.key.as_ref() < sel.key.as_ref()) as i64;
    let i = first + i64::from(sel.offset) - 1;
    if i < 0 {
        Bytes::copy_from_slice(bound.0)
    } else if i as usize >= rows.len() {
        Bytes::copy_from_slice(bound.1)
    } else {
        rows[i as usize].key.clone()
    }
}

impl Transactions {
    /// Every row the special key space holds for `tx` in `[a, b)` (modules served here only).
    fn special_rows(
        &self,
        tx: TransactionId,
        special: &SpecialContext,
        a: &[u8],
        b: &[u8],
    ) -> Vec<KeyValue> {
        let mut rows = Vec::new();
        if let Some(t) = self.txs.get(&tx) {
            if let Some(set) = t.conflicting.as_ref() {
                boundary_rows(CONFLICTING_KEYS_PREFIX, set.ranges(), &mut rows);
            }
            let (_, writes, reads) = Self::commit_lists(t);
            boundary_rows(READ_CONFLICT_PREFIX, reads, &mut rows);
            boundary_rows(WRITE_CONFLICT_PREFIX, writes, &mut rows);
            self.tracing_rows(tx, &mut rows);
            if let Some(msg) = &t.special_error {
                rows.push(KeyValue {
                    key: Bytes::from_static(ERROR_MESSAGE_KEY),
                    value: msg.clone(),
                });
            }
        }
        let singles = [
            (
                CONNECTION_STRING_KEY,
                Some(special.connection_string.clone()),
            ),
            (CLUSTER_FILE_PATH_KEY, special.cluster_file_path.clone()),
        ];
        for (key, value) in singles {
            if let Some(value) = value {
                rows.push(KeyValue {
                    key: Bytes::from_static(key),
                    value,
                });
            }
        }
        rows.sort_by(|x, y| x.key.cmp(&y.key));
        rows.retain(|kv| a <= kv.key.as_ref() && kv.key.as_ref() < b);
        rows
    }

    /// `SpecialKeySpace::getRange` for `tx`. `given`: rows of the management or
    /// configuration module the caller read from the database (the tenant map's JSON, the
    /// exclusions, ...), and the ranges they cover in full; a read reaching a part of those
    /// modules not covered is refused.
    pub(super) fn special_range(
        &self,
        tx: TransactionId,
        special: &SpecialContext,
        mut begin: KeySelector,
        mut end: KeySelector,
        opts: RangeOptions,
        given: Option<Given<'_>>,
    ) -> Result<RangeResult, ClientError> {
        let fdb = |e| Err(ClientError::Fdb(e));
        let Some(t) = self.txs.get(&tx) else {
            return fdb(ErrorCode::TRANSACTION_CANCELLED);
        };
        remove_or_equal(&mut begin);
        remove_or_equal(&mut end);
        if begin.offset >= end.offset && begin.key >= end.key {
            return Ok(RangeResult::default());
        }
        let bound = if t.options.special_key_space_relaxed {
            SPACE
        } else {
            let (b, e, served) = region_of(&begin.key);
            if !(b <= end.key.as_ref() && end.key.as_ref() <= e) {
                return fdb(ErrorCode::SPECIAL_KEYS_CROSS_MODULE_READ);
            }
            if served.is_none() {
                return fdb(ErrorCode::SPECIAL_KEYS_NO_MODULE_FOUND);
            }
            (b, e)
        };
        let mut rows = self.special_rows(tx, special, bound.0, bound.1);
        let covered: &[KeyRange] = given.map_or(&[], |g| g.covered);
        if let Some(given) = given {
            let inside = |kv: &&KeyValue| {
                let k = kv.key.as_ref();
                bound.0 <= k && k < bound.1 && covers(covered, k, &[k, b"\x00"].concat())
            };
            rows.extend(given.rows.iter().filter(inside).cloned());
            rows.sort_by(|x, y| x.key.cmp(&y.key));
        }
        let (a, b) = (resolve(&begin, &rows, bound), resolve(&end, &rows, bound));
        // A module this client does not serve would answer rows here: refuse instead (the
        // parts of the management and configuration modules whose rows were given are
        // served), even where it would answer none. A `first_greater_or_equal` selector is a
        // plain key to libfdb_c, which asks the parts of the module between the two keys;
        // another one walks the rows from its key to where it lands.
        let lo = if begin.offset == 1 {
            &begin.key
        } else {
            (&a).min(&begin.key)
        };
        let hi = if end.offset == 1 {
            &end.key
        } else {
            (&b).max(&end.key)
        };
        let unserved = MODULES.iter().any(|(mb, me, served)| {
            let (x, y) = (lo.as_ref().max(*mb), hi.as_ref().min(*me));
            *served == Served::NotHere && x < y && !covers(covered, x, y)
        });
        if unserved {
            return fdb(ErrorCode::SPECIAL_KEYS_NO_MODULE_FOUND);
        }
        if a >= b || a.as_ref() == bound.1 || b.as_ref() == bound.0 {
            return Ok(RangeResult::default());
        }
        let mut limits = range_limits(&opts);
        let inside = rows.iter().filter(|kv| a <= kv.key && kv.key < b).cloned();
        let ordered: Vec<KeyValue> = if opts.reverse {
            inside.rev().collect()
        } else {
            inside.collect()
        };
        let mut out = Vec::new();
        let total = ordered.len();
        for kv in ordered {
            limits.decrement(&kv);
            out.push(kv);
            if limits.is_reached() {
                break;
            }
        }
        let more = out.len() < total;
        Ok(RangeResult { rows: out, more })
    }

    /// A point read of a special key served from the transaction's state: RYW sends it to
    /// the special key space before any other check (an unknown transaction fails as any
    /// read of it does).
    pub(crate) fn special_get_op(
        &mut self,
        cx: &mut super::Ctx<'_>,
        tx: TransactionId,
        key: &[u8],
        snapshot: bool,
    ) -> crate::ids::RequestId {
        let Some(t) = self.txs.get(&tx) else {
            return self.get(cx, tx, key, snapshot);
        };
        let req = cx.new_request();
        let r = match t.deferred.clone() {
            Some(e) => Err(e),
            None => {
                let b = KeySelector::first_greater_or_equal(key);
                let e = KeySelector::first_greater_or_equal([key, b"\x00"].concat());
                match self.special_read_refused(tx, &b, &e) {
                    Some(e) => Err(e),
                    None => self.special_get(tx, &self.special, key, None),
                }
            }
        };
        cx.finish(req, r.map(Reply::Value));
        req
    }

    /// A range read inside the special key space served from the transaction's state,
    /// readable even after the commit. Bad arguments and an unknown transaction fail as
    /// any range read's do.
    pub(crate) fn special_range_op(
        &mut self,
        cx: &mut super::Ctx<'_>,
        tx: TransactionId,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> crate::ids::RequestId {
        if !self.txs.contains_key(&tx) || self.check_range_args(tx, &opts).is_err() {
            return self.get_range(cx, tx, begin, end, opts, snapshot);
        }
        let req = cx.new_request();
        let r = match self.special_read_refused(tx, &begin, &end) {
            Some(e) => Err(e),
            None => self
                .special_range(tx, &self.special, begin, end, opts, None)
                .map(Reply::Range),
        };
        cx.finish(req, r);
        req
    }

    /// A read libfdb_c refuses before it reaches a module's rows (a malformed
    /// `\xff\xff/actor_lineage/` read): its error, with `\xff\xff/error_message` set.
    pub(super) fn special_read_refused(
        &mut self,
        tx: TransactionId,
        begin: &KeySelector,
        end: &KeySelector,
    ) -> Option<ClientError> {
        let (mut b, mut e) = (begin.clone(), end.clone());
        remove_or_equal(&mut b);
        remove_or_equal(&mut e);
        let (mb, me) = super::actor_lineage::ACTOR_LINEAGE_MODULE;
        let (lo, hi) = (b.key.as_ref().max(mb), e.key.as_ref().min(me));
        if !(mb <= b.key.as_ref() && b.key.as_ref() < me) || lo >= hi {
            return None;
        }
        let msg = super::actor_lineage::refusal(lo, hi)?;
        self.set_special_error(tx, Bytes::from_static(msg.as_bytes()));
        Some(ClientError::Fdb(ErrorCode::SPECIAL_KEYS_API_FAILURE))
    }

    /// `SpecialKeySpace::get`: the row at `key` of `[key, keyAfter(key))`.
    pub(super) fn special_get(
        &self,
        tx: TransactionId,
        special: &SpecialContext,
        key: &[u8],
        given: Option<Given<'_>>,
    ) -> Result<Option<Bytes>, ClientError> {
        let mut after = key.to_vec();
        after.push(0);
        let r = self.special_range(
            tx,
            special,
            KeySelector::first_greater_or_equal(Bytes::copy_from_slice(key)),
            KeySelector::first_greater_or_equal(Bytes::from(after)),
            RangeOptions::default(),
            given,
        )?;
        Ok(r.rows
            .into_iter()
            .find(|kv| kv.key.as_ref() == key)
            .map(|kv| kv.value))
    }

    /// A point read or range read in the special key space, with rows of the management or
    /// configuration modules the caller read and the ranges they cover (see
    /// [`Transactions::special_range`]).
    pub(crate) fn special_read_with_rows(
        &mut self,
        cx: &mut super::Ctx<'_>,
        tx: TransactionId,
        read: SpecialRead,
        rows: &[KeyValue],
        covered: &[KeyRange],
    ) -> crate::ids::RequestId {
        let req = cx.new_request();
        self.special_read_given(cx, req, tx, read, Given { rows, covered });
        req
    }

    /// Finishes request `req`, a point read or range read in the special key space, with the
    /// rows `given` of a module the caller read.
    pub(crate) fn special_read_given(
        &self,
        cx: &mut super::Ctx<'_>,
        req: crate::ids::RequestId,
        tx: TransactionId,
        read: SpecialRead,
        given: Given<'_>,
    ) {
        let r = match self.txs.get(&tx) {
            None => Err(ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED)),
            Some(t) if t.deferred.is_some() => Err(t.deferred.clone().expect("checked")),
            Some(_) => match read {
                SpecialRead::Get(key) => self
                    .special_get(tx, &self.special, &key, Some(given))
                    .map(Reply::Value),
                SpecialRead::Range(b, e, opts) => self
                    .special_range(tx, &self.special, b, e, opts, Some(given))
                    .map(Reply::Range),
            },
        };
        cx.finish(req, r);
    }

    /// Takes the special-key writes out of `tx` for the caller to carry out before it
    /// commits (RYW's commit runs `SpecialKeySpace::commit` first).
    pub(crate) fn take_special_writes(
        &mut self,
        tx: TransactionId,
    ) -> Result<Vec<SpecialWrite>, ClientError> {
        if let Some(e) = self.txs.get(&tx).and_then(|t| t.deferred.clone()) {
            return Err(e);
        }
        Ok(self.tx_mut(tx)?.special_writes.take())
    }

    /// The special-key writes `tx` holds, left in place, and whether it reads its own writes
    /// (the management modules show them in their reads, as `rywGetRange` does).
    pub(crate) fn special_writes(
        &self,
        tx: TransactionId,
    ) -> Result<(Vec<SpecialWrite>, bool), ClientError> {
        let t = self.tx_ref(tx)?;
        Ok((t.special_writes.writes().to_vec(), !t.options.ryw_disabled))
    }

    /// Whether `tx` runs inside a tenant (a module that does not support tenants refuses its
    /// reads with `illegal_tenant_access`).
    pub(crate) fn in_tenant(&self, tx: TransactionId) -> bool {
        self.tx_tenants.contains_key(&tx)
    }

    /// Sets `\xff\xff/error_message` (`setSpecialKeySpaceErrorMsg`), until the reset.
    pub(crate) fn set_special_error(&mut self, tx: TransactionId, msg: Bytes) {
        if let Some(t) = self.txs.get_mut(&tx) {
            t.special_error = Some(msg);
        }
    }
}

/// Rows of a module not served here, read by the caller, and the parts of the space they
/// cover in full (every row there is).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Given<'a> {
    pub(crate) rows: &'a [KeyValue],
    pub(crate) covered: &'a [KeyRange],
}

/// A read the special key space answers with rows the caller hands in.
#[derive(Clone, Debug)]
pub(crate) enum SpecialRead {
    /// A point read of this key.
    Get(Bytes),
    /// A range read between two selectors.
    Range(KeySelector, KeySelector, RangeOptions),
}
