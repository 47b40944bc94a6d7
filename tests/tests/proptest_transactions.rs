//! Property tests of transactions against an in-memory model of FDB's semantics, on the
//! in-process test cluster, through the mio driver (and the tokio driver for one property).
//!
//! * **Read-your-writes equals the model** ([`ryw_reads_and_commits_equal_the_model`]): one
//!   transaction at a time runs a random program of sets, clears, range clears, atomic ops,
//!   gets, key selectors and range reads (selectors with offsets, limits, reverse, streaming
//!   modes and byte limits, read batch by batch), then commits or is dropped. Every read must
//!   equal the model (committed state plus the transaction's own writes, applied in order);
//!   after every commit the cluster's store must equal the model, and at the end a fresh
//!   transaction must read the model back.
//! * **Serializability of concurrent transactions** ([`concurrent_transactions_serialize`]):
//!   two or three transactions (each on its own `Database`) interleave reads and writes and
//!   commit (or are dropped) at random points. Every transaction's reads must come from one
//!   committed state between its creation and its last read, plus its own writes (snapshot
//!   isolation); every committed transaction's non-snapshot reads must equal the state left by
//!   the transactions committed before it plus its own writes (the history is serial in commit
//!   order); a failed commit must be `not_committed` (1020), must leave no trace, and must have
//!   a reason: a transaction committed after it was created wrote something it read (a
//!   generous over-approximation of its read conflict ranges). A transaction that wrote
//!   nothing commits without the cluster (version -1) and serializes at its read version.
//!   The store must equal the model of the committed transactions after every commit attempt.
//!   Reads are gets, range reads (plain and with selectors, limits, reverse) and key
//!   selectors, some of them snapshot reads (only the snapshot-isolation check applies to
//!   those); writes are sets, clears, range clears and atomic ops. The same property runs
//!   again with the tokio driver and every transaction on one `Database`
//!   ([`concurrent_transactions_on_one_client_serialize`]).
//!
//! The model is written here from FDB's sources (`fdbclient/include/fdbclient/Atomic.h` for the
//! atomic operations, `NativeAPI`/`ReadYourWrites` for key selectors, `AND`/`MIN` meaning
//! their V2 forms since API 510); it does not call the code under test. FDB's RYW layer
//! coalesces a stack of atomic ops on an unread key (`WriteMap::coalesceOver`), but only where
//! coalescing agrees with applying them one by one (non-associative ops of different operand
//! sizes stay separate), so the model applies every mutation in order.
//!
//! Each property starts one test cluster and gives each case the whole key space: the case
//! wipes `["", "\xff")` and writes its initial state straight into the store
//! ([`TestCluster::apply`]), so key selectors can walk to either end of the database.
//! `PROPTEST_CASES` overrides the case counts (128 per property); `--nocapture` prints what
//! the cases did (reads, writes, commits, conflicts...).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;
use fdb_driver_mio::{Database, RangeOptions};
use fdb_protocol::cluster_file::ClusterFile;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::commit::{mutation_type as mt, MutationRef};
use fdb_protocol::messages::types::KeySelector;
use fdb_protocol::{RangeResult, StreamingMode};
use fdb_tests::cluster::TestCluster;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

type Store = BTreeMap<Vec<u8>, Vec<u8>>;

/// The end of the readable key space (`getMaxReadKey()` without system-key options).
const MAX_KEY: &[u8] = b"\xff";
/// `CLIENT_KNOBS->VALUE_SIZE_LIMIT`.
const VALUE_SIZE_LIMIT: usize = 100_000;

/// Keys the programs write, spread over the test cluster's shards (split at `\x02`, `\x02m`,
/// `A`, `a`, `h`, `p`, `w`, `\xff`): `h` and `p` start shards, `h\0` is the key right after `h`.
const KEYS: &[&[u8]] = &[b"\x01", b"b", b"g", b"h", b"h\x00", b"o", b"p", b"x"];
/// More keys selectors and range bounds may name: the ends of the key space, keys between the
/// ones above and keys at the other shard boundaries.
const PROBES: &[&[u8]] = &[
    b"", b"\x02m", b"a", b"c", b"hz", b"w", b"z", b"\xfe", b"\xff",
];

/// Keys of the concurrency property: few, so that transactions collide often.
const CKEYS: &[&[u8]] = &[b"b", b"h", b"o", b"p", b"x"];
const CBOUNDS: &[&[u8]] = &[b"", b"b", b"c", b"h", b"p", b"q", b"\xff"];

// ---------------------------------------------------------------------------------------------
// Printable byte strings (for shrunk counterexamples)

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct B(Vec<u8>);

impl fmt::Debug for B {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b\"{}\"", self.0.escape_ascii())
    }
}

fn show(store: &Store) -> Vec<(B, B)> {
    store
        .iter()
        .map(|(k, v)| (B(k.clone()), B(v.clone())))
        .collect()
}

/// An atomic mutation type, shown by name.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Kind(u8);

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(mutation_name(self.0))
    }
}

/// The typed op of an API code the strategy draws (every one is an atomic op).
fn mutation(kind: u8) -> fdb_protocol::MutationType {
    fdb_protocol::MutationType::from_code(kind).expect("the strategy draws atomic ops")
}

fn mutation_name(kind: u8) -> &'static str {
    match kind {
        mt::ADD_VALUE => "ADD",
        mt::AND => "AND",
        mt::OR => "OR",
        mt::XOR => "XOR",
        mt::APPEND_IF_FITS => "APPEND_IF_FITS",
        mt::MAX => "MAX",
        mt::MIN => "MIN",
        mt::BYTE_MIN => "BYTE_MIN",
        mt::BYTE_MAX => "BYTE_MAX",
        mt::COMPARE_AND_CLEAR => "COMPARE_AND_CLEAR",
        _ => "?",
    }
}

// ---------------------------------------------------------------------------------------------
// The model of atomic operations (fdbclient/include/fdbclient/Atomic.h, 7.3.77)

fn le_add(existing: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
    let ex = existing.unwrap_or(&[]);
    if ex.is_empty() || operand.is_empty() {
        return operand.to_vec();
    }
    let mut carry = 0u16;
    let mut out = Vec::with_capacity(operand.len());
    for (i, &o) in operand.iter().enumerate() {
        let sum = o as u16 + ex.get(i).copied().unwrap_or(0) as u16 + carry;
        out.push(sum as u8);
        carry = sum >> 8;
    }
    out
}

