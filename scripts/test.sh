#!/usr/bin/env bash
# Set up and run every test: generated-model drift, formatting, lints, unit and integration tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/vitistack-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# Tools the checks need.
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)"; exit 1; }
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet pyyaml
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt

# PostgreSQL is used by the history tests; start the machine's server when it is installed but stopped.
if command -v pg_ctlcluster >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi

echo "== generated model matches ../shared/crds"
if [ -d ../shared/crds ]; then
  python3 scripts/gen-model.py --check
else
  echo "../shared/crds not present: drift check skipped"
fi
echo "== cargo fmt"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
echo "== cargo test"
log=$(mktemp)
cargo test --workspace --locked 2>&1 | tee "$log"
# One closing line for the whole run (cargo's last line is the doc-test binary's).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
rm -f "$log"
