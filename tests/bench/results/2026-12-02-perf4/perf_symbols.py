import sys, subprocess, bisect, re, collections
data, binary = sys.argv[1], sys.argv[2]
nm = subprocess.run(['nm','-C','--defined-only',binary],capture_output=True,text=True).stdout.splitlines()
syms=[]
for l in nm:
    p=l.split(' ',2)
    if len(p)==3 and p[1] in 'tTwW':
        syms.append((int(p[0],16),p[2]))
syms.sort(); addrs=[a for a,_ in syms]
out = subprocess.run(['perf','report','-i',data,'--no-children','--sort','dso,symbol','--stdio','-g','none','--percent-limit','0.01'],capture_output=True,text=True).stdout
agg=collections.Counter()
for l in out.splitlines():
    m=re.match(r'\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)',l)
    if not m: continue
    pct,dso,kind,sym=float(m.group(1)),m.group(2),m.group(3),m.group(4).strip()
    if sym.startswith('0x') and 'fdb' in dso:
        a=int(sym.split()[0],16)+0x1000; i=bisect.bisect_right(addrs,a)-1
        sym=syms[i][1] if i>=0 else sym
    sym=re.sub(r'::h[0-9a-f]{16}$','',sym)
    agg[(kind,sym[:150])]+=pct
for (k,s),p in agg.most_common(int(sys.argv[3]) if len(sys.argv)>3 else 45):
    print(f'{p:6.2f}% [{k}] {s}')
