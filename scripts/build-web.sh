#!/usr/bin/env bash
# Build the dashboard (web/, a Leptos client-side app) to wasm32 and lay it out in web/dist for the
# server to embed: content-hashed file names, a gzip copy of each, index.html pointing at them.
# Views marked `#[leptos::lazy]` (the change panel, the new-cluster form, the time control, and every
# page but the overview, the clusters list and a cluster's page) are split off the main
# module by wasm-split-cli and fetched when first shown: the first page load does not carry them.
# Called by scripts/run.sh and scripts/test.sh; installs what it needs and is incremental.
#
#   WASM_ROUTE=auto|rustup|debian  auto: rustup's wasm32-unknown-unknown target when it is installed
#                                  (a normal laptop), else Debian's rustc-web with -Zbuild-std.
#   WASM_OPT=auto|none             auto: binaryen's wasm-opt from npm (Debian's 108 breaks the
#                                  externref table export), checked after it ran.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
TARGET=wasm32-unknown-unknown
WASM_ROUTE=${WASM_ROUTE:-auto}
WASM_OPT=${WASM_OPT:-auto}
BINARYEN=132.0.0
# wasm_split_cli_support: its split points must match wasm_split_helpers in Cargo.lock (0.2.3).
SPLIT_CLI=0.2.4
# Tools and packages are installed machine-wide under a lock (scripts/setup-lib.sh).
. scripts/setup-lib.sh
TOOLS=$VITISTACK_TOOLS
say() { printf '== web: %s\n' "$*" >&2; }
die() { printf 'web build failed: %s\n' "$*" >&2; exit 1; }

rustup_has_wasm() {
  command -v rustup >/dev/null && rustup target list --installed 2>/dev/null | grep -qx "$TARGET"
}
if [ "$WASM_ROUTE" = auto ]; then
  if rustup_has_wasm; then WASM_ROUTE=rustup; else WASM_ROUTE=debian; fi
fi

# web/dist is reused while every input of the build is unchanged: the sources, the lock file,
# the schema the GraphQL documents are checked against, this script, the compiler and the tools.
# Rebuilding would take minutes (wasm-opt, zopfli) and, by rewriting web/dist, make cargo
# recompile the server that embeds it.
stamp=web/dist.inputs
inputs() {
  local rustc=rustc
  [ "$WASM_ROUTE" = debian ] && rustc=/usr/bin/rustc
  local compiler
  compiler=$("$rustc" -vV 2>/dev/null) || return 1
  {
    printf '%s\n' "$WASM_ROUTE" "$WASM_OPT" "$BINARYEN" "$compiler" "$(command -v zopfli || echo gzip)"
    find web/src web/graphql -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    sha256sum web/Cargo.toml web/index.html web/style.css Cargo.toml Cargo.lock schema.graphql \
      scripts/build-web.sh scripts/wasm-externref-check.py
  } | sha256sum | cut -d' ' -f1
}
report() {
  say "web/dist: $(python3 scripts/web-budget.py --report)"
}
# One build at a time in this clone (two at once would both replace web/dist).
if [ -z "${VITISTACK_WEB_LOCKED:-}" ]; then
  VITISTACK_WEB_LOCKED=1 locked "$root/web/.build.lock" bash "$0" "$@"
  exit $?
