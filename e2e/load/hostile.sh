#!/usr/bin/env bash
# The server under hostile input (issue 14): the release server with the 500-cluster demo and an
# API key; a normal query's latency (wrk, 1 connection) and the server's RSS are measured before,
# while e2e/load/hostile.mjs sends every hostile input with and without the key (four at a time, plus
# 5 MB WebSocket frames), and after. Prints the figures and how each hostile input was answered.
# Usage: e2e/load/hostile.sh [DURATION_SECONDS]   (default 20)
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION="${1:-20}"; PORT=19994
source e2e/load/lib.sh
load_setup
WORK=$(mktemp -d); PID=; ATTACK=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; [ -n "$ATTACK" ] && kill $ATTACK 2>/dev/null; rm -rf "$WORK"' EXIT
KEY=load-hostile-key-0123456789
printf 'hostile viewer %s\n' "$KEY" > "$WORK/keys"
wrk_script e2e/load/counts.graphql "$WORK/normal.lua"
printf 'wrk.headers["Authorization"] = "Bearer %s"\n' "$KEY" >> "$WORK/normal.lua"
API_KEYS_FILE="$WORK/keys" ANONYMOUS_READ_FROM= RESPONSE_CACHE_MB=0 start_server $PORT "$WORK" 0

rss() { awk '/^VmRSS:/{printf "%.1f", $2/1024}' "/proc/$PID/status"; }
measure() { wrk_run "http://127.0.0.1:$PORT/graphql" "$WORK/normal.lua" 1; }
printf '| phase | normal query req/s | p50 ms | p99 ms | RSS MiB after |\n|---|---|---|---|---|\n'
printf '| before | %s | %s |\n' "$(measure)" "$(rss)"
BASE="http://127.0.0.1:$PORT" KEY=$KEY SECONDS=$((DURATION + 2)) node --experimental-websocket --no-warnings e2e/load/hostile.mjs > "$WORK/attack.txt" &
ATTACK=$!
printf '| under hostile input | %s | %s |\n' "$(measure)" "$(rss)"
wait $ATTACK; ATTACK=
printf '| after | %s | %s |\n' "$(measure)" "$(rss)"
echo; echo "How the hostile inputs were answered (input, key, HTTP status or close code: count):"
cat "$WORK/attack.txt"
