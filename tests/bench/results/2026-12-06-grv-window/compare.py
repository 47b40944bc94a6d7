#!/usr/bin/env python3
"""Before/after table from run.sh's four invocations (old1 new1 new2 old2), each a directory
with fdb-bench's results.json (or results.json.gz, as committed here):

    python3 compare.py DIR

Per cell and arm: the cluster's CPU per transaction and the busiest fdbserver thread's turns
per transaction, before → after (each the mean of its two invocations), the same for
libfdb_c in those invocations, ours ÷ libfdb_c (geometric mean of the per-invocation
ratios), and read-version requests per transaction, derived from the client → server bytes
(the frames are 196 bytes for a GetReadVersionRequest, 292 for get100/get1000's GetValue,
644 for set100's Commit; see BENCHMARKS.md, "Same work on the wire").
"""
import gzip
import json
import math
import os
import sys

out = sys.argv[1]
WORK_BYTES = {"grv": 0, "get100": 292, "get1000": 292, "set100": 644}
GRV_BYTES = 196


def load(name):
    path = f"{out}/{name}/results.json"
    r = json.load(gzip.open(path + ".gz") if os.path.exists(path + ".gz") else open(path))
    cells = {}
    for c in r["cells"]:
        p = c.get("pooled")
        if p:
            cells[(c["workload"], c["workers"], c["arm"])] = p
    return cells


runs = {n: load(n) for n in ("old1", "new1", "new2", "old2")}
before, after = ("old1", "old2"), ("new1", "new2")


def mean(xs):
    return sum(xs) / len(xs)


def gmean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def metric(p, m):
    if m == "cpu":
        return p["server_cpu_us_per_txn"]
    if m == "turns":
        return p["server_busiest_thread_turns_per_txn"]
    if m == "grv":
        w = p["wire_per_txn"]
        return (w["client_to_server_bytes"] - WORK_BYTES[wl]) / GRV_BYTES
    if m == "mean":
        return p["mean_us"]
    raise KeyError(m)


keys = sorted({(w, n) for (w, n, _) in runs["old1"]}, key=lambda k: (list(WORK_BYTES).index(k[0]), k[1]))
print("| workload | workers | arm | server CPU µs/txn before → after | ÷ libfdb_c before → after | server turns/txn before → after | read-version requests/txn before → after | mean latency ÷ libfdb_c before → after |")
print("|---|---:|---|---|---|---|---|---|")
for wl, n in keys:
    for arm in ("libfdb_c", "rust-mio", "rust-tokio"):
        def vals(m, names, a=arm):
            return [metric(runs[x][(wl, n, a)], m) for x in names]

        def ratio(m, names):
            return gmean([metric(runs[x][(wl, n, arm)], m) / metric(runs[x][(wl, n, "libfdb_c")], m) for x in names])

        cpu = f"{mean(vals('cpu', before)):.1f} → {mean(vals('cpu', after)):.1f}"
        turns = f"{mean(vals('turns', before)):.2f} → {mean(vals('turns', after)):.2f}"
        grv = f"{mean(vals('grv', before)):.2f} → {mean(vals('grv', after)):.2f}"
        if arm == "libfdb_c":
            rc = rm = ""
        else:
            rc = f"{ratio('cpu', before):.2f} → {ratio('cpu', after):.2f}"
            rm = f"{ratio('mean', before):.2f} → {ratio('mean', after):.2f}"
        print(f"| {wl} | {n} | {arm} | {cpu} | {rc} | {turns} | {grv} | {rm} |")

# The traffic, as the cluster received it: per transaction, each the mean of the two
# invocations of its binary (libfdb_c's from all four).
print()
print("| workload | workers | arm | read-version requests | c→s segments | server receive calls | server epoll waits | s→c segments | server turns |")
print("|---|---:|---|---|---|---|---|---|---|")


def wire(p, k):
    return p["wire_per_txn"][k]


for wl, n in keys:
    for arm in ("libfdb_c", "rust-mio", "rust-tokio"):
        def both(f):
            if arm == "libfdb_c":
                return f"{mean([f(runs[x][(wl, n, arm)]) for x in before + after]):.2f}"
            b = mean([f(runs[x][(wl, n, arm)]) for x in before])
            a = mean([f(runs[x][(wl, n, arm)]) for x in after])
            return f"{b:.2f} → {a:.2f}"

        grv = both(lambda p: (wire(p, "client_to_server_bytes") - WORK_BYTES[wl]) / GRV_BYTES)
        segs = both(lambda p: wire(p, "client_to_server_segments"))
        recvs = both(lambda p: wire(p, "server_recv_calls"))
        epolls = both(lambda p: wire(p, "server_epoll_waits"))
        s2c = both(lambda p: wire(p, "server_to_client_segments"))
        turns = both(lambda p: p["server_busiest_thread_turns_per_txn"])
        print(f"| {wl} | {n} | {arm} | {grv} | {segs} | {recvs} | {epolls} | {s2c} | {turns} |")
