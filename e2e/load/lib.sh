# Shared by the load scripts (sourced): the release build, wrk's request script for a query, and
# the server with the generated 500-cluster fleet.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/vitistack-target}"
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/setup-lib.sh"

# Install wrk and build the release server.
load_setup() {
  command -v wrk >/dev/null || apt_install wrk
  cargo build --release --locked -p vitistack-server
}

# Write a wrk script POSTing the query in file $1 to file $2.
wrk_script() {
  python3 - "$1" "$2" <<'PY'
import json, sys
body = json.dumps({"query": open(sys.argv[1]).read()}).replace("\\", "\\\\").replace('"', '\\"')
open(sys.argv[2], "w").write(f'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = "{body}"\n')
PY
}

# One wrk run of $3 connections against URL $1 with request script $2; prints
# "req/s | p50 ms | p99 ms" and, when some answers were not 2xx, how many.
wrk_run() {
  local url=$1 lua=$2 conns=$3
  wrk -t"$(( conns < 2 ? conns : 2 ))" -c"$conns" -d"${DURATION}s" --latency -s "$lua" "$url" |
    python3 -c '
import re, sys
out = sys.stdin.read()
def ms(label):
    m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    v, u = float(m.group(1)), m.group(2)
    return v / 1000 if u == "us" else v * 1000 if u == "s" else v
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
print(f"{rps:.1f} | {ms(50):.3f} | {ms(99):.3f}" + (f" ({errors.group(1)} errors)" if errors else ""))'
}

# Start the release server on port $1 with the 500-cluster demo in a fresh database under $2,
# the simulator at $3 steps/s (0: still); extra environment comes from the caller. Sets PID and
# waits until it is ready.
start_server() {
  local port=$1 dir=$2 churn=$3 sim=()
  [ "$churn" != 0 ] && sim=(env SIMULATE=true SIMULATE_STEPS_PER_SECOND="$churn")
  # Read as a local client without a key and without a rate limit, unless the caller says otherwise.
  # SERVER_LOG=FILE: the server's log goes through a pipe into FILE (as a container runtime
  # collects it), not to the terminal.
  ANONYMOUS_READ_FROM="${ANONYMOUS_READ_FROM-127.0.0.0/8}" RATE_LIMIT="${RATE_LIMIT-0}" \
  DATABASE_URL="sqlite://$dir/load.db" PORT=$port BIND_ADDRESS=127.0.0.1 LOG_LEVEL="${LOG_LEVEL-warn}" \
    "${sim[@]}" "$CARGO_TARGET_DIR/release/vitistack" serve --demo --demo-clusters 500 \
    > >(if [ -n "${SERVER_LOG:-}" ]; then cat > "$SERVER_LOG"; else cat; fi) &
  PID=$!
  for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null && { settled "$port"; return 0; }; sleep 0.1; done
  echo "the server on port $port did not become ready" >&2
  return 1
}

# Wait (at most 2 min) until the server on port $1 has written what loading the fleet queued
# (objects and history): measurements start from the steady state, not during the first writes.
settled() {
  local port=$1
  for _ in $(seq 1 1200); do
    curl -s "http://127.0.0.1:$port/metrics" |
      awk '/^vitistack_(database_pending_writes|history_pending_events) /{s+=$2; n++} END{exit !(n>0 && s==0)}' && return 0
    sleep 0.1
  done
  echo "the server on port $port still had writes pending after 2 min; measuring anyway" >&2
}

# The store's sequence number on port $1 (changes applied so far).
store_seq() { curl -s "http://127.0.0.1:$1/metrics" | awk '/^vitistack_store_sequence /{print $2}'; }
