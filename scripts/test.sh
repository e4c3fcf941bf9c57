#!/usr/bin/env bash
# Set up and run every test: generated-model drift, formatting, lints, unit and integration tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/vitistack-target}"
# No incremental state: every clean clone (as CI makes) would add its own, gigabytes each, to the
# shared target directory until the disk is full (seen: 32 GB); dependencies are reused regardless.
export CARGO_INCREMENTAL=0
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# Tools the checks need.
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)"; exit 1; }
python3 -c 'import yaml' 2>/dev/null || python3 -m pip install --quiet pyyaml
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt

# PostgreSQL is used by the history tests; start the machine's server when it is installed but stopped.
if command -v pg_ctlcluster >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi

# Every check runs even when an earlier one failed; the exit status says whether all passed.
status=0
failed_checks=()
check() {
  local name=$1
  shift
  echo "== $name"
  if ! "$@"; then
    status=1
    failed_checks+=("$name")
  fi
}
check "generated model matches crds/" python3 scripts/gen-model.py --check
check "module graph (no cycle among the server's top-level modules)" python3 scripts/module-cycles.py
# The dashboard first: the server embeds web/dist when it compiles.
check "dashboard build (scripts/build-web.sh)" bash scripts/build-web.sh
check "dashboard size budget (the first load under 400 KiB gzip)" python3 scripts/web-budget.py
check "cargo fmt" cargo fmt --all -- --check
check "cargo clippy" cargo clippy --all-targets --locked -- -D warnings
check "supply chain (cargo-deny: licences, crates in two versions, sources; advisories when reachable)" \
  bash scripts/supply-chain.sh
echo "== cargo test (every test binary runs, even after a failure)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log" || status=1

echo "== Helm chart (real Helm engine via helm-python-sdk, kubernetes-validate; promtool for its alerts and dashboard)"
command -v promtool >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; } || status=1
check "promtool check rules (the chart's alerts)" promtool check rules charts/vitistack-graphql/files/prometheus-rules.yaml
venv="${VITISTACK_VENV:-/var/tmp/vitistack-venv}"
if ! "$venv/bin/python" -c 'import helm_python, kubernetes_validate, yaml' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet helm-python-sdk kubernetes-validate pyyaml
fi
# `cargo test` above built the binary (for the integration tests); a separate `cargo build` would
# rebuild the crate with different dev-dependency features.
VITISTACK_BIN="$CARGO_TARGET_DIR/debug/vitistack" "$venv/bin/python" -m unittest -v e2e/chart/test_chart.py 2>&1 | tee -a "$log" || status=1

echo "== the container image: scripts/build-image.sh around the test binary, unpacked by umoci, run from its root"
VITISTACK_BIN="$CARGO_TARGET_DIR/debug/vitistack" python3 -m unittest -v e2e/image/test_image.py 2>&1 | tee -a "$log" || status=1

echo "== the old aggregator's REST contract: schemathesis on /api/v1/openapi.json, promtool on /metrics"
"$venv/bin/python" -c 'import schemathesis' 2>/dev/null || "$venv/bin/pip" install --quiet schemathesis || status=1
check "REST contract (e2e/rest/check.sh)" bash e2e/rest/check.sh "$venv" "$CARGO_TARGET_DIR/debug/vitistack"

echo "== subscriptions through the reference clients (graphql-ws, ws, graphql-sse on Node)"
command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; }
(cd e2e/ws && npm ci --no-audit --no-fund --loglevel=error) || status=1
(cd e2e/ws && VITISTACK_BIN="$CARGO_TARGET_DIR/debug/vitistack" node --test --test-reporter=tap) 2>&1 \
  | grep -vE '^#? ?[0-9T:.-]+Z +(WARN|INFO)' | tee -a "$log" || status=1

echo "== GraphQL over HTTP: the graphql-http audit suite (every audit must be ok)"
(cd e2e/http && npm ci --no-audit --no-fund --loglevel=error) || status=1
(cd e2e/http && VITISTACK_BIN="$CARGO_TARGET_DIR/debug/vitistack" node --test --test-reporter=tap) 2>&1 \
  | grep -vE '^#? ?[0-9T:.-]+Z +(WARN|INFO)' | tee -a "$log" || status=1

echo "== the dashboard in headless Chromium (playwright-core, axe-core)"
command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; } || status=1
(cd e2e/web && npm ci --no-audit --no-fund --loglevel=error) || status=1
(cd e2e/web && VITISTACK_BIN="$CARGO_TARGET_DIR/debug/vitistack" node --test --test-reporter=tap --test-concurrency=1) 2>&1 \
  | grep -vE '^#? ?[0-9T:.-]+Z +(WARN|INFO)' | tee -a "$log" || status=1

# One closing line for the whole run: every cargo test binary (one that crashed counts as a
# failure), node's TAP suites and unittest's runs; skipped tests count as failures.
python3 scripts/count-tests.py "$log" || status=1
if [ ${#failed_checks[@]} -gt 0 ]; then
  printf 'failed checks: %s\n' "${failed_checks[*]}"
fi
exit "$status"
