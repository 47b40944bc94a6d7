#!/usr/bin/env python3
"""The turn-taking table of README.md, from the pooled.json beside it (results.json of fdb-bench without the per-block values) (the same formulas as
`client_cpu_allowed` and `turns_model` in tests/bench/src/report.rs, which later runs print in
results.md themselves). Usage: turns.py real/pooled.json"""
import json
import sys

d = json.load(open(sys.argv[1]))
pooled = {(c["arm"], c["workload"], c["workers"]): c["pooled"] for c in d["cells"] if c["pooled"]}
print("| arm | workload | workers | mean / libfdb_c | mean / N(S+C) | client CPU allowed µs | ours µs | libfdb_c µs | allowed / libfdb_c |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for r in d["ratios"]:
    if r["metric"] != "mean" or r["baseline"] != "libfdb_c" or r["verdict"] == "met":
        continue
    key = (r["workload"], r["workers"])
    o, b = pooled.get((r["ours"],) + key), pooled.get(("libfdb_c",) + key)
    if not o or not b or o["server_busiest_thread_us_per_txn"] is None:
        continue
    n, s, c = r["workers"], o["server_busiest_thread_us_per_txn"], o["cpu_us_per_txn"]
    target = 0.6 * b["mean_us"]
    if n == 1:
        allowed, model = target - max(o["mean_us"] - c, 0.0), "—"
    else:
        allowed, model = target / n - s, f"{o['mean_us'] / (n * (s + c)):.2f}"
    print(f"| {r['ours']} | {r['workload']} | {n} | {r['geomean']:.2f} | {model} | {allowed:.1f} | "
          f"{c:.1f} | {b['cpu_us_per_txn']:.1f} | {allowed / b['cpu_us_per_txn']:.2f} |")
