#!/bin/bash
# batchset50x1000 x8, one arm per invocation on a fresh single-process memory cluster,
# libfdb_c, rust-tokio, rust-mio and again, with each invocation's window logged for
# metrics.py. Usage: run.sh CLUSTER_SH FDB_BENCH DIR OUT
C=$1; B=$2; D=$3; OUT=$4
rm -rf $D; $C start $D 1 memory >/dev/null; eval "$($C env $D)"; sleep 5
mkdir -p $OUT; : > $OUT/windows.txt
for i in 1 2; do for arm in libfdb_c rust-tokio rust-mio; do
  sleep 6; t0=$(date +%s.%N)
  $B --cluster-file $D/fdb.cluster --arms $arm --workloads batchset50x1000 --workers 8 \
    --blocks 1 --transactions 12000 --warmup 200 --quiet --out $OUT/$arm-$i > /dev/null 2>&1
  t1=$(date +%s.%N); echo "$arm $i $t0 $t1" >> $OUT/windows.txt
done; done
sleep 6
cp -r $D/logs $OUT/logs
$C stop $D >/dev/null
