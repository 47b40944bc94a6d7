#!/bin/bash
# The runs here: one build (main e5a2f7a, `--features libfdb_c`), one single-process memory
# cluster (`cluster.sh start DIR 1 memory`), the tokio runtime with 2 worker threads (the
# default on this 2-core machine), then with 1.
set -e
: "${FDB_CLUSTER_FILE:?run cluster.sh env DIR first}"
for t in 2 1; do
  fdb-bench --cluster-file "$FDB_CLUSTER_FILE" --arms libfdb_c,rust-tokio,rust-mio \
    --tokio-threads $t --workloads grv,get100,range100,set100 --workers 1,8,32 \
    --blocks 3 --transactions 1000 --warmup 200 --quiet --out t$t
done
