#!/usr/bin/env bash
# Load test of a query: the release server with a generated fleet of 500 clusters / 10,000 machines,
# wrk POSTing the query. Prints requests/s, latency percentiles and RSS.
# Usage: e2e/load/run.sh [DURATION_SECONDS] [CONNECTIONS]
#   QUERY=e2e/load/dashboard.graphql (default; 50 clusters × 100 machines) or e2e/load/counts.graphql
#   CHURN=N: the fleet changes while it is loaded (the simulator, N pipeline steps per second: each
#            a write to the store, which drops the response cache); 0 (default) = still.
#   RESPONSE_CACHE_MB=0: no exact response cache; PART_CACHE_MB=0: no kept parts (with both,
#   every request is executed in full).
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION="${1:-30}"; CONNS="${2:-8}"; PORT="${LOAD_PORT:-19991}"
QUERY="${QUERY:-e2e/load/dashboard.graphql}"; CHURN="${CHURN:-0}"
source e2e/load/lib.sh
load_setup
BODY=$(python3 -c 'import json,sys; print(json.dumps({"query": open(sys.argv[1]).read()}))' "$QUERY")
LUA=$(mktemp --suffix .lua)
wrk_script "$QUERY" "$LUA"
DBDIR=$(mktemp -d)  # a fresh database, so the generated fleet is loaded (not an earlier run's objects)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -f "$LUA"; rm -rf "$DBDIR"' EXIT
start_server "$PORT" "$DBDIR" "$CHURN"
curl -sf "http://127.0.0.1:$PORT/ready"; echo
echo "RSS after load: $(grep VmRSS /proc/$PID/status)"
curl -s "http://127.0.0.1:$PORT/graphql" -H 'content-type: application/json' -d "$BODY" | python3 -c '
import json, sys
raw = sys.stdin.read(); d = json.loads(raw)["data"]
if "clusters" in d:
    print("clusters in page:", len(d["clusters"]["nodes"]), "machines in page:", sum(c["machines"]["totalCount"] for c in d["clusters"]["nodes"]), "of", d["clusters"]["totalCount"], "clusters;", len(raw), "bytes")
else:
    print("answer:", len(raw), "bytes:", raw[:200])'
SEQ0=$(store_seq "$PORT")
THREADS=$(( CONNS < 2 ? CONNS : 2 ))
wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency -s "$LUA" "http://127.0.0.1:$PORT/graphql"
echo "RSS after run: $(grep -E 'VmRSS|VmHWM' /proc/$PID/status | tr '\n' ' ')"
SEQ1=$(store_seq "$PORT")
python3 -c "import sys; a, b, d = map(float, sys.argv[1:]); print(f'changes to the graph during the run: {b - a:.0f} ({(b - a) / d:.1f}/s)')" "$SEQ0" "$SEQ1" "$DURATION"
