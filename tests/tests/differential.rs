//! Differential test against libfdb_c 7.3.77 (see `fdb_tests::differential`): the regression
//! cases in `tests/data/differential/*.json`, then seeded random programs, each run through
//! libfdb_c (the official Python binding), the tokio driver and the mio driver on the real
//! cluster in `FDB_CLUSTER_FILE`; every outcome must be the same.
//!
//! Skipped with a notice when `FDB_CLUSTER_FILE` is not set. When `FDB_SHARED_DIR` is set (CI)
//! the Python binding must load: CI does not skip silently.
//!
//! `FDB_DIFF_PROGRAMS=N` (default 500) and `FDB_DIFF_SEED=S` (default: random, printed) choose
//! the random programs; `FDB_DIFF_ONLY=I` runs only program I of that seed, printing it.
//! A differing program is shrunk and written to `$CARGO_TARGET_TMPDIR/differential/`: copy
//! it into `tests/data/differential/` to keep it as a regression case.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fdb_tests::differential::generate::{self, Rng};
use fdb_tests::differential::libfdb::LibFdb;
use fdb_tests::differential::program::{Op, Program};
use fdb_tests::differential::shrink::shrink;
use fdb_tests::differential::{describe, Known, Sides, Verdict};
use serde_json::{json, Value};

const DEFAULT_PROGRAMS: u64 = 500;
/// Differing programs to shrink and report before giving up on the rest (`FDB_DIFF_REPORT`).
const MAX_REPORTED: u64 = 3;

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number")),
    )
}

fn regression_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/differential")
}

/// A kept case: `{"name", "about", "known_difference"?, "program"}`.
struct Case {
    name: String,
    known_difference: Option<String>,
    program: Program,
}

fn load_cases() -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(regression_dir())
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).expect("read a regression case");
            let v: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}", f.display()));
            Case {
                name: f.file_stem().unwrap().to_string_lossy().into_owned(),
                known_difference: v["known_difference"].as_str().map(str::to_owned),
                program: Program::from_json(&v["program"])
                    .unwrap_or_else(|e| panic!("{}: bad program: {e}", f.display())),
            }
        })
        .collect()
}

/// What the libfdb_c side did over the run, so the summary shows the test reached the paths
/// it is meant to.
#[derive(Default)]
struct Tally {
    programs: usize,
    steps: usize,
    by_outcome: BTreeMap<String, usize>,
}

impl Tally {
    fn add(&mut self, p: &Program, v: &Verdict) {
        self.programs += 1;
        self.steps += p.steps.len();
        for (s, o) in p.steps.iter().zip(&v.lib.outcomes) {
            let kind = match &s.op {
                Op::Commit => {
                    if o == "ok" {
                        "commit ok".to_string()
                    } else {
                        format!("commit {o}")
                    }
                }
                _ if o.starts_with("error") => o.clone(),
                _ => continue,
            };
            *self.by_outcome.entry(kind).or_default() += 1;
        }
    }
}

fn seed_of(seed: u64, i: u64) -> u64 {
    let mut r = Rng::new(seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    r.next_u64()
}

fn save(name: &str, p: &Program, diffs: &[String]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("differential");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{name}.json"));
    let doc = json!({
        "name": name,
        "about": diffs.join("\n"),
        "program": p.to_json(),
    });
    let _ = std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap() + "\n");
    path
}

