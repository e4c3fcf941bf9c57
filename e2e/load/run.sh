#!/usr/bin/env bash
# Load test of the dashboard-sized query: the release server with a generated fleet of 500 clusters /
# 10,000 machines, wrk POSTing e2e/load/dashboard.graphql. Prints requests/s, latency percentiles and RSS.
# Usage: e2e/load/run.sh [DURATION_SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION="${1:-30}"; CONNS="${2:-8}"; PORT="${LOAD_PORT:-19991}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/vitistack-target}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
cargo build --release --locked -p vitistack-server
BODY=$(python3 -c 'import json,sys; print(json.dumps({"query": open("e2e/load/dashboard.graphql").read()}))')
LUA=$(mktemp --suffix .lua)
python3 - "$LUA" "$BODY" <<'PY'
import sys
body = sys.argv[2].replace("\\", "\\\\").replace('"', '\\"')
open(sys.argv[1], "w").write(f'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = "{body}"\n')
PY
DBDIR=$(mktemp -d)  # a fresh database, so the generated fleet is loaded (not an earlier run's objects)
DATABASE_URL="sqlite://$DBDIR/load.db" PORT=$PORT BIND_ADDRESS=127.0.0.1 LOG_LEVEL=warn \
  "$CARGO_TARGET_DIR/release/vitistack" serve --demo --demo-clusters 500 &
PID=$!
trap 'kill $PID 2>/dev/null; rm -f "$LUA"; rm -rf "$DBDIR"' EXIT
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$PORT/ready"; echo
echo "RSS after load: $(grep VmRSS /proc/$PID/status)"
curl -s "http://127.0.0.1:$PORT/graphql" -H 'content-type: application/json' -d "$BODY" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("clusters in page:", len(d["data"]["clusters"]["nodes"]), "machines in page:", sum(c["machines"]["totalCount"] for c in d["data"]["clusters"]["nodes"]), "of", d["data"]["clusters"]["totalCount"], "clusters")'
THREADS=$(( CONNS < 2 ? CONNS : 2 ))
wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency -s "$LUA" "http://127.0.0.1:$PORT/graphql"
echo "RSS after run: $(grep -E 'VmRSS|VmHWM' /proc/$PID/status | tr '\n' ' ')"
