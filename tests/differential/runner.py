#!/usr/bin/env python3
"""The libfdb_c side of the differential test (tests/tests/differential.rs).

One process per test run: it reads one JSON request per line on stdin and answers with one
JSON line on stdout. A request is {"prefix": HEX, "program": {...}} (the program format is
documented in tests/src/differential/program.rs); the answer is
{"outcomes": [...], "final": [[KEY, VALUE], ...], "stamps": {STEP: HEX}} with raw bytes in hex:
the Rust side normalizes and compares.

Everything goes through libfdb_c's C functions as the Python binding exposes them, with no
binding-level behaviour on top: range reads call fdb_transaction_get_range batch by batch
(the binding's FDBRange iterator would switch the streaming mode after the first batch and
never passes target_bytes), and the batch loop is written out here exactly as the Rust
client's RangeCursor does it.
"""

import ctypes
import json
import os
import sys
import traceback

import fdb

fdb.api_version(730)
import fdb.impl  # noqa: E402  (after api_version, which loads the C library)

MODES = {
    "want_all": -2,
    "iterator": -1,
    "exact": 0,
    "small": 1,
    "medium": 2,
    "large": 3,
    "serial": 4,
}
CONFLICTING_KEYS = b"\xff\xff/transaction/conflicting_keys/"


def key_of(spec, prefix):
    """A key spec: "r:HEX" (under the program's prefix) or "a:HEX" (absolute), optionally
    followed by "+N": padded with b"x" to N bytes in all."""
    kind, rest = spec.split(":", 1)
    pad = None
    if "+" in rest:
        rest, n = rest.split("+", 1)
        pad = int(n)
    k = bytes.fromhex(rest)
    if kind == "r":
        k = prefix + k
    elif kind != "a":
        raise ValueError("bad key spec %r" % spec)
    if pad is not None and len(k) < pad:
        k = k + b"x" * (pad - len(k))
    return k


def value_of(spec):
    """A value spec: "HEX", optionally "+N" (padded with b"v" to N bytes)."""
    pad = None
    if "+" in spec:
        spec, n = spec.split("+", 1)
        pad = int(n)
    v = bytes.fromhex(spec)
    if pad is not None and len(v) < pad:
        v = v + b"v" * (pad - len(v))
    return v


def sel_of(s, prefix):
    return (key_of(s["key"], prefix), bool(s["or_equal"]), int(s["offset"]))


def raw_get_range(tr, b, e, limit, target_bytes, mode, iteration, snapshot, reverse):
    """One fdb_transaction_get_range call: (rows, more)."""
    f = fdb.impl.FutureKeyValueArray(
        tr.capi.fdb_transaction_get_range(
            tr.tpointer,
            b[0], len(b[0]), b[1], b[2],
            e[0], len(e[0]), e[1], e[2],
            limit, target_bytes, mode, iteration, snapshot, reverse,
        )
    )
    kvs, count, more = f.wait()
    return [(kv.key, kv.value) for kv in kvs], bool(more)


def range_loop(tr, b, e, limit, target_bytes, mode, snapshot, reverse):
    """Batch after batch, continuing after the last row (before it in reverse), the
    iteration growing and `limit` bounding the total: the Rust RangeCursor's loop."""
    batches = []
    total = limit
    got = 0
    iteration = 1
    while True:
        rows, more = raw_get_range(tr, b, e, limit, target_bytes, mode, iteration, snapshot, reverse)
        batches.append((rows, more))
        got += len(rows)
        if total > 0 and got >= total:
            break
        if not more or not rows:
            break
        last = rows[-1][0]
        if reverse:
            e = (last, False, 1)
        else:
            b = (last, True, 1)
        if total > 0:
            limit = total - got
        iteration += 1
    return batches


def strinc(p):
    p = p.rstrip(b"\xff")
    return p[:-1] + bytes([p[-1] + 1])


def hx(b):
    return None if b is None else b.hex()


def batches_json(batches):
    return {"batches": [[[[k.hex(), v.hex()] for k, v in rows], more] for rows, more in batches]}


