//! What a program did: one outcome per step, the commits' versionstamps and the final contents
//! of its prefix; and the normal form two runs are compared in. Keys are shown relative to
//! the program's prefix (`R/`) or the run's root (`root/`, the sentinels around every
//! prefix); a key elsewhere shows only which side of the root it lies on; each commit's
//! versionstamp, wherever its bytes appear, shows as `<vsN>` (N: the commit's step), so
//! nothing that legitimately differs between runs (prefixes, versions) is compared.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::program::unhex;

pub type Row = (Vec<u8>, Vec<u8>);

/// One step's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A write, option or reset: nothing to report (libfdb_c's functions return void).
    Nothing,
    /// A commit, `on_error`, ... that succeeded.
    Ok,
    /// An FDB error code.
    Err(i32),
    Value(Option<Vec<u8>>),
    Key(Vec<u8>),
    /// The batches of a range read: rows and the `more` flag of each.
    Batches(Vec<(Vec<Row>, bool)>),
    /// A read version was had (its value differs per run).
    Version,
}

/// A whole run of one program on one client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunResult {
    pub outcomes: Vec<Outcome>,
    /// The prefix's contents after the last step.
    pub final_rows: Vec<Row>,
    /// The versionstamp of each successful commit, by step.
    pub stamps: BTreeMap<usize, [u8; 10]>,
}

impl RunResult {
    /// Reads the runner's answer.
    pub fn from_runner(v: &Value) -> Result<RunResult, String> {
        if let Some(e) = v.get("runner_error") {
            return Err(format!(
                "the libfdb_c runner failed:\n{}",
                e.as_str().unwrap_or("")
            ));
        }
        let mut outcomes = Vec::new();
        for o in v["outcomes"].as_array().ok_or("outcomes")? {
            outcomes.push(outcome_from_json(o)?);
        }
        let final_rows = rows_from_json(&v["final"])?;
        let mut stamps = BTreeMap::new();
        if let Some(m) = v["stamps"].as_object() {
            for (k, s) in m {
                let b = unhex(s.as_str().ok_or("stamp")?)?;
                let stamp: [u8; 10] = b.try_into().map_err(|_| "a versionstamp has 10 bytes")?;
                stamps.insert(k.parse().map_err(|_| "stamp step")?, stamp);
            }
        }
        Ok(RunResult {
            outcomes,
            final_rows,
            stamps,
        })
    }
}

fn rows_from_json(v: &Value) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for kv in v.as_array().ok_or("rows")? {
        rows.push((
            unhex(kv[0].as_str().ok_or("row key")?)?,
            unhex(kv[1].as_str().ok_or("row value")?)?,
        ));
    }
    Ok(rows)
}

fn outcome_from_json(o: &Value) -> Result<Outcome, String> {
    if o.is_null() {
        return Ok(Outcome::Nothing);
    }
    if let Some(c) = o.get("err") {
        return Ok(Outcome::Err(c.as_i64().ok_or("err")? as i32));
    }
    if o.get("ok").is_some() {
        return Ok(Outcome::Ok);
    }
    if o.get("version").is_some() {
        return Ok(Outcome::Version);
    }
    if let Some(v) = o.get("value") {
        return Ok(Outcome::Value(match v.as_str() {
            Some(s) => Some(unhex(s)?),
            None => None,
        }));
    }
    if let Some(k) = o.get("key") {
        return Ok(Outcome::Key(unhex(k.as_str().ok_or("key")?)?));
    }
    if let Some(bs) = o.get("batches") {
        let mut out = Vec::new();
        for b in bs.as_array().ok_or("batches")? {
            out.push((rows_from_json(&b[0])?, b[1].as_bool().ok_or("more")?));
        }
        return Ok(Outcome::Batches(out));
    }
    Err(format!("unknown outcome {o}"))
}

/// Where a run's keys live, for the normal form.
pub struct Places<'a> {
    pub root: &'a [u8],
    pub prefix: &'a [u8],
    /// The `pre` of each `set_versionstamped_key` of the program: NativeAPI's write conflict
    /// range for one is `pre`, the transaction's read version (8 bytes) and two zero bytes,
    /// which `conflicting_keys` can show, and which differs per run.
    pub stamped_pres: &'a [Vec<u8>],
}

/// A run in normal form: one line per step outcome, then the final rows. A range read's
/// outcome is its rows; how they were split into batches (and each batch's `more`) is kept
/// apart in `batches`, compared separately (see [`batch_differences`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Normal {
    pub outcomes: Vec<String>,
    /// Per step: the batch sizes and `more` flags of a range read, empty otherwise.
    pub batches: Vec<String>,
    /// Per step: a range read's rows, one string each.
    pub rows: Vec<Option<Vec<String>>>,
    pub final_rows: Vec<String>,
}