fn and(existing: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
    let ex = existing.unwrap_or(&[]);
    if operand.is_empty() {
        return Vec::new();
    }
    (0..operand.len())
        .map(|i| if i < ex.len() { ex[i] & operand[i] } else { 0 })
        .collect()
}

fn and_v2(existing: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
    match existing {
        None => operand.to_vec(),
        Some(_) => and(existing, operand),
    }
}

fn or(existing: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
    let ex = existing.unwrap_or(&[]);
    if ex.is_empty() || operand.is_empty() {
        return operand.to_vec();
    }
    (0..operand.len())
        .map(|i| {
            if i < ex.len() {
                ex[i] | operand[i]
            } else {
                operand[i]
            }
        })
        .collect()
}

fn xor(existing: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
    let ex = existing.unwrap_or(&[]);
    if ex.is_empty() || operand.is_empty() {
        return operand.to_vec();
    }
    (0..operand.len())
        .map(|i| {
            if i < ex.len() {
                ex[i] ^ operand[i]
            } else {
                operand[i]
            }
        })
        .collect()
}

fn append_if_fits(existing: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
    let ex = existing.unwrap_or(&[]);
    if ex.is_empty() {
        return operand.to_vec();
    }
    if operand.is_empty() || ex.len() + operand.len() > VALUE_SIZE_LIMIT {
        return ex.to_vec();
    }
    [ex, operand].concat()
}

/// `existing` cut or zero-padded to `len` bytes.
fn fit(existing: &[u8], len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| existing.get(i).copied().unwrap_or(0))
        .collect()
}

fn max(existing: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
    let ex = existing.unwrap_or(&[]);
    if ex.is_empty() || operand.is_empty() {
        return operand.to_vec();
    }
    // Bytes of the operand beyond the existing value: the existing one counts them as zeros.
    if operand[ex.len().min(operand.len())..]
        .iter()
        .any(|&b| b != 0)
    {
        return operand.to_vec();
    }
    for i in (0..ex.len().min(operand.len())).rev() {
        if operand[i] > ex[i] {
            return operand.to_vec();
        } else if operand[i] < ex[i] {
            return fit(ex, operand.len());
        }
    }
    operand.to_vec()
}

fn min(existing: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
    if operand.is_empty() {
        return Vec::new();
    }
    let ex = existing.unwrap_or(&[]);
    if operand[ex.len().min(operand.len())..]
        .iter()
        .any(|&b| b != 0)
    {
        return fit(ex, operand.len());
    }
    for i in (0..ex.len().min(operand.len())).rev() {
        if operand[i] > ex[i] {
            return fit(ex, operand.len());
        } else if operand[i] < ex[i] {
            return operand.to_vec();
        }
    }
    operand.to_vec()
}

fn min_v2(existing: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
    match existing {
        None => operand.to_vec(),
        Some(_) => min(existing, operand),
    }
}

fn byte_max(existing: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
    match existing {
        Some(ex) if ex > operand => ex.to_vec(),
        _ => operand.to_vec(),
    }
}

fn byte_min(existing: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
    match existing {
        Some(ex) if ex < operand => ex.to_vec(),
        _ => operand.to_vec(),
    }
}

/// The value after atomic op `kind` (as passed to the API) with `operand` over `existing`.
fn model_atomic(kind: u8, existing: Option<&[u8]>, operand: &[u8]) -> Option<Vec<u8>> {
    Some(match kind {
        mt::ADD_VALUE => le_add(existing, operand),
        // API >= 510: AND and MIN are AND_V2 and MIN_V2.
        mt::AND => and_v2(existing, operand),
        mt::MIN => min_v2(existing, operand),
        mt::OR => or(existing, operand),
        mt::XOR => xor(existing, operand),
        mt::APPEND_IF_FITS => append_if_fits(existing, operand),
        mt::MAX => max(existing, operand),
        mt::BYTE_MIN => byte_min(existing, operand),
        mt::BYTE_MAX => byte_max(existing, operand),
        mt::COMPARE_AND_CLEAR => {
            return match existing {
                Some(ex) if ex != operand => Some(ex.to_vec()),
                _ => None,
            }
        }
        other => panic!("no model for mutation type {other}"),
    })
}

// ---------------------------------------------------------------------------------------------
// Programs

#[derive(Clone, PartialEq, Eq)]
struct Sel {
    key: B,
    or_equal: bool,
    offset: i32,
}

impl fmt::Debug for Sel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.or_equal, self.offset) {
            (false, 1) => write!(f, "first_greater_or_equal({:?})", self.key),
            (true, 1) => write!(f, "first_greater_than({:?})", self.key),
            (false, 0) => write!(f, "last_less_than({:?})", self.key),
            (true, 0) => write!(f, "last_less_or_equal({:?})", self.key),
            _ => write!(
                f,
                "KeySelector::new({:?}, {}, {})",
                self.key, self.or_equal, self.offset
            ),
        }
    }
}

impl Sel {
    fn fdb(&self) -> KeySelector {
        KeySelector::new(Bytes::from(self.key.0.clone()), self.or_equal, self.offset)
    }
    fn ge(key: &[u8]) -> Sel {
        Sel {
            key: B(key.to_vec()),
            or_equal: false,
            offset: 1,
        }
    }
}

#[derive(Clone, Debug)]
struct RangeRead {
    begin: Sel,
    end: Sel,
    limit: usize,
    reverse: bool,
    mode: StreamingMode,
    target_bytes: usize,
    snapshot: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Set(B, B),
    Clear(B),
    ClearRange(B, B),
    Atomic(Kind, B, B),
    Get(B, bool),
    GetKey(Sel, bool),
    GetRange(RangeRead),
}

impl Op {
    fn is_write(&self) -> bool {
        matches!(
            self,
            Op::Set(..) | Op::Clear(_) | Op::ClearRange(..) | Op::Atomic(..)
        )
    }
    fn is_snapshot_read(&self) -> bool {
        matches!(
            self,
            Op::Get(_, true) | Op::GetKey(_, true) | Op::GetRange(RangeRead { snapshot: true, .. })
        )
    }
}

/// What a read returned.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Value(Option<B>),
    Key(B),
    Rows(Vec<(B, B)>),
}

// ---------------------------------------------------------------------------------------------
// The model: a store, and what each operation does to it or reads from it

fn key_after(k: &[u8]) -> Vec<u8> {
    let mut v = k.to_vec();
    v.push(0);
    v
}

