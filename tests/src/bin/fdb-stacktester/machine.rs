//! One stack machine (`bindingApiTester.md`): reads its instructions under its prefix and
//! runs them against a shared transaction map, pushing results (and errors) on its stack.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use fdb_api::driver::Driver;
use fdb_api::{
    tenant_management, ConflictRangeType, Database, Error, ErrorCode, KeySelector, KeyValue,
    RangeOptions, StreamingMode, Tenant, Transaction, TransactionOption,
};
use fdb_protocol::messages::commit::mutation_type as mt;
use fdb_protocol::tuple::{pack_into_with_versionstamp_like_python, unpack, BigInt, Element};

use crate::directory::DirectoryState;
use crate::stack::{Item, Stack};
use crate::value::*;

/// A machine (or a thread's) run to completion.
pub type Run = Pin<Box<dyn Future<Output = Result<(), Fatal>> + Send>>;

/// Starts a run concurrently with the caller; the returned future waits for its end.
pub type Spawner = Arc<dyn Fn(Run) -> Run + Send + Sync>;

/// What every machine of one tester shares: the database, the transaction map, the way to
/// start a thread.
pub struct Shared<D: Driver> {
    pub db: Database<D>,
    tr_map: Mutex<HashMap<Vec<u8>, Transaction<D>>>,
    spawn: Spawner,
}

impl<D: Driver> Shared<D> {
    pub fn new(db: Database<D>, spawn: Spawner) -> Arc<Self> {
        Arc::new(Shared {
            db,
            tr_map: Mutex::new(HashMap::new()),
            spawn,
        })
    }
}

/// Where a read goes: the current transaction (optionally as a snapshot read), or a retry
/// loop of its own on the database (`_DATABASE`) or the active tenant (`_TENANT`).
#[derive(Clone)]
pub enum Target<D: Driver> {
    Tx(Transaction<D>, bool),
    Loop(Looper<D>),
}

/// What a `_DATABASE` or `_TENANT` instruction runs its retry loop on.
#[derive(Clone)]
pub enum Looper<D: Driver> {
    Db(Database<D>),
    Tenant(Tenant<D>),
}

impl<D: Driver> Looper<D> {
    pub async fn run<T, F, Fut>(&self, f: F) -> Result<T, Error>
    where
        F: FnMut(Transaction<D>) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        match self {
            Looper::Db(db) => db.run(f).await,
            Looper::Tenant(t) => t.run(f).await,
        }
    }
}

/// The instruction's variant, from its name's suffix.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Variant {
    Plain,
    Database,
    Snapshot,
    /// In a retry loop of the active tenant (of the database without one).
    Tenant,
}

pub struct Machine<D: Driver> {
    pub shared: Arc<Shared<D>>,
    prefix: Vec<u8>,
    pub stack: Stack,
    tr_name: Vec<u8>,
    last_version: i64,
    /// The threads started (in a mutex only so that the machine is `Sync`).
    threads: Mutex<Vec<Run>>,
    pub dirs: DirectoryState,
    /// The active tenant (`TENANT_SET_ACTIVE`): new transactions and `_TENANT` instructions
    /// run in it.
    tenant: Option<Tenant<D>>,
}

/// Starts `machine` through the shared spawner.
pub fn spawn_machine<D: Driver>(machine: Machine<D>) -> Run {
    let spawn = machine.shared.spawn.clone();
    spawn(Box::pin(machine.run()))
}

impl<D: Driver> Machine<D> {
    pub fn new(shared: Arc<Shared<D>>, prefix: Vec<u8>) -> Self {
        Machine {
            shared,
            tr_name: prefix.clone(),
            prefix,
            stack: Stack::default(),
            last_version: 0,
            threads: Mutex::new(Vec::new()),
            dirs: DirectoryState::default(),
            tenant: None,
        }
    }