impl RunResult {
    pub fn normalize(&self, at: &Places<'_>) -> Normal {
        let stamps: Vec<(String, [u8; 10])> = self
            .stamps
            .iter()
            .map(|(step, s)| (format!("<vs{step}>"), *s))
            .collect();
        let n = Norm { at, stamps };
        Normal {
            outcomes: self.outcomes.iter().map(|o| n.outcome(o)).collect(),
            batches: self.outcomes.iter().map(batch_shape).collect(),
            rows: self
                .outcomes
                .iter()
                .map(|o| match o {
                    Outcome::Batches(bs) => {
                        Some(bs.iter().flat_map(|(r, _)| r).map(|r| n.row(r)).collect())
                    }
                    _ => None,
                })
                .collect(),
            final_rows: self.final_rows.iter().map(|r| n.row(r)).collect(),
        }
    }
}

struct Norm<'a> {
    at: &'a Places<'a>,
    stamps: Vec<(String, [u8; 10])>,
}

/// The special-key prefix of conflicting read ranges.
const CONFLICTING_KEYS: &[u8] = b"\xff\xff/transaction/conflicting_keys/";

impl Norm<'_> {
    fn outcome(&self, o: &Outcome) -> String {
        match o {
            Outcome::Nothing => "-".into(),
            Outcome::Ok => "ok".into(),
            Outcome::Err(c) => format!("error {c} ({})", error_name(*c)),
            Outcome::Version => "version".into(),
            Outcome::Value(None) => "value absent".into(),
            Outcome::Value(Some(v)) => format!("value {}", self.bytes(v)),
            Outcome::Key(k) => format!("key {}", self.key(k)),
            Outcome::Batches(bs) => {
                let rows: Vec<String> = bs
                    .iter()
                    .flat_map(|(r, _)| r)
                    .map(|r| self.row(r))
                    .collect();
                format!("rows [{}]", rows.join(", "))
            }
        }
    }

    fn row(&self, (k, v): &Row) -> String {
        format!("{}={}", self.key(k), self.bytes(v))
    }

    fn key(&self, k: &[u8]) -> String {
        if let Some(rest) = k.strip_prefix(self.at.prefix) {
            return format!("R/{}", self.bytes(rest));
        }
        if let Some(rest) = k.strip_prefix(CONFLICTING_KEYS) {
            return format!("conflicting_keys/{}", self.conflict_key(rest));
        }
        if let Some(rest) = k.strip_prefix(self.at.root) {
            return format!("root/{}", self.bytes(rest));
        }
        if k < self.at.root {
            "<before root>".into()
        } else {
            "<after root>".into()
        }
    }

    /// A key of a conflict range: as [`Norm::key`], with the read version a versionstamped
    /// key's conflict range carries (after its `pre`, before two zero bytes) as `<rv>`.
    fn conflict_key(&self, k: &[u8]) -> String {
        if let Some(rel) = k.strip_prefix(self.at.prefix) {
            for pre in self.at.stamped_pres {
                let Some(after) = rel.strip_prefix(&pre[..]) else {
                    continue;
                };
                if after.len() >= 10 && after[8..10] == [0, 0] {
                    return format!("R/{}<rv>{}", self.bytes(pre), self.bytes(&after[10..]));
                }
            }
        }
        self.key(k)
    }

    /// Bytes, printable ASCII as is, with every known versionstamp replaced.
    fn bytes(&self, b: &[u8]) -> String {
        let mut s = String::new();
        let mut i = 0;
        'outer: while i < b.len() {
            for (name, st) in &self.stamps {
                if b[i..].starts_with(st) {
                    s.push_str(name);
                    i += st.len();
                    continue 'outer;
                }
            }
            let c = b[i];
            if (0x20..0x7f).contains(&c) && c != b'\\' && c != b'<' {
                s.push(c as char);
            } else {
                let _ = write!(s, "\\x{c:02x}");
            }
            i += 1;
        }
        // Long runs of padding read better counted.
        compress_runs(&s)
    }
}

/// A range read's batches: `2+1 more/0` style, rows per batch and whether it said more.
fn batch_shape(o: &Outcome) -> String {
    match o {
        Outcome::Batches(bs) => bs
            .iter()
            .map(|(rows, more)| format!("{}{}", rows.len(), if *more { " more" } else { "" }))
            .collect::<Vec<_>>()
            .join(", "),
        _ => String::new(),
    }
}

/// `xxxx...x` (more than 16) as `x*N`.
fn compress_runs(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        let mut j = i;
        while j < b.len() && b[j] == b[i] {
            j += 1;
        }
        if j - i > 16 && b[i].is_ascii_alphanumeric() {
            let _ = write!(out, "{}*{}", b[i] as char, j - i);
        } else {
            out.push_str(&s[i..j]);
        }
        i = j;
    }
    out
}

/// FDB's name of an error code.
pub fn error_name(code: i32) -> &'static str {
    u16::try_from(code)
        .ok()
        .and_then(|c| fdb_protocol::error::ErrorCode(c).info())
        .map_or("?", |i| i.name)
}
