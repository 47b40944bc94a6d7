#!/usr/bin/env bash
# Before/after on one cluster, in one sitting: two fdb-bench binaries (built with
# `--features libfdb_c`) run back to back in the order OLD NEW NEW OLD, each invocation with
# the libfdb_c arm beside ours, so every ratio to libfdb_c is taken within one invocation.
#
#   eval "$(../shared/fdb/cluster.sh env DIR)"
#   tests/bench/results/2026-12-06-grv-window/run.sh OLD_BINARY NEW_BINARY OUT_DIR
#   python3 tests/bench/results/2026-12-06-grv-window/compare.py OUT_DIR
set -euo pipefail
OLD=${1:?old binary} NEW=${2:?new binary} OUT=${3:?output dir}
mkdir -p "$OUT"
for step in "old1 $OLD" "new1 $NEW" "new2 $NEW" "old2 $OLD"; do
  set -- $step
  echo "$(date -u +%H:%M:%S) $1: $2"
  "$2" --cluster-file "$FDB_CLUSTER_FILE" --arms libfdb_c,rust-mio,rust-tokio \
    --workloads get100,get1000,grv,set100 --workers 1,8,32 --blocks 2 --quiet \
    --out "$OUT/$1" > "$OUT/$1.log" 2>&1
done
echo "$(date -u +%H:%M:%S) done"
