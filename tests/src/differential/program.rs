//! A transaction program: an initial data set under the program's key prefix, then steps over
//! one to three transactions, run strictly in order. The same JSON form is read by the
//! libfdb_c runner (`tests/differential/runner.py`) and kept as regression cases in
//! `tests/data/differential/`.
//!
//! ```json
//! {"txs": 2, "init": [["61", "76"]],
//!  "steps": [{"tx": 0, "op": "get", "key": "r:61", "snapshot": false},
//!            {"tx": 1, "op": "set", "key": "r:61", "value": "77"},
//!            {"tx": 1, "op": "commit"}]}
//! ```
//!
//! Keys are written `r:HEX` (under the prefix) or `a:HEX` (absolute), optionally followed by
//! `+N`: padded with `x` to N bytes in all (prefix included), so size limits are hit exactly.
//! Values are `HEX`, optionally `+N` (padded with `v` to N bytes). Init keys are bare hex
//! under the prefix.
//!
//! A read step with `"pending": ID` is started and not waited for; `{"op": "wait", "id": ID}`
//! later waits for it and has its outcome.

use serde_json::{json, Map, Value};

/// A key: under the program's prefix or absolute, optionally padded to a total length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    pub abs: bool,
    pub bytes: Vec<u8>,
    pub pad: Option<usize>,
}

impl Key {
    pub fn rel(bytes: &[u8]) -> Key {
        Key {
            abs: false,
            bytes: bytes.to_vec(),
            pad: None,
        }
    }
    pub fn abs(bytes: &[u8]) -> Key {
        Key {
            abs: true,
            bytes: bytes.to_vec(),
            pad: None,
        }
    }
    pub fn padded(mut self, total: usize) -> Key {
        self.pad = Some(total);
        self
    }
    /// The key's bytes for a program running under `prefix`.
    pub fn resolve(&self, prefix: &[u8]) -> Vec<u8> {
        let mut k = if self.abs {
            Vec::new()
        } else {
            prefix.to_vec()
        };
        k.extend_from_slice(&self.bytes);
        if let Some(n) = self.pad {
            if k.len() < n {
                k.resize(n, b'x');
            }
        }
        k
    }
    fn to_json(&self) -> Value {
        let mut s = format!("{}:{}", if self.abs { "a" } else { "r" }, hex(&self.bytes));
        if let Some(n) = self.pad {
            s.push_str(&format!("+{n}"));
        }
        Value::String(s)
    }
    fn from_json(v: &Value) -> Result<Key, String> {
        let s = v.as_str().ok_or("a key is a string")?;
        let (kind, rest) = s.split_once(':').ok_or("a key is r:HEX or a:HEX")?;
        let (h, pad) = split_pad(rest)?;
        Ok(Key {
            abs: match kind {
                "r" => false,
                "a" => true,
                _ => return Err(format!("bad key kind in {s}")),
            },
            bytes: unhex(h)?,
            pad,
        })
    }
}

/// A value, optionally padded to a total length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Val {
    pub bytes: Vec<u8>,
    pub pad: Option<usize>,
}

impl Val {
    pub fn new(bytes: &[u8]) -> Val {
        Val {
            bytes: bytes.to_vec(),
            pad: None,
        }
    }
    pub fn padded(bytes: &[u8], total: usize) -> Val {
        Val {
            bytes: bytes.to_vec(),
            pad: Some(total),
        }
    }
    pub fn resolve(&self) -> Vec<u8> {
        let mut v = self.bytes.clone();
        if let Some(n) = self.pad {
            if v.len() < n {
                v.resize(n, b'v');
            }
        }
        v
    }
    fn to_json(&self) -> Value {
        let mut s = hex(&self.bytes);
        if let Some(n) = self.pad {
            s.push_str(&format!("+{n}"));
        }
        Value::String(s)
    }
    fn from_json(v: &Value) -> Result<Val, String> {
        let s = v.as_str().ok_or("a value is a string")?;
        let (h, pad) = split_pad(s)?;
        Ok(Val {
            bytes: unhex(h)?,
            pad,
        })
    }
}

/// A key selector, `fdb_transaction_get_key`'s three arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sel {
    pub key: Key,
    pub or_equal: bool,
    pub offset: i32,
}

