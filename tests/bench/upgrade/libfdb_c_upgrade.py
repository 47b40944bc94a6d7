"""libfdb_c's multi-version client across a live 7.3.77 -> 7.4.6 upgrade, for comparison with
`tests/tests/real_upgrade.rs`: a bank workload (8 threads, on_error retry loops, a unique id per
transfer checked in every attempt) while `cluster.sh upgrade DIR 7.4.6` runs; prints one JSON
line: failures, the sum and id invariants, the errors on_error retried, the longest transfer
across the upgrade, the longest one the upgrade hit, the longest time without a commit.

    cluster.sh start DIR 3                     # a 7.3.77 cluster
    mkdir EXT && cp <7.4.6>/lib/libfdb_c.so EXT/libfdb_c_7.4.6.so
    LD_LIBRARY_PATH=<7.3.77>/lib python libfdb_c_upgrade.py DIR EXT   # foundationdb==7.3.77

`cluster.sh` is `$FDB_SHARED_DIR/cluster.sh` (as for the tests), else `../shared/fdb/cluster.sh`
beside the checkout.
"""
import os, random, subprocess, sys, threading, time, uuid, json

cluster_dir, ext_dir = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
cluster_sh = os.path.join(
    os.environ.get("FDB_SHARED_DIR") or os.path.join(here, "..", "..", "..", "..", "shared", "fdb"),
    "cluster.sh")
import fdb
fdb.api_version(730)
fdb.options.set_external_client_directory(ext_dir)
db = fdb.open(os.path.join(cluster_dir, "fdb.cluster"))
db.options.set_transaction_timeout(120000)
N, INIT = 16, 1000
P = b"mvc_upgrade/"
acct = lambda i: P + b"acct/%02d" % i
idk = lambda u: P + b"ids/" + u.encode()

@fdb.transactional
def init(tr):
    del tr[P:P + b"\xff"]
    for i in range(N):
        tr[acct(i)] = str(INIT).encode()
init(db)

stop = threading.Event()
records, lock = [], threading.Lock()

def worker(seed):
    rnd = random.Random(seed)
    while not stop.is_set():
        a, b = rnd.sample(range(N), 2)
        amt = rnd.randint(1, 10)
        u = uuid.uuid4().hex
        start = time.monotonic()
        tr = db.create_transaction()
        retried, outcome = [], "committed"
        while True:
            try:
                if tr[idk(u)].present():
                    break
                x = int(tr[acct(a)]); y = int(tr[acct(b)])
                tr[acct(a)] = str(x - amt).encode(); tr[acct(b)] = str(y + amt).encode()
                tr[idk(u)] = b"%d,%d,%d" % (a, b, amt)
                tr.commit().wait()
                break
            except fdb.FDBError as e:
                retried.append(e.code)
                try:
                    tr.on_error(e).wait()
                except fdb.FDBError as e2:
                    outcome = "failed %d" % e2.code
                    break
        with lock:
            records.append((start, time.monotonic(), outcome, retried))

threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
for t in threads: t.start()
time.sleep(4)
u0 = time.monotonic()
subprocess.run([cluster_sh, "upgrade", cluster_dir, "7.4.6"], check=True,
               stdout=subprocess.DEVNULL)
u1 = time.monotonic()
time.sleep(5)
stop.set()
for t in threads: t.join()

@fdb.transactional
def state(tr):
    bal = [int(tr[acct(i)]) for i in range(N)]
    ids = {k.key[len(P) + 4:].decode(): v for k, v in ((kv, kv.value) for kv in tr.get_range_startswith(P + b"ids/"))}
    return bal, ids
bal, ids = state(db)
exp = [INIT] * N
for v in ids.values():
    a, b, amt = map(int, v.split(b","))
    exp[a] -= amt; exp[b] += amt
failed = [r for r in records if r[2] != "committed"]
across = [r for r in records if r[0] < u1 and r[1] > u0]
ends = sorted(r[1] for r in records if r[2] == "committed")
gaps = [(b - a, a - u0) for a, b in zip(ends, ends[1:])]
errs = {}
for r in records:
    for c in r[3]: errs[c] = errs.get(c, 0) + 1
longest = max(across, key=lambda r: r[1] - r[0])
hit = [r for r in across if any(c in (1007, 1021, 1039, 1037, 1038) for c in r[3])]
lh = max(hit, key=lambda r: r[1] - r[0]) if hit else None
print(json.dumps({
    "transfers": len(records), "failed": len(failed), "failed_codes": sorted({r[2] for r in failed}),
    "sum": sum(bal), "balances_match_ids": exp == bal, "committed_records": sum(1 for r in records if r[2] == "committed"), "expected_sum": N * INIT, "id_keys": len(ids),
    "upgrade_s": round(u1 - u0, 2), "retried": errs,
    "longest_across_s": round(longest[1] - longest[0], 3), "longest_started_rel_s": round(longest[0] - u0, 2),
    "hit": len(hit), "longest_hit_s": round(lh[1] - lh[0], 3) if lh else None, "longest_hit_retried": lh[3] if lh else None, "longest_no_commit_s": round(max(gaps)[0], 3), "gap_at_rel_s": round(max(gaps)[1], 2),
    "after_upgrade_committed": sum(1 for r in records if r[0] > u1 and r[2] == "committed"),
}))