#[test]
fn differential_against_libfdb_c() {
    let cluster_file = match std::env::var("FDB_CLUSTER_FILE") {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => {
            println!("differential: FDB_CLUSTER_FILE is not set; skipping the differential test");
            return;
        }
    };
    let lib = match LibFdb::start() {
        Ok(l) => l,
        Err(e) if std::env::var_os("FDB_SHARED_DIR").is_some() => {
            panic!("differential: FDB_SHARED_DIR is set but libfdb_c is not usable: {e}")
        }
        Err(e) => {
            println!("differential: skipping, libfdb_c is not usable: {e}");
            return;
        }
    };
    let seed = env_u64("FDB_DIFF_SEED").unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Rng::new(t.as_nanos() as u64 ^ std::process::id() as u64).next_u64() >> 16
    });
    let programs = env_u64("FDB_DIFF_PROGRAMS").unwrap_or(DEFAULT_PROGRAMS);
    let only = env_u64("FDB_DIFF_ONLY");
    let max_reported = env_u64("FDB_DIFF_REPORT").unwrap_or(MAX_REPORTED);
    let mut sides = Sides::new(&cluster_file, lib, seed ^ std::process::id() as u64)
        .expect("connect every side");
    println!(
        "differential: libfdb_c {} against both drivers; seed {seed}, {programs} programs \
         (reproduce: FDB_DIFF_SEED={seed} FDB_DIFF_PROGRAMS={programs})",
        sides.lib_hello()["client_version"]
            .as_str()
            .unwrap_or("(version unknown)")
    );

    let mut failures = Vec::new();
    let mut tally = Tally::default();
    // Differences known and reported instead of fixed, by kind.
    let mut known: BTreeMap<Known, Vec<String>> = BTreeMap::new();

    // Every kept case, every run.
    let cases = load_cases();
    for case in &cases {
        let v = sides
            .run(&case.program)
            .unwrap_or_else(|e| panic!("regression case {}: {e}", case.name));
        tally.add(&case.program, &v);
        for (k, d) in &v.known {
            known
                .entry(*k)
                .or_default()
                .push(format!("{}: {d}", case.name));
        }
        match &case.known_difference {
            _ if !v.diffs.is_empty() => failures.push(format!(
                "regression case {} differs:\n{}\n{}",
                case.name,
                v.diffs.join("\n"),
                describe(&case.program, &v)
            )),
            None => {}
            Some(_) if v.known.is_empty() => failures.push(format!(
                "regression case {} is marked as a known difference but no longer differs: \
                 remove its known_difference",
                case.name
            )),
            Some(why) => println!(
                "differential: KNOWN DIFFERENCE {} ({why}):\n  {}",
                case.name,
                v.known
                    .iter()
                    .map(|(_, d)| d.clone())
                    .collect::<Vec<_>>()
                    .join("\n  ")
            ),
        }
    }
    println!("differential: {} regression cases replayed", cases.len());

    let range = match only {
        Some(i) => i..i + 1,
        None => 0..programs,
    };
    let mut reported = 0;
    for i in range {
        let p = generate::program(seed_of(seed, i));
        let v = sides
            .run(&p)
            .unwrap_or_else(|e| panic!("program {i} of seed {seed}: {e}"));
        tally.add(&p, &v);
        for (k, d) in &v.known {
            known
                .entry(*k)
                .or_default()
                .push(format!("program {i}: {d}"));
        }
        if only.is_some() {
            println!(
                "program {i}:\n{}\n{}",
                serde_json::to_string(&p.to_json()).unwrap(),
                describe(&p, &v)
            );
        }
        if v.diffs.is_empty() {
            continue;
        }
        let small = shrink(&p, 150, |c| {
            sides.run(c).map(|v| !v.diffs.is_empty()).unwrap_or(false)
        });
        let sv = sides.run(&small).expect("rerun the shrunk program");
        let path = save(&format!("seed-{seed}-{i}"), &small, &sv.diffs);
        failures.push(format!(
            "program {i} of seed {seed} differs (shrunk from {} to {} steps, saved to {}):\n{}\n{}\n{}",
            p.steps.len(),
            small.steps.len(),
            path.display(),
            sv.diffs.join("\n"),
            describe(&small, &sv),
            serde_json::to_string(&small.to_json()).unwrap(),
        ));
        reported += 1;
        if reported >= max_reported {
            println!("differential: {max_reported} differing programs; not running the rest");
            break;
        }
    }
    sides.finish();

    for (k, lines) in &known {
        println!(
            "differential: KNOWN DIFFERENCE ({k:?}): {} times, {}; first ones:\n  {}",
            lines.len(),
            k.describe(),
            lines
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n  ")
        );
    }

    println!(
        "differential: {} programs, {} steps; libfdb_c outcomes: {}",
        tally.programs,
        tally.steps,
        tally
            .by_outcome
            .iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(
        failures.is_empty(),
        "{} difference(s) from libfdb_c:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
