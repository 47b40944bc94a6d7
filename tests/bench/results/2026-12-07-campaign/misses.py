"""Every cell of a report that does not meet its target, with the reason the report gives
for it ("Why mean-latency / one-worker p99 / client-CPU / server-CPU cells miss"); a cell no
section covers shows "—" (allocations, p99 beyond one worker, and one-worker p99 in reports
made before that section).

    python3 misses.py real-1proc/results.md
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "2026-12-06-campaign"))
from summarize import cells, target  # noqa: E402

SECTIONS = {"mean-latency": "mean", "one-worker p99": "p99", "client-CPU": "cpu", "server-CPU": "server cpu"}


def reasons(path):
    """(arm, workload, workers, column) -> the report's verdict for that cell."""
    out, column = {}, None
    for line in open(path):
        m = re.match(r"## Why (.+) cells miss", line)
        if m:
            column = SECTIONS.get(m.group(1))
            continue
        if line.startswith("## "):
            column = None
        if column and line.startswith("| rust") and "---" not in line:
            f = [x.strip() for x in line.strip().strip("|").split("|")]
            workers = 1 if column == "p99" else int(f[2])
            out[(f[0], f[1], workers, column)] = f[-1]
    return out


def main():
    path = sys.argv[1]
    why = reasons(path)
    for arm, wl, workers, name, point, low, high in cells(path):
        t = target(name, workers)
        if high <= t:
            continue
        kind = "above" if low > t else "straddles"
        print(f"{arm} {wl} x{workers} {name} {point:.2f} [{low:.2f}, {high:.2f}] ({kind} {t}): "
              f"{why.get((arm, wl, workers, name), '—')}")


if __name__ == "__main__":
    main()
