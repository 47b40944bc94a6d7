//! A bank workload for fault tests, through either driver: accounts with random transfers
//! (read two balances, write both), each transfer also writing a unique id key
//! (`ids/<id>` → `from,to,amount`) in the same transaction.
//!
//! Transfers run the standard retry loop (`on_error`) under a transaction timeout. After a
//! maybe-committed error (`commit_unknown_result`) the next attempt first reads its id key
//! and stops if it is there, so a retry never applies a transfer twice. Every transfer is
//! recorded: how it ended (what the application was told), how many attempts it took, which
//! errors `on_error` retried. [`BankState`] then judges the records against the database:
//! the sum of balances holds, every transfer the application was told committed is there,
//! none it was told failed is, and the balances are the initial ones plus the net of every
//! id key (a transfer applied twice breaks that).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use bytes::Bytes;
use fdb_api::driver::Driver;
use fdb_protocol::error::ErrorCode;
use fdb_protocol::TransactionOption;

/// The bank: where its keys live and its fixed parameters.
#[derive(Clone, Debug)]
pub struct Bank {
    prefix: Vec<u8>,
    pub accounts: usize,
    pub initial: i64,
    /// The `timeout` option of every transfer.
    pub timeout: Duration,
    /// How long the harness waits for one transfer before calling it hung (beyond any
    /// timeout the client should have enforced).
    pub hang_limit: Duration,
}

/// One transfer the application wants done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub id: u128,
    pub from: usize,
    pub to: usize,
    pub amount: i64,
}

/// Which call of an attempt an error came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    ReadVersion,
    /// Reading the id key after a maybe-committed error.
    IdCheck,
    Read,
    Commit,
    /// `on_error` itself failed with another error than the one it was given.
    OnError,
}

/// What the application was told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Commit succeeded; `by_id` when a retry after a maybe-committed error found the id.
    Committed { by_id: bool },
    /// The retry loop gave up: `code` is what reached the application (`None`: not an FDB
    /// error, e.g. a driver's own call limit; `error` says what). `ambiguous` when the
    /// application cannot know whether the transfer happened: an earlier attempt ended
    /// maybe-committed, or the commit was cut short by a timeout or cancellation.
    Failed {
        code: Option<ErrorCode>,
        stage: Stage,
        error: String,
        ambiguous: bool,
    },
    /// Still not finished after [`Bank::hang_limit`]; the harness stopped waiting.
    Hung,
}

/// One transfer's record.
#[derive(Clone, Debug)]
pub struct TxRecord {
    pub transfer: Transfer,
    /// `tokio`, `mio-1`, ...
    pub driver: String,
    pub started: Instant,
    pub ended: Instant,
    pub attempts: u32,
    /// Every error `on_error` accepted, with the call it came from.
    pub retried: Vec<(ErrorCode, Stage)>,
    pub outcome: Outcome,
}

impl TxRecord {
    pub fn duration(&self) -> Duration {
        self.ended - self.started
    }
    pub fn committed(&self) -> bool {
        matches!(self.outcome, Outcome::Committed { .. })
    }
    /// Told it failed, with no doubt left: its id must not exist.
    pub fn definitely_failed(&self) -> bool {
        matches!(
            self.outcome,
            Outcome::Failed {
                ambiguous: false,
                ..
            }
        )
    }
}

/// A small deterministic generator (xorshift64*), one per worker.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A seed that differs from run to run (std's per-process hasher keys and the wall clock).
pub fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish()
}

/// Whether an error that ended a commit leaves its outcome open: FDB's maybe-committed
/// errors, and a commit cut short by the transaction's timeout or a cancellation (the request
/// may already be at the proxy).
fn commit_outcome_open(code: Option<ErrorCode>) -> bool {
    match code {
        None => true,
        Some(c) => {
            c.is_maybe_committed()
                || c == ErrorCode::TRANSACTION_TIMED_OUT
                || c == ErrorCode::TRANSACTION_CANCELLED
        }
    }
}

/// How one attempt ended.
enum Attempt {
    Committed { by_id: bool },
    Error(Stage, Option<ErrorCode>, String),
}