impl Sel {
    fn to_json(&self) -> Value {
        json!({"key": self.key.to_json(), "or_equal": self.or_equal, "offset": self.offset})
    }
    fn from_json(v: &Value) -> Result<Sel, String> {
        Ok(Sel {
            key: Key::from_json(&v["key"])?,
            or_equal: v["or_equal"].as_bool().ok_or("or_equal")?,
            offset: v["offset"].as_i64().ok_or("offset")? as i32,
        })
    }
}

/// `FDBStreamingMode`, by the names the bindings use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    WantAll,
    Iterator,
    Exact,
    Small,
    Medium,
    Large,
    Serial,
}

impl Mode {
    pub const ALL: [Mode; 7] = [
        Mode::WantAll,
        Mode::Iterator,
        Mode::Exact,
        Mode::Small,
        Mode::Medium,
        Mode::Large,
        Mode::Serial,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Mode::WantAll => "want_all",
            Mode::Iterator => "iterator",
            Mode::Exact => "exact",
            Mode::Small => "small",
            Mode::Medium => "medium",
            Mode::Large => "large",
            Mode::Serial => "serial",
        }
    }
    fn from_name(s: &str) -> Result<Mode, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown streaming mode {s}"))
    }
}

/// The transaction options programs set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    ReadYourWritesDisable,
    NextWriteNoWriteConflictRange,
    SizeLimit(i64),
    ReportConflictingKeys,
    ReadSystemKeys,
    RetryLimit(i64),
}

/// One operation of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Get {
        key: Key,
        snapshot: bool,
    },
    GetKey {
        sel: Sel,
        snapshot: bool,
    },
    /// A whole range read batch after batch, or (with `iteration`) one raw
    /// `fdb_transaction_get_range` call.
    GetRange {
        begin: Sel,
        end: Sel,
        limit: i32,
        target_bytes: i32,
        mode: Mode,
        reverse: bool,
        snapshot: bool,
        iteration: Option<i32>,
    },
    /// Reads `\xff\xff/transaction/conflicting_keys/`.
    ConflictingKeys,
    Set {
        key: Key,
        value: Val,
    },
    Clear {
        key: Key,
    },
    ClearRange {
        begin: Key,
        end: Key,
    },
    Atomic {
        code: u8,
        key: Key,
        param: Val,
    },
    /// `set_versionstamped_key` of `prefix + pre + stamp + post`.
    VsKey {
        pre: Vec<u8>,
        post: Vec<u8>,
        value: Val,
    },
    /// `set_versionstamped_value` of `pre + stamp + post`.
    VsValue {
        key: Key,
        pre: Vec<u8>,
        post: Vec<u8>,
    },
    Conflict {
        read: bool,
        begin: Key,
        end: Key,
    },
    Option(Opt),
    ReadVersion,
    Commit,
    OnError(i32),
    Reset,
    /// Starts a read (a get, a get_key or one raw range batch) without waiting for it: its
    /// answer is the outcome of the later `Wait` with the same id. The steps in between run
    /// while it is pending (writes into the range it reads, above all).
    Start {
        id: u32,
        read: Box<Op>,
    },
    /// Waits for the read started as `id` (`-3` on every side if no such read is pending).
    Wait {
        id: u32,
    },
}

/// A step: an operation on one of the program's transactions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub tx: usize,
    pub op: Op,
}

/// A whole program.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Program {
    /// How many transactions (1–3).
    pub txs: usize,
    /// The data under the prefix before the first step: (key under the prefix, value).
    pub init: Vec<(Vec<u8>, Val)>,
    pub steps: Vec<Step>,
}

impl Program {
    pub fn to_json(&self) -> Value {
        json!({
            "txs": self.txs,
            "init": self.init.iter().map(|(k, v)| json!([hex(k), v.to_json()])).collect::<Vec<_>>(),
            "steps": self.steps.iter().map(Step::to_json).collect::<Vec<_>>(),
        })
    }

