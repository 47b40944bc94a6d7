//! Differential testing against libfdb_c: the same seeded transaction programs run through
//! libfdb_c 7.3.77 (the official Python binding, [`libfdb`]) and through this client's tokio
//! and mio drivers ([`exec`]) on the same real cluster, and every outcome is compared: each
//! read's result, each error code, each commit's success or error, and the final contents of
//! the program's prefix ([`outcome`]).
//!
//! Each side runs under a root of its own (`<base>/lib/`, `<base>/tok/`, `<base>/mio/`, all
//! the same length so size limits fall alike), bracketed by sentinel keys so that selectors
//! reaching past a program's prefix find the same keys on every side; each program gets a
//! fresh prefix under its side's root and clears it afterwards.

pub mod exec;
pub mod generate;
pub mod libfdb;
pub mod outcome;
pub mod program;
pub mod shrink;

use std::path::Path;
use std::time::Duration;

use fdb_protocol::cluster_file::ClusterFile;

use self::libfdb::LibFdb;
use self::outcome::{Normal, Places, RunResult};
use self::program::{Op, Program};

/// The sentinel keys below and above every program prefix of a side (selectors move at most
/// five keys past a prefix).
const SENTINELS: usize = 6;

/// The three clients, connected to one cluster.
pub struct Sides {
    lib: LibFdb,
    rt: tokio::runtime::Runtime,
    tokio_db: fdb_driver_tokio::Database,
    mio_dbs: Vec<fdb_driver_mio::Database>,
    /// Everything this run writes is under it.
    base: Vec<u8>,
    programs: usize,
}

/// How one program ran on each side, in normal form, and where they differ.
pub struct Verdict {
    pub lib: Normal,
    pub tokio: Normal,
    pub mio: Normal,
    /// One line per difference from libfdb_c (empty: none).
    pub diffs: Vec<String>,
    /// Differences of the kinds known and reported instead of fixed (see [`Known`]), one
    /// line each: printed, not failed on.
    pub known: Vec<(Known, String)>,
}