/// What one transaction sees: the rows, and the keys its own writes put an operation on.
/// Selectors count those keys even where the operation leaves no row (a compare_and_clear
/// that clears): libfdb_c's `RYWIterator::type()` calls every operation segment over a known
/// range a key-value segment, and only `kv()` finds nothing there
/// (`fdbclient/RYWIterator.cpp`, `typeMap` and `kv`).
#[derive(Clone, Default)]
struct View {
    rows: Store,
    ops: std::collections::BTreeSet<Vec<u8>>,
}

impl View {
    fn of(rows: &Store) -> View {
        View {
            rows: rows.clone(),
            ops: Default::default(),
        }
    }

    /// The keys selectors count, in order.
    fn counted(&self) -> Vec<&Vec<u8>> {
        let mut keys: Vec<&Vec<u8>> = self.rows.keys().chain(self.ops.iter()).collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

/// Resolves a key selector over the keys `view` counts as FDB does: the base is the last key
/// `< key` (`<=` with `or_equal`), then `offset` keys forward (offset 1 = the first key after
/// the base); before the first key resolves to `""`, after the last to `\xff`.
fn resolve(view: &View, sel: &Sel) -> Vec<u8> {
    let key = &sel.key.0;
    let keys = view.counted();
    let before = keys
        .iter()
        .filter(|k| {
            if sel.or_equal {
                k.as_slice() <= key.as_slice()
            } else {
                k.as_slice() < key.as_slice()
            }
        })
        .count() as i64;
    let idx = before + sel.offset as i64 - 1;
    if idx < 0 {
        Vec::new()
    } else if idx as usize >= keys.len() {
        MAX_KEY.to_vec()
    } else {
        keys[idx as usize].clone()
    }
}

/// `get_key` as libfdb_c answers it: a range read of one row from the resolved selector
/// (`read(GetKeyReq)` in `fdbclient/ReadYourWrites.actor.cpp`), so a counted key without a row
/// gives the next row (forward) or the one before (backward, where the selector is moved one
/// key on and the last row before it is taken).
fn get_key(view: &View, sel: &Sel) -> Vec<u8> {
    if sel.offset > 0 {
        let at = resolve(view, sel);
        match view.rows.range(at..).next() {
            Some((k, _)) if k.as_slice() < MAX_KEY => k.clone(),
            _ => MAX_KEY.to_vec(),
        }
    } else {
        let mut past = sel.clone();
        past.offset += 1;
        let at = resolve(view, &past);
        match view.rows.range(..at).next_back() {
            Some((k, _)) => k.clone(),
            None => Vec::new(),
        }
    }
}

/// Applies a write to `view`, or returns what a read sees in it.
fn model_op(view: &mut View, op: &Op) -> Option<Seen> {
    match op {
        Op::Set(k, v) => {
            view.rows.insert(k.0.clone(), v.0.clone());
            view.ops.insert(k.0.clone());
            None
        }
        Op::Clear(k) => {
            view.rows.remove(&k.0);
            view.ops.remove(&k.0);
            None
        }
        Op::ClearRange(b, e) => {
            let in_range =
                |k: &Vec<u8>| b.0.as_slice() <= k.as_slice() && k.as_slice() < e.0.as_slice();
            view.rows.retain(|k, _| !in_range(k));
            view.ops.retain(|k| !in_range(k));
            None
        }
        Op::Atomic(Kind(kind), k, operand) => {
            match model_atomic(*kind, view.rows.get(&k.0).map(|v| v.as_slice()), &operand.0) {
                Some(v) => view.rows.insert(k.0.clone(), v),
                None => view.rows.remove(&k.0),
            };
            view.ops.insert(k.0.clone());
            None
        }
        Op::Get(k, _) => Some(Seen::Value(view.rows.get(&k.0).cloned().map(B))),
        Op::GetKey(sel, _) => Some(Seen::Key(B(get_key(view, sel)))),
        Op::GetRange(r) => {
            let b = resolve(view, &r.begin);
            let e = resolve(view, &r.end);
            let mut rows: Vec<(B, B)> = if b < e {
                view.rows
                    .range(b..e)
                    .map(|(k, v)| (B(k.clone()), B(v.clone())))
                    .collect()
            } else {
                Vec::new()
            };
            if r.reverse {
                rows.reverse();
            }
            if r.limit > 0 {
                rows.truncate(r.limit);
            }
            Some(Seen::Rows(rows))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The transaction API of both drivers, blocking

/// A failed call: its FDB error code, if any, and the driver's message.
#[derive(Debug)]
struct TxError {
    code: Option<ErrorCode>,
    text: String,
}

impl fmt::Display for TxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn mio_err(e: fdb_driver_mio::Error) -> TxError {
    TxError {
        code: e.code(),
        text: e.to_string(),
    }
}

fn tokio_err(e: fdb_driver_tokio::Error) -> TxError {
    TxError {
        code: e.code(),
        text: e.to_string(),
    }
}

/// What the properties call on a transaction.
trait Tx {
    fn get(&mut self, key: &[u8], snapshot: bool) -> Result<Option<Bytes>, TxError>;
    fn get_key(&mut self, sel: KeySelector, snapshot: bool) -> Result<Bytes, TxError>;
    fn get_range_batch(
        &mut self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Result<RangeResult, TxError>;
    fn set(&mut self, key: &[u8], value: &[u8]);
    fn clear(&mut self, key: &[u8]);
    fn clear_range(&mut self, begin: &[u8], end: &[u8]);
    fn atomic_op(&mut self, key: &[u8], operand: &[u8], kind: u8);
    fn commit(&mut self) -> Result<i64, TxError>;
}

impl Tx for fdb_driver_mio::Transaction {
    fn get(&mut self, key: &[u8], snapshot: bool) -> Result<Option<Bytes>, TxError> {
        if snapshot {
            self.snapshot_get(key).map_err(mio_err)
        } else {
            fdb_driver_mio::Transaction::get(self, key).map_err(mio_err)
        }
    }
    fn get_key(&mut self, sel: KeySelector, snapshot: bool) -> Result<Bytes, TxError> {
        fdb_driver_mio::Transaction::get_key(self, sel, snapshot).map_err(mio_err)
    }
    fn get_range_batch(
        &mut self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Result<RangeResult, TxError> {
        fdb_driver_mio::Transaction::get_range_batch(self, begin, end, opts, snapshot)
            .map_err(mio_err)
    }
    fn set(&mut self, key: &[u8], value: &[u8]) {
        fdb_driver_mio::Transaction::set(self, key, value)
    }
    fn clear(&mut self, key: &[u8]) {
        fdb_driver_mio::Transaction::clear(self, key)
    }
    fn clear_range(&mut self, begin: &[u8], end: &[u8]) {
        fdb_driver_mio::Transaction::clear_range(self, begin, end)
    }
    fn atomic_op(&mut self, key: &[u8], operand: &[u8], kind: u8) {
        fdb_driver_mio::Transaction::atomic_op(self, key, operand, mutation(kind))
    }
    fn commit(&mut self) -> Result<i64, TxError> {
        fdb_driver_mio::Transaction::commit(self).map_err(mio_err)
    }
}

/// A tokio driver transaction, each call waited for on `rt`.
struct TokioTx<'r> {
    rt: &'r tokio::runtime::Runtime,
    tx: fdb_driver_tokio::Transaction,
}

impl Tx for TokioTx<'_> {
    fn get(&mut self, key: &[u8], snapshot: bool) -> Result<Option<Bytes>, TxError> {
        let r = if snapshot {
            self.rt.block_on(self.tx.snapshot_get(key))
        } else {
            self.rt.block_on(self.tx.get(key))
        };
        r.map_err(tokio_err)
    }
    fn get_key(&mut self, sel: KeySelector, snapshot: bool) -> Result<Bytes, TxError> {
        self.rt
            .block_on(self.tx.get_key(sel, snapshot))
            .map_err(tokio_err)
    }
    fn get_range_batch(
        &mut self,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
    ) -> Result<RangeResult, TxError> {
        self.rt
            .block_on(self.tx.get_range_batch(begin, end, opts, snapshot))
            .map_err(tokio_err)
    }
    fn set(&mut self, key: &[u8], value: &[u8]) {
        self.tx.set(key, value)
    }
    fn clear(&mut self, key: &[u8]) {
        self.tx.clear(key)
    }
    fn clear_range(&mut self, begin: &[u8], end: &[u8]) {
        self.tx.clear_range(begin, end)
    }
    fn atomic_op(&mut self, key: &[u8], operand: &[u8], kind: u8) {
        self.tx.atomic_op(key, operand, mutation(kind))
    }
    fn commit(&mut self) -> Result<i64, TxError> {
        self.rt.block_on(self.tx.commit()).map_err(tokio_err)
    }
}

// ---------------------------------------------------------------------------------------------
// Running operations on the cluster

fn fail(what: impl fmt::Display) -> TestCaseError {
    TestCaseError::fail(what.to_string())
}

/// A range read batch by batch, as a binding's iterator does: after a batch with `more`, go on
/// from after (forward) or before (reverse) its last row, with the limit left and the next
/// iteration number.
fn read_range(tx: &mut dyn Tx, r: &RangeRead) -> Result<Vec<(B, B)>, TxError> {
    let mut begin = r.begin.fdb();
    let mut end = r.end.fdb();
    let mut rows: Vec<(B, B)> = Vec::new();
    let mut iteration = 1;
    loop {
        let opts = RangeOptions {
            limit: if r.limit > 0 { r.limit - rows.len() } else { 0 },
            target_bytes: r.target_bytes,
            mode: r.mode,
            iteration,
            reverse: r.reverse,
        };
        let batch = tx.get_range_batch(begin.clone(), end.clone(), opts, r.snapshot)?;
        let more = batch.more;
        let last = batch.rows.last().map(|kv| kv.key.clone());
        rows.extend(
            batch
                .rows
                .into_iter()
                .map(|kv| (B(kv.key.to_vec()), B(kv.value.to_vec()))),
        );
        if r.limit > 0 && rows.len() >= r.limit {
            // More than the limit is checked by the caller's comparison.
            return Ok(rows);
        }
        if !more {
            return Ok(rows);
        }
        let Some(last) = last else {
            // `more` with no row to continue from: report what we have plus a marker row
            // that can never equal the model.
            rows.push((
                B(b"<more=true with an empty batch>".to_vec()),
                B(Vec::new()),
            ));
            return Ok(rows);
        };
        if r.reverse {
            end = KeySelector::first_greater_or_equal(last);
        } else {
            begin = KeySelector::first_greater_than(last);
        }
        iteration += 1;
        if iteration > 100 {
            rows.push((B(b"<no end after 100 batches>".to_vec()), B(Vec::new())));
            return Ok(rows);
        }
    }
}

/// Runs one operation in `tx`; reads return what they saw.
fn exec(tx: &mut dyn Tx, op: &Op) -> Result<Option<Seen>, TxError> {
    Ok(match op {
        Op::Set(k, v) => {
            tx.set(&k.0, &v.0);
            None
        }
        Op::Clear(k) => {
            tx.clear(&k.0);
            None
        }
        Op::ClearRange(b, e) => {
            tx.clear_range(&b.0, &e.0);
            None
        }
        Op::Atomic(Kind(kind), k, operand) => {
            tx.atomic_op(&k.0, &operand.0, *kind);
            None
        }
        Op::Get(k, snapshot) => Some(Seen::Value(tx.get(&k.0, *snapshot)?.map(|v| B(v.to_vec())))),
        Op::GetKey(sel, snapshot) => Some(Seen::Key(B(tx.get_key(sel.fdb(), *snapshot)?.to_vec()))),
        Op::GetRange(r) => Some(Seen::Rows(read_range(tx, r)?)),
    })
}

/// Replaces everything below `\xff` with `initial`, straight in the store.
fn reset(cluster: &TestCluster, initial: &Store) {
    let mut m = vec![MutationRef::new(
        mt::CLEAR_RANGE,
        Bytes::new(),
        Bytes::from_static(MAX_KEY),
    )];
    for (k, v) in initial {
        m.push(MutationRef::new(
            mt::SET_VALUE,
            Bytes::from(k.clone()),
            Bytes::from(v.clone()),
        ));
    }
    cluster.apply(&m);
}

/// The user keys of the cluster's store, read directly.
fn stored(cluster: &TestCluster) -> Store {
    cluster
        .snapshot()
        .into_iter()
        .filter(|(k, _)| k.as_slice() < MAX_KEY)
        .collect()
}

/// Everything a fresh transaction reads in `["", "\xff")`.
fn read_back(tx: &mut dyn Tx) -> Result<Store, TxError> {
    let rows = read_range(
        tx,
        &RangeRead {
            begin: Sel::ge(b""),
            end: Sel::ge(MAX_KEY),
            limit: 0,
            reverse: false,
            mode: StreamingMode::WantAll,
            target_bytes: 0,
            snapshot: false,
        },
    )?;
    Ok(rows.into_iter().map(|(k, v)| (k.0, v.0)).collect())
}

fn start() -> (TestCluster, impl FnMut(u64) -> Database) {
    let cluster = TestCluster::start();
    let cf = ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
    let open = move |seed: u64| Database::from_cluster_file(cf.clone(), seed).unwrap();
    (cluster, open)
}

/// What the cases of a property did, printed at the end (`--nocapture`) to show that the
/// interesting paths are taken.
#[derive(Default, Debug)]
struct Stats {
    cases: Cell<usize>,
    reads: Cell<usize>,
    writes: Cell<usize>,
    commits: Cell<usize>,
    read_only_commits: Cell<usize>,
    conflicts: Cell<usize>,
    abandoned: Cell<usize>,
}

fn bump(c: &Cell<usize>) {
    c.set(c.get() + 1);
}

fn runner(default_cases: u32) -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default_cases);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

// ---------------------------------------------------------------------------------------------
// Strategies

fn byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        Just(0u8),
        Just(1u8),
        Just(0x7f),
        Just(0x80),
        Just(0xff),
        any::<u8>()
    ]
}

/// Values and operands of 0 to 2 bytes (bytes near the edges of their range, often).
fn bytes(max_len: usize) -> impl Strategy<Value = B> {
    vec(byte(), 0..=max_len).prop_map(B)
}

fn operand() -> impl Strategy<Value = B> {
    prop_oneof![1 => Just(B(Vec::new())), 3 => vec(byte(), 1..=1).prop_map(B), 3 => vec(byte(), 2..=2).prop_map(B)]
}

fn from(keys: &'static [&'static [u8]]) -> impl Strategy<Value = B> {
    proptest::sample::select(keys).prop_map(|k| B(k.to_vec()))
}

fn any_key() -> impl Strategy<Value = B> {
    prop_oneof![3 => from(KEYS), 2 => from(PROBES)]
}

const ATOMIC_KINDS: &[u8] = &[
    mt::ADD_VALUE,
    mt::AND,
    mt::OR,
    mt::XOR,
    mt::APPEND_IF_FITS,
    mt::MAX,
    mt::MIN,
    mt::BYTE_MIN,
    mt::BYTE_MAX,
    mt::COMPARE_AND_CLEAR,
];

fn atomic(keys: &'static [&'static [u8]]) -> impl Strategy<Value = Op> {
    (
        proptest::sample::select(ATOMIC_KINDS),
        from(keys),
        operand(),
    )
        .prop_map(|(kind, k, v)| Op::Atomic(Kind(kind), k, v))
}

