#!/usr/bin/env bash
# Fuzz our own parsers (label selectors, global ids, cursors, manifest files, query documents'
# limits) with cargo-fuzz and libFuzzer: each target runs SECONDS (default 60) from its seeds in
# fuzz/seeds/<target>/ (plus what earlier runs found, in fuzz/corpus/, not committed). A crash
# stops the run with the input in fuzz/artifacts/<target>/: copy it into fuzz/seeds/<target>/,
# where the unit tests (server/src/fuzz/tests.rs) keep running it.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET ...]
set -euo pipefail
cd "$(dirname "$0")/.."
EACH="${1:-60}"; shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(label_selector global_id cursor manifest document ws_message api_keys helm_release)
. scripts/setup-lib.sh
cargo_tool cargo-fuzz 0.13.1
# cargo-fuzz passes -Z flags; the stable toolchain accepts them with RUSTC_BOOTSTRAP. No sanitizer:
# the targets are safe Rust, and the stable toolchain ships no sanitizer runtime to link.
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/vitistack-target}/fuzz"
for t in "${TARGETS[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  cp -n "fuzz/seeds/$t"/* "fuzz/corpus/$t/" 2>/dev/null || true
  echo "== $t: $EACH s"
  cargo fuzz run --sanitizer none "$t" "fuzz/corpus/$t" -- -max_total_time="$EACH" -max_len=4096 2>&1 |
    grep -a -E '^(#[0-9]+ *DONE|Done|==|.*(panicked|SUMMARY|Test unit written))' || true
  [ -z "$(ls -A "fuzz/artifacts/$t" 2>/dev/null)" ] || { echo "$t: crash inputs in fuzz/artifacts/$t" >&2; exit 1; }
done