    /// Runs every instruction, then waits for the threads this machine started.
    pub async fn run(mut self) -> Result<(), Fatal> {
        let instructions = self.instructions().await?;
        // FDB_STACKTESTER_TRACE=1 prints each instruction as it starts (to find a hang).
        let trace = std::env::var_os("FDB_STACKTESTER_TRACE").is_some_and(|v| v == "1");
        for (idx, kv) in instructions.iter().enumerate() {
            let t: Element<'static> = unpack::<Element>(&kv.value)
                .map_err(|e| Fatal(format!("instruction {idx} is no tuple: {e}")))?
                .into_owned();
            let items = t.as_tuple().unwrap_or_default();
            let Some(name) = items.first().and_then(|e| e.as_str()) else {
                return Err(Fatal(format!("instruction {idx} has no op: {t:?}")));
            };
            let (op, variant) = if let Some(op) = name.strip_suffix("_DATABASE") {
                (op, Variant::Database)
            } else if let Some(op) = name.strip_suffix("_SNAPSHOT") {
                (op, Variant::Snapshot)
            } else if let Some(op) = name.strip_suffix("_TENANT") {
                (op, Variant::Tenant)
            } else {
                (name, Variant::Plain)
            };
            if trace {
                eprintln!(
                    "fdb-stacktester: {:?} {idx} {name} {:?}",
                    String::from_utf8_lossy(&self.prefix),
                    items.get(1)
                );
            }
            match self.step(idx, op, variant, items.get(1)).await {
                Ok(()) => {}
                Err(Failure::Fdb(code)) => self.stack.push_value(idx, error_element(code)),
                Err(Failure::Fatal(f)) => {
                    return Err(Fatal(format!("instruction {idx} ({name}): {f}")));
                }
            }
        }
        let threads = std::mem::take(self.threads.get_mut().expect("threads"));
        for t in threads {
            t.await?;
        }
        Ok(())
    }

    /// The instructions: every key under `(prefix,)`, read in one retry loop.
    async fn instructions(&self) -> Result<Vec<KeyValue>, Fatal> {
        let (begin, end) =
            fdb_protocol::tuple::range(&(Element::Bytes(self.prefix.clone().into()),));
        self.shared
            .db
            .run(|tx| {
                let (b, e) = (begin.clone(), end.clone());
                async move { tx.get_range(&b, &e, 0).await }
            })
            .await
            .map_err(|e| Fatal(format!("reading the instructions: {e}")))
    }

    /// The current transaction; a name not used before gets a new one (in the active
    /// tenant, if any).
    pub fn current_tx(&self) -> Transaction<D> {
        let mut map = self.shared.tr_map.lock().expect("transaction map");
        map.entry(self.tr_name.clone())
            .or_insert_with(|| self.new_tx())
            .clone()
    }

    /// A new transaction, in the active tenant if there is one.
    fn new_tx(&self) -> Transaction<D> {
        match &self.tenant {
            Some(t) => t.create_transaction(),
            None => self.shared.db.create_transaction(),
        }
    }

    /// The retry loop of a `_DATABASE` or `_TENANT` instruction, `None` for the others.
    fn looper(&self, variant: Variant) -> Option<Looper<D>> {
        match (variant, &self.tenant) {
            (Variant::Database, _) | (Variant::Tenant, None) => {
                Some(Looper::Db(self.shared.db.clone()))
            }
            (Variant::Tenant, Some(t)) => Some(Looper::Tenant(t.clone())),
            _ => None,
        }
    }

    fn target(&self, variant: Variant) -> Target<D> {
        if let Some(l) = self.looper(variant) {
            return Target::Loop(l);
        }
        match variant {
            Variant::Snapshot => Target::Tx(self.current_tx(), true),
            _ => Target::Tx(self.current_tx(), false),
        }
    }

    async fn pop_bytes(&mut self) -> Result<Vec<u8>, Fatal> {
        as_bytes(&self.stack.pop().await?)
    }

    async fn pop_i64(&mut self) -> Result<i64, Fatal> {
        as_i64(&self.stack.pop().await?)
    }

    fn push(&mut self, idx: usize, v: Element<'static>) {
        self.stack.push_value(idx, v);
    }

    fn push_bytes(&mut self, idx: usize, v: &[u8]) {
        self.push(idx, bytes(v.to_vec()));
    }

