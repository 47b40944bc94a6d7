//! One transaction's state — read version, writes, conflict ranges, retries — and the checks
//! every write passes (sizes, legal key ranges, `used_during_commit`). Writes are synchronous:
//! they only touch the write map; a failed write is remembered and fails the next read or the
//! commit, as libfdb_c defers it.

use super::TENANT_PREFIX_SIZE;
use alloc::sync::Arc;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use super::options::{ConflictRangeType, TxOptions};
use super::special_writes::{check_module, refused_write, SpecialWriteMap};
use super::{fdb, Ctx, Transactions};
use crate::atomic;
use crate::error::ErrorCode;
use crate::event::ClientError;
use crate::ids::{RequestId, TransactionId};
use crate::knobs::Knobs;
use crate::messages::commit::{mutation_type as mt, MutationRef};
use crate::messages::types::{KeyRange, TenantInfo, Version};
use crate::messages::NetworkAddress;
use crate::ryw::range_read::update_conflict_map;
use crate::ryw::{key_after, RangeSet, SnapshotCache, WriteMap};
use crate::time::Instant;
use crate::uid::Uid;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReadVersion {
    None,
    Pending,
    Ready(Version),
    Failed(ErrorCode),
}

/// The id a commit carries, and where it went.
#[derive(Clone, Debug)]
pub(super) struct SentId {
    pub(super) id: Bytes,
    /// The commit's read version: the first version it could commit at.
    pub(super) read_snapshot: Version,
    /// With `automatic_idempotency`: the proxy's `expireIdempotencyId` endpoint and the
    /// tenant to name there (libfdb_c sends it only for a commit its load balancer placed).
    pub(super) expire_to: Option<(NetworkAddress, Uid, TenantInfo)>,
}

/// The state of one transaction.
#[derive(Debug)]
pub(crate) struct Tx {
    pub(super) options: TxOptions,
    pub(super) read_version: ReadVersion,
    /// The metadata version the read version's reply carried (`TransactionState::
    /// metadataVersion`); `None` until a GRV proxy answered, and for a read version set by hand.
    pub(super) metadata_version: Option<Option<Bytes>>,
    /// RYW's write map (unused with read-your-writes disabled). Shared with the key and range
    /// reads in flight, which see it as it was when they were issued (FDB's `WriteMap` is
    /// versioned and a read's iterator pins its version); a write made meanwhile copies it.
    pub(super) writes: Arc<WriteMap>,
    /// RYW's read conflict ranges (`readConflicts`).
    pub(super) read_conflicts: RangeSet,
    /// What NativeAPI's transaction holds already.
    pub(super) native: NativeTx,
    pub(super) trace_id: Uid,
    /// The span id of the transaction's span context (`\xff\xff/tracing/token`).
    pub(super) span_token: u64,
    /// Draws a new token when `\xff\xff/tracing/token` is set to `true`.
    pub(super) token_rng: crate::time::Rng,
    pub(super) backoff: Duration,
    pub(super) retries: u32,
    pub(super) created: Instant,
    pub(super) timed_out: bool,
    /// Set by `commit` and kept until `reset` / `on_error` (RYW's `commitStarted`): the
    /// transaction then refuses further use with `used_during_commit`.
    pub(super) committing: bool,
    pub(super) committed: Option<(Version, Option<[u8; 10]>)>,
    /// Watches waiting for this transaction to commit.
    pub(super) watches: Vec<RequestId>,
    /// The first failed write, reported by the next read or commit.
    pub(super) deferred: Option<ClientError>,
    /// Why the transaction is finished until reset (RYW's `resetPromise`): a use after the
    /// commit started (`used_during_commit`), or an `on_error` that refused to retry
    /// (`transaction_cancelled`). Every read, commit and `on_error` then fails with it.
    pub(super) finished: Option<ErrorCode>,
    /// The first error of a read the transaction started: RYW's commit waits for every read
    /// (`reading`), so the commit fails with it.
    pub(super) read_failed: Option<ClientError>,
    /// A read reached the transaction since it was reset (RYW's `reading`): reading your
    /// writes can no longer be disabled.
    pub(super) read_started: bool,
    /// What was read from storage so far.
    pub(super) cache: SnapshotCache,
    /// The key the last commit attempt both read and wrote: the dummy transaction after
    /// `commit_unknown_result` commits on it.
    pub(super) self_conflict: Option<Bytes>,
    /// The idempotency id the commit in flight carries, for what follows its outcome.
    pub(super) idempotency: Option<SentId>,
    /// The read conflict ranges the last commit sent (to name the conflicting ones).
    pub(super) sent_read_conflicts: Vec<KeyRange>,
    /// With `report_conflicting_keys`, the read conflict ranges that made the last commit
    /// fail (`\xff\xff/transaction/conflicting_keys/`).
    pub(super) conflicting: Option<RangeSet>,
    /// Writes into the special key space's write modules, for the commit to act on.
    pub(super) special_writes: SpecialWriteMap,
    /// `\xff\xff/error_message`: why the last special-key commit failed (a JSON document).
    pub(super) special_error: Option<Bytes>,
}

