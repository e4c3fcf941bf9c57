#!/usr/bin/env bash
# Assemble the container image here, without pulling a base image: one layer holding the binary
# (the dashboard embedded), exactly the libraries `ldd` names, CA certificates, a non-root user
# (65532) and /data, written as an OCI image layout by umoci. The same root filesystem is what
# Containerfile's runtime stage copies.
#
#   scripts/build-image.sh [--binary PATH] [--out DIR]   OCI layout DIR/oci (tag: the crate version),
#                                                        the same as an archive
#                                                        DIR/vitistack-graphql-VERSION.oci.tar (for
#                                                        `skopeo copy oci-archive:…`, `podman load`),
#                                                        and the CycloneDX SBOM DIR/sbom.cdx.json
#   scripts/build-image.sh --rootfs DIR                  only the root filesystem (Containerfile)
#   scripts/build-image.sh --print-ref                   the image reference the chart installs
#
# Without --binary the dashboard and the release binary are built (scripts/build-web.sh, cargo).
# The layer is reproducible: entries sorted, times SOURCE_DATE_EPOCH (default: the commit's time).
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=ghcr.io/vitistack/vitistack-graphql
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
[ -n "$version" ] || { echo "no version in Cargo.toml" >&2; exit 1; }
bin="" out=dist/image rootfs=""
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --binary) bin=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --rootfs) rootfs=${2:?}; shift 2 ;;
    --print-ref) echo "$IMAGE:$version"; exit 0 ;;
    *) usage ;;
  esac
done
say() { printf '== image: %s\n' "$*" >&2; }
. scripts/setup-lib.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/vitistack-target}"

# Tools: umoci (the OCI layout), Debian's CA bundle, objcopy, cargo-cyclonedx (the crates' SBOM).
need=()
[ -n "$rootfs" ] || command -v umoci >/dev/null || need+=(umoci)
[ -f /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
command -v objcopy >/dev/null || need+=(binutils)
[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
CYCLONEDX=0.5.9
cargo_tool cargo-cyclonedx "$CYCLONEDX"

if [ -z "$bin" ]; then
  bash scripts/build-web.sh
  say "cargo build --release"
  cargo build --release --locked -p vitistack-server --bin vitistack
  bin="$CARGO_TARGET_DIR/release/vitistack"
fi
[ -x "$bin" ] || { echo "not an executable: $bin" >&2; exit 1; }
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
fi
export SOURCE_DATE_EPOCH
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Line tables are for profiling (BENCHMARKS.md); the image keeps the symbols, so a panic's
# backtrace still names its functions.
objcopy --strip-debug "$bin" "$work/vitistack"

say "SBOM (cargo-cyclonedx, the Debian packages of the libraries)"
# It writes one file beside each workspace member's Cargo.toml: the server's is the product's.
name="sbom-crates-$$"
cargo cyclonedx --manifest-path server/Cargo.toml --format json --spec-version 1.5 \
  --override-filename "$name" -q >/dev/null
mv "server/$name.json" "$work/crates.cdx.json"
rm -f ./*/"$name.json"
mkdir -p "$out"
python3 scripts/image.py sbom "$work/crates.cdx.json" "$work/vitistack" "$out/sbom.cdx.json"
python3 scripts/image.py layer "$work/vitistack" "$work/layer.tar" "$out/sbom.cdx.json"

if [ -n "$rootfs" ]; then
  mkdir -p "$rootfs"
  tar -xpf "$work/layer.tar" -C "$rootfs"
  say "root filesystem in $rootfs"
  exit 0
fi

case $(uname -m) in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) arch=$(uname -m) ;;
esac
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
layout="$out/oci"
rm -rf "$layout"
umoci init --layout "$layout"
umoci new --image "$layout:$version"
umoci raw add-layer --image "$layout:$version" --history.created "$created" \
  --history.created_by "scripts/build-image.sh" "$work/layer.tar"
# The same settings as Containerfile's runtime stage (the image test compares them).
umoci config --image "$layout:$version" --created "$created" --history.created "$created" \
  --history.created_by "scripts/build-image.sh (config)" --architecture "$arch" --os linux \
  --config.user 65532:65532 --config.workingdir /data \
  --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --config.env DATABASE_URL=sqlite:///data/vitistack.db \
  --config.env MIMALLOC_PURGE_DELAY=1000 \
  --config.exposedports 9991/tcp --config.volume /data \
  --config.entrypoint /usr/local/bin/vitistack --config.cmd serve \
  --config.label org.opencontainers.image.title=vitistack-graphql \
  --config.label org.opencontainers.image.source=https://github.com/vitistack/vitistack-graphql \
  --config.label org.opencontainers.image.licenses=Apache-2.0 \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.revision=$commit" \
  --config.label "org.opencontainers.image.created=$created" \
  --manifest.annotation "org.opencontainers.image.ref.name=$IMAGE:$version"
umoci gc --layout "$layout"
archive="$out/vitistack-graphql-$version.oci.tar"
tar -C "$layout" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner -cf "$archive" .
layer_bytes=$(python3 - "$layout" "$version" <<'EOF'
import json, os, sys
layout, tag = sys.argv[1:]
index = json.load(open(os.path.join(layout, "index.json")))
desc = next(m for m in index["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == tag)
manifest = json.load(open(os.path.join(layout, "blobs", *desc["digest"].split(":"))))
print(sum(l["size"] for l in manifest["layers"]))
EOF
)
say "$IMAGE:$version in $layout (archive $archive): layer $layer_bytes bytes compressed ($(( (layer_bytes + 524288) / 1048576 )) MiB), uncompressed $(stat -c %s "$work/layer.tar") bytes"
