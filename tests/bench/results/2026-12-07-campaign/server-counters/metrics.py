"""Per-transaction server counters for one arm's run, from fdbserver's own trace metrics.

    python3 metrics.py LOGDIR T0 T1   # the runs' window, unix seconds

Sums, over every 5 s metrics event that lies wholly inside [T0, T1], the per-interval totals
of the commit proxy's, GRV proxy's, resolver's and process's counters, and divides by the
transactions the commit proxy took in.
"""
import glob, re, sys
logdir, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
want = {
    "ProxyMetrics": ["TxnCommitIn", "CommitBatchIn", "Mutations", "MutationBytes", "ConflictRanges"],
    "GrvProxyMetrics": ["TxnRequestIn", "TxnStartIn", "TxnStartBatch"],
    "ResolverMetrics": ["ResolveBatchIn"],
    "TLogMetrics": ["BytesInput"],
    "ProcessMetrics": ["CPUSeconds", "MainThreadCPUSeconds"],
}
sums = {}
for f in glob.glob(f"{logdir}/*/trace*.xml"):
    for line in open(f, errors="replace"):
        m = re.search(r'Type="(\w+)"', line)
        if not m or m.group(1) not in want:
            continue
        a = dict(re.findall(r' (\w+)="([^"]*)"', line))
        t, el = float(a["Time"]), float(a.get("Elapsed", "0") or 0)
        if not (t0 <= t - el and t <= t1) or el <= 0:
            continue
        for k in want[m.group(1)]:
            v = a.get(k)
            if v is None:
                continue
            parts = v.split()
            # counters: "rate roughness total" -> the interval's count is rate * elapsed
            x = float(parts[0]) * el if len(parts) == 3 else float(v)
            sums[(m.group(1), k)] = sums.get((m.group(1), k), 0.0) + x
txns = sums.get(("ProxyMetrics", "TxnCommitIn"), 0.0)
print(f"commits {txns:.0f}")
for (t, k), v in sorted(sums.items()):
    print(f"  {t}.{k}: {v:.1f}  per commit {v / txns if txns else float('nan'):.4f}")