/// The retry loop's bookkeeping, shared by both drivers' loops.
struct Loop {
    record: TxRecord,
    /// An attempt ended maybe-committed: the next one reads the id first.
    check_id: bool,
}

impl Loop {
    fn new(transfer: Transfer, driver: &str) -> Loop {
        let now = Instant::now();
        Loop {
            record: TxRecord {
                transfer,
                driver: driver.to_string(),
                started: now,
                ended: now,
                attempts: 0,
                retried: Vec::new(),
                outcome: Outcome::Hung,
            },
            check_id: false,
        }
    }

    fn finish(mut self, outcome: Outcome) -> TxRecord {
        self.record.ended = Instant::now();
        self.record.outcome = outcome;
        self.record
    }

    /// After `on_error` accepted `code`.
    fn retried(&mut self, code: ErrorCode, stage: Stage) {
        if crate::sim::workloads::maybe_committed(code) {
            self.check_id = true;
        }
        self.record.retried.push((code, stage));
    }

    /// The outcome when the loop stops on `code` (from `stage`; `rejected` is what
    /// `on_error` answered, when it answered with another error).
    fn failed(
        self,
        stage: Stage,
        code: Option<ErrorCode>,
        error: String,
        rejected: Option<(Option<ErrorCode>, String)>,
    ) -> TxRecord {
        let maybe = code.is_some_and(crate::sim::workloads::maybe_committed);
        let ambiguous =
            self.check_id || maybe || (stage == Stage::Commit && commit_outcome_open(code));
        let (stage, code, error) = match rejected {
            Some((c, e)) if c != code => (Stage::OnError, c, e),
            _ => (stage, code, error),
        };
        self.finish(Outcome::Failed {
            code,
            stage,
            error,
            ambiguous,
        })
    }
}

impl Bank {
    pub fn new(prefix: &[u8], accounts: usize, initial: i64, timeout: Duration) -> Bank {
        Bank {
            prefix: prefix.to_vec(),
            accounts,
            initial,
            timeout,
            hang_limit: timeout * 3,
        }
    }

    fn key(&self, parts: &[&[u8]]) -> Vec<u8> {
        let mut k = self.prefix.clone();
        for p in parts {
            k.extend_from_slice(p);
        }
        k
    }

    pub fn account_key(&self, i: usize) -> Vec<u8> {
        self.key(&[b"acct/", format!("{i:04}").as_bytes()])
    }

    pub fn id_key(&self, id: u128) -> Vec<u8> {
        self.key(&[b"ids/", format!("{id:032x}").as_bytes()])
    }

    fn range(&self, sub: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let begin = self.key(&[sub]);
        let mut end = begin.clone();
        *end.last_mut().expect("non-empty") += 1;
        (begin, end)
    }

    /// The key range of the whole bank (for cleaning up).
    pub fn all(&self) -> (Vec<u8>, Vec<u8>) {
        let mut end = self.prefix.clone();
        end.push(0xff);
        (self.prefix.clone(), end)
    }

    pub fn expected_sum(&self) -> i64 {
        self.initial * self.accounts as i64
    }

    /// A random transfer between two different accounts.
    pub fn random_transfer(&self, rng: &mut Rng) -> Transfer {
        let from = rng.below(self.accounts as u64) as usize;
        let to = (from + 1 + rng.below(self.accounts as u64 - 1) as usize) % self.accounts;
        Transfer {
            id: ((rng.next_u64() as u128) << 64) | rng.next_u64() as u128,
            from,
            to,
            amount: 1 + rng.below(100) as i64,
        }
    }

    fn id_value(t: &Transfer) -> Vec<u8> {
        format!("{},{},{}", t.from, t.to, t.amount).into_bytes()
    }

    fn parse_balance(v: Option<&[u8]>) -> Result<i64, String> {
        let v = v.ok_or("an account is missing")?;
        std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad balance {v:?}"))
    }

