//! Running a program through this client: one executor per driver. Both do what the libfdb_c
//! runner does, call for call: set up the initial data, run the steps in order (range reads
//! batch by batch through `get_range_batch` and the core's `RangeCursor`, so every batch and
//! its `more` flag are seen), then read the prefix's final contents and clear it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::messages::commit::mutation_type as mt;
use fdb_protocol::messages::types::KeySelector;
use fdb_protocol::{
    ConflictRangeType, RangeCursor, RangeOptions, RangeResult, StreamingMode, TransactionOption,
};

use super::outcome::{Outcome, Row, RunResult};
use super::program::{Key, Mode, Op, Opt, Program, Sel, Step};

/// How long one step may take before the run is declared hung.
pub const STEP_LIMIT: Duration = Duration::from_secs(30);

const CONFLICTING_KEYS: &[u8] = b"\xff\xff/transaction/conflicting_keys/";

/// An op resolved against a prefix: the driver-neutral arguments of one client call.
enum Call {
    Get(Vec<u8>, bool),
    GetKey(KeySelector, bool),
    Range {
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
        snapshot: bool,
        /// One raw batch (`Some`) or the whole loop.
        single: bool,
    },
    Set(Vec<u8>, Vec<u8>),
    Clear(Vec<u8>),
    ClearRange(Vec<u8>, Vec<u8>),
    Atomic(Vec<u8>, Vec<u8>, u8),
    Conflict(Vec<u8>, Vec<u8>, ConflictRangeType),
    Option(TransactionOption),
    ReadVersion,
    Commit,
    OnError(ErrorCode),
    Reset,
    /// A read started now and waited for at `Wait(id)`.
    Start(u32, Box<Call>),
    Wait(u32),
    /// What the Rust API cannot express (a negative limit, say): reported as such.
    Unrepresentable,
}

/// A read started and not yet waited for: its outcome, once it resolves.
type Started = Pin<Box<dyn Future<Output = Outcome>>>;

/// `Outcome::Err` of an API error (`-1`: not an FDB error).
fn api_err(e: fdb_api::Error) -> Outcome {
    Outcome::Err(e.code().map_or(-1, |c| c.0 as i32))
}

/// Starts a read on `t` (either driver's async transaction) and returns its outcome's future.
/// The request is made here, before any later step runs: a write made while it is pending
/// must not be seen by it, as libfdb_c's read works on the write map of the moment it started.
fn start<D: fdb_api::driver::Driver>(t: &fdb_api::Transaction<D>, call: Call) -> Started {
    match call {
        Call::Get(k, snap) => {
            let p = if snap { t.snapshot_get(&k) } else { t.get(&k) };
            Box::pin(async move {
                p.await
                    .map_or_else(api_err, |v| Outcome::Value(v.map(|b| b.to_vec())))
            })
        }
        Call::GetKey(sel, snap) => {
            let p = t.get_key(sel, snap);
            Box::pin(async move { p.await.map_or_else(api_err, |k| Outcome::Key(k.to_vec())) })
        }
        Call::Range {
            begin,
            end,
            opts,
            snapshot,
            ..
        } => {
            let cursor = RangeCursor::new(begin, end, opts);
            let Some((b, e, mut o)) = cursor.next_request() else {
                return Box::pin(async { Outcome::Batches(Vec::new()) });
            };
            o.iteration = opts.iteration;
            let p = t.get_range_batch(b, e, o, snapshot);
            Box::pin(async move {
                p.await.map_or_else(api_err, |r| {
                    Outcome::Batches(vec![(rows_of(&r.rows), r.more)])
                })
            })
        }
        Call::Unrepresentable => Box::pin(async { Outcome::Err(-2) }),
        _ => unreachable!("only reads are started"),
    }
}

fn selector(s: &Sel, prefix: &[u8]) -> KeySelector {
    KeySelector::new(Bytes::from(s.key.resolve(prefix)), s.or_equal, s.offset)
}

