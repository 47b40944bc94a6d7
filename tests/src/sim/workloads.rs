//! Workloads with invariants, for the swarm: each runs on a world of one seed with the faults
//! given, then is judged from what the application was told and what the cluster holds
//! (read directly from the simulated cluster, not through the client under test).
//!
//! * [`Workload::Bank`]: transfers between accounts ([`crate::bank`]): the sum holds, every
//!   transfer told committed is there once, none told failed is.
//! * [`Workload::Queue`]: producers push versionstamped keys, consumers pop (read the head,
//!   clear it, record the pop) in one transaction: every item pushed is popped exactly once,
//!   in push order per producer.
//! * [`Workload::Ryw`]: random programs of sets, clears, range clears, atomic ops and
//!   (snapshot or not) point and range reads over keys the tasks share; judged as a
//!   serializable history: the committed programs in commit-version order make a model,
//!   every read equals it at the read version (plus the program's own writes), every
//!   non-snapshot read also just before the commit, and the cluster ends holding it.
//! * [`Workload::Watches`]: a watch on a key another task then changes must fire; one on a
//!   key nobody changes must not fire. In a quarter of the seeds the client first sits idle
//!   for minutes.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use fdb_api::{Error, KeySelector, MutationType, RangeOptions, Transaction};
use fdb_protocol::messages::commit::mutation_type as mt;

use super::{Database, FaultCounts, Faults, Sim, SimDriver};
use crate::bank::{Bank, Rng, TxRecord};
use crate::cluster::TestClusterBuilder;

/// A workload of the swarm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Workload {
    Bank,
    Queue,
    Ryw,
    Watches,
}

impl Workload {
    pub const ALL: [Workload; 4] = [
        Workload::Bank,
        Workload::Queue,
        Workload::Ryw,
        Workload::Watches,
    ];

    /// The workload the swarm runs for `seed` (they take turns).
    pub fn of_seed(seed: u64) -> Workload {
        Workload::ALL[(seed % 4) as usize]
    }

    pub fn name(self) -> &'static str {
        match self {
            Workload::Bank => "bank",
            Workload::Queue => "queue",
            Workload::Ryw => "ryw",
            Workload::Watches => "watches",
        }
    }

    pub fn parse(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }
}

/// What one run left.
#[derive(Clone, Debug)]
pub struct Report {
    pub workload: Workload,
    pub seed: u64,
    /// [`Sim::trace_hash`].
    pub hash: u64,
    /// Broken invariants, one line each (empty: the run passed).
    pub violations: Vec<String>,
    /// Operations the application was told succeeded, of those it tried.
    pub done: usize,
    pub tried: usize,
    pub steps: u64,
    pub virtual_time: Duration,
    pub faults: FaultCounts,
}

/// The command that replays `seed` (its workload is the seed's, or `SIM_WORKLOAD`).
pub fn replay_command(seed: u64, workload: Workload) -> String {
    let env = if workload == Workload::of_seed(seed) {
        String::new()
    } else {
        format!("SIM_WORKLOAD={} ", workload.name())
    };
    format!(
        "{env}SIM_SEED={seed} cargo test -p fdb-tests --test sim -- swarm_replay --nocapture \
         (with SIM_LOG=1: every event)"
    )
}

/// Runs `workload` on a world of `seed` with `faults`; `scale` multiplies the work (1 in the
/// CI swarm). A run that does not finish (a hang, the world's time limit) panics naming the
/// seed, as [`Sim::run`] does.
pub fn run(workload: Workload, seed: u64, faults: Faults, scale: usize) -> Report {
    let mut world = Sim::with(seed, TestClusterBuilder::default(), faults.clone());
    let (violations, done, tried) = match workload {
        Workload::Bank => bank(&mut world, seed, scale),
        Workload::Queue => queue(&mut world, seed, scale),
        Workload::Ryw => ryw(&mut world, seed, scale),
        Workload::Watches => watches(&mut world, seed, scale, &faults),
    };
    Report {
        workload,
        seed,
        hash: world.trace_hash(),
        violations,
        done,
        tried,
        steps: world.steps(),
        virtual_time: world.now(),
        faults: world.fault_counts(),
    }
}

