#!/bin/bash
# The runs here: the same build (main c611114, `--features libfdb_c`), one single-process
# memory cluster (`cluster.sh start DIR 1 memory`), the tokio runtime with 2 worker threads
# (the default on this machine) and with 1, alternating.
set -e
: "${FDB_CLUSTER_FILE:?run cluster.sh env DIR first}"
for i in 1 2; do
  for t in 2 1; do
    fdb-bench --cluster-file "$FDB_CLUSTER_FILE" --arms libfdb_c,rust-tokio,rust-mio \
      --workloads range100,set100,get100 --workers 8,32 --blocks 2 --transactions 1000 \
      --warmup 200 --tokio-threads $t --quiet --out t$t-$i
  done
done
