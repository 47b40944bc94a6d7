#!/bin/bash
# usage: cycle.sh ROUNDS START WORKLOADS WORKERS name... ; binary ./fdb-bench-NAME
eval "$(/work/shared/fdb/cluster.sh env /work/clusters/rangecpu)"
R=$1; S=$2; WL=$3; WK=$4; shift 4
for i in $(seq $S $((S+R-1))); do
  for name in "$@"; do
    out=runs/$name-$i
    echo "$(date +%T) $name $i load $(cut -d' ' -f1 /proc/loadavg)" >> runs/log.txt
    ./fdb-bench-$name --cluster-file $FDB_CLUSTER_FILE --arms libfdb_c,rust-tokio,rust-mio --workloads $WL --workers $WK --blocks 3 --transactions 1000 --warmup 200 --quiet --out $out > $out.log 2>&1
  done
done
echo done
