#!/usr/bin/env bash
# Side by side, in one run: our release server and Apollo Server 5 (e2e/load/apollo/peer.mjs, the
# same fleet from in-memory maps) under the same load while the fleet changes, for the dashboard
# page and the counts query at 16 connections and at 1. Ours runs three ways: as configured by
# default (response cache and kept parts), with kept parts only (RESPONSE_CACHE_MB=0), and with
# neither (every request executed in full; parsed documents are still kept, as Apollo keeps them), and
# bare (not even documents: every request parsed and validated). Prints one table row per measurement.
# Usage: e2e/load/peers.sh [DURATION_SECONDS] [CHURN]   (defaults: 10 s, 10 simulator steps/s)
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION="${1:-10}"; CHURN="${2:-10}"; PORT=19991; PEER_PORT=19992
source e2e/load/lib.sh
load_setup
(cd e2e/load/apollo && npm ci --no-audit --no-fund --loglevel=error)
WORK=$(mktemp -d); PID=; PEER=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; [ -n "$PEER" ] && kill -CONT $PEER 2>/dev/null && kill $PEER 2>/dev/null; rm -rf "$WORK"' EXIT
for q in dashboard counts; do wrk_script "e2e/load/$q.graphql" "$WORK/$q.lua"; done


printf '| server | query | connections | requests/s | p50 ms | p99 ms | changes/s to our graph |\n|---|---|---|---|---|---|---|\n'
for mode in default parts none bare; do
  case $mode in
    default) env=() ;;
    parts) env=(RESPONSE_CACHE_MB=0) ;;
    none) env=(RESPONSE_CACHE_MB=0 PART_CACHE_MB=0) ;;
    bare) env=(RESPONSE_CACHE_MB=0 PART_CACHE_MB=0 DOCUMENT_CACHE_MB=0) ;;
  esac
  mkdir -p "$WORK/$mode"
  unset RESPONSE_CACHE_MB PART_CACHE_MB DOCUMENT_CACHE_MB
  for kv in "${env[@]}"; do export "${kv?}"; done
  start_server "$PORT" "$WORK/$mode" "$CHURN"
  unset RESPONSE_CACHE_MB PART_CACHE_MB DOCUMENT_CACHE_MB
  if [ -z "$PEER" ]; then
    # The peer loads the fleet from this server once, and changes it as often as ours changes.
    SOURCE_URL="http://127.0.0.1:$PORT/graphql" PORT=$PEER_PORT CHURN_PER_SECOND=$(( CHURN * 24 )) NODE_ENV=production \
      node e2e/load/apollo/peer.mjs >&2 &
    PEER=$!
    for _ in $(seq 1 300); do
      curl -s -o /dev/null "http://127.0.0.1:$PEER_PORT/" && break; sleep 0.2
    done
    curl -s -o /dev/null "http://127.0.0.1:$PEER_PORT/" || { echo "the Apollo peer did not start" >&2; exit 1; }
    # Both answer the dashboard page with the same clusters and machines.
    for url in "http://127.0.0.1:$PORT/graphql" "http://127.0.0.1:$PEER_PORT/"; do
      curl -s "$url" -H 'content-type: application/json' \
        -d "$(python3 -c 'import json,sys; print(json.dumps({"query": open(sys.argv[1]).read()}))' e2e/load/dashboard.graphql)" |
        python3 -c 'import json,sys; d = json.load(sys.stdin)["data"]["clusters"]; print(sys.argv[1], d["totalCount"], "clusters,", sum(len(c["machines"]["nodes"]) for c in d["nodes"]), "machines on the page")' "$url" >&2
    done
  fi
  for q in dashboard counts; do
    for conns in 16 1; do
      s0=$(store_seq "$PORT")
      r=$(wrk_run "http://127.0.0.1:$PORT/graphql" "$WORK/$q.lua" "$conns")
      s1=$(store_seq "$PORT")
      echo "| ours ($mode) | $q | $conns | $r | $(( (s1 - s0) / DURATION )) |"
    done
  done
  kill $PID; wait $PID 2>/dev/null || true; PID=
  if [ "$mode" = default ]; then
    # The peer is measured with our server stopped: the machine is all its own.
    for q in dashboard counts; do
      for conns in 16 1; do
        echo "| Apollo Server 5 | $q | $conns | $(wrk_run "http://127.0.0.1:$PEER_PORT/" "$WORK/$q.lua" "$conns") | – |"
      done
    done
    # Paused while ours is measured: its own churn takes nothing from ours.
    kill -STOP "$PEER"
  fi
done