impl Tx {
    /// A fresh span id for the span context (`fullReset`), and the generator of later ones.
    pub(super) fn new_span(&mut self, rng: &mut crate::time::Rng) {
        self.span_token = rng.next_u64();
        self.token_rng = crate::time::Rng::new(rng.next_u64());
    }

    /// Whether a read version was asked for or set.
    pub(super) fn has_read_version(&self) -> bool {
        self.read_version != ReadVersion::None
    }

    /// `initialize_new_database`: the transaction reads at version 0.
    pub(super) fn start_at_version_zero(&mut self) {
        self.read_version = ReadVersion::Ready(0);
    }

    pub(super) fn new(trace_id: Uid, now: Instant, knobs: &Knobs) -> Tx {
        Tx {
            options: TxOptions::new(knobs),
            read_version: ReadVersion::None,
            metadata_version: None,
            writes: WriteMap::blank(),
            read_conflicts: RangeSet::new(),
            native: NativeTx::default(),
            trace_id,
            span_token: 0,
            token_rng: crate::time::Rng::new(0),
            backoff: knobs.default_backoff,
            retries: 0,
            created: now,
            timed_out: false,
            committing: false,
            committed: None,
            watches: Vec::new(),
            deferred: None,
            read_started: false,
            read_failed: None,
            finished: None,
            cache: SnapshotCache::default(),
            self_conflict: None,
            idempotency: None,
            sent_read_conflicts: Vec::new(),
            conflicting: None,
            special_writes: SpecialWriteMap::default(),
            special_error: None,
        }
    }

    /// The writes a read sees: none with `read_your_writes_disable` (the read goes through
    /// NativeAPI), an empty map for a snapshot read with the snapshot-RYW counter at zero or
    /// less (RYW's `readWithConflictRangeSnapshot`: the snapshot cache alone).
    pub(super) fn writes_seen(&self, snapshot: bool) -> Option<Arc<WriteMap>> {
        if self.options.ryw_disabled {
            None
        } else if snapshot && self.options.snapshot_ryw <= 0 {
            Some(WriteMap::blank())
        } else {
            Some(self.writes.clone())
        }
    }

    pub(super) fn max_read_key(&self) -> &'static [u8] {
        if self.options.read_system_keys || self.options.access_system_keys {
            b"\xff\xff"
        } else {
            b"\xff"
        }
    }

    pub(super) fn max_write_key(&self) -> &'static [u8] {
        if self.options.access_system_keys {
            b"\xff\xff"
        } else {
            b"\xff"
        }
    }
}

/// What NativeAPI's transaction holds (`Transaction::tr`). With read-your-writes, what RYW
/// already handed it: the part of the write map a versionstamped key may land in, written out
/// when the key was set (`writeRangeToNativeTransaction`). Without it, every write and read
/// conflict range, in the order they were made.
#[derive(Debug, Default)]
pub(super) struct NativeTx {
    pub(super) mutations: Vec<MutationRef>,
    pub(super) write_conflicts: Vec<KeyRange>,
    pub(super) read_conflicts: Vec<KeyRange>,
    /// The read conflict ranges of key and range reads (`extraConflictRanges`): added at
    /// commit, after the size check.
    pub(super) extra_read_conflicts: Vec<KeyRange>,
}

