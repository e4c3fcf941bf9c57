#!/usr/bin/env bash
# The old aggregator's contract against a running server (demo fleet, SQLite in memory):
# schemathesis fuzzes every route of /api/v1/openapi.json (all checks, with a key and without
# one), and promtool lints /metrics. Usage: check.sh VENV BINARY
set -euo pipefail
venv=$1
bin=$2
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
key=schemathesis-key-0123456789
printf 'st viewer %s\n' "$key" >"$dir/keys"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PORT=$port BIND_ADDRESS=127.0.0.1 DEMO=true DATABASE_URL=sqlite::memory: API_KEYS_FILE="$dir/keys" \
  RATE_LIMIT=0 LOG_LEVEL=warn "$bin" >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/log"; exit 1; }
  sleep 0.2
done
status=0
echo "-- schemathesis: every route of /api/v1/openapi.json, every check"
"$venv/bin/schemathesis" run "http://127.0.0.1:$port/api/v1/openapi.json" --checks all \
  --max-examples 50 -H "Authorization: Bearer $key" --no-color || status=1
echo "-- promtool check metrics (the one lint expected: the old gauges' \`_total\` names)"
curl -sf "http://127.0.0.1:$port/metrics" >"$dir/metrics" || { echo "/metrics did not answer"; status=1; }
grep -q '^# TYPE vitistack_operator_clusters_total gauge$' "$dir/metrics" || { echo "clusters_total is not a gauge"; status=1; }
lint=$(promtool check metrics <"$dir/metrics" 2>&1) || true
others=$(printf '%s\n' "$lint" | grep -vE '^vitistack_operator_(clusters|machines)_total non-counter metrics should not have "_total" suffix$' | grep -v '^$' || true)
if [ -n "$others" ]; then
  printf '%s\n' "$others"
  status=1
fi
exit "$status"
