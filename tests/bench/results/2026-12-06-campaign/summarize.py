"""Issue 25's targets over a campaign's results.md files: per arm, the cells met (whole
interval at or below the target), met on the point estimate only, and in all; then every
cell whose whole interval lies above its target (a measured miss, not noise).

    python3 summarize.py real-1proc/results.md real-3proc/results.md
"""
import re
import sys

COLUMNS = ["mean", "p99", "cpu", "server cpu", "allocs"]


def target(name, workers):
    if name in ("mean", "p99"):
        return 0.6 if workers == 1 else 1.0
    return 0.5 if name == "cpu" else 1.0


def cells(path):
    """(arm, workload, workers, column, point, low, high) for every ratio cell against libfdb_c."""
    arm = None
    for line in open(path):
        m = re.match(r"## Ratios (\S+) / libfdb_c", line)
        if m:
            arm = m.group(1)
            continue
        if line.startswith("## "):
            arm = None
        if not arm or not line.startswith("| ") or "targets" in line or "---" in line:
            continue
        f = [x.strip() for x in line.strip().strip("|").split("|")]
        for name, cell in zip(COLUMNS, f[2:7]):
            point, low, high = map(float, re.findall(r"[\d.]+", cell)[:3])
            yield arm, f[0], int(f[1]), name, point, low, high


def main():
    for path in sys.argv[1:]:
        counts, above = {}, []
        for arm, wl, workers, name, point, low, high in cells(path):
            c = counts.setdefault(arm, {}).setdefault(name, [0, 0, 0])
            t = target(name, workers)
            c[0] += high <= t
            c[1] += point <= t < high
            c[2] += 1
            if low > t:
                above.append(f"{arm} {wl} x{workers} {name} {point:.2f} [{low:.2f}, {high:.2f}]")
        print(f"{path}: cells met / point estimate only / all")
        for arm, c in counts.items():
            print(f"  {arm}: " + ", ".join(f"{n} {v[0]}/{v[1]}/{v[2]}" for n, v in c.items()))
        print("  whole interval above the target:")
        for a in above:
            print(f"    {a}")


if __name__ == "__main__":
    main()
