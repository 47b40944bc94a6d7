"""The mapped range scenarios of `mapped_range.rs` through libfdb_c 7.3.77's
`fdb_transaction_get_mapped_range` (over ctypes: the Python binding has no wrapper for it).
Prints one JSON object: each scenario's outcome, in the shape the Rust side builds.

Rows: [key, value, mapped], hex; `mapped` is [[key, value], ...] for a range mapper and
[key, value-or-null] for a point mapper. The C API lays every row out as a range
(`FDBMappedKeyValue::getRange`); a point row's memory is `GetValueReqAndResultRef` (a key,
then an optional value), read here as such.
"""
import ctypes
import json
import struct
import sys

import fdb
import fdb.impl as impl
from fdb import tuple as T

fdb.api_version(730)
db = fdb.open(sys.argv[1])
capi = impl._capi
NS = sys.argv[2]
N = 60


class Key(ctypes.Structure):
    _pack_ = 4
    _fields_ = [("key", ctypes.POINTER(ctypes.c_uint8)), ("key_length", ctypes.c_int)]


class Selector(ctypes.Structure):
    _pack_ = 4
    _fields_ = [("key", Key), ("or_equal", ctypes.c_int), ("offset", ctypes.c_int)]


class KeyValue(ctypes.Structure):
    _pack_ = 4
    _fields_ = [
        ("key", ctypes.POINTER(ctypes.c_uint8)),
        ("key_length", ctypes.c_int),
        ("value", ctypes.POINTER(ctypes.c_uint8)),
        ("value_length", ctypes.c_int),
    ]


class RangeResult(ctypes.Structure):
    _pack_ = 4
    _fields_ = [
        ("begin", Selector),
        ("end", Selector),
        ("data", ctypes.POINTER(KeyValue)),
        ("size", ctypes.c_int),
        ("capacity", ctypes.c_int),
    ]


class MappedKeyValue(ctypes.Structure):
    _pack_ = 4
    _fields_ = [("key", Key), ("value", Key), ("range", RangeResult), ("buffer", ctypes.c_ubyte * 32)]


capi.fdb_transaction_get_mapped_range.restype = ctypes.c_void_p
capi.fdb_transaction_get_mapped_range.argtypes = [ctypes.c_void_p] + [
    ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
    ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
    ctypes.c_char_p, ctypes.c_int,
] + [ctypes.c_int] * 6
capi.fdb_future_get_mappedkeyvalue_array.argtypes = [
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.POINTER(MappedKeyValue)),
    ctypes.POINTER(ctypes.c_int),
    ctypes.POINTER(ctypes.c_int),
]
capi.fdb_future_block_until_ready.argtypes = [ctypes.c_void_p]
capi.fdb_future_destroy.argtypes = [ctypes.c_void_p]

WANT_ALL, ITERATOR, EXACT = -2, -1, 0


def hx(p, n):
    return ctypes.string_at(p, n).hex() if n else ""


def rows_of(out, n, point):
    rows = []
    for i in range(n):
        m = out[i]
        row = [hx(m.key.key, m.key.key_length), hx(m.value.key, m.value.key_length)]
        if point:
            raw = ctypes.string_at(ctypes.addressof(m.range), 28)
            kp, kl, vp, vl, present = struct.unpack("<QiQiB", raw[:25])
            key = ctypes.string_at(kp, kl).hex() if kl else ""
            value = (ctypes.string_at(vp, vl).hex() if vl else "") if present else None
            row.append([key, value])
        else:
            r = m.range
            row.append([[hx(r.data[j].key, r.data[j].key_length),
                         hx(r.data[j].value, r.data[j].value_length)] for j in range(r.size)])
        rows.append(row)
    return rows


def mapped(tr, begin, end, mapper, limit=0, mode=WANT_ALL, iteration=1, snapshot=0, reverse=0,
           point=False):
    """One batch: {"rows", "more"} or {"error"}."""
    f = capi.fdb_transaction_get_mapped_range(
        tr.tpointer, begin, len(begin), 0, 1, end, len(end), 0, 1, mapper, len(mapper),
        limit, 0, mode, iteration, snapshot, reverse)
    capi.fdb_future_block_until_ready(f)
    out = ctypes.POINTER(MappedKeyValue)()
    n, more = ctypes.c_int(), ctypes.c_int()
    err = capi.fdb_future_get_mappedkeyvalue_array(f, ctypes.byref(out), ctypes.byref(n),
                                                   ctypes.byref(more))
    if err:
        capi.fdb_future_destroy(f)
        return {"error": err}
    res = {"rows": rows_of(out, n.value, point), "more": bool(more.value)}
    capi.fdb_future_destroy(f)
    return res


def k(*t):
    return T.pack((NS,) + t)


@fdb.transactional
def setup(tr):
    del tr[T.range((NS,))]
    for i in range(N):
        tr[k("idx", "red" if i % 3 == 0 else "blue", i)] = T.pack(("v", i))
        tr[k("rec", i, "a")] = b"a%d" % i + b"." * 40
        tr[k("rec", i, "b")] = b"b%d" % i
        if i % 2 == 0:
            tr[k("pt", i)] = b"p%d" % i
    # fdbserver 7.3's tuples have no nested tuples; an unterminated string is one to it.
    tr[k("raw", "x") + b"\x05\x02a\x00\x00"] = T.pack(("v",))
    tr[k("rawv", "x")] = b"\x05\x02a\x00\x00"
    tr[k("lenient") + b"\x02unterminated"] = b""