    fn parse_id_value(v: &[u8]) -> Result<(usize, usize, i64), String> {
        let s = std::str::from_utf8(v).map_err(|_| format!("bad id value {v:?}"))?;
        let mut it = s.split(',');
        let mut next = || it.next().ok_or_else(|| format!("bad id value {s:?}"));
        let from = next()?.parse().map_err(|_| format!("bad id value {s:?}"))?;
        let to = next()?.parse().map_err(|_| format!("bad id value {s:?}"))?;
        let amount = next()?.parse().map_err(|_| format!("bad id value {s:?}"))?;
        Ok((from, to, amount))
    }

    /// Clears the bank's keys and opens every account at the initial balance.
    pub async fn init<D: Driver>(&self, db: &fdb_api::Database<D>) -> Result<(), fdb_api::Error> {
        let bank = self.clone();
        db.run(move |tx| {
            let bank = bank.clone();
            async move {
                let (b, e) = bank.all();
                tx.clear_range(&b, &e);
                for i in 0..bank.accounts {
                    tx.set(bank.account_key(i), bank.initial.to_string().as_bytes());
                }
                Ok(())
            }
        })
        .await
    }

    /// Clears every key of the bank.
    pub async fn clear<D: Driver>(&self, db: &fdb_api::Database<D>) -> Result<(), fdb_api::Error> {
        let (b, e) = self.all();
        db.run(move |tx| {
            let (b, e) = (b.clone(), e.clone());
            async move {
                tx.clear_range(&b, &e);
                Ok(())
            }
        })
        .await
    }

    /// One transfer through the tokio driver, to its end (or [`Bank::hang_limit`]).
    pub async fn transfer_tokio(
        &self,
        db: &fdb_driver_tokio::Database,
        t: Transfer,
        driver: &str,
    ) -> TxRecord {
        let lp = Loop::new(t, driver);
        let started = lp.record.started;
        let run = self.transfer_tokio_loop(db, t, lp);
        match tokio::time::timeout(self.hang_limit, run).await {
            Ok(r) => r,
            Err(_) => TxRecord {
                transfer: t,
                driver: driver.to_string(),
                started,
                ended: Instant::now(),
                attempts: 0,
                retried: Vec::new(),
                outcome: Outcome::Hung,
            },
        }
    }

    /// One transfer through any driver, to its end (no hang limit of its own: the
    /// simulation's time limit is one).
    pub async fn transfer<D: Driver>(
        &self,
        db: &fdb_api::Database<D>,
        t: Transfer,
        driver: &str,
    ) -> TxRecord {
        self.transfer_tokio_loop(db, t, Loop::new(t, driver)).await
    }

    async fn transfer_tokio_loop<D: Driver>(
        &self,
        db: &fdb_api::Database<D>,
        t: Transfer,
        mut lp: Loop,
    ) -> TxRecord {
        use fdb_api::Error;
        let err = |stage: Stage, e: Error| Attempt::Error(stage, e.code(), e.to_string());
        let tx = db.create_transaction();
        tx.set_option(TransactionOption::Timeout(self.timeout))
            .expect("timeout is implemented");
        loop {
            lp.record.attempts += 1;
            let attempt = async {
                tx.get_read_version()
                    .await
                    .map_err(|e| err(Stage::ReadVersion, e))?;
                if lp.check_id {
                    let found = tx
                        .get(self.id_key(t.id))
                        .await
                        .map_err(|e| err(Stage::IdCheck, e))?;
                    if found.is_some() {
                        return Ok(Attempt::Committed { by_id: true });
                    }
                }
                let (ka, kb) = (self.account_key(t.from), self.account_key(t.to));
                let a = tx.get(&ka).await.map_err(|e| err(Stage::Read, e))?;
                let b = tx.get(&kb).await.map_err(|e| err(Stage::Read, e))?;
                let parse = |v: Option<Bytes>| {
                    Self::parse_balance(v.as_deref())
                        .map_err(|e| Attempt::Error(Stage::Read, None, e))
                };
                let (a, b) = (parse(a)?, parse(b)?);
                tx.set(&ka, (a - t.amount).to_string().as_bytes());
                tx.set(&kb, (b + t.amount).to_string().as_bytes());
                tx.set(self.id_key(t.id), Self::id_value(&t));
                tx.commit().await.map_err(|e| err(Stage::Commit, e))?;
                Ok::<_, Attempt>(Attempt::Committed { by_id: false })
            }
            .await;
            match attempt.unwrap_or_else(|a| a) {
                Attempt::Committed { by_id } => return lp.finish(Outcome::Committed { by_id }),
                Attempt::Error(stage, None, e) => return lp.failed(stage, None, e, None),
                Attempt::Error(stage, Some(code), e) => match tx.on_error(code).await {
                    Ok(()) => lp.retried(code, stage),
                    Err(r) => {
                        let rejected = Some((r.code(), r.to_string()));
                        return lp.failed(stage, Some(code), e, rejected);
                    }
                },
            }
        }
    }

