import sys, glob, os, statistics, re, collections
# usage: summarize.py DIR [AFTER]: DIR holds before-N.md and AFTER-N.md (results.md of each
# invocation); prints per cell the median over invocations of each arm's pooled value and of
# each arm's ratio to libfdb_c (taken within each invocation).
S=sys.argv[1]; AFTER=sys.argv[2] if len(sys.argv)>2 else 'after4'
rows=collections.defaultdict(list)  # (w,workers,arm,variant,metric) -> list
for p in sorted(glob.glob(f'{S}/*-*.md')):
    v,i=os.path.basename(p)[:-3].rsplit('-',1)
    if not os.path.exists(p): continue
    inarm=False
    per={}
    for line in open(p):
        c=[x.strip() for x in line.strip().strip('|').split('|')]
        if len(c)==10 and c[2] in ('rust-tokio','rust-mio','libfdb_c','floor') and re.match(r'^[0-9.]+$',c[7] or 'x'):
            key=(c[0],c[1],c[2])
            if key in per: continue  # first table only (pooled per-arm)
            per[key]=dict(mean=float(c[3]),p99=float(c[5]),cpu=float(c[7]),allocs=float(c[8]),heap=float(c[9]))
    for (w,k,a),m in per.items():
        for mk,val in m.items(): rows[(w,k,a,v,mk)].append(val)
        if a!='libfdb_c' and (w,k,'libfdb_c') in per:
            for mk in ('mean','p99','cpu'):
                rows[(w,k,a+'/libfdb_c',v,mk)].append(m[mk]/per[(w,k,'libfdb_c')][mk])
keys=sorted(set((w,k,a,mk) for (w,k,a,v,mk) in rows))
print('| workload | workers | series | metric | before (median) | after (median) | after/before | n |')
print('|---|---:|---|---|---:|---:|---:|---:|')
for (w,k,a,mk) in keys:
    b=rows.get((w,k,a,'before',mk),[]); f=rows.get((w,k,a,AFTER,mk),[])
    if not b or not f: continue
    mb,mf=statistics.median(b),statistics.median(f)
    fmt=(lambda x:f'{x:.3f}') if '/' in a else (lambda x:f'{x:.4g}')
    print(f'| {w} | {k} | {a} | {mk} | {fmt(mb)} | {fmt(mf)} | {mf/mb if mb else float("nan"):.2f} | {len(b)}/{len(f)} |')