def rng(*t):
    r = T.range((NS,) + t)
    return r.start, r.stop


RANGE = k("rec", "{K[3]}", "{...}")
POINT = k("pt", "{K[3]}")


def commit(tr):
    try:
        tr.commit().wait()
        return 0
    except fdb.FDBError as e:
        return e.code


def scenarios():
    out = {}
    b, e = rng("idx", "blue")
    out["range"] = mapped(db.create_transaction(), b, e, RANGE)
    out["point"] = mapped(db.create_transaction(), b, e, POINT, point=True)
    # Batch after batch in the iterator mode, as a binding's iterator reads.
    ab, ae = rng("idx")
    tr = db.create_transaction()
    batches, begin, it = [], ab, 1
    while True:
        r = mapped(tr, begin, ae, RANGE, mode=ITERATOR, iteration=it)
        batches.append(r)
        if "error" in r or not r["more"]:
            break
        begin = r["rows"][-1][0]
        begin = bytes.fromhex(begin) + b"\x00"
        it += 1
    out["batches"] = batches
    out["exact_limit"] = mapped(db.create_transaction(), b, e, POINT, limit=5, mode=EXACT,
                                point=True)
    out["reverse"] = mapped(db.create_transaction(), b, e, RANGE, limit=3, mode=EXACT, reverse=1)
    out["snapshot"] = mapped(db.create_transaction(), b, e, RANGE, snapshot=1)
    tr = db.create_transaction()
    tr.options.set_read_your_writes_disable()
    out["ryw_disabled"] = mapped(tr, b, e, RANGE)
    tr = db.create_transaction()
    tr[k("idx", "blue", 1)] = T.pack(("v", 1))
    out["own_write_in_range"] = mapped(tr, b, e, RANGE)
    tr = db.create_transaction()
    tr[k("rec", 4, "b")] = b"new"
    out["own_write_in_mapped_range"] = mapped(tr, b, e, RANGE)
    tr = db.create_transaction()
    tr.clear(k("pt", 4))
    out["own_clear_of_mapped_key"] = mapped(tr, b, e, POINT, point=True)
    tr = db.create_transaction()
    tr[k("pt", 5)] = b"new"
    out["own_write_of_missing_mapped_key"] = mapped(tr, b, e, POINT, point=True)
    tr = db.create_transaction()
    tr[k("elsewhere")] = b"x"
    r = mapped(tr, b, e, RANGE)
    out["own_write_elsewhere"] = {"rows": len(r.get("rows", [])), "error": r.get("error", 0)}
    tr = db.create_transaction()
    tr.add_write_conflict_range(k("rec", 4), k("rec", 5))
    out["write_conflict_range_on_mapped_range"] = mapped(tr, b, e, RANGE)
    rb, re_ = rng("raw")
    out["key_not_tuple"] = mapped(db.create_transaction(), rb, re_, k("rec", "{K[2]}"))
    out["key_not_tuple_unused"] = mapped(db.create_transaction(), rb, re_, k("pt", "{V[0]}"),
                                         point=True)
    lb, le = rng("lenient")
    out["lenient_tuple"] = mapped(db.create_transaction(), lb, le, k("pt", "{K[2]}"), point=True)
    vb, ve = rng("rawv")
    out["value_not_tuple"] = mapped(db.create_transaction(), vb, ve, k("pt", "{V[0]}"),
                                    point=True)
    out["value_mapper"] = mapped(db.create_transaction(), b, e, k("pt", "{V[1]}"), limit=4,
                                 mode=EXACT, point=True)
    out["mapper_not_tuple"] = mapped(db.create_transaction(), b, e, b"\x99")
    out["range_not_last"] = mapped(db.create_transaction(), b, e, T.pack(("{...}", "x")))
    out["bad_index"] = mapped(db.create_transaction(), b, e, k("rec", "{K[9]}"))
    out["index_stoi"] = mapped(db.create_transaction(), b, e, k("rec", "{K[ 3x]}", "{...}"),
                               limit=2, mode=EXACT)
    out["escaped"] = mapped(db.create_transaction(), b, e, k("lit", "{{K[3]}}", "{K[3]}"),
                            limit=2, mode=EXACT, point=True)
    out["empty_range_bad_mapper"] = mapped(db.create_transaction(), e, e + b"\x00", b"\x99")
    out["special_keys"] = mapped(db.create_transaction(), b"\xff\xff/a", b"\xff\xff/b", RANGE)
    out["system_keys"] = mapped(db.create_transaction(), b"\xff/a", b"\xff/b", RANGE)
    # Conflicts: a write by another transaction to a mapped key or range, or to the range
    # itself, after the read, makes the commit conflict; elsewhere it does not.
    for name, mapper, point, other in [
        ("conflict_mapped_range", RANGE, False, k("rec", 4, "zz")),
        ("conflict_mapped_key", POINT, True, k("pt", 5)),
        ("conflict_range", RANGE, False, k("idx", "blue", 1, "new")),
        ("no_conflict_elsewhere", RANGE, False, k("rec", 3, "a")),
    ]:
        tr = db.create_transaction()
        r = mapped(tr, b, e, mapper, point=point)
        w = db.create_transaction()
        w[other] = b"w"
        w.commit().wait()
        tr[k("out", name)] = b"1"
        out[name] = {"rows": len(r.get("rows", [])), "commit": commit(tr)}
        setup(db)
    return out


setup(db)
print(json.dumps(scenarios(), sort_keys=True))
