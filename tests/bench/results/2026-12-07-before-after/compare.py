#!/usr/bin/env python3
"""Holds two fdb-bench reports against each other, cell by cell.

    compare.py BEFORE/results.md AFTER/results.md

Each report's "Ratios <arm> / libfdb_c" tables give, per workload, worker count and
measure, a ratio to libfdb_c from the same invocation with its 95% interval. Dividing by
libfdb_c's own figures takes out what the machine did between the two invocations. A cell
counts as worse (or better) only where the two intervals do not overlap.
"""
import os
import sys

# The ratio tables are read as the campaign summary reads them.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06-campaign"))
from summarize import cells  # noqa: E402


def ratios(path):
    """{(arm, workload, workers, measure): (point, low, high)}"""
    return {(arm, wl, workers, name): (point, low, high)
            for arm, wl, workers, name, point, low, high in cells(path)}


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
