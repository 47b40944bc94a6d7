#!/usr/bin/env python3
"""Tenant scenarios for traffic capture (libfdb_c 7.3.77 through the Python binding, API 730),
one per process, against a cluster configured with tenant_mode=optional_experimental.

  capture.py setup_tenant_data | tenant_data | setup_tenant_manage | tenant_manage

The setup_* steps run before tcpdump starts; each scenario prints a one-line JSON result.
"""
import json
import os
import sys

import fdb
from fdb import tenant_management as tm

fdb.api_version(730)

CLUSTER = os.environ.get("FDB_CLUSTER_FILE", "fdb.cluster")
DATA_TENANT = b"cap-tenant"
MANAGE_TENANT = b"cap-tm"


def _drop(db, name):
    try:
        t = db.open_tenant(name)

        @fdb.transactional
        def clear(tr):
            tr.clear_range(b"", b"\xff")

        clear(t)
        tm.delete_tenant(db, name)
    except fdb.FDBError as e:
        if e.code != 2131:
            raise


def setup_tenant_data(db):
    _drop(db, DATA_TENANT)
    tm.create_tenant(db, DATA_TENANT)
    return {"created": True}


def s_tenant_data(db):
    t = db.open_tenant(DATA_TENANT)
    tr = t.create_transaction()
    tr[b"a"] = b"1"
    tr[b"b"] = b"2"
    tr.commit().wait()
    committed = tr.get_committed_version()
    tr2 = t.create_transaction()
    a = tr2.get(b"a").wait()
    rows = [(kv.key.decode(), kv.value.decode()) for kv in tr2.get_range(b"", b"\xff")]
    return {"committed_version": committed, "a": None if a is None else bytes(a).decode(),
            "rows": rows, "tenant_id": t.get_id().wait()}


def setup_tenant_manage(db):
    _drop(db, MANAGE_TENANT)
    return {"dropped": True}


def s_tenant_manage(db):
    tm.create_tenant(db, MANAGE_TENANT)
    t = db.open_tenant(MANAGE_TENANT)
    tr = t.create_transaction()
    tr[b"k"] = b"v"
    tr.commit().wait()
    tr = t.create_transaction()
    v = tr.get(b"k").wait()
    listed = [(kv.key.decode(), kv.value.decode())
              for kv in tm.list_tenants(db, MANAGE_TENANT, MANAGE_TENANT + b"\x00", 10)]
    tr = t.create_transaction()
    del tr[b"k"]
    tr.commit().wait()
    tm.delete_tenant(db, MANAGE_TENANT)
    gone = db.open_tenant(MANAGE_TENANT).create_transaction()
    try:
        gone.get(b"k").wait()
        after = None
    except fdb.FDBError as e:
        after = e.code
    return {"read": None if v is None else bytes(v).decode(), "listed": listed,
            "after_delete_error": after}


SCENARIOS = {
    "setup_tenant_data": setup_tenant_data,
    "tenant_data": s_tenant_data,
    "setup_tenant_manage": setup_tenant_manage,
    "tenant_manage": s_tenant_manage,
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        sys.exit("usage: tenant_capture.py {%s}" % "|".join(SCENARIOS))
    name = sys.argv[1]
    db = fdb.open(CLUSTER)
    result = SCENARIOS[name](db)
    print(json.dumps({"scenario": name, "result": result}, sort_keys=True))


if __name__ == "__main__":
    main()
