#!/usr/bin/env python3
"""The special keys libfdb_c 7.3.77 fills from the cluster, for traffic capture (through the
Python binding, API 730), in one transaction: \xff\xff/cluster_id, then the whole of
\xff\xff/metrics/data_distribution_stats/, \xff\xff/metrics/health/ and
\xff\xff/worker_interfaces/. Prints a one-line JSON result: the id and each read's rows in hex.

Recorded against a single-process memory cluster (`cluster.sh start DIR 1 memory`, connection
string local:888f726af1413dd4@127.0.0.1:60109) with `tcpdump -i lo 'tcp port 60109'`, split by
decode_frames.py with the server port set to 60109.
"""
import json

import fdb

fdb.api_version(730)
db = fdb.open()
tr = db.create_transaction()
out = {"cluster_id": bytes(tr[b"\xff\xff/cluster_id"]).decode()}


def rows(b, e):
    return [(bytes(k).hex(), bytes(v).hex()) for k, v in tr.get_range(b, e)]


out["dd"] = rows(b"\xff\xff/metrics/data_distribution_stats/", b"\xff\xff/metrics/data_distribution_stats0")
out["health"] = rows(b"\xff\xff/metrics/health/", b"\xff\xff/metrics/health0")
out["workers"] = rows(b"\xff\xff/worker_interfaces/", b"\xff\xff/worker_interfaces0")
print(json.dumps({"scenario": "cluster_special_keys", "result": out}))
