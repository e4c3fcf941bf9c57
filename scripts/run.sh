#!/usr/bin/env bash
# Build and start vitistack on the embedded default (no cluster) with the generated demo fleet.
# Extra arguments go to `vitistack serve` (e.g. manifest files or directories to load).
# A second start with nothing changed reuses both builds (the dashboard's is keyed on its inputs).
#   VITISTACK_BIN=PATH        serve this binary instead of building the release one (the tests do)
#   VITISTACK_STATE_DIR=DIR   where the newcomer's keys file is made (default .vitistack)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/vitistack-target}"
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)"; exit 1; }
# The dashboard first: the server embeds web/dist.
bash scripts/build-web.sh
bin="${VITISTACK_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --release --locked -p vitistack-server
  bin="$CARGO_TARGET_DIR/release/vitistack"
fi
export PORT="${PORT:-9991}" DEVELOPMENT="${DEVELOPMENT:-true}" LOG_JSON_LOGGING="${LOG_JSON_LOGGING:-false}"
# The demo is live: the simulator plays the operators' pipeline (SIMULATE=false turns it off).
export SIMULATE="${SIMULATE:-true}"
# Access for a newcomer: reading needs no key from this machine (the server listens on localhost
# only, DEVELOPMENT=true), and a fresh admin key is made for changes. The keys file holds only its
# hash; the key itself is printed here once and kept nowhere else.
export ANONYMOUS_READ_FROM="${ANONYMOUS_READ_FROM-127.0.0.0/8,::1/128}"
if [ -z "${API_KEYS_FILE:-}" ]; then
  state="${VITISTACK_STATE_DIR:-$PWD/.vitistack}"
  mkdir -p "$state"
  key="vsk_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  hash=$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)
  printf '# made by scripts/run.sh: NAME ROLE sha256:<hash of the key>\nnewcomer admin sha256:%s\n' "$hash" > "$state/keys"
  export API_KEYS_FILE="$state/keys"
  echo "vitistack: reading needs no key from this machine; to sign in as admin (changes), use the key $key"
fi
echo "vitistack: the dashboard is at http://localhost:${PORT}/ and GraphiQL at http://localhost:${PORT}/graphql"
exec "$bin" serve --demo "$@"