impl NativeTx {
    /// `Transaction::set`; `end`: the key's write-conflict end if the caller has it.
    fn set(&mut self, key: Bytes, value: Bytes, end: Option<Bytes>, conflict: bool) {
        if conflict {
            let end = end.unwrap_or_else(|| key_after(&key));
            self.write_conflicts.push(KeyRange::new(key.clone(), end));
        }
        self.mutations
            .push(MutationRef::new(mt::SET_VALUE, key, value));
    }

    /// `Transaction::clear` of a range whose keys are already cut to the longest key.
    fn clear(&mut self, begin: Bytes, end: Bytes, conflict: bool) {
        if begin >= end {
            return;
        }
        if conflict {
            self.write_conflicts
                .push(KeyRange::new(begin.clone(), end.clone()));
        }
        self.mutations
            .push(MutationRef::new(mt::CLEAR_RANGE, begin, end));
    }

    /// `Transaction::atomicOp`: a versionstamped key gets no write conflict range.
    fn atomic(&mut self, key: Bytes, param: Bytes, kind: u8, conflict: bool) {
        if conflict && kind != mt::SET_VERSIONSTAMPED_KEY {
            self.write_conflicts
                .push(KeyRange::new(key.clone(), key_after(&key)));
        }
        self.mutations.push(MutationRef::new(kind, key, param));
    }
}

/// The check `fdb_transaction_add_conflict_range` makes before anything else and returns at
/// once (its only synchronous error): a driver refuses an inverted range the same way.
pub fn check_conflict_range(begin: &[u8], end: &[u8]) -> Result<(), ClientError> {
    if begin > end {
        return fdb(ErrorCode::INVERTED_RANGE);
    }
    Ok(())
}

/// The longest key a set or an atomic op may write (`getMaxWriteKeySize`): with raw access
/// (which read_system_keys and access_system_keys imply) room for a tenant prefix too.
pub(super) fn check_write_size(
    knobs: &Knobs,
    key: &[u8],
    raw_access: bool,
) -> Result<(), ClientError> {
    let limit = if key.starts_with(b"\xff") {
        knobs.system_key_size_limit
    } else if raw_access {
        knobs.key_size_limit.saturating_add(TENANT_PREFIX_SIZE)
    } else {
        knobs.key_size_limit
    };
    if key.len() > limit {
        return fdb(ErrorCode::KEY_TOO_LARGE);
    }
    Ok(())
}

/// The longest key a read, a clear or a conflict range considers (`getMaxKeySize`: the write
/// limit with room for a tenant prefix): anything longer cannot exist.
pub(super) fn max_key_size(knobs: &Knobs, key: &[u8]) -> usize {
    if key.starts_with(b"\xff") {
        knobs.system_key_size_limit
    } else {
        knobs.key_size_limit.saturating_add(TENANT_PREFIX_SIZE)
    }
}

/// A range end longer than any key, cut to one byte past the longest key (the same range of
/// keys that can exist), as RYW does for clears and conflict ranges.
pub(super) fn truncate_key<'k>(knobs: &Knobs, key: &'k [u8]) -> &'k [u8] {
    let max = max_key_size(knobs, key);
    if key.len() > max {
        &key[..max + 1]
    } else {
        key
    }
}

impl Transactions {
    /// Uses `version` instead of asking a GRV proxy.
    pub(crate) fn set_read_version(
        &mut self,
        tx: TransactionId,
        version: Version,
    ) -> Result<(), ClientError> {
        // `ThreadSafeTransaction::setVersion` runs nothing once an error is deferred, and
        // defers what NativeAPI's `setVersion` throws: a read version already set (or asked
        // for), or one that is not positive.
        if let Some(e) = self.skipped(tx) {
            return Err(e);
        }
        let t = self.tx_mut(tx)?;
        let r = if !matches!(t.read_version, ReadVersion::None) {
            fdb(ErrorCode::READ_VERSION_ALREADY_SET)
        } else if version <= 0 {
            fdb(ErrorCode::VERSION_INVALID)
        } else {
            t.read_version = ReadVersion::Ready(version);
            Ok(())
        };
        self.defer(tx, r)
    }