/// Whether the application takes `commit_unknown_result` for a failure (a planted bug).
fn unknown_as_failed() -> bool {
    #[cfg(feature = "planted-bugs")]
    return super::plant::is(super::plant::Plant::CommitUnknownAsFailed);
    #[cfg(not(feature = "planted-bugs"))]
    false
}

/// Whether an application that saw `code` must check if its attempt landed before trying
/// again.
pub(crate) fn maybe_committed(code: fdb_api::ErrorCode) -> bool {
    code.is_maybe_committed() && !unknown_as_failed()
}

/// The standard retry loop around `body`, which is told whether an earlier attempt may have
/// committed (so it can look before doing it again). An error `on_error` refuses ends it.
async fn retry<T, F, Fut>(db: &Database, mut body: F) -> Result<T, Error>
where
    F: FnMut(Transaction<SimDriver>, bool) -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let tx = db.create_transaction();
    let mut maybe = false;
    loop {
        match body(tx.clone(), maybe).await {
            Ok(v) => return Ok(v),
            Err(e) => {
                let Some(code) = e.code() else { return Err(e) };
                maybe |= maybe_committed(code);
                tx.on_error(code).await?;
            }
        }
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

type Job = Pin<Box<dyn Future<Output = ()>>>;

// ---------------------------------------------------------------------------------------
// The bank.

fn bank(world: &mut Sim, seed: u64, scale: usize) -> (Vec<String>, usize, usize) {
    let (workers, per_worker) = (4, 8 * scale);
    let bank = Bank::new(b"bank/", 6, 1000, Duration::from_secs(5));
    let records: Rc<RefCell<Vec<TxRecord>>> = Rc::default();
    let recs = records.clone();
    let b = bank.clone();
    let state = world.run(move |db| async move {
        while b.init(&db).await.is_err() {
            super::sleep(ms(100)).await;
        }
        let other = super::open();
        let mut rng = Rng::new(seed);
        let jobs: Vec<_> = (0..workers)
            .map(|w| {
                let db = if w % 2 == 0 {
                    db.clone()
                } else {
                    other.clone()
                };
                let transfers: Vec<_> = (0..per_worker)
                    .map(|_| b.random_transfer(&mut rng))
                    .collect();
                let (b, recs) = (b.clone(), recs.clone());
                let mut think = Rng::new(seed ^ w as u64);
                async move {
                    for t in transfers {
                        // Think time, so the run spans the faults.
                        super::sleep(ms(think.below(40))).await;
                        let r = b.transfer(&db, t, "sim").await;
                        super::note(format!("{:?}", r.outcome).as_bytes());
                        recs.borrow_mut().push(r);
                    }
                }
            })
            .collect();
        join_all(jobs).await;
        // Faults may still be on: read until a read gets through.
        loop {
            match b.read_once(&db).await {
                Ok(state) => return state,
                Err(_) => super::sleep(ms(100)).await,
            }
        }
    });
    let records = records.borrow();
    let verdict = state.judge(&bank, &records, Duration::from_secs(3600));
    let done = records.iter().filter(|r| r.committed()).count();
    (verdict.violations, done, records.len())
}

/// Runs `jobs` to the end, side by side.
async fn join_all(jobs: Vec<impl Future<Output = ()> + 'static>) {
    let left = Rc::new(Cell::new(jobs.len()));
    for job in jobs {
        let left = left.clone();
        super::spawn(async move {
            job.await;
            left.set(left.get() - 1);
            wake_waiters();
        });
    }
    Until(left).await;
}

/// Ready when the counter reaches zero (woken whenever a joined job ends).
struct Until(Rc<Cell<usize>>);

impl Future for Until {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.0.get() == 0 {
            return std::task::Poll::Ready(());
        }
        WAITERS.with(|w| w.borrow_mut().push(cx.waker().clone()));
        std::task::Poll::Pending
    }
}

thread_local! {
    /// The tasks waiting in [`Until`]; woken whenever a joined job ends.
    static WAITERS: RefCell<Vec<std::task::Waker>> = const { RefCell::new(Vec::new()) };
}

fn wake_waiters() {
    for w in WAITERS.with(|w| std::mem::take(&mut *w.borrow_mut())) {
        w.wake();
    }
}

// ---------------------------------------------------------------------------------------
// The queue.

const QUEUE: &[u8] = b"q/";
const QUEUE_END: &[u8] = b"q0";
const POPS: &[u8] = b"n";