fn mode(m: Mode) -> StreamingMode {
    match m {
        Mode::WantAll => StreamingMode::WantAll,
        Mode::Iterator => StreamingMode::Iterator,
        Mode::Exact => StreamingMode::Exact,
        Mode::Small => StreamingMode::Small,
        Mode::Medium => StreamingMode::Medium,
        Mode::Large => StreamingMode::Large,
        Mode::Serial => StreamingMode::Serial,
    }
}

fn resolve(op: &Op, prefix: &[u8]) -> Call {
    let k = |k: &Key| k.resolve(prefix);
    match op {
        Op::Get { key, snapshot } => Call::Get(k(key), *snapshot),
        Op::GetKey { sel, snapshot } => Call::GetKey(selector(sel, prefix), *snapshot),
        Op::GetRange {
            begin,
            end,
            limit,
            target_bytes,
            mode: m,
            reverse,
            snapshot,
            iteration,
        } => {
            let (Ok(limit), Ok(target_bytes)) =
                (usize::try_from(*limit), usize::try_from(*target_bytes))
            else {
                return Call::Unrepresentable;
            };
            let Ok(it) = u32::try_from(iteration.unwrap_or(1)) else {
                return Call::Unrepresentable;
            };
            Call::Range {
                begin: selector(begin, prefix),
                end: selector(end, prefix),
                opts: RangeOptions {
                    limit,
                    target_bytes,
                    mode: mode(*m),
                    iteration: it,
                    reverse: *reverse,
                },
                snapshot: *snapshot,
                single: iteration.is_some(),
            }
        }
        Op::ConflictingKeys => {
            let mut end = CONFLICTING_KEYS.to_vec();
            end.push(0xff);
            Call::Range {
                begin: KeySelector::first_greater_or_equal(Bytes::from_static(CONFLICTING_KEYS)),
                end: KeySelector::first_greater_or_equal(Bytes::from(end)),
                opts: RangeOptions {
                    mode: StreamingMode::WantAll,
                    ..RangeOptions::default()
                },
                snapshot: false,
                single: false,
            }
        }
        Op::Set { key, value } => Call::Set(k(key), value.resolve()),
        Op::Clear { key } => Call::Clear(k(key)),
        Op::ClearRange { begin, end } => Call::ClearRange(k(begin), k(end)),
        Op::Atomic { code, key, param } => Call::Atomic(k(key), param.resolve(), *code),
        Op::VsKey { pre, post, value } => {
            let mut key = prefix.to_vec();
            key.extend_from_slice(pre);
            key.extend_from_slice(&[0; 10]);
            key.extend_from_slice(post);
            key.extend_from_slice(&((prefix.len() + pre.len()) as u32).to_le_bytes());
            Call::Atomic(key, value.resolve(), mt::SET_VERSIONSTAMPED_KEY)
        }
        Op::VsValue { key, pre, post } => {
            let mut param = pre.clone();
            param.extend_from_slice(&[0; 10]);
            param.extend_from_slice(post);
            param.extend_from_slice(&(pre.len() as u32).to_le_bytes());
            Call::Atomic(k(key), param, mt::SET_VERSIONSTAMPED_VALUE)
        }
        Op::Conflict { read, begin, end } => Call::Conflict(
            k(begin),
            k(end),
            if *read {
                ConflictRangeType::Read
            } else {
                ConflictRangeType::Write
            },
        ),
        Op::Option(o) => Call::Option(match *o {
            Opt::ReadYourWritesDisable => TransactionOption::ReadYourWritesDisable,
            Opt::NextWriteNoWriteConflictRange => TransactionOption::NextWriteNoWriteConflictRange,
            Opt::SizeLimit(n) => match usize::try_from(n) {
                Ok(n) => TransactionOption::SizeLimit(n),
                Err(_) => return Call::Unrepresentable,
            },
            Opt::ReportConflictingKeys => TransactionOption::ReportConflictingKeys,
            Opt::ReadSystemKeys => TransactionOption::ReadSystemKeys,
            Opt::RetryLimit(n) => TransactionOption::RetryLimit(u32::try_from(n).ok()),
        }),
        Op::ReadVersion => Call::ReadVersion,
        Op::Commit => Call::Commit,
        Op::OnError(c) => match u16::try_from(*c) {
            Ok(c) => Call::OnError(ErrorCode(c)),
            Err(_) => Call::Unrepresentable,
        },
        Op::Reset => Call::Reset,
        Op::Start { id, read } => Call::Start(*id, Box::new(resolve(read, prefix))),
        Op::Wait { id } => Call::Wait(*id),
    }
}