fi
if key=$(inputs) && [ -f web/dist/index.html ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
  say "web/dist is up to date (its inputs are unchanged): reused"
  report
  exit 0
fi
# Both routes: components type-erased (leptos' `erase_components`: far less monomorphised view
# code, 53 KB less gzip) and relocations kept, which wasm-split-cli needs to split the module.
common_flags="--cfg=erase_components -Clink-args=--emit-relocs"
case "$WASM_ROUTE" in
  rustup)
    build=(env "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS=$common_flags" cargo build)
    ;;
  debian)
    apt_install rustc-web cargo-web rust-web-src
    llvm=$(/usr/bin/rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
    lld=""
    for cand in "lld-$llvm" lld-22 lld-19; do
      if dpkg-query -W -f='${Status}' "$cand" 2>/dev/null | grep -q 'install ok installed' ||
        apt-cache show "$cand" >/dev/null 2>&1; then
        lld=$cand
        break
      fi
    done
    [ -n "$lld" ] || die "no lld package (wasm-ld) for LLVM $llvm"
    apt_install "$lld"
    wasm_ld="/usr/lib/llvm-${lld#lld-}/bin/wasm-ld"
    # PATH=/usr/bin first: build scripts that call rustc or cargo get Debian's, not rustup's.
    # std is built here anyway, so it is built to abort on panic without formatting a message,
    # and without Debug formatting or panic locations: 20 KB less gzip (a panic is a bug either
    # way; the rustup route keeps the messages). So the dashboard never shows `{:?}` output.
    # No panic hook either (feature panic-hook): with immediate-abort it would never run.
    # std's `optimize_for_size` picks its smaller implementations (sorting above all): 6 KB gzip.
    build=(env "PATH=/usr/bin:$PATH" RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1
      "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=$wasm_ld"
      "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS=-Zunstable-options -Cpanic=immediate-abort -Zfmt-debug=none -Zlocation-detail=none $common_flags"
      /usr/bin/cargo build -Zbuild-std=std,panic_abort -Zbuild-std-features=optimize_for_size --no-default-features)
    ;;
  *) die "WASM_ROUTE must be auto, rustup or debian" ;;
esac

# The wasm-bindgen CLI must equal the crate in Cargo.lock exactly.
wb=$(awk '$0=="name = \"wasm-bindgen\""{getline; gsub(/version = |"/,""); print; exit}' Cargo.lock)
[ -n "$wb" ] || die "wasm-bindgen is not in Cargo.lock"
cargo_tool wasm-bindgen-cli "$wb" || die "cannot install wasm-bindgen-cli $wb"
wasm_bindgen="$TOOLS/bin/wasm-bindgen"
cargo_tool wasm_split_cli_support "$SPLIT_CLI" --features build-binary ||
  die "cannot install wasm_split_cli_support $SPLIT_CLI"
split_cli="$TOOLS/bin/wasm-split-cli"