/// The producer's last pushed item (what a retry after `commit_unknown_result` checks).
fn pushed_mark(p: u8) -> Vec<u8> {
    vec![b'p', b'/', p]
}

/// The record a pop writes: the pop's number and the consumer.
fn pop_record(p: u8, s: u16) -> Vec<u8> {
    [&b"d/"[..], &[p], &s.to_be_bytes()].concat()
}

/// A queue item: `q/` + the push's versionstamp + producer + sequence number.
fn queue_key(p: u8, s: u16) -> Vec<u8> {
    let mut k = QUEUE.to_vec();
    k.extend_from_slice(&[0; 10]);
    k.push(p);
    k.extend_from_slice(&s.to_be_bytes());
    k.extend_from_slice(&(QUEUE.len() as u32).to_le_bytes());
    k
}

#[derive(Default)]
struct QueueLog {
    /// Pushes: `true` when the producer cannot know whether it landed.
    pushed: BTreeMap<(u8, u16), bool>,
    /// Pops the consumers were told committed: item, pop number, consumer.
    popped: Vec<(u8, u16, u64, u8)>,
    violations: Vec<String>,
}

fn queue(world: &mut Sim, seed: u64, scale: usize) -> (Vec<String>, usize, usize) {
    let (producers, per, consumers) = (3u8, 6 * scale as u16, 3u8);
    let log: Rc<RefCell<QueueLog>> = Rc::default();
    let lg = log.clone();
    world.run(move |db| async move {
        let other = super::open();
        let left = Rc::new(Cell::new(producers));
        let mut jobs: Vec<Job> = Vec::new();
        for p in 0..producers {
            let db = if p % 2 == 0 { &db } else { &other }.clone();
            let (log, left) = (lg.clone(), left.clone());
            let mut think = Rng::new(seed ^ (p as u64) << 8);
            jobs.push(Box::pin(async move {
                for s in 0..per {
                    super::sleep(ms(think.below(30))).await;
                    let r = retry(&db, |tx, maybe| async move {
                        if maybe {
                            let mark = tx.get(pushed_mark(p)).await?;
                            if mark.as_deref() == Some(&s.to_be_bytes()[..]) {
                                return Ok(());
                            }
                        }
                        let [hi, lo] = s.to_be_bytes();
                        tx.atomic_op(
                            queue_key(p, s),
                            [p, hi, lo],
                            MutationType::SetVersionstampedKey,
                        );
                        tx.set(pushed_mark(p), s.to_be_bytes());
                        tx.commit().await?;
                        Ok(())
                    })
                    .await;
                    let mut log = log.borrow_mut();
                    log.pushed.insert((p, s), r.is_err());
                    if let Err(e) = r {
                        log.violations.push(format!("push {p}/{s} gave up: {e}"));
                    }
                }
                left.set(left.get() - 1);
            }));
        }
        for c in 0..consumers {
            let db = if c % 2 == 0 { &other } else { &db }.clone();
            let (log, left) = (lg.clone(), left.clone());
            let mut think = Rng::new(seed ^ (c as u64) << 16);
            jobs.push(Box::pin(async move {
                loop {
                    // Empty after every producer finished: drained.
                    let last = left.get() == 0;
                    let r = retry(&db, |tx, _| async move {
                        let head = tx.get_range(QUEUE, QUEUE_END, 1).await?;
                        let Some(kv) = head.first() else {
                            return Ok(None);
                        };
                        let n = tx.get(POPS).await?.map_or(0, |v| be_u64(&v));
                        let (p, s) = match kv.value[..] {
                            [p, a, b] => (p, u16::from_be_bytes([a, b])),
                            _ => (u8::MAX, u16::MAX),
                        };
                        tx.clear(&kv.key);
                        tx.set(POPS, (n + 1).to_be_bytes());
                        tx.set(pop_record(p, s), [&n.to_be_bytes()[..], &[c]].concat());
                        tx.commit().await?;
                        Ok(Some((p, s, n)))
                    })
                    .await;
                    match r {
                        Ok(Some((p, s, n))) => {
                            super::note(&[p, s as u8, n as u8, c]);
                            log.borrow_mut().popped.push((p, s, n, c));
                        }
                        Ok(None) if last => return,
                        Ok(None) => super::sleep(ms(1 + think.below(20))).await,
                        Err(e) => {
                            log.borrow_mut()
                                .violations
                                .push(format!("consumer {c} gave up: {e}"));
                            return;
                        }
                    }
                }
            }));
        }
        join_all(jobs).await;
    });
    let held = world.cluster().snapshot();
    let log = log.borrow();
    let mut v = log.violations.clone();
    let left = held.keys().filter(|k| k.starts_with(QUEUE)).count();
    if left > 0 {
        v.push(format!("{left} items left in the drained queue"));
    }
    // Every pop's record: item → (pop number, consumer).
    let records: BTreeMap<(u8, u16), (u64, u8)> = held
        .iter()
        .filter_map(|(k, val)| match (&k[..], &val[..]) {
            ([b'd', b'/', p, a, b], [n @ .., c]) if n.len() == 8 => {
                Some(((*p, u16::from_be_bytes([*a, *b])), (be_u64(n), *c)))
            }
            _ => None,
        })
        .collect();
    let pops = held.get(POPS).map_or(0, |n| be_u64(n));
    if pops != records.len() as u64 {
        v.push(format!(
            "{pops} pops counted, {} items recorded popped",
            records.len()
        ));
    }
    for (&(p, s), &ambiguous) in &log.pushed {
        if !ambiguous && !records.contains_key(&(p, s)) {
            v.push(format!("item {p}/{s} pushed, never popped"));
        }
    }
    for (p, s) in records.keys() {
        if !log.pushed.contains_key(&(*p, *s)) {
            v.push(format!("item {p}/{s} popped, never pushed"));
        }
    }
    for p in 0..producers {
        let order: Vec<(u16, u64)> = records
            .range((p, 0)..=(p, u16::MAX))
            .map(|(&(_, s), &(n, _))| (s, n))
            .collect();
        for w in order.windows(2) {
            if w[1].1 <= w[0].1 {
                v.push(format!(
                    "producer {p}: item {} popped (pop {}) before item {} (pop {})",
                    w[1].0, w[1].1, w[0].0, w[0].1
                ));
            }
        }
    }
    let mut told: BTreeMap<(u8, u16), u8> = BTreeMap::new();
    for &(p, s, n, c) in &log.popped {
        if let Some(first) = told.insert((p, s), c) {
            v.push(format!(
                "item {p}/{s} popped twice (consumers {first} and {c})"
            ));
        }
        if records.get(&(p, s)) != Some(&(n, c)) {
            v.push(format!(
                "consumer {c} was told it popped {p}/{s} as pop {n}; the record says {:?}",
                records.get(&(p, s))
            ));
        }
    }
    (v, log.popped.len(), log.pushed.len())
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    let n = b.len().min(8);
    a[8 - n..].copy_from_slice(&b[b.len() - n..]);
    u64::from_be_bytes(a)
}