class Runner:
    def __init__(self, db):
        self.db = db

    def setup(self, prefix, init):
        tr = self.db.create_transaction()
        while True:
            try:
                tr.clear_range(prefix, strinc(prefix))
                for k, v in init:
                    tr.set(prefix + bytes.fromhex(k), value_of(v))
                tr.commit().wait()
                return
            except fdb.FDBError as e:
                tr.on_error(e).wait()

    def final(self, prefix):
        tr = self.db.create_transaction()
        while True:
            try:
                b = (prefix, False, 1)
                e = (strinc(prefix), False, 1)
                rows = [r for rows, _ in range_loop(tr, b, e, 0, 0, MODES["want_all"], False, False) for r in rows]
                tr.clear_range(prefix, strinc(prefix))
                tr.commit().wait()
                return [[k.hex(), v.hex()] for k, v in rows]
            except fdb.FDBError as e:
                tr.on_error(e).wait()

    def run(self, prefix, program):
        self.setup(prefix, program.get("init", []))
        n = int(program.get("txs", 1))
        trs = [self.db.create_transaction() for _ in range(n)]
        commit_started = [False] * n
        outcomes = []
        stamps = {}
        # Reads started and not yet waited for, by id: a function giving the outcome.
        self.pending = {}
        for i, step in enumerate(program["steps"]):
            t = int(step["tx"])
            try:
                if "pending" in step:
                    self.pending[int(step["pending"])] = self.start(trs[t], step, prefix)
                    outcomes.append(None)
                    continue
                if step["op"] == "wait":
                    finish = self.pending.pop(int(step["id"]), None)
                    outcomes.append({"err": -3} if finish is None else finish())
                    continue
                out, stamp = self.step(trs[t], step, prefix, commit_started, t)
                if stamp is not None:
                    stamps[str(i)] = stamp.hex()
            except fdb.FDBError as e:
                out = {"err": e.code}
            outcomes.append(out)
        del trs
        return {"outcomes": outcomes, "final": self.final(prefix), "stamps": stamps}

    def start(self, tr, s, prefix):
        """Calls the read's C function now (a get, a get_key, one range batch) and returns
        what waits for it later; steps run in between while it is pending."""
        op = s["op"]
        r = tr.snapshot if s.get("snapshot") else tr
        if op == "get":
            f = r.get(key_of(s["key"], prefix))
            conv = lambda v: {"value": hx(v.value if v.present() else None)}  # noqa: E731
            wait = f.wait
        elif op == "get_key":
            k, oe, off = sel_of(s["sel"], prefix)
            f = r.get_key(fdb.KeySelector(k, oe, off))
            conv = lambda k: {"key": k.hex()}  # noqa: E731
            wait = f.wait
        elif op == "get_range":
            b, e = sel_of(s["begin"], prefix), sel_of(s["end"], prefix)
            f = fdb.impl.FutureKeyValueArray(
                tr.capi.fdb_transaction_get_range(
                    tr.tpointer,
                    b[0], len(b[0]), b[1], b[2],
                    e[0], len(e[0]), e[1], e[2],
                    int(s.get("limit", 0)), int(s.get("target_bytes", 0)), MODES[s.get("mode", "iterator")],
                    int(s.get("iteration", 1)), bool(s.get("snapshot")), bool(s.get("reverse")),
                )
            )

            def wait():
                kvs, _count, more = f.wait()
                return [(kv.key, kv.value) for kv in kvs], bool(more)

            conv = lambda rm: batches_json([rm])  # noqa: E731
        else:
            raise ValueError("op %r cannot be pending" % op)

        def finish():
            try:
                return conv(wait())
            except fdb.FDBError as e:
                return {"err": e.code}

        return finish

    def step(self, tr, s, prefix, commit_started, t):
        op = s["op"]
        K = lambda spec: key_of(spec, prefix)  # noqa: E731
        if op == "get":
            r = tr.snapshot if s.get("snapshot") else tr
            v = r.get(K(s["key"])).wait()
            return {"value": hx(v.value if v.present() else None)}, None
        if op == "get_key":
            r = tr.snapshot if s.get("snapshot") else tr
            k, oe, off = sel_of(s["sel"], prefix)
            return {"key": r.get_key(fdb.KeySelector(k, oe, off)).wait().hex()}, None
        if op == "get_range":
            b, e = sel_of(s["begin"], prefix), sel_of(s["end"], prefix)
            args = (int(s.get("limit", 0)), int(s.get("target_bytes", 0)), MODES[s.get("mode", "iterator")],
                    bool(s.get("snapshot")), bool(s.get("reverse")))
            if "iteration" in s:
                limit, target, mode, snap, rev = args
                rows, more = raw_get_range(tr, b, e, limit, target, mode, int(s["iteration"]), snap, rev)
                return batches_json([(rows, more)]), None
            return batches_json(range_loop(tr, b, e, *args)), None
        if op == "conflicting_keys":
            b = (CONFLICTING_KEYS, False, 1)
            e = (CONFLICTING_KEYS + b"\xff", False, 1)
            return batches_json(range_loop(tr, b, e, 0, 0, MODES["want_all"], False, False)), None
        if op == "set":
            tr.set(K(s["key"]), value_of(s["value"]))
            return None, None
        if op == "clear":
            tr.clear(K(s["key"]))
            return None, None
        if op == "clear_range":
            tr.capi.fdb_transaction_clear_range(tr.tpointer, *kl(K(s["begin"])), *kl(K(s["end"])))
            return None, None
        if op == "atomic":
            tr._atomic_operation(int(s["code"]), K(s["key"]), value_of(s["param"]))
            return None, None
        if op == "vs_key":
            pre, post = bytes.fromhex(s["pre"]), bytes.fromhex(s["post"])
            key = prefix + pre + b"\x00" * 10 + post + (len(prefix) + len(pre)).to_bytes(4, "little")
            tr._atomic_operation(14, key, value_of(s["value"]))
            return None, None
        if op == "vs_value":
            pre, post = bytes.fromhex(s["pre"]), bytes.fromhex(s["post"])
            param = pre + b"\x00" * 10 + post + len(pre).to_bytes(4, "little")
            tr._atomic_operation(15, K(s["key"]), param)
            return None, None
        if op == "conflict":
            b, e = K(s["begin"]), K(s["end"])
            kind = 0 if s["kind"] == "read" else 1
            # fdb_transaction_add_conflict_range returns an error code (an inverted range);
            # the binding raises it: that is libfdb_c's answer.
            if kind == 0:
                tr.add_read_conflict_range(b, e)
            else:
                tr.add_write_conflict_range(b, e)
            return None, None
        if op == "option":
            name = s["name"]
            o = tr.options
            if name == "read_your_writes_disable":
                o.set_read_your_writes_disable()
            elif name == "next_write_no_write_conflict_range":
                o.set_next_write_no_write_conflict_range()
            elif name == "size_limit":
                o.set_size_limit(int(s["value"]))
            elif name == "report_conflicting_keys":
                o.set_report_conflicting_keys()
            elif name == "read_system_keys":
                o.set_read_system_keys()
            elif name == "retry_limit":
                o.set_retry_limit(int(s["value"]))
            else:
                raise ValueError("unknown option %r" % name)
            return None, None
        if op == "read_version":
            tr.get_read_version().wait()
            return {"version": True}, None
        if op == "commit":
            vs = None
            if not commit_started[t]:
                # Asked before the commit starts, so asking has no side effect on the
                # transaction (after a commit it would mark the transaction used).
                vs = tr.get_versionstamp()
            commit_started[t] = True
            tr.commit().wait()
            stamp = None
            if vs is not None:
                try:
                    stamp = vs.wait()
                except fdb.FDBError:
                    stamp = None
            return {"ok": True}, stamp
        if op == "on_error":
            tr.on_error(int(s["code"])).wait()
            commit_started[t] = False
            return {"ok": True}, None
        if op == "reset":
            tr.reset()
            commit_started[t] = False
            return None, None
        raise ValueError("unknown op %r" % op)


def kl(k):
    return (k, len(k))


def main():
    cluster_file = os.environ.get("FDB_CLUSTER_FILE")
    db = fdb.open(cluster_file)
    runner = Runner(db)
    try:
        fdb.impl._capi.fdb_get_client_version.restype = ctypes.c_char_p
        version = fdb.impl._capi.fdb_get_client_version().decode()
    except Exception:  # an older library without it: say so, do not fail
        version = "unknown"
    print(json.dumps({"ready": True, "api_version": fdb.get_api_version(), "client_version": version}), flush=True)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        try:
            res = runner.run(bytes.fromhex(req["prefix"]), req["program"])
        except Exception:  # a runner bug, not an FDB outcome: report it whole
            res = {"runner_error": traceback.format_exc()}
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
