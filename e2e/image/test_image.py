"""The container image, assembled by scripts/build-image.sh, unpacked by umoci and run from its root.

What a platform team would notice: the image is a valid OCI layout with the settings Containerfile
declares and the reference the chart installs; its root holds the binary, exactly the libraries
`ldd` names, CA certificates, a non-root user and nothing else to run (no shell); the binary started
from the unpacked root as user 65532 serves the demo, the dashboard and the health routes; the
health check command works inside it; the SBOM names the crates and the Debian packages.

Run by scripts/test.sh with VITISTACK_BIN (the test build of the binary: the image is assembled
around whichever binary it is given; the release image's size is in BENCHMARKS.md).
"""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "build-image.sh")
CONTAINERFILE = os.path.join(ROOT, "Containerfile")
CHART = os.path.join(ROOT, "charts", "vitistack-graphql")
USER = 65532


def crate_version():
    with open(os.path.join(ROOT, "Cargo.toml")) as f:
        return re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)


def build(out):
    """Run the image script on the test binary; its output (what it said) for the failure message."""
    run = subprocess.run(
        ["bash", SCRIPT, "--binary", os.environ["VITISTACK_BIN"], "--out", out],
        capture_output=True, text=True, cwd=ROOT,
    )
    if run.returncode != 0:
        raise AssertionError(f"build-image.sh failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    return run.stdout + run.stderr


def blob(layout, digest):
    algo, hexdigest = digest.split(":")
    return os.path.join(layout, "blobs", algo, hexdigest)


def image(layout):
    """(manifest, config) of the layout's one tagged image."""
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    (desc,) = index["manifests"]
    with open(blob(layout, desc["digest"])) as f:
        manifest = json.load(f)
    with open(blob(layout, manifest["config"]["digest"])) as f:
        config = json.load(f)
    return desc, manifest, config


def containerfile_runtime():
    """The runtime stage's settings, as Containerfile declares them."""
    with open(CONTAINERFILE) as f:
        text = f.read().replace("\\\n", " ")
    stage = text[text.rindex("FROM scratch"):]
    settings = {"env": {}, "labels": {}}
    for line in stage.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "ENV":
            settings["env"].update(dict(kv.split("=", 1) for kv in rest.split()))
        elif word in ("USER", "WORKDIR", "EXPOSE", "VOLUME"):
            settings[word.lower()] = rest.strip()
        elif word in ("ENTRYPOINT", "CMD"):
            settings[word.lower()] = json.loads(rest)
        elif word == "HEALTHCHECK":
            settings["healthcheck"] = json.loads(rest[rest.index("CMD") + 3:])
        elif word == "LABEL":
            settings["labels"].update(dict(re.findall(r'(\S+)="([^"]*)"', rest)))
    return settings


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers_200(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def in_root(rootfs, args, env):
    """The command run from the unpacked root: chroot as user 65532 (root is needed for chroot; an
    unprivileged run maps itself to root in a user namespace instead)."""
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    if os.geteuid() == 0:
        prefix = [chroot, f"--userspec={USER}:{USER}"]
    else:
        prefix = [shutil.which("unshare") or "/usr/bin/unshare", "--map-root-user", chroot]
    return prefix + [rootfs] + args, {"PATH": "/usr/local/bin", **env}


class Image(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = os.path.join(cls.tmp.name, "image")
        cls.said = build(cls.out)
        cls.layout = os.path.join(cls.out, "oci")
        cls.desc, cls.manifest, cls.config = image(cls.layout)
        cls.bundle = os.path.join(cls.tmp.name, "bundle")
        unpack = ["umoci", "unpack"] + ([] if os.geteuid() == 0 else ["--rootless"])
        subprocess.run(
            unpack + ["--image", f"{cls.layout}:{crate_version()}", cls.bundle],
            check=True, capture_output=True,
        )
        cls.rootfs = os.path.join(cls.bundle, "rootfs")
        with open(os.path.join(cls.bundle, "config.json")) as f:
            cls.runtime = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_layout_is_tagged_with_the_reference_the_chart_installs(self):
        version = crate_version()
        self.assertEqual(self.desc["annotations"]["org.opencontainers.image.ref.name"], version)
        ref = subprocess.run(["bash", SCRIPT, "--print-ref"], capture_output=True, text=True, check=True).stdout.strip()
        with open(os.path.join(CHART, "values.yaml")) as f:
            values = f.read()
        repository = re.search(r"^  repository: (\S+)$", values, re.M).group(1)
        with open(os.path.join(CHART, "Chart.yaml")) as f:
            chart = f.read()
        app_version = re.search(r'^appVersion: "?([^"\n]+)"?$', chart, re.M).group(1)
        self.assertEqual(ref, f"{repository}:{app_version}")
        self.assertEqual(app_version, version)
        self.assertEqual(self.manifest["annotations"]["org.opencontainers.image.ref.name"], ref)
        self.assertEqual(self.config["config"]["Labels"]["org.opencontainers.image.version"], version)
        # The archive a registry push or `podman load` takes holds the same layout.
        archive = os.path.join(self.out, f"vitistack-graphql-{version}.oci.tar")
        listing = subprocess.run(["tar", "-tf", archive], capture_output=True, text=True, check=True).stdout
        self.assertIn("./index.json", listing.split())
        self.assertIn("./" + os.path.relpath(blob(self.layout, self.desc["digest"]), self.layout), listing.split())

    def test_the_image_has_the_settings_containerfile_declares(self):
        declared = containerfile_runtime()
        cfg = self.config["config"]
        self.assertEqual(cfg["User"], declared["user"])
        self.assertEqual(cfg["User"], f"{USER}:{USER}")
        self.assertEqual(cfg["WorkingDir"], declared["workdir"])
        self.assertEqual(cfg["Entrypoint"], declared["entrypoint"])
        self.assertEqual(cfg["Cmd"], declared["cmd"])
        self.assertEqual(dict(e.split("=", 1) for e in cfg["Env"]), declared["env"])
        self.assertEqual(list(cfg["ExposedPorts"]), [declared["expose"]])
        self.assertEqual(list(cfg["Volumes"]), [declared["volume"]])
        for k, v in declared["labels"].items():
            self.assertEqual(cfg["Labels"][k], v, k)
        self.assertEqual(declared["healthcheck"][:3], ["/usr/local/bin/vitistack", "probe", "--live"])
        self.assertEqual(self.config["os"], "linux")
        # umoci's runtime bundle runs what the image says, as the image's user.
        self.assertEqual(self.runtime["process"]["args"], cfg["Entrypoint"] + cfg["Cmd"])
        if os.geteuid() == 0:
            self.assertEqual(self.runtime["process"]["user"]["uid"], USER)

    def test_the_root_holds_the_binary_exactly_the_libraries_ldd_names_and_no_shell(self):
        binary = os.path.join(self.rootfs, "usr/local/bin/vitistack")
        self.assertTrue(os.access(binary, os.X_OK))
        ldd = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
        wanted = set(re.findall(r"(?:=> )?(/\S+) \(0x", ldd))
        present = set()
        for d, _, files in os.walk(self.rootfs):
            for name in files:
                rel = "/" + os.path.relpath(os.path.join(d, name), self.rootfs)
                if re.search(r"\.so(\.|$)", name):
                    present.add(rel)
        self.assertEqual(present, wanted, "the image's libraries are not the ones ldd names")
        for shell in ("bin/sh", "bin/bash", "usr/bin/sh", "bin/busybox"):
            self.assertFalse(os.path.exists(os.path.join(self.rootfs, shell)), shell)
        with open(os.path.join(self.rootfs, "etc/ssl/certs/ca-certificates.crt")) as f:
            self.assertGreater(f.read().count("BEGIN CERTIFICATE"), 50)
        data = os.stat(os.path.join(self.rootfs, "data"))
        tmp = os.stat(os.path.join(self.rootfs, "tmp"))
        self.assertEqual(tmp.st_mode & 0o7777, 0o1777)
        if os.geteuid() == 0:
            self.assertEqual((data.st_uid, data.st_gid), (USER, USER))
            self.assertEqual(os.stat(binary).st_uid, 0, "the user must not own the binary")
        with open(os.path.join(self.rootfs, "etc/passwd")) as f:
            passwd = f.read()
        self.assertIn(f"nonroot:x:{USER}:{USER}:", passwd)

    def test_the_binary_serves_the_demo_from_the_unpacked_root_as_the_non_root_user(self):
        port = free_port()
        cfg = self.config["config"]
        env = dict(e.split("=", 1) for e in cfg["Env"])
        env.update(PORT=str(port), ANONYMOUS_READ_FROM="127.0.0.0/8", LOG_LEVEL="warn")
        args, env = in_root(self.rootfs, cfg["Entrypoint"] + cfg["Cmd"] + ["--demo"], env)
        base = f"http://127.0.0.1:{port}"
        probe, penv = in_root(self.rootfs, ["/usr/local/bin/vitistack", "probe", "--live"], {"PORT": str(port)})
        # The health check says so while nothing serves.
        self.assertEqual(subprocess.run(probe, env=penv, capture_output=True).returncode, 1)
        proc = subprocess.Popen(args, env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.time() + 120
            for route in ("/health/live", "/ready"):
                while not answers_200(f"{base}{route}"):
                    if proc.poll() is not None or time.time() > deadline:
                        raise AssertionError(
                            f"the image's server never answered {route}: {proc.stderr.read().decode()[-3000:]}"
                        )
                    time.sleep(0.2)
            if os.geteuid() == 0:
                with open(f"/proc/{proc.pid}/status") as f:
                    status = f.read()
                self.assertRegex(status, rf"\nUid:\s+{USER}\s", "the server does not run as 65532")
            query = json.dumps({"query": "{ clusters(first: 100) { totalCount } version { version } }"}).encode()
            req = urllib.request.Request(f"{base}/graphql", data=query, headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as r:
                body = json.load(r)
            self.assertGreater(body["data"]["clusters"]["totalCount"], 0, body)
            self.assertEqual(body["data"]["version"]["version"], crate_version())
            with urllib.request.urlopen(f"{base}/", timeout=10) as r:
                page = r.read().decode()
            asset = re.search(r'/assets/[\w.-]+\.(?:js|wasm)', page)
            self.assertIsNotNone(asset, "the dashboard's page names no asset")
            with urllib.request.urlopen(base + asset.group(0), timeout=10) as r:
                self.assertEqual(r.status, 200)
            # The default DATABASE_URL: the SQLite file on /data, written by the user.
            db = os.path.join(self.rootfs, "data", "vitistack.db")
            self.assertTrue(os.path.exists(db), "no SQLite file on /data")
            # The image's health check, run inside it, passes on the serving process.
            run = subprocess.run(probe, env=penv, capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            self.assertIn("/health/live answers 200", run.stdout)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            proc.stderr.close()

    def test_the_sbom_names_the_crates_and_the_debian_packages_and_ships_inside(self):
        with open(os.path.join(self.out, "sbom.cdx.json")) as f:
            sbom = json.load(f)
        self.assertEqual(sbom["bomFormat"], "CycloneDX")
        purls = {c.get("purl", "") for c in sbom["components"]}
        for crate in ("tokio", "async-graphql", "axum", "sqlx", "kube"):
            self.assertTrue(any(p.startswith(f"pkg:cargo/{crate}@") for p in purls), crate)
        self.assertTrue(any(p.startswith("pkg:deb/debian/libc6@") for p in purls), "libc6 missing")
        self.assertTrue(any(p.startswith("pkg:deb/debian/ca-certificates@") for p in purls))
        # Dev-only crates (the tests' clients) are not in the product.
        self.assertFalse(any(p.startswith("pkg:cargo/criterion@") for p in purls))
        inside = os.path.join(self.rootfs, "usr/share/doc/vitistack-graphql/sbom.cdx.json")
        with open(inside) as f:
            self.assertEqual(json.load(f), sbom)

    def test_the_same_binary_gives_the_same_image(self):
        again = os.path.join(self.tmp.name, "again")
        build(again)
        first = self.manifest["layers"]
        _, second, _ = image(os.path.join(again, "oci"))
        self.assertEqual([l["digest"] for l in second["layers"]], [l["digest"] for l in first])
        shutil.rmtree(again)


if __name__ == "__main__":
    unittest.main()