    /// Sets `key` to `value`.
    pub(crate) fn set(
        &mut self,
        tx: TransactionId,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), ClientError> {
        self.set_bytes(
            tx,
            Bytes::copy_from_slice(key),
            Bytes::copy_from_slice(value),
        )
    }

    /// [`Client::set`] with buffers the caller already owns: nothing is copied.
    pub(crate) fn set_bytes(
        &mut self,
        tx: TransactionId,
        key: Bytes,
        value: Bytes,
    ) -> Result<(), ClientError> {
        self.write(tx, |s| s.set_inner(tx, key, None, value))
    }

    /// [`Client::set_packed`]: key, the key's write-conflict end and value cut from one
    /// buffer `key | 0x00 | value`.
    pub(crate) fn set_packed(
        &mut self,
        tx: TransactionId,
        packed: Bytes,
        key_len: usize,
    ) -> Result<(), ClientError> {
        if let Some(e) = self.skipped(tx) {
            return Err(e);
        }
        if packed.len() <= key_len || packed[key_len] != 0 {
            return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
        }
        let key = packed.slice(..key_len);
        let end = packed.slice(..key_len + 1);
        let value = packed.slice(key_len + 1..);
        let r = self.set_inner(tx, key, Some(end), value);
        self.defer(tx, r)
    }

    /// `end`: the key's write-conflict end (`key | 0x00`) if the caller has it.
    pub(super) fn set_inner(
        &mut self,
        tx: TransactionId,
        key: Bytes,
        end: Option<Bytes>,
        value: Bytes,
    ) -> Result<(), ClientError> {
        // RYW's `set` hands a special key to the special key space before anything else
        // (before `next_write_no_write_conflict_range` is consumed, before the commit check).
        if self.check_special_write_key(tx, &key, Some(&value))? {
            return Ok(());
        }
        // Only a versionstamp may set the metadata version, whatever the options.
        if key == crate::keys::METADATA_VERSION_KEY {
            return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
        }
        let conflict = self.take_write_conflict(tx)?;
        self.check_write(tx, &key)?;
        check_write_size(&self.knobs, &key, self.tx_ref(tx)?.options.raw_access())?;
        if value.len() > self.knobs.value_size_limit {
            return fdb(ErrorCode::VALUE_TOO_LARGE);
        }
        let t = self.tx_mut(tx)?;
        if t.options.ryw_disabled {
            t.native.set(key, value, end, conflict);
        } else {
            // The write map's conflict ranges are segments of its own (`end` is not needed).
            Arc::make_mut(&mut t.writes).mutate(key, mt::SET_VALUE, value, conflict);
        }
        Ok(())
    }

    /// Removes `key`.
    pub(crate) fn clear(&mut self, tx: TransactionId, key: &[u8]) -> Result<(), ClientError> {
        self.write(tx, |s| {
            let conflict = s.take_write_conflict(tx)?;
            s.check_not_committing(tx)?;
            if s.check_special_write_key(tx, key, None)? {
                return Ok(());
            }
            s.check_write(tx, key)?;
            // No key that long exists: clearing it does nothing (RYW's `clear(key)`).
            if key.len() > max_key_size(&s.knobs, key) {
                return Ok(());
            }
            let end = key_after(key);
            let t = s.tx_mut(tx)?;
            if t.options.ryw_disabled {
                t.native.clear(Bytes::copy_from_slice(key), end, conflict);
            } else {
                Arc::make_mut(&mut t.writes).clear(key, &end, conflict);
            }
            Ok(())
        })
    }

