//! Runs the real binary with tiny counts against the in-process cluster and checks that the
//! JSON, Markdown and SVG come out well-formed. No timing assertions.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fdb-bench"))
}

fn out_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Tags balance: every opened element is closed, in order (self-closing ones excepted).
fn check_xml_balanced(svg: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find('<') {
        let j = rest[i..].find('>').expect("unterminated tag") + i;
        let tag = &rest[i + 1..j];
        rest = &rest[j + 1..];
        if tag.starts_with('?') || tag.starts_with('!') || tag.ends_with('/') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(name.trim()),
                "mismatched </{name}>"
            );
        } else {
            let name = tag.split_whitespace().next().expect("tag name");
            stack.push(name.to_string());
        }
    }
    assert!(stack.is_empty(), "unclosed elements: {stack:?}");
}

#[test]
fn tiny_run_writes_json_markdown_and_svg() {
    let out = out_dir("smoke");
    let result = bench()
        .args([
            "--arms",
            "rust-tokio,rust-mio,floor",
            "--workloads",
            "grv,get100",
            "--workers",
            "1,2",
            "--warmup",
            "4",
            "--transactions",
            "20",
            // Exactly 20 a run (the minimum window is the harness's unit test's).
            "--min-run-ms",
            "0",
            "--blocks",
            "2",
            "--resamples",
            "200",
            "--run-timeout",
            "120",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("run fdb-bench");
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        result.status.success(),
        "fdb-bench failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );

    // JSON: parses, and holds what was asked for.
    let text = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(v["tool"], "fdb-bench");
    assert_eq!(v["config"]["blocks"], 2);
    assert_eq!(v["config"]["min_run_ms"], 0);
    let runs = v["runs"].as_array().expect("runs");
    // grv: 3 arms × 2 worker levels × 2 blocks × 2 (ABBA) runs.
    let grv_runs: Vec<_> = runs.iter().filter(|r| r["workload"] == "grv").collect();
    assert_eq!(grv_runs.len(), 3 * 2 * 2 * 2);
    for r in &grv_runs {
        assert_eq!(r["ok"], true, "run failed: {r}");
        let s = &r["summary"];
        assert_eq!(s["txns"], 20);
        for k in [
            "mean_us",
            "p50_us",
            "p99_us",
            "throughput_tps",
            "cpu_us_per_txn",
            "client_switches_per_txn",
            "allocs_per_txn",
            "heap_bytes_per_txn",
        ] {
            let x = s[k]
                .as_f64()
                .unwrap_or_else(|| panic!("{k} missing in {s}"));
            assert!(x.is_finite() && x >= 0.0, "{k} = {x}");
        }
        assert!(s["p50_us"].as_f64() <= s["p99_us"].as_f64());
    }
    // The client arms allocate; the counting allocator is installed.
    let tokio_allocs: f64 = grv_runs
        .iter()
        .filter(|r| r["arm"] == "rust-tokio")
        .map(|r| r["summary"]["allocs_per_txn"].as_f64().unwrap())
        .sum();
    assert!(tokio_allocs > 0.0);
    // A client waits for the cluster's replies, so its threads block (not in every run: a
    // reply can be in before the wait).
    let client_switches: f64 = grv_runs
        .iter()
        .filter(|r| r["arm"] != "floor")
        .map(|r| r["summary"]["client_switches_per_txn"].as_f64().unwrap())
        .sum();
    assert!(client_switches > 0.0);
    // On the in-process cluster the client arms' runs carry the cluster's request counters;
    // one worker asks for one read version per transaction.
    for r in grv_runs.iter().filter(|r| r["arm"] != "floor") {
        let grvs = r["requests"]["GetReadVersion"].as_u64().unwrap_or(0);
        if r["workers"] == 1 {
            assert_eq!(grvs, 20, "{r}");
        } else {
            assert!((1..=20).contains(&grvs), "{r}");
        }
    }
    assert!(grv_runs
        .iter()
        .filter(|r| r["arm"] == "floor")
        .all(|r| r.get("requests").is_none()));
    // Each block runs the arms A B C C B A.
    let order: Vec<(&str, u64)> = runs
        .iter()
        .filter(|r| r["workload"] == "grv" && r["workers"] == 1 && r["block"] == 0)
        .map(|r| (r["arm"].as_str().unwrap(), r["pass"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        order,
        vec![
            ("rust-tokio", 0),
            ("rust-mio", 0),
            ("floor", 0),
            ("floor", 1),
            ("rust-mio", 1),
            ("rust-tokio", 1)
        ]
    );
    // floor runs every workload; the client arms skip the data workloads with a reason.
    assert!(runs
        .iter()
        .any(|r| r["workload"] == "get100" && r["arm"] == "floor" && r["ok"] == true));
    let skipped = v["skipped"].as_array().unwrap();
    for arm in ["rust-tokio", "rust-mio"] {
        let covers_get100 = skipped
            .iter()
            .any(|s| s["arm"] == arm && s["workload"] == "get100");
        let ran_get100 = runs
            .iter()
            .any(|r| r["arm"] == arm && r["workload"] == "get100" && r["ok"] == true);
        assert!(
            covers_get100 ^ ran_get100,
            "{arm}: get100 neither ran nor was skipped"
        );
    }
    for s in skipped {
        assert!(!s["reason"].as_str().unwrap().is_empty());
    }
    // Ratios: per block, geometric mean inside its interval.
    let ratios = v["ratios"].as_array().unwrap();
    let grv_tokio_floor: Vec<_> = ratios
        .iter()
        .filter(|r| r["ours"] == "rust-tokio" && r["baseline"] == "floor" && r["workload"] == "grv")
        .collect();
    assert_eq!(grv_tokio_floor.len(), 2 * 5); // 2 worker levels × 5 metrics
    for r in grv_tokio_floor {
        // The floor arm has no cluster and allocates nothing in its loop: no server CPU or
        // allocation ratio against it.
        if r["metric"] == "server cpu" || r["metric"] == "allocs" {
            assert!(r["block_ratios"].as_array().unwrap().is_empty(), "{r}");
            assert!(r["geomean"].is_null(), "{r}");
            continue;
        }
        assert_eq!(r["block_ratios"].as_array().unwrap().len(), 2, "{r}");
        let g = r["geomean"].as_f64().unwrap();
        let lo = r["ci95"][0].as_f64().unwrap();
        let hi = r["ci95"][1].as_f64().unwrap();
        assert!(
            g > 0.0 && lo <= g * (1.0 + 1e-9) && g <= hi * (1.0 + 1e-9),
            "{r}"
        );
    }

    // Markdown: the tables are there and every table row has its header's column count.
    let md = std::fs::read_to_string(out.join("results.md")).expect("results.md");
    assert!(md.starts_with("# fdb-bench results"));
    assert!(md.contains("| workload | workers | arm | mean µs |"));
    assert!(md.contains("| client switches/txn |"));
    assert!(md.contains("## Ratios rust-tokio / floor"));
    assert!(md.contains("## Ratios rust-tokio / rust-mio"));
    let mut columns = None;
    for line in md.lines() {
        if line.starts_with('|') {
            let n = line.matches('|').count();
            match columns {
                None => columns = Some(n),
                Some(c) => assert_eq!(n, c, "ragged table row: {line}"),
            }
        } else {
            columns = None;
        }
    }
    assert!(stdout.contains("# fdb-bench results"));

    // SVG: one document, balanced, with the panels' captions.
    let svg = std::fs::read_to_string(out.join("ratios.svg")).expect("ratios.svg");
    assert!(svg.trim_start().starts_with("<svg"));
    assert!(svg.trim_end().ends_with("</svg>"));
    check_xml_balanced(&svg);
    assert!(svg.contains("rust-tokio / floor: mean latency"));
    assert!(svg.contains("rust-tokio / rust-mio: CPU per transaction"));
}

#[test]
fn bad_arguments_fail_with_usage() {
    let r = bench().args(["--arms", "nope"]).output().unwrap();
    assert!(!r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("usage: fdb-bench"));
    let r = bench().arg("--help").output().unwrap();
    assert!(r.status.success());
    assert!(String::from_utf8_lossy(&r.stdout).contains("--cluster-file"));
}

#[cfg(not(feature = "libfdb_c"))]
#[test]
fn libfdb_c_arm_needs_the_feature() {
    let out = out_dir("no-libfdb-c");
    let r = bench()
        .args(["--arms", "libfdb_c,floor", "--quiet", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("--features libfdb_c"));
}

/// Runs `fdb-bench` with the libfdb_c arm beside ours: every workload, one worker, one block,
/// a handful of transactions. Returns the parsed `results.json`.
#[cfg(feature = "libfdb_c")]
fn libfdb_c_tiny_run(name: &str, cluster_file: Option<&str>) -> serde_json::Value {
    let out = out_dir(name);
    let mut cmd = bench();
    if let Some(f) = cluster_file {
        cmd.args(["--cluster-file", f]);
    }
    let result = cmd
        .args([
            "--arms",
            "libfdb_c,rust-tokio,rust-mio",
            "--workers",
            "1",
            "--warmup",
            "3",
            "--transactions",
            "5",
            "--min-run-ms",
            "0",
            "--blocks",
            "1",
            "--resamples",
            "100",
            "--run-timeout",
            "60",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("run fdb-bench");
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        result.status.success(),
        "fdb-bench failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let text = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    // Every arm ran every workload, twice (A B C C B A), all transactions done.
    assert!(
        v["skipped"].as_array().unwrap().is_empty(),
        "{}",
        v["skipped"]
    );
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 7 * 3 * 2);
    for r in runs {
        assert_eq!(r["ok"], true, "run failed: {r}");
        assert_eq!(r["summary"]["txns"], 5, "{r}");
    }
    // libfdb_c's own allocations are seen (counted at malloc, which it calls directly).
    assert!(v["units"]["allocations_counted_at"]
        .as_str()
        .unwrap()
        .contains("C allocator"));
    let fdb_c_allocs: f64 = runs
        .iter()
        .filter(|r| r["arm"] == "libfdb_c")
        .map(|r| r["summary"]["allocs_per_txn"].as_f64().unwrap())
        .sum();
    assert!(
        fdb_c_allocs > 7.0 * 2.0 * 2.0,
        "libfdb_c allocs/txn: {fdb_c_allocs}"
    );
    // The comparisons against libfdb_c are reported with their verdicts.
    let ratios = v["ratios"].as_array().unwrap();
    assert!(ratios.iter().any(|r| r["ours"] == "rust-tokio"
        && r["baseline"] == "libfdb_c"
        && r["verdict"].is_string()));
    v
}

/// The CI smoke run of the libfdb_c arm on a real cluster (`FDB_CLUSTER_FILE`), so the arm
/// keeps compiling, linking and running.
#[cfg(feature = "libfdb_c")]
#[test]
fn libfdb_c_arm_runs_on_a_real_cluster() {
    let Ok(cf) = std::env::var("FDB_CLUSTER_FILE") else {
        eprintln!("skipped: FDB_CLUSTER_FILE is not set (no real cluster to run libfdb_c on)");
        return;
    };
    let v = libfdb_c_tiny_run("libfdb_c_real", Some(&cf));
    assert!(v["target"]["description"]
        .as_str()
        .unwrap()
        .starts_with("cluster file"));
}

/// The wire check: on the in-process cluster, which counts the requests it serves, every arm
/// asks for the same requests per transaction at one worker (steady state, locations cached).
#[cfg(feature = "libfdb_c")]
#[test]
fn libfdb_c_and_ours_send_the_same_requests() {
    let v = libfdb_c_tiny_run("libfdb_c_wire", None);
    let expected: [(&str, [(&str, f64); 5]); 7] = {
        let k = |grv, get, range, commit| {
            [
                ("GetReadVersion", grv),
                ("GetValue", get),
                ("GetKeyValues", range),
                ("Commit", commit),
                ("GetKeyServerLocations", 0.0),
            ]
        };
        [
            ("grv", k(1.0, 0.0, 0.0, 0.0)),
            ("get100", k(1.0, 1.0, 0.0, 0.0)),
            ("get1000", k(1.0, 1.0, 0.0, 0.0)),
            ("range100", k(1.0, 0.0, 1.0, 0.0)),
            ("set100", k(1.0, 0.0, 0.0, 1.0)),
            ("batchset50", k(1.0, 0.0, 0.0, 1.0)),
            ("batchset50x1000", k(1.0, 0.0, 0.0, 1.0)),
        ]
    };
    let cells = v["cells"].as_array().unwrap();
    for (workload, kinds) in expected {
        for arm in ["libfdb_c", "rust-tokio", "rust-mio"] {
            let cell = cells
                .iter()
                .find(|c| c["workload"] == workload && c["arm"] == arm)
                .unwrap_or_else(|| panic!("no cell {workload} {arm}"));
            let per_txn = &cell["requests_per_txn"];
            for (kind, want) in kinds {
                let got = per_txn[kind].as_f64().unwrap_or(0.0);
                assert_eq!(got, want, "{workload} {arm} {kind}: {per_txn}");
            }
        }
    }
}