fn rows_of(kvs: &[fdb_protocol::messages::types::KeyValue]) -> Vec<Row> {
    kvs.iter()
        .map(|kv| (kv.key.to_vec(), kv.value.to_vec()))
        .collect()
}

/// The first key after every key starting with `p`.
pub fn strinc(p: &[u8]) -> Vec<u8> {
    let mut e = p.to_vec();
    while e.last() == Some(&0xff) {
        e.pop();
    }
    if let Some(l) = e.last_mut() {
        *l += 1;
    }
    e
}

/// `Outcome::Err` of a tokio driver error (`-1`: not an FDB error).
fn tokio_err(e: fdb_driver_tokio::Error) -> Outcome {
    Outcome::Err(e.code().map_or(-1, |c| c.0 as i32))
}

fn mio_err(e: fdb_driver_mio::Error) -> Outcome {
    Outcome::Err(e.code().map_or(-1, |c| c.0 as i32))
}

/// The tokio driver: one `Database`, one transaction per program transaction.
pub async fn run_tokio(
    db: &fdb_driver_tokio::Database,
    prefix: &[u8],
    p: &Program,
) -> Result<RunResult, String> {
    use fdb_driver_tokio::Transaction;
    let end = strinc(prefix);
    let init: Vec<(Vec<u8>, Vec<u8>)> = p
        .init
        .iter()
        .map(|(k, v)| ([prefix, k].concat(), v.resolve()))
        .collect();
    let (pre, e) = (prefix.to_vec(), end.clone());
    tokio::time::timeout(
        STEP_LIMIT,
        db.run(|tx| {
            let (pre, e, init) = (pre.clone(), e.clone(), init.clone());
            async move {
                tx.clear_range(&pre, &e);
                for (k, v) in &init {
                    tx.set(k, v);
                }
                Ok(())
            }
        }),
    )
    .await
    .map_err(|_| "set-up timed out")?
    .map_err(|e| format!("set-up failed: {e}"))?;

    let txs: Vec<Transaction> = (0..p.txs).map(|_| db.create_transaction()).collect();
    let mut out = RunResult::default();
    let mut started: HashMap<u32, Started> = HashMap::new();
    for (i, Step { tx, op }) in p.steps.iter().enumerate() {
        let t = &txs[*tx];
        let call = resolve(op, prefix);
        let step = async {
            match call {
                Call::Start(id, read) => {
                    started.insert(id, start(t, *read));
                    Outcome::Nothing
                }
                Call::Wait(id) => match started.remove(&id) {
                    Some(f) => f.await,
                    None => Outcome::Err(-3),
                },
                Call::Get(k, snap) => {
                    let r = if snap {
                        t.snapshot_get(&k).await
                    } else {
                        t.get(&k).await
                    };
                    r.map_or_else(tokio_err, |v| Outcome::Value(v.map(|b| b.to_vec())))
                }
                Call::GetKey(sel, snap) => t
                    .get_key(sel, snap)
                    .await
                    .map_or_else(tokio_err, |k| Outcome::Key(k.to_vec())),
                Call::Range {
                    begin,
                    end,
                    opts,
                    snapshot,
                    single,
                } => {
                    let mut batches = Vec::new();
                    let mut cursor = RangeCursor::new(begin, end, opts);
                    let mut first = Some(opts);
                    loop {
                        let Some((b, e, mut o)) = cursor.next_request() else {
                            break Outcome::Batches(batches);
                        };
                        if let Some(f) = first.take() {
                            o.iteration = f.iteration; // the raw call's own iteration, even 0
                        }
                        match t.get_range_batch(b, e, o, snapshot).await {
                            Ok(r) => {
                                batches.push((rows_of(&r.rows), r.more));
                                if single {
                                    break Outcome::Batches(batches);
                                }
                                cursor.feed(r);
                            }
                            Err(e) => break tokio_err(e),
                        }
                    }
                }
                Call::Set(k, v) => {
                    t.set(&k, &v);
                    Outcome::Nothing
                }
                Call::Clear(k) => {
                    t.clear(&k);
                    Outcome::Nothing
                }
                Call::ClearRange(b, e) => {
                    t.clear_range(&b, &e);
                    Outcome::Nothing
                }
                Call::Atomic(k, p, code) => {
                    t.atomic_op_code(&k, &p, code);
                    Outcome::Nothing
                }
                Call::Conflict(b, e, kind) => t
                    .add_conflict_range(&b, &e, kind)
                    .map_or_else(tokio_err, |_| Outcome::Nothing),
                Call::Option(o) => t.set_option(o).map_or_else(tokio_err, |_| Outcome::Nothing),
                Call::ReadVersion => t
                    .get_read_version()
                    .await
                    .map_or_else(tokio_err, |_| Outcome::Version),
                Call::Commit => match t.commit().await {
                    Ok(_) => {
                        if let Ok(Some(s)) = t.versionstamp().await {
                            out.stamps.insert(i, s);
                        }
                        Outcome::Ok
                    }
                    Err(e) => tokio_err(e),
                },
                Call::OnError(c) => t.on_error(c).await.map_or_else(tokio_err, |_| Outcome::Ok),
                Call::Reset => {
                    t.reset();
                    Outcome::Nothing
                }
                Call::Unrepresentable => Outcome::Err(-2),
            }
        };
        let o = tokio::time::timeout(STEP_LIMIT, step)
            .await
            .map_err(|_| format!("step {i} ({op:?}) hung"))?;
        out.outcomes.push(o);
    }
    drop(txs);

    let (pre, e) = (prefix.to_vec(), end);
    out.final_rows = tokio::time::timeout(
        STEP_LIMIT,
        db.run(|tx| {
            let (pre, e) = (pre.clone(), e.clone());
            async move {
                let rows = tx
                    .get_range_with(
                        KeySelector::first_greater_or_equal(Bytes::from(pre.clone())),
                        KeySelector::first_greater_or_equal(Bytes::from(e.clone())),
                        RangeOptions {
                            mode: StreamingMode::WantAll,
                            ..RangeOptions::default()
                        },
                        false,
                    )
                    .await?;
                tx.clear_range(&pre, &e);
                Ok(rows_of(&rows))
            }
        }),
    )
    .await
    .map_err(|_| "final read timed out")?
    .map_err(|e| format!("final read failed: {e}"))?;
    Ok(out)
}