// ---------------------------------------------------------------------------------------
// Read-your-writes programs against a model.

/// One operation of a program (keys are indices into the task's ten keys).
#[derive(Clone, Debug)]
enum Op {
    Set(u8, Vec<u8>),
    Clear(u8),
    ClearRange(u8, u8),
    Atomic(MutationType, u8, Vec<u8>),
    Get {
        key: u8,
        snapshot: bool,
    },
    Range {
        begin: u8,
        end: u8,
        limit: usize,
        reverse: bool,
        snapshot: bool,
    },
}

/// The atomic ops on values (a versionstamped key or value cannot be read back in its
/// transaction).
fn value_ops() -> Vec<MutationType> {
    MutationType::ALL
        .into_iter()
        .filter(|m| {
            !matches!(
                m,
                MutationType::SetVersionstampedKey | MutationType::SetVersionstampedValue
            )
        })
        .collect()
}

/// Key `k` (0..=10; 10 is the end of the range): the tasks share the ten keys, so their
/// programs conflict.
fn ryw_key(k: u8) -> Vec<u8> {
    vec![b'r', b'/', b'0' + k]
}

/// Task `t`'s mark: its last committed program, the attempt that landed, and that commit's
/// versionstamp (so a commit the task was not told of still has its place in the order).
fn ryw_mark(t: u8) -> Vec<u8> {
    vec![b'r', b'm', b'0' + t]
}

fn random_value(rng: &mut Rng) -> Vec<u8> {
    (0..rng.below(4)).map(|_| rng.below(4) as u8).collect()
}

