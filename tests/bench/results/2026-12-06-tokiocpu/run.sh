#!/bin/bash
# Alternating invocations of two builds: ./run.sh TAG A B ROUNDS WORKLOADS, with
# ./fdb-bench-A and ./fdb-bench-B built with `--features libfdb_c` and the cluster's
# environment set (FDB_CLUSTER_FILE, LD_LIBRARY_PATH). Writes TAG-{A,B}-N/.
tag=$1; A=$2; B=$3; n=$4; wl=$5
for i in $(seq 1 "$n"); do for b in "$A" "$B"; do
  "./fdb-bench-$b" --cluster-file "$FDB_CLUSTER_FILE" --arms libfdb_c,rust-tokio \
    --workloads "$wl" --workers 8,32 --blocks 2 --transactions 1000 --warmup 200 \
    --quiet --out "$tag-$b-$i" >/dev/null 2>&1
done; done
