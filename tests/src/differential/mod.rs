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
/// eleven keys past a prefix: offsets up to ±10, one more for `or_equal`).
const SENTINELS: usize = 12;

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

    /// Runs `p` on every side, one after another, and compares.
    pub fn run(&mut self, p: &Program) -> Result<Verdict, String> {
        self.programs += 1;
        let n = self.programs;
        let roots = Self::NAMES.map(|s| self.root(s));
        let prefixes = roots
            .clone()
            .map(|r| [&r[..], format!("{n:07}/").as_bytes()].concat());
        self.lib.send(&prefixes[0], p)?;
        // libfdb_c first, alone: a side's commit writes its self-conflict key in `\xff/SC/`
        // (makeSelfConflicting), which a program reading through the system keys would
        // otherwise see from whichever side ran beside it.
        let lib = self.lib.receive()?;
        let tokio = self
            .rt
            .block_on(exec::run_tokio(&self.tokio_db, &prefixes[1], p))
            .map_err(|e| format!("tokio driver: {e}"))?;
        let mio = exec::run_mio(&mut self.mio_dbs, &prefixes[2], p)
            .map_err(|e| format!("mio driver: {e}"))?;
        let stamped_pres: Vec<Vec<u8>> = p
            .steps
            .iter()
            .filter_map(|s| match &s.op {
                Op::VsKey { pre, .. } => Some(pre.clone()),
                _ => None,
            })
            .collect();
        let norm = |r: &RunResult, i: usize| {
            r.normalize(&Places {
                root: &roots[i],
                prefix: &prefixes[i],
                stamped_pres: &stamped_pres,
            })
        };
        let (lib, tokio, mio) = (norm(&lib, 0), norm(&tokio, 1), norm(&mio, 2));
        let mut diffs = compare("libfdb_c", &lib, "tokio", &tokio);
        diffs.extend(compare("libfdb_c", &lib, "mio", &mio));
        Ok(Verdict {
            lib,
            tokio,
            mio,
            diffs,
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

/// Compares two runs of a program: every step's outcome and batches, and the final contents.
fn compare(a_name: &str, a: &Normal, b_name: &str, b: &Normal) -> Vec<String> {
    let mut diffs = Vec::new();
    let show = |n: &Normal, i: usize| match (n.outcomes.get(i), n.batches.get(i)) {
        (Some(o), Some(s)) if !s.is_empty() => format!("{o} (batches {s})"),
        (Some(o), _) => o.clone(),
        _ => "(missing)".into(),
    };
    for i in 0..a.outcomes.len().max(b.outcomes.len()) {
        if a.outcomes.get(i) != b.outcomes.get(i) || a.batches.get(i) != b.batches.get(i) {
            diffs.push(format!(
                "step {i}: {a_name}: {}; {b_name}: {}",
                show(a, i),
                show(b, i)
            ));
        }
    }
    if a.final_rows != b.final_rows {
        diffs.push(format!(
            "final contents: {a_name}: [{}]; {b_name}: [{}]",
            a.final_rows.join(", "),
            b.final_rows.join(", ")
        ));
    }
    diffs
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