    /// One transfer through the mio driver (each call is bounded by the driver's own limit;
    /// the loop stops after [`Bank::hang_limit`]).
    pub fn transfer_mio(
        &self,
        db: &mut fdb_driver_mio::Database,
        t: Transfer,
        driver: &str,
    ) -> TxRecord {
        use fdb_driver_mio::Error;
        let err = |stage: Stage, e: Error| Attempt::Error(stage, e.code(), e.to_string());
        let mut lp = Loop::new(t, driver);
        let tx = db.create_transaction();
        // A refused option would fail the next read, which is recorded there.
        tx.set_option(TransactionOption::Timeout(self.timeout))
            .expect("timeout is implemented");
        loop {
            if lp.record.started.elapsed() > self.hang_limit {
                return lp.finish(Outcome::Hung);
            }
            lp.record.attempts += 1;
            let attempt = || {
                tx.get_read_version()
                    .map_err(|e| err(Stage::ReadVersion, e))?;
                if lp.check_id {
                    let found = tx
                        .get(self.id_key(t.id))
                        .map_err(|e| err(Stage::IdCheck, e))?;
                    if found.is_some() {
                        return Ok(Attempt::Committed { by_id: true });
                    }
                }
                let (ka, kb) = (self.account_key(t.from), self.account_key(t.to));
                let a = tx.get(&ka).map_err(|e| err(Stage::Read, e))?;
                let b = tx.get(&kb).map_err(|e| err(Stage::Read, e))?;
                let parse = |v: Option<Bytes>| {
                    Self::parse_balance(v.as_deref())
                        .map_err(|e| Attempt::Error(Stage::Read, None, e))
                };
                let (a, b) = (parse(a)?, parse(b)?);
                tx.set(&ka, (a - t.amount).to_string().as_bytes());
                tx.set(&kb, (b + t.amount).to_string().as_bytes());
                tx.set(self.id_key(t.id), Self::id_value(&t));
                tx.commit().map_err(|e| err(Stage::Commit, e))?;
                Ok::<_, Attempt>(Attempt::Committed { by_id: false })
            };
            match attempt().unwrap_or_else(|a| a) {
                Attempt::Committed { by_id } => return lp.finish(Outcome::Committed { by_id }),
                Attempt::Error(stage, None, e) => return lp.failed(stage, None, e, None),
                Attempt::Error(stage, Some(code), e) => match tx.on_error(code) {
                    Ok(()) => lp.retried(code, stage),
                    Err(r) => {
                        let rejected = Some((r.code(), r.to_string()));
                        return lp.failed(stage, Some(code), e, rejected);
                    }
                },
            }
        }
    }