    pub fn from_json(v: &Value) -> Result<Program, String> {
        let txs = v["txs"].as_u64().ok_or("txs")? as usize;
        if !(1..=3).contains(&txs) {
            return Err(format!("txs must be 1..=3, not {txs}"));
        }
        let mut init = Vec::new();
        for kv in v["init"].as_array().ok_or("init")? {
            let k = unhex(kv[0].as_str().ok_or("init key")?)?;
            init.push((k, Val::from_json(&kv[1])?));
        }
        let mut steps = Vec::new();
        for s in v["steps"].as_array().ok_or("steps")? {
            let step = Step::from_json(s)?;
            if step.tx >= txs {
                return Err(format!("step names transaction {} of {txs}", step.tx));
            }
            steps.push(step);
        }
        Ok(Program { txs, init, steps })
    }
}

impl Step {
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("tx".into(), json!(self.tx));
        let mut put = |k: &str, v: Value| {
            m.insert(k.into(), v);
        };
        match &self.op {
            Op::Get { key, snapshot } => {
                put("op", json!("get"));
                put("key", key.to_json());
                put("snapshot", json!(snapshot));
            }
            Op::GetKey { sel, snapshot } => {
                put("op", json!("get_key"));
                put("sel", sel.to_json());
                put("snapshot", json!(snapshot));
            }
            Op::GetRange {
                begin,
                end,
                limit,
                target_bytes,
                mode,
                reverse,
                snapshot,
                iteration,
            } => {
                put("op", json!("get_range"));
                put("begin", begin.to_json());
                put("end", end.to_json());
                put("limit", json!(limit));
                put("target_bytes", json!(target_bytes));
                put("mode", json!(mode.name()));
                put("reverse", json!(reverse));
                put("snapshot", json!(snapshot));
                if let Some(i) = iteration {
                    put("iteration", json!(i));
                }
            }
            Op::ConflictingKeys => put("op", json!("conflicting_keys")),
            Op::Set { key, value } => {
                put("op", json!("set"));
                put("key", key.to_json());
                put("value", value.to_json());
            }
            Op::Clear { key } => {
                put("op", json!("clear"));
                put("key", key.to_json());
            }
            Op::ClearRange { begin, end } => {
                put("op", json!("clear_range"));
                put("begin", begin.to_json());
                put("end", end.to_json());
            }
            Op::Atomic { code, key, param } => {
                put("op", json!("atomic"));
                put("code", json!(code));
                put("key", key.to_json());
                put("param", param.to_json());
            }
            Op::VsKey { pre, post, value } => {
                put("op", json!("vs_key"));
                put("pre", json!(hex(pre)));
                put("post", json!(hex(post)));
                put("value", value.to_json());
            }
            Op::VsValue { key, pre, post } => {
                put("op", json!("vs_value"));
                put("key", key.to_json());
                put("pre", json!(hex(pre)));
                put("post", json!(hex(post)));
            }
            Op::Conflict { read, begin, end } => {
                put("op", json!("conflict"));
                put("kind", json!(if *read { "read" } else { "write" }));
                put("begin", begin.to_json());
                put("end", end.to_json());
            }
            Op::Option(o) => {
                put("op", json!("option"));
                let (name, value) = match o {
                    Opt::ReadYourWritesDisable => ("read_your_writes_disable", None),
                    Opt::NextWriteNoWriteConflictRange => {
                        ("next_write_no_write_conflict_range", None)
                    }
                    Opt::SizeLimit(n) => ("size_limit", Some(*n)),
                    Opt::ReportConflictingKeys => ("report_conflicting_keys", None),
                    Opt::ReadSystemKeys => ("read_system_keys", None),
                    Opt::RetryLimit(n) => ("retry_limit", Some(*n)),
                };
                put("name", json!(name));
                if let Some(v) = value {
                    put("value", json!(v));
                }
            }
            Op::ReadVersion => put("op", json!("read_version")),
            Op::Commit => put("op", json!("commit")),
            Op::OnError(code) => {
                put("op", json!("on_error"));
                put("code", json!(code));
            }
            Op::Reset => put("op", json!("reset")),
            Op::Start { id, read } => {
                // The read's own fields, marked pending.
                if let Value::Object(r) = (Step {
                    tx: self.tx,
                    op: (**read).clone(),
                })
                .to_json()
                {
                    for (k, v) in r {
                        put(&k, v);
                    }
                }
                put("pending", json!(id));
            }
            Op::Wait { id } => {
                put("op", json!("wait"));
                put("id", json!(id));
            }
        }
        Value::Object(m)
    }

    fn from_json(v: &Value) -> Result<Step, String> {
        let tx = v["tx"].as_u64().ok_or("step tx")? as usize;
        let b = |k: &str| v[k].as_bool().unwrap_or(false);
        let i = |k: &str| v[k].as_i64().ok_or(format!("step field {k}"));
        let raw = |k: &str| -> Result<Vec<u8>, String> { unhex(v[k].as_str().ok_or(k)?) };
        let op = match v["op"].as_str().ok_or("step op")? {
            "get" => Op::Get {
                key: Key::from_json(&v["key"])?,
                snapshot: b("snapshot"),
            },
            "get_key" => Op::GetKey {
                sel: Sel::from_json(&v["sel"])?,
                snapshot: b("snapshot"),
            },
            "get_range" => Op::GetRange {
                begin: Sel::from_json(&v["begin"])?,
                end: Sel::from_json(&v["end"])?,
                limit: v["limit"].as_i64().unwrap_or(0) as i32,
                target_bytes: v["target_bytes"].as_i64().unwrap_or(0) as i32,
                mode: Mode::from_name(v["mode"].as_str().unwrap_or("iterator"))?,
                reverse: b("reverse"),
                snapshot: b("snapshot"),
                iteration: v["iteration"].as_i64().map(|n| n as i32),
            },
            "conflicting_keys" => Op::ConflictingKeys,
            "set" => Op::Set {
                key: Key::from_json(&v["key"])?,
                value: Val::from_json(&v["value"])?,
            },
            "clear" => Op::Clear {
                key: Key::from_json(&v["key"])?,
            },
            "clear_range" => Op::ClearRange {
                begin: Key::from_json(&v["begin"])?,
                end: Key::from_json(&v["end"])?,
            },
            "atomic" => Op::Atomic {
                code: u8::try_from(i("code")?).map_err(|e| e.to_string())?,
                key: Key::from_json(&v["key"])?,
                param: Val::from_json(&v["param"])?,
            },
            "vs_key" => Op::VsKey {
                pre: raw("pre")?,
                post: raw("post")?,
                value: Val::from_json(&v["value"])?,
            },
            "vs_value" => Op::VsValue {
                key: Key::from_json(&v["key"])?,
                pre: raw("pre")?,
                post: raw("post")?,
            },
            "conflict" => Op::Conflict {
                read: v["kind"].as_str() == Some("read"),
                begin: Key::from_json(&v["begin"])?,
                end: Key::from_json(&v["end"])?,
            },
            "option" => Op::Option(match v["name"].as_str().ok_or("option name")? {
                "read_your_writes_disable" => Opt::ReadYourWritesDisable,
                "next_write_no_write_conflict_range" => Opt::NextWriteNoWriteConflictRange,
                "size_limit" => Opt::SizeLimit(i("value")?),
                "report_conflicting_keys" => Opt::ReportConflictingKeys,
                "read_system_keys" => Opt::ReadSystemKeys,
                "retry_limit" => Opt::RetryLimit(i("value")?),
                o => return Err(format!("unknown option {o}")),
            }),
            "read_version" => Op::ReadVersion,
            "commit" => Op::Commit,
            "on_error" => Op::OnError(i("code")? as i32),
            "reset" => Op::Reset,
            "wait" => Op::Wait {
                id: u32::try_from(i("id")?).map_err(|e| e.to_string())?,
            },
            o => return Err(format!("unknown op {o}")),
        };
        let op = match v.get("pending") {
            None => op,
            Some(id) => {
                let id = id
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or("pending id")?;
                match op {
                    Op::Get { .. }
                    | Op::GetKey { .. }
                    | Op::GetRange {
                        iteration: Some(_), ..
                    } => Op::Start {
                        id,
                        read: Box::new(op),
                    },
                    o => {
                        return Err(format!(
                            "only a get, a get_key or one range batch may be pending, not {o:?}"
                        ))
                    }
                }
            }
        };
        Ok(Step { tx, op })
    }
}

fn split_pad(s: &str) -> Result<(&str, Option<usize>), String> {
    match s.split_once('+') {
        Some((h, n)) => Ok((h, Some(n.parse().map_err(|_| format!("bad pad in {s}"))?))),
        None => Ok((s, None)),
    }
}

pub use crate::to_hex as hex;

pub fn unhex(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err(format!("odd hex {s}"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("bad hex {s}")))
        .collect()
}