/// The mio driver: a mio `Transaction` borrows its `Database`, so each program transaction
/// gets a `Database` of its own (the cluster cannot tell: conflicts are the resolver's).
pub fn run_mio(
    dbs: &mut [fdb_driver_mio::Database],
    prefix: &[u8],
    p: &Program,
) -> Result<RunResult, String> {
    let end = strinc(prefix);
    dbs[0]
        .run(|tx| {
            tx.clear_range(prefix, &end);
            for (k, v) in &p.init {
                tx.set([prefix, k].concat(), v.resolve());
            }
            Ok(())
        })
        .map_err(|e| format!("set-up failed: {e}"))?;

    let mut out = RunResult::default();
    {
        let mut txs: Vec<_> = dbs
            .iter_mut()
            .take(p.txs)
            .map(|d| d.create_transaction())
            .collect();
        let mut started: HashMap<u32, Started> = HashMap::new();
        for (i, Step { tx, op }) in p.steps.iter().enumerate() {
            let t = &mut txs[*tx];
            let o = match resolve(op, prefix) {
                Call::Start(id, read) => {
                    started.insert(id, start(t.async_tx(), *read));
                    Outcome::Nothing
                }
                Call::Wait(id) => match started.remove(&id) {
                    Some(f) => t
                        .async_tx()
                        .driver()
                        .block_on(f, STEP_LIMIT)
                        .map_err(|_| format!("step {i} ({op:?}) hung"))?,
                    None => Outcome::Err(-3),
                },
                Call::Get(k, snap) => {
                    let r = if snap { t.snapshot_get(&k) } else { t.get(&k) };
                    r.map_or_else(mio_err, |v| Outcome::Value(v.map(|b| b.to_vec())))
                }
                Call::GetKey(sel, snap) => t
                    .get_key(sel, snap)
                    .map_or_else(mio_err, |k| Outcome::Key(k.to_vec())),
                Call::Range {
                    begin,
                    end,
                    opts,
                    snapshot,
                    single,
                } => {
                    let mut batches = Vec::new();
                    let mut cursor = RangeCursor::new(begin, end, opts);
                    let mut first = Some(opts);
                    loop {
                        let Some((b, e, mut o)) = cursor.next_request() else {
                            break Outcome::Batches(batches);
                        };
                        if let Some(f) = first.take() {
                            o.iteration = f.iteration;
                        }
                        let r: Result<RangeResult, _> = t.get_range_batch(b, e, o, snapshot);
                        match r {
                            Ok(r) => {
                                batches.push((rows_of(&r.rows), r.more));
                                if single {
                                    break Outcome::Batches(batches);
                                }
                                cursor.feed(r);
                            }
                            Err(e) => break mio_err(e),
                        }
                    }
                }
                Call::Set(k, v) => {
                    t.set(&k, &v);
                    Outcome::Nothing
                }
                Call::Clear(k) => {
                    t.clear(&k);
                    Outcome::Nothing
                }
                Call::ClearRange(b, e) => {
                    t.clear_range(&b, &e);
                    Outcome::Nothing
                }
                Call::Atomic(k, p, code) => {
                    t.atomic_op_code(&k, &p, code);
                    Outcome::Nothing
                }
                Call::Conflict(b, e, kind) => t
                    .add_conflict_range(&b, &e, kind)
                    .map_or_else(mio_err, |_| Outcome::Nothing),
                Call::Option(o) => t.set_option(o).map_or_else(mio_err, |_| Outcome::Nothing),
                Call::ReadVersion => t
                    .get_read_version()
                    .map_or_else(mio_err, |_| Outcome::Version),
                Call::Commit => match t.commit() {
                    Ok(_) => {
                        if let Some(s) = t.versionstamp() {
                            out.stamps.insert(i, s);
                        }
                        Outcome::Ok
                    }
                    Err(e) => mio_err(e),
                },
                Call::OnError(c) => t.on_error(c).map_or_else(mio_err, |_| Outcome::Ok),
                Call::Reset => {
                    t.reset();
                    Outcome::Nothing
                }
                Call::Unrepresentable => Outcome::Err(-2),
            };
            out.outcomes.push(o);
        }
    }

    out.final_rows = dbs[0]
        .run(|tx| {
            let mut cursor = RangeCursor::new(
                KeySelector::first_greater_or_equal(Bytes::copy_from_slice(prefix)),
                KeySelector::first_greater_or_equal(Bytes::from(end.clone())),
                RangeOptions {
                    mode: StreamingMode::WantAll,
                    ..RangeOptions::default()
                },
            );
            while let Some((b, e, o)) = cursor.next_request() {
                let r = tx.get_range_batch(b, e, o, false)?;
                cursor.feed(r);
            }
            tx.clear_range(prefix, &end);
            Ok(rows_of(&cursor.into_rows()))
        })
        .map_err(|e| format!("final read failed: {e}"))?;
    Ok(out)
}