    /// Every balance and every id key, read in one transaction through the tokio driver
    /// (retried for up to `limit`).
    pub async fn read_state(
        &self,
        db: &fdb_driver_tokio::Database,
        limit: Duration,
    ) -> Result<BankState, String> {
        let start = Instant::now();
        let mut last = String::new();
        while start.elapsed() < limit {
            match tokio::time::timeout(Duration::from_secs(30), self.read_once(db)).await {
                Ok(Ok(state)) => return Ok(state),
                Ok(Err(e)) => last = e,
                Err(_) => last = "no answer within 30 s".into(),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Err(format!("cannot read the bank within {limit:?}: {last}"))
    }

    /// The bank as one transaction reads it (through the retry loop), through any driver.
    pub async fn read_once<D: Driver>(
        &self,
        db: &fdb_api::Database<D>,
    ) -> Result<BankState, String> {
        let bank = self.clone();
        let (accts, ids) = db
            .run(move |tx| {
                let bank = bank.clone();
                async move {
                    let (ab, ae) = bank.range(b"acct/");
                    let (ib, ie) = bank.range(b"ids/");
                    let accts = tx.get_range(&ab, &ae, 0).await?;
                    let ids = tx.get_range(&ib, &ie, 0).await?;
                    Ok((accts, ids))
                }
            })
            .await
            .map_err(|e| e.to_string())?;
        self.parse_state(&accts, &ids)
    }

    fn parse_state(
        &self,
        accts: &[fdb_protocol::messages::types::KeyValue],
        ids: &[fdb_protocol::messages::types::KeyValue],
    ) -> Result<BankState, String> {
        let mut balances = vec![None; self.accounts];
        for kv in accts {
            let i = (0..self.accounts)
                .find(|&i| self.account_key(i) == kv.key.as_ref())
                .ok_or_else(|| format!("unexpected account key {:?}", kv.key))?;
            balances[i] = Some(Self::parse_balance(Some(&kv.value))?);
        }
        let balances = balances
            .into_iter()
            .enumerate()
            .map(|(i, b)| b.ok_or_else(|| format!("account {i} is missing")))
            .collect::<Result<Vec<_>, _>>()?;
        let (ib, _) = self.range(b"ids/");
        let mut map = HashMap::new();
        for kv in ids {
            let hex = std::str::from_utf8(&kv.key[ib.len()..])
                .ok()
                .and_then(|h| u128::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad id key {:?}", kv.key))?;
            map.insert(hex, Self::parse_id_value(&kv.value)?);
        }
        Ok(BankState { balances, ids: map })
    }
}

/// The bank as the database holds it.
#[derive(Clone, Debug)]
pub struct BankState {
    pub balances: Vec<i64>,
    /// Every id key: id → (from, to, amount).
    pub ids: HashMap<u128, (usize, usize, i64)>,
}

/// What [`BankState::judge`] found wrong, and counts for the report.
#[derive(Clone, Debug, Default)]
pub struct Verdict {
    /// Broken invariants, one line each.
    pub violations: Vec<String>,
    /// Failed transfers (told failed, or hung) whose id key exists.
    pub failed_but_applied: usize,
    /// Of those, the ones told failed without doubt (the worst case).
    pub definitely_failed_but_applied: usize,
}

impl BankState {
    pub fn sum(&self) -> i64 {
        self.balances.iter().sum()
    }

    /// Judges `records` against this state (see the module docs). `grace` is how far past
    /// the bank's timeout a transfer may end.
    pub fn judge(&self, bank: &Bank, records: &[TxRecord], grace: Duration) -> Verdict {
        let mut v = Verdict::default();
        if self.sum() != bank.expected_sum() {
            v.violations.push(format!(
                "sum of balances is {}, expected {}",
                self.sum(),
                bank.expected_sum()
            ));
        }
        let mut expected = vec![bank.initial; bank.accounts];
        for (from, to, amount) in self.ids.values() {
            match (expected.get(*from), expected.get(*to)) {
                (Some(_), Some(_)) => {
                    expected[*from] -= amount;
                    expected[*to] += amount;
                }
                _ => v
                    .violations
                    .push(format!("id key names accounts {from},{to}")),
            }
        }
        if expected != self.balances {
            let off: Vec<String> = (0..bank.accounts)
                .filter(|&i| expected[i] != self.balances[i])
                .map(|i| format!("#{i}: {} vs {}", self.balances[i], expected[i]))
                .collect();
            v.violations.push(format!(
                "balances differ from initial + net of the id keys (applied twice or lost?): {}",
                off.join(", ")
            ));
        }
        let mut lost = 0;
        let mut told_failed_applied = Vec::new();
        let mut long = 0;
        for r in records {
            let present = self.ids.get(&r.transfer.id);
            if let Some(&(f, t, a)) = present {
                if (f, t, a) != (r.transfer.from, r.transfer.to, r.transfer.amount) {
                    v.violations
                        .push(format!("id {:032x} holds another transfer", r.transfer.id));
                }
            }
            if r.committed() && present.is_none() {
                lost += 1;
            }
            if !r.committed() && present.is_some() {
                v.failed_but_applied += 1;
                if r.definitely_failed() {
                    v.definitely_failed_but_applied += 1;
                    told_failed_applied.push(r);
                }
            }
            if r.duration() > bank.timeout + grace {
                long += 1;
            }
        }
        if lost > 0 {
            v.violations.push(format!(
                "{lost} transfers told committed are not in the database"
            ));
        }
        if !told_failed_applied.is_empty() {
            let codes: Vec<String> = told_failed_applied
                .iter()
                .take(5)
                .map(|r| match &r.outcome {
                    Outcome::Failed { error, stage, .. } => format!("{error} at {stage:?}"),
                    o => format!("{o:?}"),
                })
                .collect();
            v.violations.push(format!(
                "{} transfers told failed were applied (e.g. {})",
                told_failed_applied.len(),
                codes.join("; ")
            ));
        }
        let hung = records
            .iter()
            .filter(|r| r.outcome == Outcome::Hung)
            .count();
        if hung > 0 {
            v.violations.push(format!(
                "{hung} transfers hung (no end after {:?})",
                bank.hang_limit
            ));
        }
        if long > hung {
            v.violations.push(format!(
                "{} transfers ran past their {:?} timeout (+{grace:?})",
                long - hung,
                bank.timeout
            ));
        }
        v
    }
}

/// Per driver, what the transfers of a phase did, for the report.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub transfers: usize,
    pub committed: usize,
    /// Committed, as found by their id after a maybe-committed error.
    pub committed_by_id: usize,
    pub failed: usize,
    pub hung: usize,
    /// Hung transfers whose id key exists.
    pub hung_applied: usize,
    pub attempts: u64,
    pub longest: Duration,
    /// `on_error` retried these (code, call) this often.
    pub retried: BTreeMap<(u16, Stage), usize>,
    /// These reached the application: (code or 0 for a non-FDB error, call) → (count, of
    /// which applied).
    pub to_app: BTreeMap<(u16, Stage), (usize, usize)>,
    /// From the fault to the end of the first transfer begun after it that committed.
    pub first_success_after_fault: Option<Duration>,
}

impl Tally {
    /// Tallies `records` by driver; `fault` is when the fault was injected.
    pub fn by_driver(
        records: &[TxRecord],
        state: Option<&BankState>,
        fault: Option<Instant>,
    ) -> BTreeMap<String, Tally> {
        let mut out: BTreeMap<String, Tally> = BTreeMap::new();
        for r in records {
            let t = out.entry(r.driver.clone()).or_default();
            t.transfers += 1;
            t.attempts += r.attempts as u64;
            t.longest = t.longest.max(r.duration());
            for (c, s) in &r.retried {
                *t.retried.entry((c.0, *s)).or_default() += 1;
            }
            let applied = state.is_some_and(|s| s.ids.contains_key(&r.transfer.id));
            match &r.outcome {
                Outcome::Committed { by_id } => {
                    t.committed += 1;
                    t.committed_by_id += usize::from(*by_id);
                    if let Some(f) = fault {
                        if r.started >= f {
                            let d = r.ended - f;
                            t.first_success_after_fault =
                                Some(t.first_success_after_fault.map_or(d, |x| x.min(d)));
                        }
                    }
                }
                Outcome::Failed { code, stage, .. } => {
                    t.failed += 1;
                    let e = t
                        .to_app
                        .entry((code.map_or(0, |c| c.0), *stage))
                        .or_default();
                    e.0 += 1;
                    e.1 += usize::from(applied);
                }
                Outcome::Hung => {
                    t.hung += 1;
                    t.hung_applied += usize::from(applied);
                }
            }
        }
        out
    }
}

/// `name (code)` for a code as tallied (0: not an FDB error).
pub fn code_name(code: u16) -> String {
    if code == 0 {
        "non-FDB error".into()
    } else {
        ErrorCode(code).to_string()
    }
}
