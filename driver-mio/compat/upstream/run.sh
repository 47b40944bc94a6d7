#!/usr/bin/env bash
# The acceptance test of fdb-compat: foundationdb-rs 0.11.0's own examples and tests, taken
# unchanged from its published crate, built against fdb-compat with only the dependency line
# different, and run against the cluster in FDB_CLUSTER_FILE. Prints PASS / FAIL per file.
#
#   driver-mio/compat/upstream/run.sh                 # all 32 files
#   driver-mio/compat/upstream/run.sh hello-world get # some (example or test names)
#
# Without FDB_CLUSTER_FILE the files are only built (a notice says so). The scratch crate
# lives in a temporary directory; its build goes to target/upstream (reused between runs).
# Needs the network once, to `cargo fetch` foundationdb 0.11.0 and the files' dependencies.
# FDB_COMPAT_TIMEOUT: seconds per file (default 300). FDB_COMPAT_FEATURES: more features of
# the scratch crate, e.g. tenant-experimental (with a cluster in a tenant mode).
# FDB_COMPAT_REFERENCE=1: the reference run instead, the same files on the real foundationdb
# 0.11.0 over libfdb_c (needs libclang for its bindgen, and libfdb_c 7.3 in LIBRARY_PATH and
# LD_LIBRARY_PATH, as `cluster.sh env` gives them).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
compat="$(cd "$here/.." && pwd)"
repo="$(cd "$compat/../.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/fdb-compat-upstream.XXXXXX")"
trap 'rm -rf "$work"' EXIT
reference="${FDB_COMPAT_REFERENCE:-}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target/upstream${reference:+-reference}}"
timeout_s="${FDB_COMPAT_TIMEOUT:-300}"

# 1. The published crate's sources, from cargo's registry cache.
mkdir -p "$work/fetch/src"
cat > "$work/fetch/Cargo.toml" <<'TOML'
[package]
name = "fetch-foundationdb"
version = "0.0.0"
edition = "2021"
[dependencies]
foundationdb = { version = "=0.11.0", default-features = false, features = ["fdb-7_3", "embedded-fdb-include"] }
[workspace]
TOML
echo 'fn main() {}' > "$work/fetch/src/main.rs"
cargo fetch -q --manifest-path "$work/fetch/Cargo.toml" || { echo "upstream: cargo fetch failed"; exit 1; }
src="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/foundationdb-0.11.0 | head -1)"
[ -d "$src/examples" ] && [ -d "$src/tests" ] || { echo "upstream: no foundationdb-0.11.0 sources"; exit 1; }

# 2. The scratch crate: the files unchanged, foundationdb = fdb-compat.
up="$work/upstream"
mkdir -p "$up/src" "$up/shim"
cp -r "$src/examples" "$src/tests" "$up/"
rm -f "$up/examples/README.md"
echo "" > "$up/src/lib.rs"
cp "$here/sys_shim.rs" "$up/shim/lib.rs"
cat > "$up/shim/Cargo.toml" <<'TOML'
[package]
name = "foundationdb-sys"
version = "0.11.0"
edition = "2021"
[lib]
path = "lib.rs"
proc-macro = true
TOML
cat > "$up/Cargo.toml" <<TOML
[package]
name = "fdbrs-upstream"
version = "0.0.0"
edition = "2024"
[workspace]

# foundationdb-rs's own feature set as the reference run builds it: fdb-7_3 and its
# defaults (uuid, recipes), so the files compile exactly what they compile there.
[features]
default = ["fdb-7_3", "uuid", "recipes"]
uuid = []
recipes = ["recipes-leader-election", "recipes-ranked-register"]
fdb-5_1 = []
fdb-5_2 = []
fdb-6_0 = []
fdb-6_1 = []
fdb-6_2 = []
fdb-6_3 = []
fdb-7_0 = []
fdb-7_1 = []
fdb-7_3 = []
fdb-7_4 = []
tenant-experimental = ["foundationdb/tenant-experimental"]
num-bigint = ["foundationdb/num-bigint"]
trace = ["foundationdb/trace"]
recipes-leader-election = []
recipes-ranked-register = []

