#!/usr/bin/env bash
# Our release server against the limit of its stack: `same_bytes` (server/examples/same_bytes.rs,
# tokio + hyper + axum answering the very bytes ours answers, nothing else). Both cached queries of
# the 500-cluster still fleet (counts, dashboard page), wrk with CONNECTIONS connections; the limit
# is measured again before each of ours, so both see the same machine. One row per configuration:
# the defaults (LOG_LEVEL=info, the log piped into a file), and one per-request layer changed at a
# time. Prints requests/s and the ratio to the limit.
# Usage: e2e/load/limit.sh [DURATION_SECONDS] [CONNECTIONS] [ROWS]   (defaults: 10 s, 16, all)
#   ROWS=defaults: only the first row (the defaults), for repeated runs of the budget's figure
#   ROWS=scopes: the defaults, an API key, and an API key limited to one namespace (a tenant)
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION="${1:-10}"; CONNS="${2:-16}"; ROWS="${3:-all}"; PORT=19991; LIMIT_PORT=19993
source e2e/load/lib.sh
load_setup
cargo build --release --locked -p vitistack-server --example same_bytes
WORK=$(mktemp -d); PID=; LIMIT=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; [ -n "$LIMIT" ] && kill $LIMIT 2>/dev/null; rm -rf "$WORK"' EXIT
for q in counts dashboard; do wrk_script "e2e/load/$q.graphql" "$WORK/$q.lua"; done
KEY="vsk_load_$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf 'load viewer sha256:%s\n' "$(printf '%s' "$KEY" | sha256sum | cut -d' ' -f1)" > "$WORK/keys"
printf 'load viewer sha256:%s namespaces=team-1\n' "$(printf '%s' "$KEY" | sha256sum | cut -d' ' -f1)" > "$WORK/tenant-keys"
# wrk sends the key when AUTH_HEADER is set (the "API key" row).
for q in counts dashboard; do
  sed 's/^wrk.headers\["Content-Type"\] = "application\/json"$/&\nif os.getenv("AUTH_HEADER") then wrk.headers["Authorization"] = os.getenv("AUTH_HEADER") end/' \
    "$WORK/$q.lua" > "$WORK/$q.key.lua"
done

run_config() { # $1 = label; the caller's environment configures the server
  local label=$1 q body rps lim
  mkdir -p "$WORK/db-$label"
  SERVER_LOG="$WORK/server-$label.log" start_server "$PORT" "$WORK/db-$label" 0
  for q in counts dashboard; do
    body=$(python3 -c 'import json,sys; print(json.dumps({"query": open(sys.argv[1]).read()}))' "e2e/load/$q.graphql")
    curl -sf "http://127.0.0.1:$PORT/graphql" -H 'content-type: application/json' ${AUTH_HEADER:+-H "Authorization: $AUTH_HEADER"} \
      -d "$body" -o "$WORK/$q.json"
    "$CARGO_TARGET_DIR/release/examples/same_bytes" "$LIMIT_PORT" "$WORK/$q.json" & LIMIT=$!
    for _ in $(seq 1 100); do curl -sf -X POST "http://127.0.0.1:$LIMIT_PORT/" -o /dev/null && break; sleep 0.05; done
    lim=$(wrk_run "http://127.0.0.1:$LIMIT_PORT/graphql" "$WORK/$q.lua" "$CONNS" | cut -d' ' -f1)
    kill "$LIMIT"; wait "$LIMIT" 2>/dev/null || true; LIMIT=
    rps=$(wrk_run "http://127.0.0.1:$PORT/graphql" "$WORK/$q.key.lua" "$CONNS" | cut -d' ' -f1)
    python3 -c "import sys; l, r = map(float, sys.argv[3:5]); print(f'| {sys.argv[1]} | {sys.argv[2]} | {r:,.0f} | {l:,.0f} | {r / l:.2f} |')" \
      "$label" "$q" "$lim" "$rps"
  done
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
}

printf '| configuration | query | ours req/s | limit req/s | ratio |\n|---|---|---|---|---|\n'
# Each configuration in a subshell of its own, its settings exported (the server and wrk see them).
base=(ANONYMOUS_READ_FROM=127.0.0.0/8 RATE_LIMIT=0 LOG_LEVEL=info)
(export "${base[@]}"; run_config "defaults (LOG_LEVEL=info)")
[ "$ROWS" = defaults ] && exit 0
if [ "$ROWS" = scopes ]; then
  (export "${base[@]}" ANONYMOUS_READ_FROM= API_KEYS_FILE="$WORK/keys" AUTH_HEADER="Bearer $KEY"; run_config "an API key instead of anonymous")
  (export "${base[@]}" ANONYMOUS_READ_FROM= API_KEYS_FILE="$WORK/tenant-keys" AUTH_HEADER="Bearer $KEY"; run_config "the key limited to one namespace (team-1)")
  exit 0
fi
(export "${base[@]}" LOG_LEVEL=warn; run_config "LOG_LEVEL=warn (no access log)")
(export "${base[@]}" RATE_LIMIT=1000000000/1000000000; run_config "rate limit on, never reached")
(export "${base[@]}" ANONYMOUS_READ_FROM= API_KEYS_FILE="$WORK/keys" AUTH_HEADER="Bearer $KEY"; run_config "an API key instead of anonymous")