    /// Removes every key in `[begin, end)`.
    pub(crate) fn clear_range(
        &mut self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
    ) -> Result<(), ClientError> {
        self.write(tx, |s| {
            // libfdb_c checks the order first (`ThreadSafeTransaction::clear`), then RYW's rules:
            // either end beyond the legal range fails (nothing is clamped), and ends longer than
            // any key are cut to one byte past the longest key.
            if begin > end {
                return fdb(ErrorCode::INVERTED_RANGE);
            }
            let conflict = s.take_write_conflict(tx)?;
            s.check_not_committing(tx)?;
            if s.check_special_write(tx, begin, end, None, false)? {
                return Ok(());
            }
            let knobs = s.knobs;
            let t = s.tx_mut(tx)?;
            let max = t.max_write_key();
            if begin > max || end > max {
                return fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE);
            }
            let (begin, end) = (truncate_key(&knobs, begin), truncate_key(&knobs, end));
            let t = s.tx_mut(tx)?;
            if t.options.ryw_disabled {
                let (b, e) = (Bytes::copy_from_slice(begin), Bytes::copy_from_slice(end));
                t.native.clear(b, e, conflict);
            } else {
                Arc::make_mut(&mut t.writes).clear(begin, end, conflict);
            }
            Ok(())
        })
    }

    /// An atomic operation (`mutation_type`: ADD_VALUE, AND, OR, XOR, APPEND_IF_FITS, MAX, MIN,
    /// SET_VERSIONSTAMPED_KEY, SET_VERSIONSTAMPED_VALUE, BYTE_MIN, BYTE_MAX, COMPARE_AND_CLEAR).
    pub(crate) fn atomic_op(
        &mut self,
        tx: TransactionId,
        key: &[u8],
        param: &[u8],
        kind: u8,
    ) -> Result<(), ClientError> {
        self.write(tx, |s| {
            // RYW's order: the legal range, then the mutation type, then the sizes.
            let conflict = s.take_write_conflict(tx)?;
            if key == crate::keys::METADATA_VERSION_KEY {
                // RYW's `atomicOp`: the metadata version takes one write, a versionstamp of the
                // whole value (`metadataVersionRequiredValue`), and no other system-key check.
                s.check_not_committing(tx)?;
                if kind != mt::SET_VERSIONSTAMPED_VALUE || param != [0u8; 14] {
                    return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
                }
            } else {
                s.check_write(tx, key)?;
            }
            let valid = atomic::is_atomic_op(kind)
                || kind == mt::SET_VERSIONSTAMPED_KEY
                || kind == mt::SET_VERSIONSTAMPED_VALUE;
            if !valid {
                return fdb(ErrorCode::INVALID_MUTATION_TYPE);
            }
            check_write_size(&s.knobs, key, s.tx_ref(tx)?.options.raw_access())?;
            // Since API 510 `and` and `min` mean their V2 forms.
            let kind = match kind {
                mt::AND => mt::AND_V2,
                mt::MIN => mt::MIN_V2,
                k => k,
            };
            if param.len() > s.knobs.value_size_limit {
                return fdb(ErrorCode::VALUE_TOO_LARGE);
            }
            let t = s.tx_mut(tx)?;
            let read_version = match t.read_version {
                ReadVersion::Ready(v) => v,
                _ => 0,
            };
            let ryw = !t.options.ryw_disabled;
            let (key, conflict) = match kind {
                mt::SET_VERSIONSTAMPED_KEY => {
                    let Some(pos) = atomic::versionstamp_offset(key) else {
                        return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
                    };
                    // `getVersionstampKeyRange`: where the key may land, from the read version
                    // libfdb_c knows (zeros otherwise), cut at the readable end.
                    let stem = &key[..key.len() - 4];
                    let mut lo = stem.to_vec();
                    atomic::place_versionstamp(&mut lo[pos..pos + 10], read_version, 0);
                    let mut hi = stem.to_vec();
                    hi[pos..pos + 10].fill(0xff);
                    hi.push(0);
                    let hi = Bytes::copy_from_slice(core::cmp::min(&hi[..], t.max_read_key()));
                    let lo = Bytes::from(lo);
                    if lo > hi {
                        return fdb(ErrorCode::INVERTED_RANGE);
                    }
                    if ryw {
                        // RYW hands what it holds there to NativeAPI now, and from then on
                        // reads there fail (`addUnmodifiedAndUnreadableRange`).
                        let native = &mut t.native;
                        t.writes.write_to_native(
                            &lo,
                            &hi,
                            &mut native.mutations,
                            &mut native.write_conflicts,
                        );
                        Arc::make_mut(&mut t.writes).add_unmodified_and_unreadable_range(&lo, &hi);
                    }
                    let mut k = key.to_vec();
                    atomic::place_versionstamp(&mut k[pos..pos + 10], read_version, 0);
                    (Bytes::from(k), false)
                }
                mt::SET_VERSIONSTAMPED_VALUE => {
                    if atomic::versionstamp_offset(param).is_none() {
                        return fdb(ErrorCode::CLIENT_INVALID_OPERATION);
                    }
                    (Bytes::copy_from_slice(key), conflict)
                }
                _ => (Bytes::copy_from_slice(key), conflict),
            };
            let param = Bytes::copy_from_slice(param);
            if ryw {
                Arc::make_mut(&mut t.writes).mutate(key, kind, param, conflict);
            } else {
                t.native.atomic(key, param, kind, conflict);
            }
            Ok(())
        })
    }

    /// Adds a read or write conflict range by hand. An inverted range is refused at once and
    /// not remembered (see [`check_conflict_range`]); other errors also fail the next read or
    /// the commit.
    pub(crate) fn add_conflict_range(
        &mut self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        kind: ConflictRangeType,
    ) -> Result<(), ClientError> {
        check_conflict_range(begin, end)?;
        self.write(tx, |s| {
            s.check_not_committing(tx)?;
            let knobs = s.knobs;
            let t = s.tx_mut(tx)?;
            let max = match kind {
                ConflictRangeType::Read => t.max_read_key(),
                ConflictRangeType::Write => t.max_write_key(),
            };
            if begin > max || end > max {
                return fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE);
            }
            let (begin, end) = (truncate_key(&knobs, begin), truncate_key(&knobs, end));
            if begin >= end {
                return Ok(());
            }
            let range =
                || KeyRange::new(Bytes::copy_from_slice(begin), Bytes::copy_from_slice(end));
            match kind {
                // RYW's `updateConflictMap`: not over what the transaction's writes decide.
                ConflictRangeType::Read if !t.options.ryw_disabled => {
                    let (b, e) = (Bytes::copy_from_slice(begin), Bytes::copy_from_slice(end));
                    update_conflict_map(&t.writes, &b, &e, &mut t.read_conflicts);
                }
                ConflictRangeType::Read => t.native.read_conflicts.push(range()),
                ConflictRangeType::Write if !t.options.ryw_disabled => {
                    Arc::make_mut(&mut t.writes).add_conflict_range(begin, end)
                }
                ConflictRangeType::Write => t.native.write_conflicts.push(range()),
            }
            Ok(())
        })
    }

    /// The versionstamp of a committed transaction.
    pub(crate) fn versionstamp(&self, tx: TransactionId) -> Option<[u8; 10]> {
        self.txs.get(&tx)?.committed?.1
    }

    /// The version a transaction committed at (`-1` if it wrote nothing).
    pub(crate) fn committed_version(&self, tx: TransactionId) -> Option<Version> {
        Some(self.txs.get(&tx)?.committed?.0)
    }

    /// About how many bytes the commit would carry.
    pub(crate) fn approximate_size(&self, tx: TransactionId) -> usize {
        self.txs.get(&tx).map_or(0, Self::commit_size)
    }

    /// `fdb_transaction_get_approximate_size`: the size, or the deferred error of a failed
    /// write (`ThreadSafeTransaction` checks it first).
    pub(crate) fn get_approximate_size(&self, tx: TransactionId) -> Result<i64, ClientError> {
        let t = self.tx_ref(tx)?;
        if let Some(e) = &t.deferred {
            return Err(e.clone());
        }
        Ok(i64::try_from(Self::commit_size(t)).unwrap_or(i64::MAX))
    }

    // ----- helpers -----

    /// A write of `tx`: skipped with the error a write already left, else run, its error left
    /// for the next call.
    fn write(
        &mut self,
        tx: TransactionId,
        f: impl FnOnce(&mut Self) -> Result<(), ClientError>,
    ) -> Result<(), ClientError> {
        if let Some(e) = self.skipped(tx) {
            return Err(e);
        }
        let r = f(self);
        self.defer(tx, r)
    }

    pub(super) fn defer(
        &mut self,
        tx: TransactionId,
        r: Result<(), ClientError>,
    ) -> Result<(), ClientError> {
        if let Err(e) = &r {
            if let Some(t) = self.txs.get_mut(&tx) {
                if t.deferred.is_none() {
                    t.deferred = Some(e.clone());
                }
            }
        }
        r
    }

    pub(super) fn tx_ref(&self, tx: TransactionId) -> Result<&Tx, ClientError> {
        self.txs
            .get(&tx)
            .ok_or(ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED))
    }

    pub(super) fn tx_mut(&mut self, tx: TransactionId) -> Result<&mut Tx, ClientError> {
        self.txs
            .get_mut(&tx)
            .ok_or(ClientError::Fdb(ErrorCode::TRANSACTION_CANCELLED))
    }

    pub(super) fn check_read_key(
        &mut self,
        tx: TransactionId,
        key: &[u8],
    ) -> Result<(), ClientError> {
        self.check_usable(tx)?;
        let t = self.tx_ref(tx)?;
        if t.timed_out {
            return fdb(ErrorCode::TRANSACTION_TIMED_OUT);
        }
        // The metadata version is readable without `read_system_keys`.
        if key >= t.max_read_key() && key != crate::keys::METADATA_VERSION_KEY {
            return fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE);
        }
        Ok(())
    }

    /// A failed write fails every later read and commit, before any other check
    /// (`ThreadSafeTransaction` checks the deferred error first); a transaction whose commit
    /// has started is done until it is reset.
    pub(super) fn check_usable(&mut self, tx: TransactionId) -> Result<(), ClientError> {
        if let Some(e) = &self.tx_ref(tx)?.deferred {
            return Err(e.clone());
        }
        self.check_not_committing(tx)?;
        if let Some(e) = self.tx_ref(tx)?.finished {
            return fdb(e);
        }
        Ok(())
    }

    /// A set or clear inside the special key space (`[\xff\xff, \xff\xff\xff)`, the whole
    /// range within it) is the special key space's (`SpecialKeySpace::set` / `clear`): without
    /// `special_key_space_enable_writes` it fails with `special_keys_write_disabled`; with it,
    /// it goes to its write module (kept for the commit), or fails as the module table says.
    /// `Ok(true)`: the special key space took the write.
    /// [`check_special_write`](Self::check_special_write) for one key: a plain key costs
    /// one prefix test, and the range's end is built only for a special one.
    fn check_special_write_key(
        &mut self,
        tx: TransactionId,
        key: &[u8],
        value: Option<&Bytes>,
    ) -> Result<bool, ClientError> {
        if !key.starts_with(b"\xff\xff") {
            return Ok(false);
        }
        self.check_special_write(tx, key, &key_after(key), value, true)
    }

    fn check_special_write(
        &mut self,
        tx: TransactionId,
        begin: &[u8],
        end: &[u8],
        value: Option<&Bytes>,
        single: bool,
    ) -> Result<bool, ClientError> {
        const SPECIAL_END: &[u8] = b"\xff\xff\xff";
        // `begin >= \xff\xff` is `begin` starting with it; two byte tests, not a `memcmp`
        // call on every set and clear.
        let inside = begin.len() >= 2 && begin[0] == 0xff && begin[1] == 0xff && end <= SPECIAL_END;
        if !inside {
            return Ok(false);
        }
        if !self.tx_ref(tx)?.options.special_key_space_writes {
            return fdb(ErrorCode::SPECIAL_KEYS_WRITE_DISABLED);
        }
        if begin >= end {
            return Ok(true);
        }
        check_module(begin, end, single).map_err(ClientError::Fdb)?;
        // The tenant module is not for a transaction inside a tenant (`supportsTenants`).
        if self.tx_tenants.contains_key(&tx) {
            return fdb(ErrorCode::ILLEGAL_TENANT_ACCESS);
        }
        if begin.starts_with(super::tracing::TRACING_MODULE.0) {
            return self.tracing_special_write(tx, begin, end, value, single);
        }
        let t = self.tx_mut(tx)?;
        if let Some(msg) = refused_write(begin, value, single) {
            t.special_error = Some(Bytes::from_static(msg.as_bytes()));
            return fdb(ErrorCode::SPECIAL_KEYS_API_FAILURE);
        }
        t.special_writes.write(
            Bytes::copy_from_slice(begin),
            Bytes::copy_from_slice(end),
            value.cloned(),
        );
        Ok(true)
    }

    /// RYW's first checks of a write: not after commit, not beyond the legal range.
    pub(super) fn check_write(&mut self, tx: TransactionId, key: &[u8]) -> Result<(), ClientError> {
        self.check_not_committing(tx)?;
        let t = self.tx_mut(tx)?;
        if key >= t.max_write_key() {
            return fdb(ErrorCode::KEY_OUTSIDE_LEGAL_RANGE);
        }
        Ok(())
    }

    // ----- helpers -----

    /// Like libfdb_c, a failed write is remembered and fails the next read or the commit.
    /// Once an error is deferred, libfdb_c runs no further write, option or conflict range
    /// of the transaction (`doOnMainThreadVoid` returns early while `deferredError` is set):
    /// they are skipped, and answer the deferred error.
    pub(super) fn skipped(&self, tx: TransactionId) -> Option<ClientError> {
        self.txs.get(&tx)?.deferred.clone()
    }

    /// RYW's `checkUsedDuringCommit`: once the commit started, any use fails, and the first
    /// one finishes the transaction with `used_during_commit` (if nothing else did before).
    /// That sets RYW's `resetPromise`, which fails at once what waits on it: the commit in
    /// flight, reads, watches, versionstamps, an `on_error` still sleeping (a commit that
    /// failed leaves `commitStarted` set until the backoff's `resetRyow`). The caller has no
    /// `Ctx`: the transaction is noted, and [`Transactions::deliver_trips`] fails them.
    pub(super) fn check_not_committing(&mut self, tx: TransactionId) -> Result<(), ClientError> {
        let t = self.tx_mut(tx)?;
        if !t.committing {
            return Ok(());
        }
        // `used_during_commit_protection_disable`: only the offending call fails.
        if !t.options.no_commit_protection && t.finished.is_none() {
            t.finished = Some(ErrorCode::USED_DURING_COMMIT);
            self.trips.push(tx);
        }
        fdb(ErrorCode::USED_DURING_COMMIT)
    }

    /// Whether a use during the commit finished a transaction whose waiting requests have
    /// not been failed yet (see [`Transactions::check_not_committing`]).
    pub(crate) fn has_trips(&self) -> bool {
        !self.trips.is_empty()
    }

    /// Fails, with `used_during_commit`, what the transactions noted by
    /// [`Transactions::check_not_committing`] still wait for.
    pub(crate) fn deliver_trips(&mut self, cx: &mut Ctx<'_>) {
        for tx in core::mem::take(&mut self.trips) {
            self.cancel_tx_ops(cx, tx, ErrorCode::USED_DURING_COMMIT);
            self.fail_backoffs(cx, tx, ErrorCode::USED_DURING_COMMIT);
        }
    }

    /// Whether the write about to be made adds its write conflict range: RYW consumes
    /// `next_write_no_write_conflict_range` as each write starts, even one that then fails.
    pub(super) fn take_write_conflict(&mut self, tx: TransactionId) -> Result<bool, ClientError> {
        let t = self.tx_mut(tx)?;
        Ok(!core::mem::take(&mut t.options.next_write_no_conflict))
    }
}