    async fn step(
        &mut self,
        idx: usize,
        op: &str,
        variant: Variant,
        arg: Option<&Element<'static>>,
    ) -> Result<(), Failure> {
        let looper = self.looper(variant);
        match op {
            "PUSH" => {
                let v = arg
                    .cloned()
                    .ok_or_else(|| Fatal("PUSH without an item".into()))?;
                self.push(idx, v);
            }
            "DUP" => {
                let top = self.stack.top()?;
                self.stack.push(top.index, top.item);
            }
            "EMPTY_STACK" => self.stack.clear(),
            "SWAP" => {
                let depth = as_usize(&self.stack.pop().await?)?;
                self.stack.swap(depth)?;
            }
            "POP" => {
                self.stack.pop().await?;
            }
            "SUB" => {
                let a = as_bigint(&self.stack.pop().await?)?;
                let b = as_bigint(&self.stack.pop().await?)?;
                self.push(idx, int_element(sub(&a, &b)?));
            }
            "CONCAT" => {
                let a = self.stack.pop().await?;
                let b = self.stack.pop().await?;
                let v = match (&a, &b) {
                    (Element::String(x), Element::String(y)) => string(format!("{x}{y}")),
                    _ => {
                        let mut x = as_bytes(&a)?;
                        x.extend_from_slice(&as_bytes(&b)?);
                        bytes(x)
                    }
                };
                self.push(idx, v);
            }
            "WAIT_FUTURE" => {
                let (i, v) = self.stack.pop_entry().await?;
                self.push(i, v);
            }
            "NEW_TRANSACTION" => {
                let tx = self.new_tx();
                self.shared
                    .tr_map
                    .lock()
                    .expect("transaction map")
                    .insert(self.tr_name.clone(), tx);
            }
            "USE_TRANSACTION" => {
                self.tr_name = self.pop_bytes().await?;
                self.current_tx();
            }
            "ON_ERROR" => {
                let code = self.pop_i64().await?;
                let code = u16::try_from(code).map_err(|_| Fatal(format!("error code {code}")))?;
                let tx = self.current_tx();
                self.stack.push(
                    idx,
                    Item::started(async move {
                        settle(tx.on_error(ErrorCode(code)).await, |()| not_present())
                    }),
                );
            }
            "GET" => {
                let key = self.pop_bytes().await?;
                let v = match self.target(variant) {
                    Target::Tx(tx, snapshot) => {
                        if snapshot {
                            tx.snapshot_get(&key).await
                        } else {
                            tx.get(&key).await
                        }
                    }
                    Target::Loop(db) => {
                        db.run(|tx| {
                            let key = key.clone();
                            async move { tx.get(&key).await }
                        })
                        .await
                    }
                }?;
                self.push(idx, v.map_or_else(not_present, |v| bytes(v.to_vec())));
            }
            "GET_ESTIMATED_RANGE_SIZE" => {
                let begin = self.pop_bytes().await?;
                let end = self.pop_bytes().await?;
                self.current_tx()
                    .get_estimated_range_size_bytes(&begin, &end)
                    .await?;
                self.push_bytes(idx, b"GOT_ESTIMATED_RANGE_SIZE");
            }
            "GET_RANGE_SPLIT_POINTS" => {
                let begin = self.pop_bytes().await?;
                let end = self.pop_bytes().await?;
                let chunk = self.pop_i64().await?;
                self.current_tx()
                    .get_range_split_points(&begin, &end, chunk)
                    .await?;
                self.push_bytes(idx, b"GOT_RANGE_SPLIT_POINTS");
            }
            "GET_KEY" => {
                let key = self.pop_bytes().await?;
                let or_equal = as_bool(&self.stack.pop().await?)?;
                let offset = self.pop_i64().await?;
                let prefix = self.pop_bytes().await?;
                let offset =
                    i32::try_from(offset).map_err(|_| Fatal(format!("offset {offset}")))?;
                let sel = KeySelector::new(Bytes::from(key), or_equal, offset);
                let result = match self.target(variant) {
                    Target::Tx(tx, snapshot) => tx.get_key(sel, snapshot).await,
                    Target::Loop(db) => {
                        db.run(|tx| {
                            let sel = sel.clone();
                            async move { tx.get_key(sel, false).await }
                        })
                        .await
                    }
                }?;
                let v = if result.starts_with(&prefix) {
                    result.to_vec()
                } else if result.as_ref() < prefix.as_slice() {
                    prefix
                } else {
                    strinc(&prefix)?
                };
                self.push(idx, bytes(v));
            }
            "GET_RANGE" => {
                let begin = self.pop_bytes().await?;
                let end = self.pop_bytes().await?;
                let opts = self.pop_range_options().await?;
                let rows = self
                    .read_range(
                        variant,
                        KeySelector::first_greater_or_equal(Bytes::from(begin)),
                        KeySelector::first_greater_or_equal(Bytes::from(end)),
                        opts,
                    )
                    .await?;
                self.push_range(idx, &rows, None);
            }
            "GET_RANGE_STARTS_WITH" => {
                let prefix = self.pop_bytes().await?;
                let opts = self.pop_range_options().await?;
                let end = strinc(&prefix)?;
                let rows = self
                    .read_range(
                        variant,
                        KeySelector::first_greater_or_equal(Bytes::from(prefix)),
                        KeySelector::first_greater_or_equal(Bytes::from(end)),
                        opts,
                    )
                    .await?;
                self.push_range(idx, &rows, None);
            }
            "GET_RANGE_SELECTOR" => {
                let begin = self.pop_selector().await?;
                let end = self.pop_selector().await?;
                let opts = self.pop_range_options().await?;
                let prefix = self.pop_bytes().await?;
                let rows = self.read_range(variant, begin, end, opts).await?;
                self.push_range(idx, &rows, Some(&prefix));
            }
            "GET_READ_VERSION" => {
                self.last_version = self.current_tx().get_read_version().await?;
                self.push_bytes(idx, b"GOT_READ_VERSION");
            }
            "GET_VERSIONSTAMP" => {
                let f = self.current_tx().get_versionstamp();
                self.stack.push(
                    idx,
                    Item::future(async move { settle(f.await, |v| bytes(v.to_vec())) }),
                );
            }
            "SET" => {
                let key = self.pop_bytes().await?;
                let value = self.pop_bytes().await?;
                self.write(idx, &looper, move |tx| tx.set(&key, &value))
                    .await?;
            }
            "CLEAR" => {
                let key = self.pop_bytes().await?;
                self.write(idx, &looper, move |tx| tx.clear(&key)).await?;
            }
            "CLEAR_RANGE" => {
                let begin = self.pop_bytes().await?;
                let end = self.pop_bytes().await?;
                self.write(idx, &looper, move |tx| tx.clear_range(&begin, &end))
                    .await?;
            }
            "CLEAR_RANGE_STARTS_WITH" => {
                let prefix = self.pop_bytes().await?;
                let end = strinc(&prefix)?;
                self.write(idx, &looper, move |tx| tx.clear_range(&prefix, &end))
                    .await?;
            }
            "ATOMIC_OP" => {
                let name = self.stack.pop().await?;
                let name = name
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| {
                        as_bytes(&name)
                            .ok()
                            .map(|b| String::from_utf8_lossy(&b).into_owned())
                    })
                    .unwrap_or_default();
                let kind = mutation_type(&name)?;
                let key = self.pop_bytes().await?;
                let param = self.pop_bytes().await?;
                self.write(idx, &looper, move |tx| {
                    tx.atomic_op_code(&key, &param, kind)
                })
                .await?;
            }
            "SET_READ_VERSION" => self.current_tx().set_read_version(self.last_version),
            "READ_CONFLICT_RANGE" | "WRITE_CONFLICT_RANGE" => {
                let begin = self.pop_bytes().await?;
                let end = self.pop_bytes().await?;
                let kind = conflict_kind(op);
                self.current_tx().add_conflict_range(&begin, &end, kind)?;
                self.push_bytes(idx, b"SET_CONFLICT_RANGE");
            }
            "READ_CONFLICT_KEY" | "WRITE_CONFLICT_KEY" => {
                let key = self.pop_bytes().await?;
                let mut end = key.clone();
                end.push(0);
                let kind = conflict_kind(op);
                self.current_tx().add_conflict_range(&key, &end, kind)?;
                self.push_bytes(idx, b"SET_CONFLICT_KEY");
            }
            "DISABLE_WRITE_CONFLICT" => self
                .current_tx()
                .set_option(TransactionOption::NextWriteNoWriteConflictRange)?,
            "COMMIT" => {
                let tx = self.current_tx();
                self.stack.push(
                    idx,
                    Item::started(async move { settle(tx.commit().await, |_| not_present()) }),
                );
            }
            "RESET" => self.current_tx().reset(),
            "CANCEL" => self.current_tx().cancel(),
            "GET_COMMITTED_VERSION" => {
                self.last_version = self.current_tx().get_committed_version().await?;
                self.push_bytes(idx, b"GOT_COMMITTED_VERSION");
            }
            "GET_APPROXIMATE_SIZE" => {
                self.current_tx().get_approximate_size().await?;
                self.push_bytes(idx, b"GOT_APPROXIMATE_SIZE");
            }
            "TUPLE_PACK" => {
                let items = self.pop_counted().await?;
                self.push(idx, bytes(pack(&items)));
            }
            "TUPLE_PACK_WITH_VERSIONSTAMP" => {
                let prefix = self.pop_bytes().await?;
                let items = self.pop_counted().await?;
                let t = Element::Tuple(items);
                match t.count_incomplete_versionstamp() {
                    0 => self.push_bytes(idx, b"ERROR: NONE"),
                    1 => {
                        let mut out = prefix;
                        pack_into_with_versionstamp_like_python(&t, &mut out)
                            .map_err(|e| Fatal(format!("pack_with_versionstamp: {e}")))?;
                        self.push_bytes(idx, b"OK");
                        self.push(idx, bytes(out));
                    }
                    _ => self.push_bytes(idx, b"ERROR: MULTIPLE"),
                }
            }
            "TUPLE_UNPACK" => {
                let packed = self.pop_bytes().await?;
                let t = unpack::<Element>(&packed)
                    .map_err(|e| Fatal(format!("TUPLE_UNPACK: {e}")))?
                    .into_owned();
                for e in t.as_tuple().unwrap_or_default() {
                    self.push(idx, bytes(pack(std::slice::from_ref(e))));
                }
            }
            "TUPLE_SORT" => {
                let packed = self.pop_counted().await?;
                let mut keys = Vec::with_capacity(packed.len());
                for p in &packed {
                    let t = unpack::<Element>(&as_bytes(p)?)
                        .map_err(|e| Fatal(format!("TUPLE_SORT: {e}")))?
                        .into_owned();
                    keys.push(pack(t.as_tuple().unwrap_or_default()));
                }
                keys.sort();
                for k in keys {
                    self.push(idx, bytes(k));
                }
            }
            "TUPLE_RANGE" => {
                let items = self.pop_counted().await?;
                let p = pack(&items);
                let (mut begin, mut end) = (p.clone(), p);
                begin.push(0x00);
                end.push(0xff);
                self.push(idx, bytes(begin));
                self.push(idx, bytes(end));
            }
            "ENCODE_FLOAT" => {
                let b: [u8; 4] = self
                    .pop_bytes()
                    .await?
                    .try_into()
                    .map_err(|_| Fatal("ENCODE_FLOAT needs 4 bytes".into()))?;
                self.push(idx, Element::Float(f32::from_be_bytes(b)));
            }
            "ENCODE_DOUBLE" => {
                let b: [u8; 8] = self
                    .pop_bytes()
                    .await?
                    .try_into()
                    .map_err(|_| Fatal("ENCODE_DOUBLE needs 8 bytes".into()))?;
                self.push(idx, Element::Double(f64::from_be_bytes(b)));
            }
            "DECODE_FLOAT" => {
                let v = self.stack.pop().await?;
                let f = v
                    .as_f32()
                    .ok_or_else(|| Fatal(format!("DECODE_FLOAT of {v:?}")))?;
                self.push_bytes(idx, &f.to_be_bytes());
            }
            "DECODE_DOUBLE" => {
                let v = self.stack.pop().await?;
                let d = v
                    .as_f64()
                    .ok_or_else(|| Fatal(format!("DECODE_DOUBLE of {v:?}")))?;
                self.push_bytes(idx, &d.to_be_bytes());
            }
            "LOG_STACK" => {
                let prefix = self.pop_bytes().await?;
                let mut batch = Vec::new();
                while self.stack.len() > 0 {
                    let stack_index = self.stack.len() - 1;
                    let (i, v) = self.stack.pop_entry().await?;
                    batch.push((stack_index, i, v));
                    if batch.len() == 100 {
                        self.log_stack(&prefix, std::mem::take(&mut batch)).await?;
                    }
                }
                self.log_stack(&prefix, batch).await?;
            }
            "START_THREAD" => {
                let prefix = self.pop_bytes().await?;
                let m = Machine::new(self.shared.clone(), prefix);
                self.threads
                    .get_mut()
                    .expect("threads")
                    .push(spawn_machine(m));
            }
            "WAIT_EMPTY" => {
                let prefix = self.pop_bytes().await?;
                let end = strinc(&prefix)?;
                self.shared
                    .db
                    .run(|tx| {
                        let (b, e) = (prefix.clone(), end.clone());
                        async move {
                            if tx.get_range(&b, &e, 1).await?.is_empty() {
                                Ok(())
                            } else {
                                Err(Error::from(ErrorCode::NOT_COMMITTED))
                            }
                        }
                    })
                    .await?;
                self.push_bytes(idx, b"WAITED_FOR_EMPTY");
            }
            "TENANT_CREATE" => {
                let name = self.pop_bytes().await?;
                tenant_management::create_tenant(&self.shared.db, &name).await?;
                self.push(idx, not_present());
            }
            "TENANT_DELETE" => {
                let name = self.pop_bytes().await?;
                tenant_management::delete_tenant(&self.shared.db, &name).await?;
                self.push(idx, not_present());
            }
            "TENANT_SET_ACTIVE" => {
                let name = self.pop_bytes().await?;
                // The tenant is active even if its lookup fails (then its transactions fail
                // with the lookup's error), as in the Python tester.
                let tenant = self.shared.db.open_tenant(&name);
                self.tenant = Some(tenant.clone());
                tenant.get_id().await?;
                self.push_bytes(idx, b"SET_ACTIVE_TENANT");
            }
            "TENANT_CLEAR_ACTIVE" => self.tenant = None,
            "TENANT_LIST" => {
                let begin = self.pop_bytes().await?;
                let end = self.pop_bytes().await?;
                let limit = as_bigint(&self.stack.pop().await?)?;
                let names = list_tenant_names(&self.shared.db, begin, end, &limit).await?;
                let names: Vec<_> = names.into_iter().map(bytes).collect();
                self.push(idx, bytes(pack(&names)));
            }
            "TENANT_GET_ID" => match self.tenant.clone() {
                Some(t) => {
                    t.get_id().await?;
                    self.push_bytes(idx, b"GOT_TENANT_ID");
                }
                None => self.push_bytes(idx, b"NO_ACTIVE_TENANT"),
            },
            // Options, watches, cancellation, retry limits and timeouts have tests of their
            // own in this workspace.
            "UNIT_TESTS" => {}
            _ if op.starts_with("DIRECTORY_") => self.directory_op(idx, op, variant).await?,
            _ => return Err(Fatal(format!("unknown op {op}")).into()),
        }
        Ok(())
    }

    /// A write on the current transaction, or (`_DATABASE`) in a retry loop of its own,
    /// which pushes `RESULT_NOT_PRESENT`.
    async fn write(
        &mut self,
        idx: usize,
        looper: &Option<Looper<D>>,
        f: impl Fn(&Transaction<D>),
    ) -> Result<(), Failure> {
        let Some(looper) = looper else {
            f(&self.current_tx());
            return Ok(());
        };
        looper
            .run(|tx| {
                f(&tx);
                async { Ok(()) }
            })
            .await?;
        self.push(idx, not_present());
        Ok(())
    }

    async fn log_stack(
        &self,
        prefix: &[u8],
        batch: Vec<(usize, usize, Element<'static>)>,
    ) -> Result<(), Failure> {
        let rows: Vec<(Vec<u8>, Vec<u8>)> = batch
            .into_iter()
            .map(|(stack_index, i, v)| {
                let key = pack_with_prefix(prefix, &[int(stack_index as i128), int(i as i128)]);
                let mut value = pack(&[v]);
                value.truncate(40000);
                (key, value)
            })
            .collect();
        self.shared
            .db
            .run(|tx| {
                for (k, v) in &rows {
                    tx.set(k, v);
                }
                async { Ok(()) }
            })
            .await?;
        Ok(())
    }

    /// Pops N, then N items.
    pub async fn pop_counted(&mut self) -> Result<Vec<Element<'static>>, Fatal> {
        let n = as_usize(&self.stack.pop().await?)?;
        self.stack.pop_n(n).await
    }

    async fn pop_selector(&mut self) -> Result<KeySelector, Fatal> {
        let key = self.pop_bytes().await?;
        let or_equal = as_bool(&self.stack.pop().await?)?;
        let offset = self.pop_i64().await?;
        let offset = i32::try_from(offset).map_err(|_| Fatal(format!("offset {offset}")))?;
        Ok(KeySelector::new(Bytes::from(key), or_equal, offset))
    }

    /// LIMIT, REVERSE, STREAMING_MODE.
    async fn pop_range_options(&mut self) -> Result<RangeOptions, Fatal> {
        let limit = self.pop_i64().await?;
        let reverse = as_bool(&self.stack.pop().await?)?;
        let mode = self.pop_i64().await?;
        let mode = match mode {
            -2 => StreamingMode::WantAll,
            -1 => StreamingMode::Iterator,
            0 => StreamingMode::Exact,
            1 => StreamingMode::Small,
            2 => StreamingMode::Medium,
            3 => StreamingMode::Large,
            4 => StreamingMode::Serial,
            m => return Err(Fatal(format!("streaming mode {m}"))),
        };
        Ok(RangeOptions {
            // A negative limit is no limit in the bindings' range iterators.
            limit: usize::try_from(limit).unwrap_or(0),
            reverse,
            mode,
            ..RangeOptions::default()
        })
    }

    async fn read_range(
        &self,
        variant: Variant,
        begin: KeySelector,
        end: KeySelector,
        opts: RangeOptions,
    ) -> Result<Vec<KeyValue>, Error> {
        match self.target(variant) {
            Target::Tx(tx, snapshot) => tx.get_range_with(begin, end, opts, snapshot).await,
            Target::Loop(db) => {
                db.run(|tx| {
                    let (b, e) = (begin.clone(), end.clone());
                    async move { tx.get_range_with(b, e, opts, false).await }
                })
                .await
            }
        }
    }

    fn push_range(&mut self, idx: usize, rows: &[KeyValue], prefix: Option<&[u8]>) {
        let mut items = Vec::with_capacity(rows.len() * 2);
        for kv in rows {
            if prefix.is_none_or(|p| kv.key.starts_with(p)) {
                items.push(bytes(kv.key.to_vec()));
                items.push(bytes(kv.value.to_vec()));
            }
        }
        self.push(idx, bytes(pack(&items)));
    }
}

