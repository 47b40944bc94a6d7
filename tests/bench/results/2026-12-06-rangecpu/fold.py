import sys, re, collections
# parse perf script output into stacks (leaf first)
def stacks(path):
    st=[]; cur=None
    for line in open(path, errors='replace'):
        line=line.rstrip('\n')
        if not line.strip():
            if cur is not None: st.append(cur); cur=None
            continue
        if not line.startswith((' ','\t')):
            cur=[]; continue
        parts=line.strip().split(None,1)
        if len(parts)==2:
            sym=parts[1]; sym=re.sub(r'\+0x[0-9a-f]+','',sym); sym=re.sub(r' \(.*\)$','',sym)
            cur.append(sym)
    if cur: st.append(cur)
    return st
S=stacks(sys.argv[1]); N=len(S)
mode=sys.argv[2]
if mode=='incl':
    c=collections.Counter()
    for s in S:
        for f in set(s): c[f]+=1
    for f,n in c.most_common(int(sys.argv[3]) if len(sys.argv)>3 else 80):
        print(f"{100*n/N:6.2f}% {f[:170]}")
elif mode=='callers':
    pat=sys.argv[3]; depth=int(sys.argv[4]) if len(sys.argv)>4 else 1
    c=collections.Counter(); tot=0
    for s in S:
        if s and re.search(pat,s[0]):
            tot+=1
            # first frame not matching skip pattern
            fr=[f for f in s[1:] if not re.search(r'^(alloc::|core::|bytes::|__|_int|malloc|free|cfree|unlink|<alloc|<core|<bytes|realloc|_mid|tcache)',f)]
            c[' <- '.join(x[:90] for x in fr[:depth])]+=1
    print(f"total {100*tot/N:.2f}%")
    for f,n in c.most_common(25): print(f"{100*n/N:6.2f}% {f}")
if mode=='self':
    c=collections.Counter()
    for s in S:
        if s: c[s[0]]+=1
    for f,n in c.most_common(int(sys.argv[3])): print(f"{100*n/N:6.2f}% {f[:150]}")
