#!/usr/bin/env python3
"""Fail when the code's structure drifts from what we keep it to:

- a hand-written Rust file (server, dashboard, testkit) longer than 600 lines (generated files,
  which say `@generated` on their first line, are left out): split it by job;
- ARCHITECTURE.md's module maps (the server's and the dashboard's tables) naming a module, or a
  file or folder of a module, that does not exist;
- a top-level module of the server or the dashboard that has no row in its map;
- a `….rs` named anywhere in ARCHITECTURE.md that no module has.

A row's first cell names its modules (`store/`, `error.rs`, or several: `retry.rs`, `clock.rs`);
every backticked path in its other cells that ends in `.rs` or `/` must exist inside the row's
module (its folder; the source root for a file module), or inside the source root when the path
names a module of its own (`domain/vitistack_status.rs` in the `change/` row).
Prints what it found; exit status 1 when anything is wrong.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 600
SOURCES = [ROOT / "server" / "src", ROOT / "web" / "src", ROOT / "testkit" / "src"]
# (source root, the heading line that precedes its table in ARCHITECTURE.md)
MAPS = [
    (ROOT / "server" / "src", "## Module map"),
    (ROOT / "web" / "src", "The dashboard (`web/`, Leptos compiled to WebAssembly) reads only the GraphQL API:"),
]
ASSEMBLY = {"lib.rs", "main.rs"}


def long_files():
    out = []
    for src in SOURCES:
        for path in sorted(src.rglob("*.rs")):
            text = path.read_text(encoding="utf-8")
            if "@generated" in text.split("\n", 1)[0]:
                continue
            n = text.count("\n")
            if n > LIMIT:
                out.append(f"{path.relative_to(ROOT)}: {n} lines (the limit is {LIMIT}): split it by job")
    return out


def table_after(text, heading):
    """The rows of the first Markdown table after `heading`: lists of cells."""
    start = text.index(heading)
    rows = []
    in_table = False
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            in_table = True
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if set("".join(cells)) <= set("-: "):
                continue
            rows.append(cells)
        elif in_table:
            break
    return rows[1:]  # without the header


def top_modules(src):
    mods = set()
    for p in src.iterdir():
        if p.is_dir():
            mods.add(p.name + "/")
        elif p.suffix == ".rs" and p.name not in ASSEMBLY:
            # A file module whose folder holds its children counts once, as the file.
            mods.add(p.name)
    return {m for m in mods if not (m.endswith("/") and (src / (m[:-1] + ".rs")).exists())}


def check_map(src, heading, text):
    problems = []
    rows = table_after(text, heading)
    named = set()
    for cells in rows:
        modules = re.findall(r"`([^`]+)`", cells[0])
        for m in modules:
            named.add(m)
            if not (src / m.rstrip("/")).exists():
                problems.append(f"ARCHITECTURE.md names module `{m}`, which {src.relative_to(ROOT)} does not have")
        bases = [src / m.rstrip("/") if m.endswith("/") else src for m in modules]
        for cell in cells[1:]:
            for path in re.findall(r"`([A-Za-z0-9_./-]+(?:\.rs|/))`", cell):
                if path.startswith(("crds/", "scripts/", "web/", "e2e/", "server/", "migrations/")):
                    continue
                candidates = [b / path.rstrip("/") for b in bases] + [src / path.rstrip("/")]
                if not any(c.exists() for c in candidates):
                    problems.append(
                        f"ARCHITECTURE.md's row for {', '.join(modules)} names `{path}`, which does not exist"
                    )
    for m in sorted(top_modules(src)):
        if m not in named and m.rstrip("/") + "/" not in named and m.removesuffix(".rs") + "/" not in named:
            problems.append(f"{src.relative_to(ROOT)}/{m} is a top-level module with no row in ARCHITECTURE.md's map")
    return problems


def every_file_named(text):
    """Every `….rs` ARCHITECTURE.md names anywhere (tables, "where a change goes", caches) exists:
    under a source root, or under one of its modules (a path as its module's row writes it)."""
    problems = []
    for path in sorted(set(re.findall(r"`([A-Za-z0-9_./-]+\.rs)`", text))):
        roots = [ROOT] + [s for s, _ in MAPS]
        found = any((r / path).exists() for r in roots) or any(
            any(m.is_file() for m in s.glob(f"*/{path}")) or any(m.is_file() for m in s.glob(f"*/*/{path}"))
            for s, _ in MAPS
        )
        if not found:
            problems.append(f"ARCHITECTURE.md names `{path}`, which no module has")
    return problems


def main():
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    problems = long_files()
    for src, heading in MAPS:
        problems += check_map(src, heading, text)
    problems += every_file_named(text)
    for p in problems:
        print(p)
    files = sum(1 for s in SOURCES for _ in s.rglob("*.rs"))
    print(f"structure: {files} Rust files, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