impl Sides {
    const NAMES: [&'static str; 3] = ["lib", "tok", "mio"];

    /// Connects both drivers to the cluster of `cluster_file` and writes the sentinels.
    pub fn new(cluster_file: &Path, lib: LibFdb, run_id: u64) -> Result<Sides, String> {
        let text = std::fs::read_to_string(cluster_file)
            .map_err(|e| format!("cannot read {}: {e}", cluster_file.display()))?;
        let cf = ClusterFile::parse(&text).map_err(|e| format!("bad cluster file: {e}"))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let tokio_db = {
            let _g = rt.enter();
            fdb_driver_tokio::Database::from_cluster_file(cf.clone(), run_id ^ 1)
                .expect("the driver starts")
        };
        let mio_dbs = (0..3)
            .map(|i| fdb_driver_mio::Database::from_cluster_file(cf.clone(), run_id ^ (2 + i)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let s = Sides {
            lib,
            rt,
            tokio_db,
            mio_dbs,
            base: format!("fdb-diff/{run_id:016x}/").into_bytes(),
            programs: 0,
        };
        let (base, roots) = (s.base.clone(), Self::NAMES.map(|n| s.root(n)));
        s.mio_dbs[0]
            .run(|tx| {
                tx.clear_range(&base, exec::strinc(&base));
                for root in &roots {
                    for i in 0..SENTINELS {
                        tx.set([&root[..], format!("!{i}").as_bytes()].concat(), b"s");
                        tx.set([&root[..], format!("~{i}").as_bytes()].concat(), b"s");
                    }
                }
                Ok(())
            })
            .map_err(|e| format!("cannot write the sentinels: {e}"))?;
        Ok(s)
    }

    fn root(&self, side: &str) -> Vec<u8> {
        [&self.base[..], side.as_bytes(), b"/"].concat()
    }

    /// Runs `p` on every side (libfdb_c meanwhile with the drivers) and compares.
    pub fn run(&mut self, p: &Program) -> Result<Verdict, String> {
        self.programs += 1;
        let n = self.programs;
        let roots = Self::NAMES.map(|s| self.root(s));
        let prefixes = roots
            .clone()
            .map(|r| [&r[..], format!("{n:07}/").as_bytes()].concat());
        self.lib.send(&prefixes[0], p)?;
        let tokio = self
            .rt
            .block_on(exec::run_tokio(&self.tokio_db, &prefixes[1], p))
            .map_err(|e| format!("tokio driver: {e}"))?;
        let mio = exec::run_mio(&mut self.mio_dbs, &prefixes[2], p)
            .map_err(|e| format!("mio driver: {e}"))?;
        let lib = self.lib.receive()?;
        let norm = |r: &RunResult, i: usize| {
            r.normalize(&Places {
                root: &roots[i],
                prefix: &prefixes[i],
            })
        };
        let (lib, tokio, mio) = (norm(&lib, 0), norm(&tokio, 1), norm(&mio, 2));
        let (mut diffs, mut known) = compare(p, "libfdb_c", &lib, "tokio", &tokio);
        let (d, k) = compare(p, "libfdb_c", &lib, "mio", &mio);
        diffs.extend(d);
        known.extend(k);
        Ok(Verdict {
            lib,
            tokio,
            mio,
            diffs,
            known,
        })
    }

    /// Removes everything this run wrote.
    pub fn finish(self) {
        let base = self.base.clone();
        let _ = self.mio_dbs[0].run(|tx| {
            tx.clear_range(&base, exec::strinc(&base));
            Ok(())
        });
        drop(self.tokio_db);
        self.rt.shutdown_timeout(Duration::from_secs(1));
    }

    /// The runner's greeting (API and client versions of the libfdb_c it loaded).
    pub fn lib_hello(&self) -> &serde_json::Value {
        &self.lib.hello
    }
}

/// The differences from libfdb_c that are reported rather than fixed: both come from how
/// this client resolves range selectors. It resolves each selector first (a scan from the
/// selector's key, cached) and ends a byte-limited batch after the first storage reply with
/// rows; RYW's `getRangeValue` (ReadYourWrites.actor.cpp) resolves them lazily while it
/// iterates, sending selectors to storage, and ends such a batch before the next range it must
/// fetch. Matching it means rebuilding the core's range scan on RYW's iterator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Known {
    /// The same rows, split into batches differently (sizes, `more` flags); for a single raw
    /// batch, one side's rows are a prefix of the other's.
    BatchBoundaries,
    /// A range read with a selector to resolve, in a transaction holding versionstamped
    /// writes: one side's resolution walks into the unreadable range (accessed_unreadable),
    /// the other's does not.
    UnreadableViaSelector,
    /// A commit that conflicted on one side only, after a range read with a selector to
    /// resolve: resolving it first adds a read conflict range over keys RYW never looked at
    /// (its limit was reached first), and RYW reads past a row limit to place an end
    /// selector with an offset below 1 (`itemsPastEnd >= 1 - end.offset`), adding conflicts
    /// this client does not. What the program did after it is not compared.
    ConflictsViaSelector,
    /// A selector resolved in a transaction holding a compare_and_clear: RYW's iterator
    /// counts the key as present while resolving (`RYWIterator::type` says KV for a dependent
    /// write) even when the op clears it (`kv()` then returns nothing); this client counts
    /// only keys that exist once the op is applied.
    CompareAndClearCounted,
    /// A commit over a size_limit in a transaction that made a versionstamped key inside a
    /// range it had cleared: RYW's `atomicOp` writes that range to the native transaction at
    /// once (`writeRangeToNativeTransaction`) and the commit writes it again, so libfdb_c
    /// sends (and counts toward size_limit) the clear twice; this client sends it once.
    VersionstampClearTwice,
}

impl Known {
    pub fn describe(self) -> &'static str {
        match self {
            Known::BatchBoundaries => {
                "range reads returned the same rows as libfdb_c in differently sized batches \
                 (tests/data/differential/batch-boundaries.json)"
            }
            Known::UnreadableViaSelector => {
                "range reads with selectors to resolve met a versionstamped range where \
                 libfdb_c's lazy resolution did not, or the reverse \
                 (tests/data/differential/unreadable-via-selector.json)"
            }
            Known::ConflictsViaSelector => {
                "commits conflicted on one side only, after range reads whose selectors were \
                 resolved differently (tests/data/differential/conflicts-via-selector.json)"
            }
            Known::VersionstampClearTwice => {
                "commits near size_limit with a versionstamped key in a cleared range: libfdb_c \
                 counts the clear twice (tests/data/differential/versionstamp-clear-twice.json)"
            }
            Known::CompareAndClearCounted => {
                "selectors counted a key cleared by compare_and_clear as libfdb_c does not \
                 (tests/data/differential/compare-and-clear-counted.json)"
            }
        }
    }
}

/// Compares two runs of `p`: the differences that fail the test, and the known ones.
fn compare(
    p: &Program,
    a_name: &str,
    a: &Normal,
    b_name: &str,
    b: &Normal,
) -> (Vec<String>, Vec<(Known, String)>) {
    let (mut diffs, mut known) = (Vec::new(), Vec::new());
    let show = |n: &Normal, i: usize| match (n.outcomes.get(i), n.batches.get(i)) {
        (Some(o), Some(s)) if !s.is_empty() => format!("{o} (batches {s})"),
        (Some(o), _) => o.clone(),
        _ => "(missing)".into(),
    };
    // Set once a step differed in a known way that changes what the program does next:
    // everything after it is that difference's consequence.
    let mut after: Option<Known> = None;
    for i in 0..a.outcomes.len().max(b.outcomes.len()) {
        let line = || {
            format!(
                "step {i}: {a_name}: {}; {b_name}: {}",
                show(a, i),
                show(b, i)
            )
        };
        if let Some(k) = after {
            if a.outcomes.get(i) != b.outcomes.get(i) || a.batches.get(i) != b.batches.get(i) {
                known.push((k, line()));
            }
            continue;
        }
        if a.outcomes.get(i) == b.outcomes.get(i) {
            if a.batches.get(i) != b.batches.get(i) {
                known.push((Known::BatchBoundaries, line()));
            }
            continue;
        }
        let step = p.steps.get(i);
        let single = matches!(
            step.map(|s| &s.op),
            Some(Op::GetRange {
                iteration: Some(_),
                ..
            })
        );
        let prefix = match (a.rows.get(i), b.rows.get(i)) {
            (Some(Some(x)), Some(Some(y))) => x.starts_with(y) || y.starts_with(x),
            _ => false,
        };
        let unreadable = [a, b].iter().any(|n| {
            n.outcomes
                .get(i)
                .is_some_and(|o| o.starts_with("error 1036"))
        }) && [a, b]
            .iter()
            .any(|n| n.rows.get(i).is_some_and(|r| r.is_some()))
            && step.is_some_and(|s| resolves_selectors(&s.op) && stamped_before(p, i, s.tx));
        let is = |n: &Normal, o: &str| n.outcomes.get(i).is_some_and(|x| x.starts_with(o));
        let conflict = step.is_some_and(|s| {
            matches!(s.op, Op::Commit)
                && ((is(a, "ok") && is(b, "error 1020")) || (is(a, "error 1020") && is(b, "ok")))
                && resolved_before(p, i, s.tx)
        });
        let conflict = conflict
            || step.is_some_and(|s| {
                matches!(s.op, Op::ConflictingKeys) && resolved_before(p, i, s.tx)
            });
        let counted = step.is_some_and(|s| {
            matches!(s.op, Op::GetRange { .. } | Op::GetKey { .. })
                && p.steps[..i]
                    .iter()
                    .any(|x| x.tx == s.tx && matches!(x.op, Op::Atomic { code: 20, .. }))
        });
        let clear_twice = step.is_some_and(|s| {
            matches!(s.op, Op::Commit)
                && [a, b].iter().any(|n| is(n, "error 2101"))
                && p.steps[..i]
                    .iter()
                    .any(|x| x.tx == s.tx && matches!(x.op, Op::VsKey { .. }))
        });
        if clear_twice {
            after = Some(Known::VersionstampClearTwice);
            known.push((Known::VersionstampClearTwice, line()));
        } else if conflict {
            after = Some(Known::ConflictsViaSelector);
            known.push((Known::ConflictsViaSelector, line()));
        } else if single && prefix {
            known.push((Known::BatchBoundaries, line()));
        } else if unreadable {
            after = Some(Known::UnreadableViaSelector);
            known.push((Known::UnreadableViaSelector, line()));
        } else if counted {
            after = Some(Known::CompareAndClearCounted);
            known.push((Known::CompareAndClearCounted, line()));
        } else {
            diffs.push(line());
        }
    }
    if let (true, Some(k)) = (a.final_rows != b.final_rows, after) {
        known.push((
            k,
            format!(
                "final contents: {a_name}: [{}]; {b_name}: [{}]",
                a.final_rows.join(", "),
                b.final_rows.join(", ")
            ),
        ));
    } else if a.final_rows != b.final_rows {
        diffs.push(format!(
            "final contents: {a_name}: [{}]; {b_name}: [{}]",
            a.final_rows.join(", "),
            b.final_rows.join(", ")
        ));
    }
    (diffs, known)
}

/// A range read with a selector other than `first_greater_or_equal`.
fn resolves_selectors(op: &Op) -> bool {
    match op {
        Op::GetRange { begin, end, .. } => [begin, end].iter().any(|s| s.or_equal || s.offset != 1),
        _ => false,
    }
}

/// Whether transaction `tx` made a (conflicting) range read with a selector to resolve
/// before step `i`.
fn resolved_before(p: &Program, i: usize, tx: usize) -> bool {
    p.steps[..i].iter().any(|s| {
        s.tx == tx
            && resolves_selectors(&s.op)
            && matches!(
                s.op,
                Op::GetRange {
                    snapshot: false,
                    ..
                }
            )
    })
}

/// Whether transaction `tx` made a versionstamped write before step `i`.
fn stamped_before(p: &Program, i: usize, tx: usize) -> bool {
    p.steps[..i].iter().any(|s| {
        s.tx == tx
            && matches!(
                s.op,
                Op::VsKey { .. } | Op::VsValue { .. } | Op::Atomic { code: 14 | 15, .. }
            )
    })
}

/// A program and its step list, readable in a failure message.
pub fn describe(p: &Program, v: &Verdict) -> String {
    let mut s = String::new();
    for (i, step) in p.steps.iter().enumerate() {
        let at = |n: &Normal| {
            let (o, b) = (n.outcomes.get(i), n.batches.get(i));
            match (o, b) {
                (Some(o), Some(b)) if !b.is_empty() => format!("{o} (batches {b})"),
                (Some(o), _) => o.clone(),
                _ => "?".into(),
            }
        };
        let same = at(&v.lib) == at(&v.tokio) && at(&v.lib) == at(&v.mio);
        s.push_str(&format!(
            "  {}{i:>3} tx{} {:?}\n        libfdb_c: {}\n",
            if same { " " } else { "*" },
            step.tx,
            step.op,
            at(&v.lib),
        ));
        if !same {
            s.push_str(&format!(
                "        tokio:    {}\n        mio:      {}\n",
                at(&v.tokio),
                at(&v.mio),
            ));
        }
    }
    s
}