/// The row limit a tester's `TENANT_LIST` gets from the stack's integer `limit`, as the
/// Python tester's `list_tenants` applies it: libfdb_c receives it as a C `int` (its low 32
/// bits: ctypes masks), where 0 and -1 mean no limit and other negatives fail with
/// `range_limits_invalid`; and the Python range iterator, having received that many rows,
/// asks for the rest with the limit lowered by the count, so a limit beyond 32 bits ends up
/// at a masked 0: no limit. `Ok(None)`: every tenant.
pub fn tenant_list_limit(limit: &BigInt) -> Result<Option<usize>, ErrorCode> {
    let m = limit.magnitude();
    let mut low = [0u8; 4];
    let n = m.len().min(4);
    low[4 - n..].copy_from_slice(&m[m.len() - n..]);
    let low = u32::from_be_bytes(low);
    let masked = if limit.is_negative() {
        low.wrapping_neg()
    } else {
        low
    } as i32;
    match masked {
        0 | -1 => Ok(None),
        i32::MIN..=-2 => Err(ErrorCode::RANGE_LIMITS_INVALID),
        n if limit.to_i64() == Some(i64::from(n)) => Ok(Some(n as usize)),
        _ => Ok(None),
    }
}

/// The names of the tenants in `[begin, end)` (`fdb.tenant_management.list_tenants`), read
/// from the tenant name index; `limit` as [`tenant_list_limit`] takes it.
async fn list_tenant_names<D: Driver>(
    db: &Database<D>,
    begin: Vec<u8>,
    end: Vec<u8>,
    limit: &BigInt,
) -> Result<Vec<Vec<u8>>, Failure> {
    const NAME_INDEX: &[u8] = b"\xff/tenant/nameIndex/";
    let limit = tenant_list_limit(limit)?.unwrap_or(0);
    let key = |name: Vec<u8>| pack_with_prefix(NAME_INDEX, &[bytes(name)]);
    let (b, e) = (key(begin), key(end));
    if b >= e {
        return Ok(Vec::new());
    }
    let rows = db
        .run(|tx| {
            let (b, e) = (b.clone(), e.clone());
            async move {
                tx.set_option(TransactionOption::ReadSystemKeys)?;
                tx.get_range(&b, &e, limit).await
            }
        })
        .await?;
    let mut names = Vec::with_capacity(rows.len());
    for kv in rows {
        let packed = &kv.key[NAME_INDEX.len()..];
        let (name,) = fdb_protocol::tuple::unpack::<(Vec<u8>,)>(packed)
            .map_err(|e| Fatal(format!("TENANT_LIST: a name index key {packed:?}: {e}")))?;
        names.push(name);
    }
    Ok(names)
}