fn random_program(rng: &mut Rng) -> Vec<Op> {
    let atomics = value_ops();
    (0..1 + rng.below(8))
        .map(|_| {
            let (a, b) = (rng.below(10) as u8, rng.below(11) as u8);
            match rng.below(9) {
                0 | 1 => Op::Set(a, random_value(rng)),
                2 => Op::Clear(a),
                3 => Op::ClearRange(a.min(b), a.max(b)),
                4 | 5 => Op::Atomic(
                    atomics[rng.below(atomics.len() as u64) as usize],
                    a,
                    (0..1 + rng.below(3)).map(|_| rng.below(4) as u8).collect(),
                ),
                6 | 7 => Op::Get {
                    key: a,
                    snapshot: rng.below(2) == 0,
                },
                _ => Op::Range {
                    begin: a.min(b),
                    end: a.max(b),
                    limit: rng.below(4) as usize,
                    reverse: rng.below(2) == 0,
                    snapshot: rng.below(2) == 0,
                },
            }
        })
        .collect()
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Applies a write to the model (reads change nothing).
fn model_apply(m: &mut Model, op: &Op) {
    match op {
        Op::Set(k, v) => {
            m.insert(ryw_key(*k), v.clone());
        }
        Op::Clear(k) => {
            m.remove(&ryw_key(*k));
        }
        Op::ClearRange(a, b) => {
            let (a, b) = (ryw_key(*a), ryw_key(*b));
            m.retain(|k, _| !(a <= *k && *k < b));
        }
        Op::Atomic(op, k, param) => {
            let key = ryw_key(*k);
            // The client sends `and` and `min` as their second versions (a missing value
            // becomes the operand), as libfdb_c does at this API version.
            let code = match op.code() {
                mt::AND => mt::AND_V2,
                mt::MIN => mt::MIN_V2,
                c => c,
            };
            match fdb_protocol::atomic::apply(code, m.get(&key).map(|v| &v[..]), param) {
                Some(v) => m.insert(key, v),
                None => m.remove(&key),
            };
        }
        Op::Get { .. } | Op::Range { .. } => {}
    }
}

/// What one read of an attempt returned.
#[derive(Clone, Debug, PartialEq)]
enum Got {
    One(Option<Vec<u8>>),
    Rows(Vec<(Vec<u8>, Vec<u8>)>),
}

/// One attempt of a program: its read version (once it read) and what each read returned,
/// in program order.
#[derive(Clone, Debug, Default)]
struct Attempt {
    read_version: Option<i64>,
    reads: Vec<Got>,
}

/// A program that committed: at which version, and the attempt that did.
#[derive(Clone, Debug)]
struct Committed {
    task: u8,
    program: u32,
    version: i64,
    ops: Vec<Op>,
    attempt: Attempt,
}

/// What `op` (a read) returns over `view`.
fn read_of(view: &Model, op: &Op) -> Option<Got> {
    match *op {
        Op::Get { key, .. } => Some(Got::One(view.get(&ryw_key(key)).cloned())),
        Op::Range {
            begin,
            end,
            limit,
            reverse,
            ..
        } => {
            let rows = view.range(ryw_key(begin)..ryw_key(end));
            let mut rows: Vec<(Vec<u8>, Vec<u8>)> =
                rows.map(|(k, v)| (k.clone(), v.clone())).collect();
            if reverse {
                rows.reverse();
            }
            if limit > 0 {
                rows.truncate(limit);
            }
            Some(Got::Rows(rows))
        }
        _ => None,
    }
}

/// Runs `ops` on `tx`, recording what each read returns into `rec`.
async fn ryw_attempt(
    tx: &Transaction<SimDriver>,
    ops: &[Op],
    rec: &RefCell<Attempt>,
) -> Result<(), Error> {
    for op in ops {
        let got = match *op {
            Op::Set(k, ref v) => {
                tx.set(ryw_key(k), v);
                continue;
            }
            Op::Clear(k) => {
                tx.clear(ryw_key(k));
                continue;
            }
            Op::ClearRange(a, b) => {
                tx.clear_range(ryw_key(a), ryw_key(b));
                continue;
            }
            Op::Atomic(m, k, ref p) => {
                tx.atomic_op(ryw_key(k), p, m);
                continue;
            }
            Op::Get { key, snapshot } => {
                let k = ryw_key(key);
                let v = if snapshot {
                    tx.snapshot_get(&k).await?
                } else {
                    tx.get(&k).await?
                };
                Got::One(v.map(|v| v.to_vec()))
            }
            Op::Range {
                begin,
                end,
                limit,
                reverse,
                snapshot,
            } => {
                let (b, e) = (ryw_key(begin), ryw_key(end));
                let opts = RangeOptions {
                    limit,
                    reverse,
                    ..RangeOptions::default()
                };
                let rows = tx
                    .get_range_with(
                        KeySelector::first_greater_or_equal(&b),
                        KeySelector::first_greater_or_equal(&e),
                        opts,
                        snapshot,
                    )
                    .await?;
                Got::Rows(
                    rows.into_iter()
                        .map(|kv| (kv.key.to_vec(), kv.value.to_vec()))
                        .collect(),
                )
            }
        };
        if rec.borrow().read_version.is_none() {
            let rv = tx.get_read_version().await?;
            rec.borrow_mut().read_version = Some(rv);
        }
        rec.borrow_mut().reads.push(got);
    }
    Ok(())
}

/// The mark's value: a versionstamp, then the program and attempt numbers (the param ends
/// with the stamp's offset, 0).
fn mark_param(program: u32, attempt: u32) -> Vec<u8> {
    [
        &[0u8; 10][..],
        &program.to_be_bytes(),
        &attempt.to_be_bytes(),
        &0u32.to_le_bytes(),
    ]
    .concat()
}

/// The mark's (commit version, program, attempt).
fn parse_mark(v: &[u8]) -> Option<(i64, u32, u32)> {
    if v.len() != 18 {
        return None;
    }
    let version = i64::from_be_bytes(v[..8].try_into().ok()?);
    let program = u32::from_be_bytes(v[10..14].try_into().ok()?);
    let attempt = u32::from_be_bytes(v[14..18].try_into().ok()?);
    Some((version, program, attempt))
}

/// Judges the committed programs as a serializable history: put in commit-version order
/// and applied to a model, every read must equal the model at its read version (plus the
/// program's own earlier writes), and every non-snapshot read must also equal the model
/// just before its commit — what conflict checking guarantees: a program whose read was
/// overwritten between its read version and its commit must not commit.
fn judge_serial(mut committed: Vec<Committed>) -> (Model, Vec<String>) {
    committed.sort_by_key(|c| c.version);
    let mut bad = Vec::new();
    // The model after each commit, to find the one at a read version.
    let mut states: Vec<(i64, Model)> = vec![(i64::MIN, Model::new())];
    for c in &committed {
        let before = states.last().expect("the initial state").1.clone();
        let rv = c.attempt.read_version.unwrap_or(c.version - 1);
        let at_rv = &states[states.partition_point(|(v, _)| *v <= rv) - 1].1;
        let (mut then, mut now) = (at_rv.clone(), before.clone());
        let mut reads = c.attempt.reads.iter();
        for (j, op) in c.ops.iter().enumerate() {
            if let Some(want) = read_of(&then, op) {
                let Some(got) = reads.next() else {
                    bad.push(format!(
                        "task {} program {}: a read missing",
                        c.task, c.program
                    ));
                    break;
                };
                let snapshot = matches!(
                    op,
                    Op::Get { snapshot: true, .. } | Op::Range { snapshot: true, .. }
                );
                let what = format!("task {} program {} op {j} {op:?}", c.task, c.program);
                if *got != want {
                    bad.push(format!(
                        "{what}: read {got:?}, the model at its read version {rv} says {want:?}"
                    ));
                } else if !snapshot {
                    let want = read_of(&now, op).expect("a read");
                    if *got != want {
                        bad.push(format!(
                            "{what}: read {got:?} at {rv}, but before its commit at {} the \
                             model says {want:?} (a conflict missed)",
                            c.version
                        ));
                    }
                }
            }
            model_apply(&mut then, op);
            model_apply(&mut now, op);
        }
        states.push((c.version, now));
    }
    let end = states.pop().expect("the initial state").1;
    (end, bad)
}

fn ryw(world: &mut Sim, seed: u64, scale: usize) -> (Vec<String>, usize, usize) {
    let (tasks, programs) = (3u8, 6 * scale as u32);
    let bad: Rc<RefCell<Vec<String>>> = Rc::default();
    let committed: Rc<RefCell<Vec<Committed>>> = Rc::default();
    let done = Rc::new(Cell::new(0usize));
    let (bd, cm, dn) = (bad.clone(), committed.clone(), done.clone());
    world.run(move |db| async move {
        let other = super::open();
        let mut jobs: Vec<Job> = Vec::new();
        for t in 0..tasks {
            let db = if t % 2 == 0 { &db } else { &other }.clone();
            let (bad, committed, done) = (bd.clone(), cm.clone(), dn.clone());
            let mut rng = Rng::new(seed ^ (t as u64) << 24);
            jobs.push(Box::pin(async move {
                for i in 1..=programs {
                    super::sleep(ms(rng.below(30))).await;
                    let ops = random_program(&mut rng);
                    let attempts: RefCell<Vec<Attempt>> = RefCell::default();
                    // The attempt that landed and its commit version.
                    let landed: Cell<Option<(u32, i64)>> = Cell::new(None);
                    let r = retry(&db, |tx, maybe| {
                        let (ops, attempts, landed) = (&ops, &attempts, &landed);
                        async move {
                            // After a maybe-committed attempt: did it land?
                            if maybe {
                                let mark = tx.get(ryw_mark(t)).await?;
                                if let Some((v, p, a)) = mark.as_deref().and_then(parse_mark) {
                                    if p == i {
                                        landed.set(Some((a, v)));
                                        return Ok(());
                                    }
                                }
                            }
                            attempts.borrow_mut().push(Attempt::default());
                            let n = attempts.borrow().len() as u32 - 1;
                            let rec = RefCell::new(Attempt::default());
                            let out = ryw_attempt(&tx, ops, &rec).await;
                            attempts.borrow_mut()[n as usize] = rec.into_inner();
                            out?;
                            tx.atomic_op(
                                ryw_mark(t),
                                mark_param(i, n),
                                MutationType::SetVersionstampedValue,
                            );
                            tx.commit().await?;
                            landed.set(Some((n, tx.get_committed_version().await?)));
                            Ok(())
                        }
                    })
                    .await;
                    match (r, landed.get()) {
                        (Ok(()), Some((a, version))) => {
                            committed.borrow_mut().push(Committed {
                                task: t,
                                program: i,
                                version,
                                ops: ops.clone(),
                                attempt: attempts.borrow()[a as usize].clone(),
                            });
                            done.set(done.get() + 1);
                        }
                        (Ok(()), None) => unreachable!("a program ends committed or given up"),
                        (Err(e), _) => {
                            bad.borrow_mut()
                                .push(format!("task {t} program {i} gave up: {e}"));
                            return;
                        }
                    }
                }
            }));
        }
        join_all(jobs).await;
    });
    let held = world.cluster().snapshot();
    let mut v = bad.borrow().clone();
    let (model, serial) = judge_serial(committed.borrow().clone());
    v.extend(serial);
    if v.is_empty() {
        let (b, e) = (ryw_key(0), ryw_key(10));
        let has: Model = held
            .range(b.clone()..e)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if has != model {
            v.push(format!(
                "the cluster holds {has:?}, the committed programs in order make {model:?}"
            ));
        }
    }
    let done = done.get();
    (v, done, tasks as usize * programs as usize)
}

// ---------------------------------------------------------------------------------------
// Watches.

/// What became of one watched key.
#[derive(Clone, Debug, Default)]
struct Watched {
    /// Another task changes it.
    changes: bool,
    /// When its watch fired (or a re-read saw the change).
    fired: Option<Duration>,
    /// Fired while the key held its first value.
    spurious: u32,
    /// Errors the watch ended with (it is set again after each).
    errors: Vec<String>,
    /// When each watch was set (its transaction committed), and when the key changed.
    set_at: Vec<Duration>,
    changed_at: Option<Duration>,
}

fn watches(
    world: &mut Sim,
    seed: u64,
    scale: usize,
    faults: &Faults,
) -> (Vec<String>, usize, usize) {
    let mut rng = Rng::new(seed ^ 0x3a7c);
    let n = 4 + rng.below(4 * scale as u64) as u8;
    let state: Rc<RefCell<Vec<Watched>>> = Rc::new(RefCell::new(
        (0..n)
            .map(|i| Watched {
                // At least one of each kind.
                changes: i == 0 || (i > 1 && rng.below(2) == 0),
                ..Watched::default()
            })
            .collect(),
    ));
    // In a quarter of the seeds the application then leaves the client idle for minutes
    // before anything changes: past the connections' idle close, the storage servers'
    // watch timeout and the coordinators' renewal of the cluster-info long poll, time
    // scales the rest of the swarm never reaches (an idle client once spun here).
    let idle = if Rng::new(seed ^ 0x1d1e).below(4) == 0 {
        Duration::from_secs(100 + Rng::new(seed ^ 0x1d1f).below(300))
    } else {
        Duration::ZERO
    };
    let deadline = faults.until + idle + Duration::from_secs(30);
    let st = state.clone();
    world.run(move |db| async move {
        let key = |i: u8| vec![b'w', b'/', i];
        retry(&db, |tx, _| async move {
            for i in 0..n {
                tx.set(key(i), b"0");
            }
            tx.commit().await?;
            Ok(())
        })
        .await
        .expect("the keys are set");
        let other = super::open();
        for i in 0..n {
            let db = if i % 2 == 0 { &db } else { &other }.clone();
            let st = st.clone();
            super::spawn(async move {
                loop {
                    let r = retry(&db, |tx, _| async move {
                        let v = tx.get(key(i)).await?;
                        let w = tx.watch(key(i));
                        tx.commit().await?;
                        Ok((v, w))
                    })
                    .await;
                    let (v, w) = match r {
                        Ok(r) => r,
                        Err(e) => {
                            st.borrow_mut()[i as usize].errors.push(e.to_string());
                            super::sleep(ms(50)).await;
                            continue;
                        }
                    };
                    st.borrow_mut()[i as usize].set_at.push(super::now());
                    if v.as_deref() != Some(&b"0"[..]) {
                        st.borrow_mut()[i as usize].fired = Some(super::now());
                        return;
                    }
                    match w.await {
                        // Fired: the next look at the value says whether it changed.
                        Ok(_) => {
                            let now = super::now();
                            let mut s = st.borrow_mut();
                            if !s[i as usize].changes {
                                s[i as usize].spurious += 1;
                            } else if s[i as usize].fired.is_none() {
                                s[i as usize].fired = Some(now);
                                return;
                            }
                        }
                        Err(e) => st.borrow_mut()[i as usize].errors.push(e.to_string()),
                    }
                }
            });
        }
        let mut order: Vec<u8> = (0..n)
            .filter(|&i| st.borrow()[i as usize].changes)
            .collect();
        let mut rng = Rng::new(seed ^ 0x3a7d);
        for j in (1..order.len()).rev() {
            order.swap(j, rng.below(j as u64 + 1) as usize);
        }
        super::sleep(ms(rng.below(200)) + idle).await;
        for i in order {
            super::sleep(ms(rng.below(100))).await;
            retry(&db, |tx, _| async move {
                tx.set(key(i), b"1");
                tx.commit().await?;
                Ok(())
            })
            .await
            .expect("the change is made");
            st.borrow_mut()[i as usize].changed_at = Some(super::now());
        }
        while super::now() < deadline && st.borrow().iter().any(|w| w.changes && w.fired.is_none())
        {
            super::sleep(ms(50)).await;
        }
        // A while longer for any spurious fire.
        super::sleep(Duration::from_secs(1)).await;
    });
    let state = state.borrow();
    let mut v = Vec::new();
    let held = world.cluster().0.borrow().pending_watches();
    let asked = world
        .cluster()
        .requests(crate::cluster::RequestKind::WatchValue);
    for (i, w) in state.iter().enumerate() {
        if w.changes && w.fired.is_none() {
            v.push(format!(
                "the watch on changed key w/{i} never fired (set at {:?}, changed at {:?}, \
                 errors {:?}; the cluster holds {held} watches of {asked} asked)",
                w.set_at, w.changed_at, w.errors
            ));
        }
        if !w.changes && w.spurious > 0 {
            v.push(format!(
                "the watch on unchanged key w/{i} fired {} times (errors {:?})",
                w.spurious, w.errors
            ));
        }
    }
    let fired = state.iter().filter(|w| w.fired.is_some()).count();
    let changed = state.iter().filter(|w| w.changes).count();
    (v, fired, changed)
}