/// A range `[b, e)` with `b <= e` from the given bound keys.
fn bounds<S: Strategy<Value = B>>(keys: impl Fn() -> S) -> impl Strategy<Value = (B, B)> {
    (keys(), keys()).prop_map(|(a, b)| if a <= b { (a, b) } else { (b, a) })
}

fn selector() -> impl Strategy<Value = Sel> {
    (any_key(), any::<bool>(), -3i32..=4).prop_map(|(key, or_equal, offset)| Sel {
        key,
        or_equal,
        offset,
    })
}

const MODES: &[StreamingMode] = &[
    StreamingMode::WantAll,
    StreamingMode::Iterator,
    StreamingMode::Exact,
    StreamingMode::Small,
    StreamingMode::Medium,
    StreamingMode::Large,
    StreamingMode::Serial,
];

fn range_read() -> impl Strategy<Value = RangeRead> {
    (
        selector(),
        selector(),
        0usize..5,
        any::<bool>(),
        proptest::sample::select(MODES),
        proptest::sample::select(&[0usize, 0, 1, 12, 40][..]),
        any::<bool>(),
    )
        .prop_map(
            |(begin, end, limit, reverse, mode, target_bytes, snapshot)| RangeRead {
                begin,
                end,
                limit,
                reverse,
                // EXACT needs a row limit (`exact_mode_without_limits` otherwise).
                mode: if mode == StreamingMode::Exact && limit == 0 {
                    StreamingMode::WantAll
                } else {
                    mode
                },
                target_bytes,
                snapshot,
            },
        )
}