fn not_present() -> Element<'static> {
    bytes(b"RESULT_NOT_PRESENT".to_vec())
}

/// A future's outcome as a stack value.
fn settle<T>(
    r: Result<T, Error>,
    ok: impl FnOnce(T) -> Element<'static>,
) -> Result<Element<'static>, Fatal> {
    match r {
        Ok(v) => Ok(ok(v)),
        Err(e) => match e.code() {
            Some(c) => Ok(error_element(c)),
            None => Err(Fatal(format!("client failure: {e}"))),
        },
    }
}

fn conflict_kind(op: &str) -> ConflictRangeType {
    if op.starts_with("READ") {
        ConflictRangeType::Read
    } else {
        ConflictRangeType::Write
    }
}

/// The mutation type of an atomic op, by the bindings' option names.
fn mutation_type(name: &str) -> Result<u8, Fatal> {
    Ok(match name {
        "ADD" => mt::ADD_VALUE,
        "AND" | "BIT_AND" => mt::AND,
        "OR" | "BIT_OR" => mt::OR,
        "XOR" | "BIT_XOR" => mt::XOR,
        "APPEND_IF_FITS" => mt::APPEND_IF_FITS,
        "MAX" => mt::MAX,
        "MIN" => mt::MIN,
        "SET_VERSIONSTAMPED_KEY" => mt::SET_VERSIONSTAMPED_KEY,
        "SET_VERSIONSTAMPED_VALUE" => mt::SET_VERSIONSTAMPED_VALUE,
        "BYTE_MIN" => mt::BYTE_MIN,
        "BYTE_MAX" => mt::BYTE_MAX,
        "COMPARE_AND_CLEAR" => mt::COMPARE_AND_CLEAR,
        _ => return Err(Fatal(format!("unknown atomic op {name}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big(negative: bool, magnitude: &[u8]) -> BigInt {
        BigInt::from_magnitude(negative, magnitude).expect("small enough")
    }

    fn pow2(n: usize) -> Vec<u8> {
        let mut m = vec![0u8; n / 8 + 1];
        m[0] = 1 << (n % 8);
        m
    }

    /// What `fdb.tenant_management.list_tenants(db, b"", b"\xff", limit)` gave over three
    /// tenants with the Python binding 7.3.77 (probe run by hand): `Some(n)` the first n,
    /// `None` all three, `Err` range_limits_invalid (2012).
    #[test]
    fn tenant_list_limits_as_the_python_binding_applies_them() {
        let all = Ok(None);
        let invalid = Err(ErrorCode::RANGE_LIMITS_INVALID);
        let plus = |m: Vec<u8>| big(false, &m);
        let minus = |m: Vec<u8>| big(true, &m);
        let add = |mut m: Vec<u8>, k: u8| {
            *m.last_mut().unwrap() += k;
            m
        };
        let cases: Vec<(BigInt, Result<Option<usize>, ErrorCode>)> = vec![
            (BigInt::from(0i64), all),
            (BigInt::from(1i64), Ok(Some(1))),
            (BigInt::from(2i64), Ok(Some(2))),
            (BigInt::from(-1i64), all),
            (BigInt::from(-5i64), invalid),
            (
                BigInt::from(i64::from(i32::MAX)),
                Ok(Some(i32::MAX as usize)),
            ),
            (BigInt::from(1i64 << 31), invalid),
            (BigInt::from((1i64 << 32) + 1), all),
            (BigInt::from((1i64 << 33) + 2), all),
            (BigInt::from(-(1i64 << 31)), invalid),
            (BigInt::from(-(1i64 << 31) - 1), all),
            (BigInt::from(i64::MAX), all),
            (plus(pow2(63)), all),
            (plus(add(pow2(64), 1)), all),
            (plus(pow2(100)), all),
            (minus(pow2(100)), all),
        ];
        for (limit, want) in cases {
            assert_eq!(tenant_list_limit(&limit), want, "limit {limit:?}");
        }
    }
}
