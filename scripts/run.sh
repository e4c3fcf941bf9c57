#!/usr/bin/env bash
# Build and start vitistack on the embedded default (no cluster) with the generated demo fleet.
# Extra arguments go to `vitistack serve` (e.g. manifest files or directories to load).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/vitistack-target}"
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)"; exit 1; }
# The dashboard first: the server embeds web/dist.
bash scripts/build-web.sh
cargo build --release --locked -p vitistack-server
export PORT="${PORT:-9991}" DEVELOPMENT="${DEVELOPMENT:-true}" LOG_JSON_LOGGING="${LOG_JSON_LOGGING:-false}"
# The demo is live: the simulator plays the operators' pipeline (SIMULATE=false turns it off).
export SIMULATE="${SIMULATE:-true}"
echo "vitistack: the dashboard is at http://localhost:${PORT}/ and GraphiQL at http://localhost:${PORT}/graphql"
exec "$CARGO_TARGET_DIR/release/vitistack" serve --demo "$@"
