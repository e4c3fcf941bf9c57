#!/usr/bin/env python3
"""The container image's one layer and its SBOM, assembled from a built binary without a base image.

    image.py layer BINARY OUT.tar SBOM.json   the root filesystem as a tar: the binary, exactly the
                                              libraries `ldd` names, CA certificates, a non-root user,
                                              /data and /tmp; the SBOM given is copied in
    image.py sbom CRATES.cdx.json BINARY OUT  the crates' CycloneDX SBOM (cargo-cyclonedx) plus the
                                              Debian packages the libraries come from

The tar is reproducible: entries sorted, every timestamp SOURCE_DATE_EPOCH, owners and modes set here
(root everywhere but the user's home and /data), so the same binary gives the same layer digest.
Used by scripts/build-image.sh, and by Containerfile through it.
"""

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import uuid

USER = 65532
SBOM_PATH = "usr/share/doc/vitistack-graphql/sbom.cdx.json"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def libraries(binary):
    """The absolute paths `ldd` names for the binary (the dynamic loader included); [] when static."""
    run = subprocess.run(["ldd", binary], capture_output=True, text=True)
    text = run.stdout + run.stderr
    if "not a dynamic executable" in text or "statically linked" in text:
        return []
    if run.returncode != 0:
        sys.exit(f"ldd {binary} failed: {text.strip()}")
    paths = []
    for line in run.stdout.splitlines():
        line = line.strip()
        if "=> not found" in line:
            sys.exit(f"ldd: a library of {binary} is missing: {line}")
        m = re.match(r"(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)$", line)
        if m:
            paths.append(m.group(1))
    return paths


def installed(pkg):
    """(package, version, arch) of an installed Debian package, or None."""
    run = subprocess.run(["dpkg-query", "-W", "-f=${Version} ${Architecture}", pkg],
                         capture_output=True, text=True)
    fields = run.stdout.split()
    return (pkg, fields[0], fields[1]) if run.returncode == 0 and len(fields) == 2 else None


def debian_package(path):
    """(package, version, arch) owning a library file, or None off Debian."""
    for candidate in dict.fromkeys([path, os.path.realpath(path), "/usr" + path]):
        run = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if run.returncode == 0:
            return installed(run.stdout.split(":", 1)[0].strip())
    return None


def deb_component(kind, owner, description):
    """A CycloneDX component for a Debian package (name, version, arch)."""
    name, version, arch = owner
    return {
        "type": kind,
        "bom-ref": f"deb:{name}@{version}",
        "name": name,
        "version": version,
        "purl": f"pkg:deb/debian/{name}@{version.replace('+', '%2B')}?arch={arch}",
        "description": description,
    }


def layer(binary, out, sbom):
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    entries = {}  # path in the image -> (TarInfo, bytes or None)

    def dir_info(path, uid, mode):
        info = tarfile.TarInfo(path)
        info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, epoch
        info.uid = info.gid = uid
        return info

    def parents(path):
        parts = path.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            entries.setdefault(parent, (dir_info(parent, 0, 0o755), None))

    def directory(path, uid=0, mode=0o755):
        parents(path)
        entries[path] = (dir_info(path, uid, mode), None)

    def file(path, data, mode=0o644):
        parents(path)
        info = tarfile.TarInfo(path)
        info.size, info.mode, info.mtime = len(data), mode, epoch
        entries[path] = (info, data)

    def host(src):
        with open(src, "rb") as f:
            return f.read()

    file("usr/local/bin/vitistack", host(binary), 0o755)
    for lib in libraries(binary):
        file(lib.lstrip("/"), host(os.path.realpath(lib)), 0o755)
        owner = debian_package(lib)
        copyright_file = owner and f"/usr/share/doc/{owner[0]}/copyright"
        if copyright_file and os.path.exists(copyright_file):
            file(copyright_file.lstrip("/"), host(copyright_file))
    if not os.path.exists(CA_BUNDLE):
        sys.exit(f"{CA_BUNDLE} is missing (Debian's ca-certificates)")
    file(CA_BUNDLE.lstrip("/"), host(CA_BUNDLE))
    file("etc/passwd", (
        "root:x:0:0:root:/root:/sbin/nologin\n"
        f"nonroot:x:{USER}:{USER}:nonroot:/home/nonroot:/sbin/nologin\n").encode())
    file("etc/group", f"root:x:0:\nnonroot:x:{USER}:\n".encode())
    file("etc/nsswitch.conf", b"hosts: files dns\n")
    file(SBOM_PATH, host(sbom))
    directory("tmp", mode=0o1777)
    directory("home/nonroot", uid=USER, mode=0o700)
    directory("data", uid=USER, mode=0o755)

    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(entries):
            info, data = entries[path]
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    print(f"layer {out}: {len(entries)} entries, {os.path.getsize(out)} bytes")


def sbom(crates, binary, out):
    with open(crates) as f:
        doc = json.load(f)
    components = doc.setdefault("components", [])
    seen = set()
    for lib in libraries(binary):
        owner = debian_package(lib)
        if owner is None or owner[0] in seen:
            continue
        seen.add(owner[0])
        components.append(deb_component(
            "library", owner, f"Debian package providing {os.path.basename(lib)} (linked by the binary)"))
    if not any(c.get("name") == "ca-certificates" for c in components):
        # The bundle is generated by update-ca-certificates, so no package owns the file itself.
        owner = installed("ca-certificates") or ("ca-certificates", "unknown", "all")
        components.append(deb_component("data", owner, f"CA certificates ({CA_BUNDLE})"))
    # Reproducible: the time is the source's (SOURCE_DATE_EPOCH), the serial number follows the content.
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    doc.setdefault("metadata", {})["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    doc.pop("serialNumber", None)
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    doc["serialNumber"] = f"urn:uuid:{uuid.UUID(digest[:32])}"
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"sbom {out}: {len(components)} components ({len(seen)} Debian packages)")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "layer":
        layer(*sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "sbom":
        sbom(*sys.argv[2:])
    else:
        sys.exit(__doc__)
