#!/usr/bin/env bash
# Set up and run every test: generated-model drift, formatting, lints, unit and integration tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/vitistack-target}"
# No incremental state: every clean clone (as CI makes) would add its own, gigabytes each, to the
# shared target directory until the disk is full (seen: 32 GB); dependencies are reused regardless.
export CARGO_INCREMENTAL=0
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# Tools the checks need, installed machine-wide under a lock (a set-up started beside this one
# waits for it, or it for that one, and the second reuses what the first installed).
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)"; exit 1; }
. scripts/setup-lib.sh
python3 -c 'import yaml' 2>/dev/null ||
  locked "$VITISTACK_TOOLS/pip.lock" python3 -m pip install --quiet pyyaml
rustup component list --installed 2>/dev/null | grep -q '^clippy' ||
  locked "$VITISTACK_TOOLS/rustup.lock" rustup component add clippy rustfmt

# PostgreSQL is used by the history tests; start the machine's server when it is installed but stopped.
if command -v pg_ctlcluster >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi

# What git sees in the clone before the run: the run must leave it so (no file written or changed
# that git would show; what the run makes belongs in a temporary or ignored place).
clone_before=$(git status --porcelain 2>/dev/null || true)

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
check "structure (no hand-written file over 600 lines; ARCHITECTURE.md's module maps match the code)" python3 scripts/structure.py
# The dashboard first: the server embeds web/dist when it compiles.
check "dashboard build (scripts/build-web.sh)" bash scripts/build-web.sh
# Without a dashboard the tests that drive it cannot pass: they are not started (each would wait
# for a page that never comes), and the closing line counts them as failed.
web_built=1
case " ${failed_checks[*]-} " in *" dashboard build "*) web_built=0 ;; esac
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
command -v promtool >/dev/null || apt_install prometheus || status=1
check "promtool check rules (the chart's alerts)" promtool check rules charts/vitistack-graphql/files/prometheus-rules.yaml
venv="${VITISTACK_VENV:-/var/tmp/vitistack-venv}"
python_venv "$venv" helm-python-sdk kubernetes-validate pyyaml schemathesis || status=1
# `cargo test` above built the binary (for the integration tests); a separate `cargo build` would
# rebuild the crate with different dev-dependency features.
VITISTACK_BIN="$CARGO_TARGET_DIR/debug/vitistack" "$venv/bin/python" -m unittest -v e2e/chart/test_chart.py 2>&1 | tee -a "$log" || status=1

echo "== the container image: scripts/build-image.sh around the test binary, unpacked by umoci, run from its root"
VITISTACK_BIN="$CARGO_TARGET_DIR/debug/vitistack" python3 -m unittest -v e2e/image/test_image.py 2>&1 | tee -a "$log" || status=1

echo "== the old aggregator's REST contract: schemathesis on /api/v1/openapi.json, promtool on /metrics"
check "REST contract (e2e/rest/check.sh)" bash e2e/rest/check.sh "$venv" "$CARGO_TARGET_DIR/debug/vitistack"

echo "== subscriptions through the reference clients (graphql-ws, ws, graphql-sse on Node)"
command -v npm >/dev/null || apt_install nodejs npm || status=1
(cd e2e/ws && npm ci --no-audit --no-fund --loglevel=error) || status=1
(cd e2e/ws && VITISTACK_BIN="$CARGO_TARGET_DIR/debug/vitistack" node --test --test-reporter=tap) 2>&1 \
  | grep -vE '^#? ?[0-9T:.-]+Z +(WARN|INFO)' | tee -a "$log" || status=1

echo "== GraphQL over HTTP: the graphql-http audit suite (every audit must be ok)"
(cd e2e/http && npm ci --no-audit --no-fund --loglevel=error) || status=1
(cd e2e/http && VITISTACK_BIN="$CARGO_TARGET_DIR/debug/vitistack" node --test --test-reporter=tap) 2>&1 \
  | grep -vE '^#? ?[0-9T:.-]+Z +(WARN|INFO)' | tee -a "$log" || status=1

echo "== the dashboard in headless Chromium (playwright-core, axe-core)"
if [ "$web_built" = 1 ]; then
  command -v chromium >/dev/null || apt_install chromium || status=1
  (cd e2e/web && npm ci --no-audit --no-fund --loglevel=error) || status=1
  (cd e2e/web && VITISTACK_BIN="$CARGO_TARGET_DIR/debug/vitistack" node --test --test-reporter=tap --test-concurrency=1) 2>&1 \
    | grep -vE '^#? ?[0-9T:.-]+Z +(WARN|INFO)' | tee -a "$log" || status=1
else
  echo "not run: e2e/web (the dashboard in Chromium): the dashboard build failed, see above" | tee -a "$log"
  status=1
fi

echo "== two set-ups at once in fresh clones (scripts/build-web.sh with a fresh tools directory)"
python3 -m unittest -v e2e/setup/test_setup.py 2>&1 | tee -a "$log" || status=1

clone_after=$(git status --porcelain 2>/dev/null || true)
if [ "$clone_before" != "$clone_after" ]; then
  echo "the test command changed what git sees in the clone:"
  diff <(printf '%s\n' "$clone_before") <(printf '%s\n' "$clone_after") || true
  status=1
  failed_checks+=("the clone is left as it was")
fi

# One closing line for the whole run: every cargo test binary (one that crashed counts as a
# failure), node's TAP suites and unittest's runs; skipped tests count as failures.
python3 scripts/count-tests.py "$log" || status=1
if [ ${#failed_checks[@]} -gt 0 ]; then
  printf 'failed checks: %s\n' "${failed_checks[*]}"
fi
exit "$status"
