#!/usr/bin/env bash
# A bounded pass of FoundationDB's own bindingtester (FDB 7.3.77, unchanged, from
# ../shared/fdb/bindings) over fdb-stacktester, on both drivers, against a real cluster, with
# the Python binding (foundationdb==7.3.77 over libfdb_c, as a multi-version client: see
# FDB_NETWORK_OPTION_DISABLE_CLIENT_BYPASS below) as the reference.
#
#   tests/bindingtester/run.sh [CLUSTER_FILE]        (default: $FDB_CLUSTER_FILE)
#
# libfdb_c.so must be on LD_LIBRARY_PATH (`cluster.sh env` sets it) and the Python binding
# installed. The bindingtester clears the whole database before every run: give it a cluster
# nothing else uses meanwhile. Knobs (environment):
#   SEEDS         seeds per test type and driver (default "1 2")
#   DRIVERS       default "mio tokio"
#   TESTS         default all of: api api_concurrent directory directory_concurrent
#                 directory_hca tuple scripted (tuple and scripted use no randomness: one seed
#                 is enough)
#   NUM_OPS       operations per thread (default 1000; directory_hca uses a tenth)
#   TIMEOUT       seconds per tester run (default 300)
#   STACKTESTER   a built fdb-stacktester (default: cargo builds the release one)
#   FDB_SHARED_DIR  default ../shared/fdb beside the project
#   LOG_DIR       keeps the logs there (default: a temporary directory, removed on success)
#   FDBCLI        the fdbcli that sets tenant_mode=optional_experimental before the api tests
#                 (default: fdbcli on PATH, else the one beside libfdb_c on LD_LIBRARY_PATH, as
#                 ../shared/fdb/cluster.sh lays them out)
# Exits nonzero if any run reports an incorrect result or an error, or fails to complete.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/tests/bindingtester"
cluster_file=${1:-${FDB_CLUSTER_FILE:-}}
if [ -z "$cluster_file" ] || [ ! -f "$cluster_file" ]; then
  echo "bindingtester: no cluster file (argument or FDB_CLUSTER_FILE)" >&2
  exit 2
fi
shared=${FDB_SHARED_DIR:-$root/../shared/fdb}
bt="$shared/bindings/bindingtester"
if [ ! -f "$bt/bindingtester.py" ] || [ ! -f "$shared/bindings/python/tests/tester.py" ]; then
  echo "bindingtester: $bt/bindingtester.py or the Python tester not found" >&2
  exit 2
fi
if ! python3 -c 'import fdb; fdb.api_version(730); fdb.open' >/dev/null 2>&1; then
  echo "bindingtester: the Python binding (foundationdb==7.3.77) or libfdb_c.so" \
    "(LD_LIBRARY_PATH) is missing" >&2
  exit 2
fi
if [ -z "${STACKTESTER:-}" ]; then
  (cd "$root" && cargo build --release -q -p fdb-tests --bin fdb-stacktester)
  STACKTESTER="${CARGO_TARGET_DIR:-$root/target}/release/fdb-stacktester"
fi
seeds=${SEEDS:-1 2}
drivers=${DRIVERS:-mio tokio}
tests=${TESTS:-api api_concurrent directory directory_concurrent directory_hca tuple scripted}
ops=${NUM_OPS:-1000}
keep_logs=${LOG_DIR:+1}
logs=${LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/bindingtester.XXXXXX")}
mkdir -p "$logs"

# The test type's bindingtester arguments, as FDB's run_tester_loop.sh runs them (the
# concurrent ones cannot --compare: the bindingtester checks their own invariants instead).
args_of() {
  case $1 in
    api) echo "--test-name api --compare python3 --num-ops $ops" ;;
    api_concurrent) echo "--test-name api --concurrency 3 --num-ops $ops" ;;
    directory) echo "--test-name directory --compare python3 --num-ops $ops" ;;
    directory_concurrent) echo "--test-name directory --concurrency 3 --num-ops $ops" ;;
    directory_hca) echo "--test-name directory_hca --concurrency 5 --num-ops $((ops / 10))" ;;
    tuple) echo "--test-name tuple --compare python3" ;;
    scripted) echo "--test-name scripted" ;;
    *) echo "bindingtester: unknown test $1" >&2; return 1 ;;
  esac
}

# The api tests create, use and delete tenants (TENANT_* instructions and the _TENANT
# variants), which needs a cluster whose tenant_mode allows them. Setting the mode again is
# harmless, and a cluster that allows tenants still serves every request made outside them.
case " $tests " in
  *" api "* | *" api_concurrent "*)
    fdbcli=${FDBCLI:-$(command -v fdbcli || true)}
    if [ -z "$fdbcli" ]; then
      IFS=: read -r -a lib_dirs <<<"${LD_LIBRARY_PATH:-}"
      for d in "${lib_dirs[@]}"; do
        if [ -n "$d" ] && [ -x "$d/../fdbcli" ]; then
          fdbcli="$d/../fdbcli"
          break
        fi
      done
    fi
    if [ -z "$fdbcli" ]; then
      echo "bindingtester: no fdbcli (FDBCLI, PATH or beside libfdb_c) to enable tenants" >&2
      exit 2
    fi
    if ! "$fdbcli" -C "$cluster_file" --no-status --timeout 30 \
        --exec "configure tenant_mode=optional_experimental" >"$logs/configure.log" 2>&1; then
      echo "bindingtester: could not set tenant_mode=optional_experimental:" >&2
      cat "$logs/configure.log" >&2
      exit 2
    fi
    ;;
esac

# The reference is libfdb_c as a multi-version client, which is what this client is (it
# follows a cluster's upgrade, and reports a request cut off by one as
# cluster_version_changed). Without external clients libfdb_c bypasses its multi-version
# client unless told not to, and the two answer ON_ERROR of cluster_version_changed (1039)
# differently: bypassed, it is refused like any error; multi-version, it starts a new
# transaction (api, 10,000 operations, seed 4005 draws it). libfdb_c reads network options
# from FDB_NETWORK_OPTION_* variables; this client's stack tester ignores the variable.
export FDB_NETWORK_OPTION_DISABLE_CLIENT_BYPASS=

runs=0
failed=()
for test in $tests; do
  test_args=$(args_of "$test")
  test_seeds=$seeds
  case $test in tuple | scripted) test_seeds=${seeds%% *} ;; esac
  for driver in $drivers; do
    for seed in $test_seeds; do
      log="$logs/$test-$driver-$seed.log"
      runs=$((runs + 1))
      # The bindingtester's scratch output (trace files, if any) stays in the log directory.
      # shellcheck disable=SC2086
      if (cd "$logs" && python3 "$here/launch.py" "$bt" "$STACKTESTER" "rust-$driver" \
            $test_args --seed "$seed" --cluster-file "$cluster_file" \
            --logging-level WARNING --timeout "${TIMEOUT:-300}") >"$log" 2>&1; then
        echo "bindingtester: $test $driver seed $seed: ok"
      else
        echo "bindingtester: $test $driver seed $seed: FAILED ($log)"
        grep -v '^$' "$log" | tail -25 | sed 's/^/    /'
        failed+=("$test/$driver/$seed")
      fi
    done
  done
done

echo "bindingtester: $runs runs, ${#failed[@]} failed${failed:+: ${failed[*]}}"
if [ ${#failed[@]} -gt 0 ]; then
  exit 1
fi
[ -n "$keep_logs" ] || rm -rf "$logs"