fn ryw_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (from(KEYS), bytes(2)).prop_map(|(k, v)| Op::Set(k, v)),
        2 => from(KEYS).prop_map(Op::Clear),
        2 => bounds(any_key).prop_map(|(b, e)| Op::ClearRange(b, e)),
        5 => atomic(KEYS),
        3 => (from(KEYS), any::<bool>()).prop_map(|(k, s)| Op::Get(k, s)),
        3 => (selector(), any::<bool>()).prop_map(|(s, snap)| Op::GetKey(s, snap)),
        4 => range_read().prop_map(Op::GetRange),
    ]
}

fn initial_state(keys: &'static [&'static [u8]]) -> impl Strategy<Value = Store> {
    vec((from(keys), bytes(2)), 0..=keys.len())
        .prop_map(|kvs| kvs.into_iter().map(|(k, v)| (k.0, v.0)).collect())
}

/// How a transaction ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Commit,
    /// Dropped without committing.
    Abandon,
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![3 => Just(End::Commit), 1 => Just(End::Abandon)]
}

#[derive(Clone, Debug)]
struct TxProgram {
    ops: Vec<Op>,
    end: End,
}

// ---------------------------------------------------------------------------------------------
// Property 1: read-your-writes, one transaction at a time

#[derive(Clone, Debug)]
struct RywCase {
    initial: Store,
    txs: Vec<TxProgram>,
}

fn ryw_case() -> impl Strategy<Value = RywCase> {
    (
        initial_state(KEYS),
        vec(
            (vec(ryw_op(), 1..16), end()).prop_map(|(ops, end)| TxProgram { ops, end }),
            1..4,
        ),
    )
        .prop_map(|(initial, txs)| RywCase { initial, txs })
}

