"""Two set-ups at once, as a newcomer starts them: `scripts/run.sh` in one terminal and
`scripts/test.sh` in another clone, both building the dashboard (scripts/build-web.sh) and
installing its tools into the same, fresh tools directory.

Each clone is a fresh copy of this working tree. The tools directory is fresh, so both set-ups
must install wasm-bindgen-cli, wasm-split-cli and binaryen there: one installs each, the other
waits for it and reuses it (before the lock, the second `cargo install` broke the first's in the
shared target directory). The tools are built in the machine's usual tool target directory
(`VITISTACK_TOOLS_BUILD`, warm after the test command's own dashboard build), whose lock both take.

Run by scripts/test.sh (after the dashboard is built once).
"""

import filecmp
import os
import re
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def copy_tree(dest):
    """The working tree's tracked files (as they are now, committed or not) in `dest`."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in files.decode().split("\0"):
        if not rel or not os.path.isfile(os.path.join(ROOT, rel)):
            continue
        os.makedirs(os.path.dirname(os.path.join(dest, rel)) or dest, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, rel), os.path.join(dest, rel))


def dist_files(clone):
    dist = os.path.join(clone, "web", "dist")
    out = []
    for d, _, names in os.walk(dist):
        out += [os.path.relpath(os.path.join(d, n), dist) for n in names]
    return sorted(out)


class TwoSetupsTest(unittest.TestCase):
    def test_two_dashboard_set_ups_started_together_both_succeed_and_install_each_tool_once(self):
        base = os.environ.get("VITISTACK_SETUP_TMP", "/var/tmp")
        with tempfile.TemporaryDirectory(prefix="vitistack-setups-", dir=base) as tmp:
            clones = [os.path.join(tmp, n) for n in ("run", "test")]
            for c in clones:
                copy_tree(c)
            env = dict(os.environ)
            usual = env.get("VITISTACK_TOOLS", "/var/tmp/vitistack-tools")
            env["VITISTACK_TOOLS_BUILD"] = env.get("VITISTACK_TOOLS_BUILD", os.path.join(usual, "build"))
            env["VITISTACK_TOOLS"] = os.path.join(tmp, "tools")
            env.pop("VITISTACK_WEB_LOCKED", None)
            procs = [
                subprocess.Popen(["bash", "scripts/build-web.sh"], cwd=c, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for c in clones
            ]
            logs = [p.communicate(timeout=3600)[0] for p in procs]
            for c, p, log in zip(clones, procs, logs):
                self.assertEqual(p.returncode, 0, f"{c}:\n{log[-4000:]}")
                self.assertTrue(os.path.isfile(os.path.join(c, "web", "dist", "index.html")), log[-2000:])
            # The same dashboard from both.
            a, b = (dist_files(c) for c in clones)
            self.assertEqual(a, b)
            self.assertTrue(any(f.endswith(".wasm") for f in a), a)
            _, mismatch, errors = filecmp.cmpfiles(*(os.path.join(c, "web", "dist") for c in clones), a, shallow=False)
            self.assertEqual((mismatch, errors), ([], []))
            # Each tool installed once into the fresh directory, and reused by the other set-up.
            both = "\n".join(logs)
            for crate in ("wasm-bindgen-cli", "wasm_split_cli_support"):
                installs = re.findall(rf"cargo install {crate} ", both)
                reuses = re.findall(rf"{crate} \S+ is installed: reused", both)
                self.assertEqual((len(installs), len(reuses)), (1, 1), f"{crate}:\n{both[-4000:]}")
            self.assertLessEqual(both.count("npm install binaryen@"), 1, both[-4000:])
            for tool in ("wasm-bindgen", "wasm-split-cli"):
                self.assertTrue(os.access(os.path.join(tmp, "tools", "bin", tool), os.X_OK), tool)


if __name__ == "__main__":
    unittest.main()
