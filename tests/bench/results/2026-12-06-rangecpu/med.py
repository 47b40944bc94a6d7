import os, sys, glob, re, statistics, collections
HERE = os.path.dirname(os.path.abspath(__file__))
# usage: med.py name1 name2 ...
def parse(path):
    d={}
    for line in open(path):
        if line.startswith('## Wire'): break
        m=re.match(r'\| (\w+) \| (\d+) \| ([\w-]+) \| ([\d.]+) \| [\d.]+ \| [\d.]+ \| [\d.]+ \| ([\d.]+) \|',line)
        if m:
            d[(m[1],int(m[2]),m[3])]=(float(m[5]), float(m[4]))
    return d
for arg in sys.argv[1:]:
    name,_,rng=arg.partition(':')
    paths=sorted(glob.glob(f'{HERE}/runs/{name}-*.md'))
    if rng:
        a,b=map(int,rng.split('-'))
        paths=[p for p in paths if a<=int(p.split('/')[-1][:-3].rsplit('-',1)[1])<=b]
    runs=[parse(p) for p in paths]
    cells=sorted({(w,k) for r in runs for (w,k,a) in r})
    print(f"== {name}: {len(runs)} invocations; CPU µs/tx median (ratio to libfdb_c median)")
    for w,k in cells:
        row=[]
        for arm in ['libfdb_c','rust-tokio','rust-mio']:
            cpu=[r[(w,k,arm)][0] for r in runs if (w,k,arm) in r]
            rat=[r[(w,k,arm)][0]/r[(w,k,'libfdb_c')][0] for r in runs if (w,k,arm) in r and (w,k,'libfdb_c') in r]
            if arm=='libfdb_c': row.append(f"{arm} {statistics.median(cpu):6.2f}")
            else: row.append(f"{arm} {statistics.median(cpu):6.2f} ({statistics.median(rat):.3f}) [{' '.join('%.2f'%x for x in rat)}]")
        print(f"  {w} x{k}: "+" | ".join(row))