fn run_ryw_case(
    cluster: &TestCluster,
    db: &mut Database,
    case: &RywCase,
    stats: &Stats,
) -> Result<(), TestCaseError> {
    bump(&stats.cases);
    reset(cluster, &case.initial);
    let mut committed = case.initial.clone();
    for (t, prog) in case.txs.iter().enumerate() {
        let mut view = View::of(&committed);
        let mut tx = db.create_transaction();
        for (i, op) in prog.ops.iter().enumerate() {
            let before = view.clone();
            let want = model_op(&mut view, op);
            bump(if want.is_some() {
                &stats.reads
            } else {
                &stats.writes
            });
            let got = exec(&mut tx, op).map_err(|e| fail(format!("tx {t} op {i} {op:?}: {e}")))?;
            prop_assert_eq!(
                got,
                want,
                "tx {} op {} {:?} over {:?}",
                t,
                i,
                op,
                show(&before.rows)
            );
        }
        match prog.end {
            End::Commit => {
                tx.commit()
                    .map_err(|e| fail(format!("tx {t}: commit failed: {e}")))?;
                committed = view.rows;
                bump(&stats.commits);
                prop_assert_eq!(
                    show(&stored(cluster)),
                    show(&committed),
                    "store after tx {} committed",
                    t
                );
            }
            End::Abandon => {
                bump(&stats.abandoned);
                drop(tx)
            }
        }
    }
    let back =
        read_back(&mut db.create_transaction()).map_err(|e| fail(format!("read back: {e}")))?;
    prop_assert_eq!(
        show(&back),
        show(&committed),
        "read back by a fresh transaction"
    );
    Ok(())
}

#[test]
fn ryw_reads_and_commits_equal_the_model() {
    let (cluster, mut open) = start();
    let db = RefCell::new(open(1));
    let stats = Stats::default();
    let mut runner = runner(128);
    let result = runner.run(&ryw_case(), |case| {
        run_ryw_case(&cluster, &mut db.borrow_mut(), &case, &stats)
    });
    eprintln!("{stats:?}");
    if let Err(e) = result {
        panic!("{e}");
    }
}

fn sel(key: &[u8], or_equal: bool, offset: i32) -> Sel {
    Sel {
        key: B(key.to_vec()),
        or_equal,
        offset,
    }
}

fn rr(begin: Sel, end: Sel, reverse: bool, mode: StreamingMode, target_bytes: usize) -> Op {
    Op::GetRange(RangeRead {
        begin,
        end,
        limit: 0,
        reverse,
        mode,
        target_bytes,
        snapshot: false,
    })
}

fn b(k: &[u8]) -> B {
    B(k.to_vec())
}

/// Shrunk counterexamples the property found, kept as fixed cases.
fn ryw_regressions() -> Vec<(&'static str, RywCase)> {
    vec![(
        // A forward read whose begin selector resolves backward from `h\0` to `h` must not
        // leave `[.., h)` known: the reverse read after it must still find `\x01` below `b`.
        "reverse read after a forward read from last_less_than",
        RywCase {
            initial: Store::new(),
            txs: vec![
                TxProgram {
                    ops: vec![
                        Op::Atomic(Kind(mt::ADD_VALUE), b(b"\x01"), b(b"\x01")),
                        Op::Set(b(b"h"), b(b"")),
                        Op::Atomic(Kind(mt::ADD_VALUE), b(b"b"), b(b"\x01")),
                    ],
                    end: End::Commit,
                },
                TxProgram {
                    ops: vec![
                        rr(
                            sel(b"h\x00", false, 0),
                            sel(b"o", false, 0),
                            false,
                            StreamingMode::WantAll,
                            0,
                        ),
                        rr(
                            sel(b"", false, 0),
                            sel(b"h", false, 1),
                            true,
                            StreamingMode::WantAll,
                            40,
                        ),
                    ],
                    end: End::Commit,
                },
            ],
        },
    )]
}

