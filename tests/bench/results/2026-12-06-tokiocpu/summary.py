"""Medians over the invocations of each build: rust-tokio / libfdb_c (client CPU and mean
latency, each the invocation's geometric mean over its blocks). python3 summary.py [DIR]"""
import collections, glob, os, re, statistics, sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
cells = collections.defaultdict(list)
for md in sorted(glob.glob(os.path.join(root, '*-*-*', 'results.md'))):
    tag, build, _ = os.path.basename(os.path.dirname(md)).split('-')
    sec = open(md).read().split('## Ratios rust-tokio / libfdb_c')[1].split('\n## ')[0]
    for line in sec.splitlines():
        c = [x.strip() for x in line.split('|')]
        if len(c) > 6 and c[2].isdigit():
            cells[(c[1], int(c[2]), tag, build)].append(
                (float(c[5].split()[0]), float(c[3].split()[0])))
print('| workload | workers | set | build | runs | CPU/txn ÷ libfdb_c | mean latency ÷ libfdb_c |')
print('|---|---:|---|---|---:|---|---|')
for (w, n, tag, build), v in sorted(cells.items()):
    cpu = statistics.median(x[0] for x in v)
    mean = statistics.median(x[1] for x in v)
    print(f'| {w} | {n} | {tag} | {build} | {len(v)} | {cpu:.2f} | {mean:.2f} |')
