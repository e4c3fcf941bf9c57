#!/usr/bin/env bash
# The dependencies' supply chain, by cargo-deny and deny.toml: licences, crates in two versions,
# sources (crates.io only), and known advisories when the RustSec database can be fetched.
# Exit 1 when a check fails; a database that cannot be fetched is said, not failed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup-lib.sh
DENY=0.20.2
cargo_tool cargo-deny "$DENY"
status=0
cargo deny --color never check licenses bans sources || status=1
if fetch=$(cargo deny --color never fetch db 2>&1); then
  cargo deny --color never check --disable-fetch advisories || status=1
else
  reason=$(printf '%s\n' "$fetch" | grep -m1 -iE 'fatal|error' | sed 's/^.*\] //' || true)
  echo "advisories: skipped, the RustSec database could not be fetched (${reason:-no reason given})"
fi
exit "$status"
