#!/usr/bin/env python3
"""A mapped range read through libfdb_c 7.3.77 (`fdb_transaction_get_mapped_range` over
ctypes: the Python binding has no wrapper for it), for traffic capture: index rows
("mapped_capture", "idx", i) -> "" and records ("mapped_capture", "rec", i, "a") -> "v<i>",
read with a range mapper ("mapped_capture", "rec", "{K[2]}", "{...}") forwards, then
backwards with a row limit of 2, then with a point mapper ("mapped_capture", "rec", "{K[2]}",
"a"). Prints a one-line JSON result: each read's primary rows and, for the range mapper, the
secondary rows, in hex.

Recorded against a single-process cluster (`cluster.sh start DIR 1`) with
`tcpdump -i lo 'tcp port PORT'`, split by decode_frames.py with the server port set to PORT.
"""
import ctypes
import json

import fdb
import fdb.impl as impl
from fdb import tuple as T

fdb.api_version(730)
db = fdb.open()
capi = impl._capi
NS = "mapped_capture"


@fdb.transactional
def setup(tr):
    del tr[T.range((NS,))]
    for i in range(3):
        tr[T.pack((NS, "idx", i))] = b""
        tr[T.pack((NS, "rec", i, "a"))] = b"v%d" % i


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


def hx(p, n):
    return ctypes.string_at(p, n).hex()


def mapped(mapper, limit=0, reverse=0, secondary=True):
    tr = db.create_transaction()
    b = T.range((NS, "idx")).start
    e = T.range((NS, "idx")).stop
    f = capi.fdb_transaction_get_mapped_range(
        tr.tpointer, b, len(b), 0, 1, e, len(e), 0, 1, mapper, len(mapper), limit, 0, -2, 0, 0, reverse
    )
    capi.fdb_future_block_until_ready(f)
    out = ctypes.POINTER(MappedKeyValue)()
    n, more = ctypes.c_int(), ctypes.c_int()
    err = capi.fdb_future_get_mappedkeyvalue_array(f, ctypes.byref(out), ctypes.byref(n), ctypes.byref(more))
    if err:
        capi.fdb_future_destroy(f)
        return {"error": err}
    rows = []
    for i in range(n.value):
        m = out[i]
        row = [hx(m.key.key, m.key.key_length), hx(m.value.key, m.value.key_length)]
        if secondary:
            r = m.range
            row.append([[hx(r.data[j].key, r.data[j].key_length), hx(r.data[j].value, r.data[j].value_length)]
                        for j in range(r.size)])
        rows.append(row)
    capi.fdb_future_destroy(f)
    return {"rows": rows, "more": bool(more.value)}


setup(db)
out = {
    "range": mapped(T.pack((NS, "rec", "{K[2]}", "{...}"))),
    "reverse_limit_2": mapped(T.pack((NS, "rec", "{K[2]}", "{...}")), limit=2, reverse=1),
    # The C API lays every row out as a range; a point mapper's rows are read for their keys.
    "point": mapped(T.pack((NS, "rec", "{K[2]}", "a")), secondary=False),
}
print(json.dumps({"scenario": "mapped_range", "result": out}))