[dependencies]
$(if [ -n "$reference" ]; then
  echo 'foundationdb = { version = "=0.11.0", features = ["fdb-7_3", "embedded-fdb-include"] }'
  echo 'foundationdb-sys = { version = "=0.11.0", default-features = false, features = ["fdb-7_3", "embedded-fdb-include"] }'
else
  echo "foundationdb = { package = \"fdb-compat\", path = \"$compat\", features = [\"fdb-7_3\", \"embedded-fdb-include\", \"uuid\", \"recipes\"] }"
  echo 'foundationdb-sys = { path = "shim" }'
fi)
# What the files use of foundationdb-rs's own dependencies.
foundationdb-macros = "0.4.0"
futures = "0.3.32"
rand = "0.10.1"
uuid = "1.23.3"
tracing = "0.1.44"

[dev-dependencies]
byteorder = "1.5.0"
bytesize = "2.4"
data-encoding = "2.11.0"
futures-util = "0.3.32"
lazy_static = "1.5.0"
sha2 = "0.11.0"
tokio = { version = "1.52.3", features = ["full"] }
tracing-subscriber = "0.3.23"
uuid = { version = "1.23.3", features = ["v4"] }
TOML

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in "$up"/examples/*.rs "$up"/tests/*.rs; do names+=("$(basename "$f" .rs)"); done
fi
if [ -z "${FDB_CLUSTER_FILE:-}" ]; then
    echo "upstream: FDB_CLUSTER_FILE is not set: building the files only, not running them"
fi

# Files known to fail, one "name: why" a line (upstream/known-failures for fdb-compat,
# upstream/known-failures-reference for the reference run): listed as KNOWN, and only a
# failure not listed fails the run (a listed file that passes is reported, to be unlisted).
known_file="$here/known-failures${reference:+-reference}"
known() { [ -f "$known_file" ] && grep -q "^$1:" "$known_file"; }
pass=0; fail=0; failed=(); known_failed=0
for name in "${names[@]}"; do
    if [ -f "$up/examples/$name.rs" ]; then kind=example; else kind=test; fi
    log="$work/$name.log"
    if [ "$kind" = example ]; then
        build=(cargo build -q --manifest-path "$up/Cargo.toml" --example "$name" ${FDB_COMPAT_FEATURES:+--features "$FDB_COMPAT_FEATURES"})
    else
        build=(cargo test -q --no-run --manifest-path "$up/Cargo.toml" --test "$name" ${FDB_COMPAT_FEATURES:+--features "$FDB_COMPAT_FEATURES"})
    fi
    if ! "${build[@]}" >"$log" 2>&1; then
        echo "FAIL $kind $name (build)"; grep -E -m5 -A6 "^error" "$log" | sed 's/^/    /'
        if known "$name"; then echo "    KNOWN: $(grep "^$name:" "$known_file" | cut -d: -f2-)"; known_failed=$((known_failed + 1))
        else fail=$((fail + 1)); failed+=("$name"); fi
        continue
    fi
    [ -z "${FDB_CLUSTER_FILE:-}" ] && { echo "BUILT $kind $name"; continue; }
    if [ "$kind" = example ]; then
        cmd=(env RUST_BACKTRACE=0 cargo run -q --manifest-path "$up/Cargo.toml" --example "$name" ${FDB_COMPAT_FEATURES:+--features "$FDB_COMPAT_FEATURES"})
    else
        cmd=(env RUST_BACKTRACE=0 cargo test -q --manifest-path "$up/Cargo.toml" --test "$name" ${FDB_COMPAT_FEATURES:+--features "$FDB_COMPAT_FEATURES"})
    fi
    if timeout "$timeout_s" "${cmd[@]}" >"$log" 2>&1; then
        echo "PASS $kind $name"; pass=$((pass + 1))
        known "$name" && echo "    (listed in $(basename "$known_file"): unlist it)"
    else
        echo "FAIL $kind $name (run)"
        { grep -E -m6 -A3 "panicked|^Error|error:|^Expected|^Actual|^Difference" "$log" || tail -n 20 "$log"; } | sed 's/^/    /'
        if known "$name"; then echo "    KNOWN: $(grep "^$name:" "$known_file" | cut -d: -f2-)"; known_failed=$((known_failed + 1))
        else fail=$((fail + 1)); failed+=("$name"); fi
    fi
done
echo "upstream: $pass passed, $known_failed known failures, $fail other failures${failed:+: ${failed[*]}}"
[ "$fail" -eq 0 ]
