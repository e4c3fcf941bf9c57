#!/usr/bin/env bash
# The cost of authentication on the small (counts) query, in one run of one release server:
# anonymous (a trusted network, no key), with an API key (SHA-256 and a constant-time compare of
# every key per request), and with a key whose role is rate limited (a limit never reached, so
# every request pays the limiter's check). Rounds alternate the modes so the machine's noise falls
# on all of them alike. Prints one table row per measurement.
# Usage: e2e/load/auth.sh [DURATION_SECONDS] [ROUNDS]   (defaults: 10 s, 3 rounds)
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION="${1:-10}"; ROUNDS="${2:-3}"; PORT=19993
source e2e/load/lib.sh
load_setup
WORK=$(mktemp -d); PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$WORK"' EXIT
VIEWER=load-viewer-key-0123456789; ADMIN=load-admin-key-0123456789
printf 'viewer-load viewer %s\nadmin-load admin %s\n' "$VIEWER" "$ADMIN" > "$WORK/keys"
wrk_script e2e/load/counts.graphql "$WORK/anonymous.lua"
for mode in key limited; do
  key=$VIEWER; [ $mode = limited ] && key=$ADMIN
  { cat "$WORK/anonymous.lua"; printf 'wrk.headers["Authorization"] = "Bearer %s"\n' "$key"; } > "$WORK/$mode.lua"
done
API_KEYS_FILE="$WORK/keys" RATE_LIMIT=0 RATE_LIMIT_ADMIN=1000000000/1000000000 start_server $PORT "$WORK" 0

measure() { wrk_run "http://127.0.0.1:$PORT/graphql" "$1" "$2"; }

printf '| round | caller | connections | requests/s | p50 ms | p99 ms |\n|---|---|---|---|---|---|\n'
for round in $(seq 1 "$ROUNDS"); do
  for conns in 16 1; do
    for mode in anonymous key limited; do
      printf '| %s | %s | %s | %s |\n' "$round" "$mode" "$conns" "$(measure "$WORK/$mode.lua" "$conns")"
    done
  done
done
