import os, sys, glob, re, statistics
HERE = os.path.dirname(os.path.abspath(__file__))
# per-cell table: CPU us/tx median, ratio median, allocs/tx median, for each name:range given
def parse(path):
    d={}
    for line in open(path):
        if line.startswith('## Wire'): break
        c=[x.strip() for x in line.split('|')]
        if len(c)>=14 and c[1] in ('range100','set100') and c[2].isdigit():
            d[(c[1],int(c[2]),c[3])]=(float(c[8]), float(c[9]))
    return d
def load(arg):
    name,_,rng=arg.partition(':')
    paths=sorted(glob.glob(f'{HERE}/runs/{name}-*.md'))
    if rng:
        a,b=map(int,rng.split('-'))
        paths=[p for p in paths if a<=int(p.split('/')[-1][:-3].rsplit('-',1)[1])<=b]
    return [parse(p) for p in paths]
A=load(sys.argv[1]); B=load(sys.argv[2])
print(f"| cell | arm | CPU µs/tx before → after | / libfdb_c before → after | allocs/tx before → after |")
print("|---|---|---|---|---|")
for w in ['range100','set100']:
  for k in [8,32,64]:
    for arm in ['rust-tokio','rust-mio']:
        def s(R):
            cpu=statistics.median(r[(w,k,arm)][0] for r in R)
            rat=statistics.median(r[(w,k,arm)][0]/r[(w,k,'libfdb_c')][0] for r in R)
            al=statistics.median(r[(w,k,arm)][1] for r in R)
            return cpu,rat,al
        a=s(A); b=s(B)
        print(f"| {w} ×{k} | {arm} | {a[0]:.1f} → {b[0]:.1f} | {a[1]:.2f} → {b[1]:.2f} | {a[2]:.2f} → {b[2]:.2f} |")
    lf=[statistics.median(r[(w,k,'libfdb_c')][0] for r in R) for R in (A,B)]
    la=[statistics.median(r[(w,k,'libfdb_c')][1] for r in R) for R in (A,B)]
    print(f"| {w} ×{k} | libfdb_c | {lf[0]:.1f} / {lf[1]:.1f} | | {la[0]:.2f} / {la[1]:.2f} |")
