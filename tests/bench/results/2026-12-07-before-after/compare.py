#!/usr/bin/env python3
"""Holds two fdb-bench reports against each other, cell by cell.

    compare.py BEFORE/results.md AFTER/results.md

Each report's "Ratios <arm> / libfdb_c" tables give, per workload, worker count and
measure, a ratio to libfdb_c from the same invocation with its 95% interval. Dividing by
libfdb_c's own figures takes out what the machine did between the two invocations. A cell
counts as worse (or better) only where the two intervals do not overlap.
"""
import re
import sys

ARMS = ("rust-tokio", "rust-mio")
NUM = r"([0-9.]+) \[([0-9.]+), ([0-9.]+)\]"


def ratios(path):
    """{(arm, workload, workers, measure): (point, low, high)}"""
    out, arm, names = {}, None, None
    for line in open(path):
        m = re.match(r"## Ratios (\S+) / libfdb_c", line)
        if m:
            arm, names = (m.group(1) if m.group(1) in ARMS else None), None
            continue
        if line.startswith("## "):
            arm = None
            continue
        if arm is None or not line.startswith("|"):
            continue
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if cols[0] == "workload":
            names = cols
            continue
        if names is None or not cols[1].isdigit():
            continue
        for name, cell in zip(names[2:], cols[2:]):
            m = re.fullmatch(NUM, cell)
            if m:
                out[(arm, cols[0], int(cols[1]), name)] = tuple(map(float, m.groups()))
    return out


def main():
    before, after = ratios(sys.argv[1]), ratios(sys.argv[2])
    worse, better, same = [], [], 0
    for key in sorted(before.keys() & after.keys()):
        b, a = before[key], after[key]
        if a[1] > b[2]:
            worse.append((key, b, a))
        elif a[2] < b[1]:
            better.append((key, b, a))
        else:
            same += 1
    show = lambda r: f"{r[0]:.2f} [{r[1]:.2f}, {r[2]:.2f}]"
    print(f"{len(before.keys() & after.keys())} cells: {len(worse)} worse, {len(better)} better, {same} within the noise")
    for title, rows in (("worse (after's interval above before's)", worse), ("better", better)):
        print(f"\n{title}:")
        for (arm, wl, workers, name), b, a in rows:
            print(f"  {arm} {wl} x{workers} {name}: {show(b)} -> {show(a)}")


if __name__ == "__main__":
    main()
