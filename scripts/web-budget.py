#!/usr/bin/env python3
"""The dashboard's size budget: what the first page load fetches, gzip as served, under 400 KiB.

Usage: scripts/web-budget.py [--report] [DIST]   (DIST defaults to web/dist)

The first load is every asset but the lazily loaded modules: the wasm files the split loader
(`lazy-*.js`) fetches when a lazy view is first shown. Each asset counts as its `.gz` copy (what
the server sends a browser). Exits 1 when the first load is over the budget (with --report it only
prints the figures, for the build's own summary line).
"""
import os
import re
import sys

BUDGET = 400 * 1024  # bytes of gzip: the budget set by the dashboard issue (issue 12)


def sizes(dist):
    assets = os.path.join(dist, "assets")
    names = sorted(n for n in os.listdir(assets) if not n.endswith(".gz"))
    lazy = set()
    for n in names:
        if n.startswith("lazy-") and n.endswith(".js"):
            with open(os.path.join(assets, n), encoding="utf-8") as f:
                lazy.update(re.findall(r'new URL\("\./([^"]+\.wasm)"', f.read()))
    missing = lazy - set(names)
    if missing:
        sys.exit(f"the loader names modules that are not in {assets}: {sorted(missing)}")

    def gz(n):
        path = os.path.join(assets, n + ".gz")
        return os.path.getsize(path if os.path.exists(path) else os.path.join(assets, n))

    first = {n: gz(n) for n in names if n not in lazy}
    later = {n: gz(n) for n in names if n in lazy}
    return first, later


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    report_only = "--report" in sys.argv[1:]
    dist = args[0] if args else os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "web", "dist")
    if not os.path.isdir(os.path.join(dist, "assets")):
        sys.exit(f"{dist} has no assets: build the dashboard first (scripts/build-web.sh)")
    first, later = sizes(dist)
    wasm = sum(os.path.getsize(os.path.join(dist, "assets", n)) for n in first if n.endswith(".wasm"))
    total = sum(first.values())
    line = (
        f"first load {total} bytes gzip ({total / 1024:.1f} KiB of the {BUDGET // 1024} KiB budget; "
        f"main wasm {wasm} bytes); loaded on demand {sum(later.values())} bytes gzip in {len(later)} modules"
    )
    print(line)
    if report_only:
        return
    for n, s in sorted(first.items(), key=lambda kv: -kv[1]):
        print(f"  {s:8d}  {n}")
    if total > BUDGET:
        sys.exit(f"the dashboard's first load is {total} bytes gzip, over the budget of {BUDGET} (400 KiB)")


if __name__ == "__main__":
    main()