#[test]
fn ryw_regressions_equal_the_model() {
    let (cluster, mut open) = start();
    let mut db = open(1);
    let stats = Stats::default();
    let mut failed = Vec::new();
    for (name, case) in ryw_regressions() {
        if let Err(e) = run_ryw_case(&cluster, &mut db, &case, &stats) {
            failed.push(format!("{name}: {e}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Property 2: serializability of concurrent transactions

fn conc_op() -> impl Strategy<Value = Op> {
    let range = (bounds(|| from(CBOUNDS)), 0usize..3, any::<bool>()).prop_map(
        |((b, e), limit, reverse)| {
            Op::GetRange(RangeRead {
                begin: Sel::ge(&b.0),
                end: Sel::ge(&e.0),
                limit,
                reverse,
                mode: StreamingMode::WantAll,
                target_bytes: 0,
                snapshot: false,
            })
        },
    );
    prop_oneof![
        4 => (from(CKEYS), bytes(2)).prop_map(|(k, v)| Op::Set(k, v)),
        1 => from(CKEYS).prop_map(Op::Clear),
        1 => bounds(|| from(CBOUNDS)).prop_map(|(b, e)| Op::ClearRange(b, e)),
        2 => atomic(CKEYS),
        5 => from(CKEYS).prop_map(|k| Op::Get(k, false)),
        1 => from(CKEYS).prop_map(|k| Op::Get(k, true)),
        3 => range,
        2 => (conc_selector(), any::<bool>()).prop_map(|(s, snap)| Op::GetKey(s, snap)),
        1 => (conc_selector(), conc_selector(), 0usize..3, any::<bool>(), any::<bool>()).prop_map(
            |(begin, end, limit, reverse, snapshot)| Op::GetRange(RangeRead {
                begin,
                end,
                limit,
                reverse,
                mode: StreamingMode::WantAll,
                target_bytes: 0,
                snapshot,
            })
        ),
    ]
}

fn conc_selector() -> impl Strategy<Value = Sel> {
    (
        prop_oneof![from(CKEYS), from(CBOUNDS)],
        any::<bool>(),
        -2i32..=3,
    )
        .prop_map(|(key, or_equal, offset)| Sel {
            key,
            or_equal,
            offset,
        })
}

#[derive(Clone, Debug)]
struct ConcCase {
    initial: Store,
    txs: Vec<TxProgram>,
    /// Which of the unfinished transactions takes each next step.
    schedule: Vec<Index>,
}

fn conc_case() -> impl Strategy<Value = ConcCase> {
    (
        initial_state(CKEYS),
        vec(
            (vec(conc_op(), 1..7), end()).prop_map(|(ops, end)| TxProgram { ops, end }),
            2..=3,
        ),
        vec(any::<Index>(), 24),
    )
        .prop_map(|(initial, txs, schedule)| ConcCase {
            initial,
            txs,
            schedule,
        })
}

#[derive(Debug)]
enum Outcome {
    Running,
    /// Committed as the n-th commit of the case.
    Committed(usize),
    /// The commit failed when n transactions had committed.
    Failed(usize),
    Abandoned,
}

/// What happened to one transaction.
#[derive(Debug)]
struct Trace {
    /// Commits done when the transaction was created, and at its last read. Its read version
    /// comes from the first read that needs the cluster (reads its own writes decide do not),
    /// so it is the state after one of the commits in between.
    created: usize,
    last_read: Option<usize>,
    /// `(op index, what it saw)` for every read.
    seen: Vec<(usize, Seen)>,
    outcome: Outcome,
}

/// Replays a transaction's operations over `base`: what each read sees, and the final store.
fn replay(base: &Store, ops: &[Op]) -> (Vec<(usize, Seen)>, Store) {
    let mut view = View::of(base);
    let mut seen = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        if let Some(s) = model_op(&mut view, op) {
            seen.push((i, s));
        }
    }
    (seen, view.rows)
}

/// `[b, e)` ranges a transaction's non-snapshot reads cover (at least its read conflict
/// ranges), and the ranges its writes touch.
fn reads_of(ops: &[Op], seen: &[(usize, Seen)]) -> Vec<(Vec<u8>, Vec<u8>)> {
    ops.iter()
        .enumerate()
        .filter_map(|(i, op)| match op {
            Op::Get(k, false) => Some((k.0.clone(), key_after(&k.0))),
            Op::GetRange(r) if !r.snapshot => {
                if r.begin == Sel::ge(&r.begin.key.0) && r.end == Sel::ge(&r.end.key.0) {
                    Some((r.begin.key.0.clone(), r.end.key.0.clone()))
                } else {
                    // Resolving the selectors reads keys no row shows: anything.
                    Some((Vec::new(), key_after(MAX_KEY)))
                }
            }
            Op::GetKey(sel, false) => {
                // FDB reads from the selector's key to the result, either way.
                let Some((_, Seen::Key(found))) = seen.iter().find(|(j, _)| *j == i) else {
                    unreachable!("every read is logged")
                };
                let (lo, hi) = if found.0 < sel.key.0 {
                    (&found.0, &sel.key.0)
                } else {
                    (&sel.key.0, &found.0)
                };
                Some((lo.clone(), key_after(&key_after(hi))))
            }
            _ => None,
        })
        .collect()
}

fn writes_of(ops: &[Op]) -> Vec<(Vec<u8>, Vec<u8>)> {
    ops.iter()
        .filter_map(|op| match op {
            Op::Set(k, _) | Op::Clear(k) | Op::Atomic(_, k, _) => {
                Some((k.0.clone(), key_after(&k.0)))
            }
            Op::ClearRange(b, e) => Some((b.0.clone(), e.0.clone())),
            _ => None,
        })
        .collect()
}

fn overlap(a: &[(Vec<u8>, Vec<u8>)], b: &[(Vec<u8>, Vec<u8>)]) -> bool {
    a.iter().any(|(ab, ae)| {
        b.iter()
            .any(|(bb, be)| ab < be && bb < ae && ab < ae && bb < be)
    })
}

/// Creates the transaction of one participant of a case, when it takes its first step.
type Opener<'a> = Box<dyn FnOnce() -> Box<dyn Tx + 'a> + 'a>;

fn mio_opener(db: &mut Database) -> Opener<'_> {
    Box::new(move || {
        let db = db;
        Box::new(db.create_transaction())
    })
}

/// Runs a case with one opener per transaction, then reads the store back with
/// `read_back`.
fn run_conc_case(
    cluster: &TestCluster,
    openers: Vec<Opener<'_>>,
    read_back: impl FnOnce() -> Result<Store, TxError>,
    case: &ConcCase,
    stats: &Stats,
) -> Result<(), TestCaseError> {
    let mut log = Vec::new();
    let result = conc_case_logged(cluster, openers, case, stats, &mut log).and_then(|want| {
        let back = read_back().map_err(|e| fail(format!("read back: {e}")))?;
        prop_assert_eq!(show(&back), show(&want), "read back by a fresh transaction");
        Ok(())
    });
    result.map_err(|e| match e {
        TestCaseError::Fail(why) => fail(format!("{why}\nhistory:\n  {}", log.join("\n  "))),
        other => other,
    })
}

/// Runs a case, logging each step; returns the model's final store.
fn conc_case_logged(
    cluster: &TestCluster,
    openers: Vec<Opener<'_>>,
    case: &ConcCase,
    stats: &Stats,
    log: &mut Vec<String>,
) -> Result<Store, TestCaseError> {
    bump(&stats.cases);
    reset(cluster, &case.initial);
    let n = case.txs.len();
    // states[i]: the store after the first i commits of the case.
    let mut states = vec![case.initial.clone()];
    // (transaction, commit version) in commit order.
    let mut commits: Vec<(usize, i64)> = Vec::new();
    let mut traces: Vec<Trace> = Vec::new();
    {
        let mut openers: Vec<Option<Opener<'_>>> = openers.into_iter().map(Some).collect();
        let mut txs: Vec<Option<Box<dyn Tx + '_>>> = (0..n).map(|_| None).collect();
        let mut next = vec![0usize; n];
        let mut done = vec![false; n];
        traces.extend((0..n).map(|_| Trace {
            created: 0,
            last_read: None,
            seen: Vec::new(),
            outcome: Outcome::Running,
        }));
        let mut step = 0;
        while done.iter().any(|d| !d) {
            let active: Vec<usize> = (0..n).filter(|&t| !done[t]).collect();
            let t = match case.schedule.get(step) {
                Some(ix) => active[ix.index(active.len())],
                None => active[0],
            };
            step += 1;
            if txs[t].is_none() {
                let open = openers[t].take().expect("one opener per transaction");
                txs[t] = Some(open());
                traces[t].created = commits.len();
                log.push(format!("tx {t} created after {} commits", commits.len()));
            }
            let prog = &case.txs[t];
            let tx = &mut **txs[t].as_mut().unwrap();
            if let Some(op) = prog.ops.get(next[t]) {
                let i = next[t];
                next[t] += 1;
                bump(if op.is_write() {
                    &stats.writes
                } else {
                    &stats.reads
                });
                if !op.is_write() {
                    traces[t].last_read = Some(commits.len());
                }
                let seen = exec(tx, op).map_err(|e| fail(format!("tx {t} op {i} {op:?}: {e}")))?;
                match &seen {
                    Some(s) => log.push(format!("tx {t} op {i} {op:?} -> {s:?}")),
                    None => log.push(format!("tx {t} op {i} {op:?}")),
                }
                if let Some(s) = seen {
                    traces[t].seen.push((i, s));
                }
                continue;
            }
            done[t] = true;
            match prog.end {
                End::Abandon => {
                    txs[t] = None;
                    traces[t].outcome = Outcome::Abandoned;
                    log.push(format!("tx {t} dropped"));
                    bump(&stats.abandoned);
                }
                End::Commit => match tx.commit() {
                    Ok(version) => {
                        let base = states.last().unwrap().clone();
                        let (_, after) = replay(&base, &prog.ops);
                        states.push(after);
                        commits.push((t, version));
                        log.push(format!("tx {t} committed at version {version}"));
                        traces[t].outcome = Outcome::Committed(commits.len() - 1);
                        bump(if version < 0 {
                            &stats.read_only_commits
                        } else {
                            &stats.commits
                        });
                        prop_assert_eq!(
                            show(&stored(cluster)),
                            show(states.last().unwrap()),
                            "store after tx {} committed (commit #{})",
                            t,
                            commits.len() - 1
                        );
                    }
                    Err(e) => {
                        prop_assert_eq!(
                            e.code,
                            Some(ErrorCode::NOT_COMMITTED),
                            "tx {} commit failed with {} (only not_committed is expected)",
                            t,
                            e
                        );
                        traces[t].outcome = Outcome::Failed(commits.len());
                        log.push(format!("tx {t} failed to commit: {e}"));
                        bump(&stats.conflicts);
                        prop_assert_eq!(
                            show(&stored(cluster)),
                            show(states.last().unwrap()),
                            "store after tx {} failed to commit",
                            t
                        );
                    }
                },
            }
        }
    }
    let mut last_version = 0;
    for (t, version) in &commits {
        if *version > 0 {
            prop_assert!(
                *version > last_version,
                "tx {} committed at {} after a commit at {}",
                t,
                version,
                last_version
            );
            last_version = *version;
        }
    }
    for (t, (prog, trace)) in case.txs.iter().zip(&traces).enumerate() {
        // Snapshot isolation: all reads come from one committed state between the
        // transaction's creation and its last read, plus its own writes.
        if let Some(last_read) = trace.last_read {
            let fits =
                (trace.created..=last_read).any(|s| replay(&states[s], &prog.ops).0 == trace.seen);
            prop_assert!(
                fits,
                "tx {}: reads {:?} fit no committed state from #{} to #{}: {:?}",
                t,
                trace.seen,
                trace.created,
                last_read,
                states[trace.created..=last_read]
                    .iter()
                    .map(show)
                    .collect::<Vec<_>>()
            );
        }
        match trace.outcome {
            Outcome::Committed(c) if commits[c].1 < 0 => {
                // Nothing written: FDB commits without asking the cluster (version -1), and
                // the transaction serializes at its read version (checked above).
                prop_assert!(
                    writes_of(&prog.ops).iter().all(|(b, e)| b >= e),
                    "tx {} wrote but its commit reports no version",
                    t
                );
            }
            Outcome::Committed(c) => {
                // Serializability: the non-snapshot reads equal a serial run in commit order.
                let (want, _) = replay(&states[c], &prog.ops);
                let strict = |seen: &[(usize, Seen)]| -> Vec<(usize, Seen)> {
                    seen.iter()
                        .filter(|(i, _)| !prog.ops[*i].is_snapshot_read())
                        .cloned()
                        .collect()
                };
                prop_assert_eq!(
                    strict(&trace.seen),
                    strict(&want),
                    "tx {} committed as #{} but its reads differ from a serial run over {:?}",
                    t,
                    c,
                    show(&states[c])
                );
            }
            Outcome::Failed(c) => {
                // A conflict needs a cause: a commit after this transaction started that
                // wrote something it read.
                let reads = reads_of(&prog.ops, &trace.seen);
                let cause = commits[trace.created..c]
                    .iter()
                    .any(|(other, _)| overlap(&reads, &writes_of(&case.txs[*other].ops)));
                prop_assert!(
                    cause,
                    "tx {} failed to commit, but no transaction committed since its start wrote what it read",
                    t
                );
            }
            Outcome::Abandoned => {}
            Outcome::Running => unreachable!("tx {t} never finished"),
        }
    }
    Ok(states.pop().unwrap())
}

#[test]
fn concurrent_transactions_serialize() {
    let (cluster, mut open) = start();
    // One database per transaction (a mio transaction borrows its database), and one to
    // read back with.
    let dbs: RefCell<Vec<Database>> = RefCell::new((0..4).map(|i| open(10 + i)).collect());
    let stats = Stats::default();
    let mut runner = runner(128);
    let result = runner.run(&conc_case(), |case| {
        let mut dbs = dbs.borrow_mut();
        let (tx_dbs, rest) = dbs.split_at_mut(3);
        let openers: Vec<Opener<'_>> = tx_dbs.iter_mut().map(mio_opener).collect();
        let back = || read_back(&mut rest[0].create_transaction());
        run_conc_case(&cluster, openers, back, &case, &stats)
    });
    eprintln!("{stats:?}");
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// The same property with the tokio driver and every transaction on one `Database`: one
/// client's location cache, read version requests and connections shared by interleaved
/// transactions.
#[test]
fn concurrent_transactions_on_one_client_serialize() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let cluster = TestCluster::start();
    let cf = ClusterFile::parse(&cluster.cluster_file_string()).unwrap();
    let db = {
        let _in_rt = rt.enter();
        fdb_driver_tokio::Database::from_cluster_file(cf, 20).expect("the driver starts")
    };
    let stats = Stats::default();
    let mut runner = runner(128);
    let result = runner.run(&conc_case(), |case| {
        let (rt, db) = (&rt, &db);
        let openers: Vec<Opener<'_>> = (0..3)
            .map(|_| {
                Box::new(move || {
                    Box::new(TokioTx {
                        rt,
                        tx: db.create_transaction(),
                    }) as Box<dyn Tx>
                }) as Opener
            })
            .collect();
        let back = || {
            read_back(&mut TokioTx {
                rt,
                tx: db.create_transaction(),
            })
        };
        run_conc_case(&cluster, openers, back, &case, &stats)
    });
    eprintln!("{stats:?}");
    if let Err(e) = result {
        panic!("{e}");
    }
}