# A separate target directory per toolchain: switching rustc would rebuild everything.
export CARGO_TARGET_DIR="${WEB_TARGET_DIR:-/var/tmp/vitistack-web-target}/$WASM_ROUTE"
say "cargo build ($WASM_ROUTE)"
"${build[@]}" --locked -p vitistack-web --profile wasm-release --target "$TARGET"
raw="$CARGO_TARGET_DIR/$TARGET/wasm-release/vitistack_web.wasm"
[ -f "$raw" ] || die "expected $raw"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# The lazily loaded views into modules of their own, a loader (`__wasm_split.js`) for them, and the
# main module, which wasm-bindgen then binds as usual.
"$split_cli" "$raw" "$stage/split" --out-name vitistack_web >/dev/null
# --keep-lld-exports: the lazily loaded modules import the function table, which wasm-bindgen
# would otherwise stop exporting.
"$wasm_bindgen" --target web --no-typescript --keep-lld-exports --out-dir "$stage" "$stage/split/vitistack_web.wasm"
bg="$stage/vitistack_web_bg.wasm"
lazy=()
for f in "$stage"/split/*.wasm; do
  [ "$(basename "$f")" = vitistack_web.wasm ] || lazy+=("$f")
done

# wasm-opt: checked, since a broken one kills the page (`__wbindgen_externrefs` must stay an
# externref table). `--low-memory-unused`: Rust puts the stack, then the data, above the first
# KiB, so loads and stores there can fold their offsets (3 KB less gzip). The lazily loaded
# modules share the main module's memory and table: optimised alike, each on its own.
if [ "$WASM_OPT" = auto ] && command -v npm >/dev/null; then
  opt="$TOOLS/node_modules/.bin/wasm-opt"
  npm_tool binaryen "$BINARYEN" wasm-opt || die "cannot install binaryen $BINARYEN"
  if "$opt" -Oz --low-memory-unused -o "$bg.opt" "$bg" && python3 scripts/wasm-externref-check.py "$bg.opt"; then
    mv "$bg.opt" "$bg"
  else
    say "wasm-opt failed or broke the externref table; keeping the unoptimised wasm"
    rm -f "$bg.opt"
  fi
  for f in "${lazy[@]}"; do
    if "$opt" -Oz --low-memory-unused -o "$f.opt" "$f" 2>/dev/null; then mv "$f.opt" "$f"; else rm -f "$f.opt"; fi
  done
fi
python3 scripts/wasm-externref-check.py "$bg"

# Content-hashed names: the server lets browsers keep /assets/* forever.
hash() { sha256sum "$1" | cut -c1-16; }
out="$stage/dist"
mkdir -p "$out/assets"
wasm_name="vitistack-$(hash "$bg").wasm"
cp "$bg" "$out/assets/$wasm_name"
loader="$stage/loader.js"
cp "$stage/split/__wasm_split.js" "$loader"
for f in "${lazy[@]}"; do
  name="lazy-$(hash "$f").wasm"
  cp "$f" "$out/assets/$name"
  sed -i "s#\"\./$(basename "$f")\"#\"./$name\"#" "$loader"
done
sed "s#vitistack_web_bg.wasm#$wasm_name#" "$stage/vitistack_web.js" > "$stage/glue.js"
# The glue imports the loader and the loader imports the glue: one hash over both, written with
# a placeholder for itself, names the pair. Only the ES imports change: the wasm still names its
# import module `./__wasm_split.js`, and so must the glue's imports object.
sed "/^import /s#\"\./__wasm_split\.js\"#\"./lazy-@PAIR@.js\"#" "$stage/glue.js" > "$stage/glue.pair.js"
sed "/^import /s#\"\./vitistack_web\.js\"#\"./vitistack-@PAIR@.js\"#" "$loader" > "$stage/loader.pair.js"
grep -q '^import .*"\./lazy-@PAIR@\.js"' "$stage/glue.pair.js" || die "the glue does not import the loader"
grep -q '^import .*"\./vitistack-@PAIR@\.js"' "$stage/loader.pair.js" || die "the loader does not import the glue"
pair=$(cat "$stage/glue.pair.js" "$stage/loader.pair.js" | sha256sum | cut -c1-16)
js_name="vitistack-$pair.js"
sed "s#@PAIR@#$pair#g" "$stage/glue.pair.js" > "$out/assets/$js_name"
sed "s#@PAIR@#$pair#g" "$stage/loader.pair.js" > "$out/assets/lazy-$pair.js"
css_name="vitistack-$(hash web/style.css).css"
cp web/style.css "$out/assets/$css_name"
# The start-up script is a file, not inline, so the page's CSP can forbid inline scripts.
# It also lets a benchmark read the WebAssembly memory's size (the JS heap does not include it)
# and the bytes the app's allocator has in use within it.
printf 'import init, { heapInUse } from "/assets/%s";\nconst wasm = await init({ module_or_path: "/assets/%s" });\nwindow.vitistackWasmBytes = () => wasm.memory.buffer.byteLength;\nwindow.vitistackHeapInUse = heapInUse;\n' \
  "$js_name" "$wasm_name" > "$stage/boot.js"
boot_name="boot-$(hash "$stage/boot.js").js"
cp "$stage/boot.js" "$out/assets/$boot_name"
sed -e "s#__JS__#/assets/$js_name#" -e "s#__WASM__#/assets/$wasm_name#" -e "s#__CSS__#/assets/$css_name#" \
  -e "s#__BOOT__#/assets/$boot_name#" web/index.html > "$out/index.html"
# Zopfli writes gzip that any browser reads, about 4 % smaller than gzip -9 (once, at build time).
command -v zopfli >/dev/null || apt_install zopfli || true
for f in "$out/index.html" "$out"/assets/*; do
  if command -v zopfli >/dev/null; then zopfli --i15 "$f"; else gzip -9 -n -k "$f"; fi
done

# An identical result leaves web/dist as it is (its files' times too: cargo then has nothing to
# rebuild).
if [ -d web/dist ] && diff -rq "$out" web/dist >/dev/null 2>&1; then
  say "the build's result is identical to web/dist: kept"
else
  rm -rf web/dist
  mv "$out" web/dist
fi
# The inputs as they were when the build began: a file edited meanwhile makes the next run build.
printf '%s\n' "${key:-$(inputs)}" > "$stamp"
report
