# Sourced by the set-up scripts (build-web.sh, test.sh, supply-chain.sh, build-image.sh, …): what
# they install, installed once per machine and under a lock, so that two set-ups started together
# (`scripts/run.sh` in one terminal, `scripts/test.sh` in another clone) never build or install the
# same thing in the same place at once. The second waits for the first ("waiting for …") and then
# reuses what it installed.
#
#   VITISTACK_TOOLS=DIR        where tools are installed (default /var/tmp/vitistack-tools):
#                              cargo tools in DIR/bin, npm tools in DIR/node_modules
#   VITISTACK_TOOLS_BUILD=DIR  the cargo target directory tools are built in (default DIR/build);
#                              its lock is DIR.lock, so set-ups sharing it take turns

VITISTACK_TOOLS=${VITISTACK_TOOLS:-/var/tmp/vitistack-tools}
VITISTACK_TOOLS_BUILD=${VITISTACK_TOOLS_BUILD:-$VITISTACK_TOOLS/build}
export VITISTACK_TOOLS VITISTACK_TOOLS_BUILD
export PATH="$VITISTACK_TOOLS/bin:$HOME/.cargo/bin:$PATH"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

setup_say() { printf '== set-up: %s\n' "$*" >&2; }

# locked LOCKFILE COMMAND...: run COMMAND (a program or a function) holding LOCKFILE; a set-up
# that holds it already is waited for, and said so.
locked() {
  local lock=$1
  shift
  mkdir -p "$(dirname "$lock")"
  (
    if ! flock -n 9; then
      setup_say "waiting for another set-up ($lock)"
      flock 9
    fi
    "$@"
  ) 9>"$lock"
}

# The apt lock of this machine: apt-get fails at once when another holds dpkg's, so set-ups queue
# here first (and give dpkg's own lock time, for an apt run that is not ours).
APT_LOCK=/var/tmp/vitistack-apt.lock
apt_updated=0
_apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || { echo "missing ${missing[*]} and no apt-get to install them" >&2; return 1; }
  local apt=($SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -qq)
  if [ "$apt_updated" = 0 ]; then "${apt[@]}" update; apt_updated=1; fi
  setup_say "apt-get install ${missing[*]}"
  "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
}
# apt_install PACKAGE...: the Debian packages that are missing.
apt_install() { locked "$APT_LOCK" _apt_install "$@"; }

_cargo_tool() {
  local crate=$1 version=$2
  shift 2
  if cargo install --list --root "$VITISTACK_TOOLS" 2>/dev/null | grep -qx "$crate v$version:"; then
    setup_say "$crate $version is installed: reused"
    return 0
  fi
  setup_say "cargo install $crate $version (into $VITISTACK_TOOLS)"
  local first
  first=$(mktemp)
  # --locked can fail when the registry no longer serves a locked dependency (seen: wasm-bindgen-cli's
  # webpki-roots); then the dependencies are resolved afresh, and the first attempt's errors are
  # shown only if that fails too.
  if CARGO_TARGET_DIR="$VITISTACK_TOOLS_BUILD" cargo install --quiet --root "$VITISTACK_TOOLS" --force \
    "$crate" --version "$version" --locked "$@" 2>"$first"; then
    rm -f "$first"
    return 0
  fi
  setup_say "$crate $version: its locked dependencies are not all in the registry; resolving afresh"
  if ! CARGO_TARGET_DIR="$VITISTACK_TOOLS_BUILD" cargo install --quiet --root "$VITISTACK_TOOLS" --force \
    "$crate" --version "$version" "$@"; then
    cat "$first" >&2
    rm -f "$first"
    return 1
  fi
  rm -f "$first"
}
# cargo_tool CRATE VERSION [cargo install options…]: CRATE at VERSION in $VITISTACK_TOOLS/bin,
# built in its own target directory; one install at a time per target directory.
cargo_tool() { locked "$VITISTACK_TOOLS_BUILD.lock" _cargo_tool "$@"; }

_npm_tool() {
  local package=$1 version=$2 check=$3
  if [ -x "$VITISTACK_TOOLS/node_modules/.bin/$check" ] &&
    [ "$(node -p "require('$VITISTACK_TOOLS/node_modules/$package/package.json').version" 2>/dev/null)" = "$version" ]; then
    return 0
  fi
  setup_say "npm install $package@$version (into $VITISTACK_TOOLS)"
  mkdir -p "$VITISTACK_TOOLS"
  npm install --prefix "$VITISTACK_TOOLS" --no-audit --no-fund --loglevel=error "$package@$version" >/dev/null
}
# npm_tool PACKAGE VERSION BIN: PACKAGE at VERSION in $VITISTACK_TOOLS/node_modules (BIN its program).
npm_tool() { locked "$VITISTACK_TOOLS/npm.lock" _npm_tool "$@"; }

_python_venv() {
  local venv=$1
  shift
  if "$venv/bin/python" -c 'import sys' 2>/dev/null &&
    "$venv/bin/pip" show --quiet "$@" >/dev/null 2>&1; then
    return 0
  fi
  setup_say "pip install $* (into $venv)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "$@"
}
# python_venv DIR PACKAGE...: a virtual environment at DIR holding PACKAGE….
python_venv() { locked "$1.lock" _python_venv "$@"; }
