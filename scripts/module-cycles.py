#!/usr/bin/env python3
"""Print the dependency graph of the server's top-level modules and fail when it has a cycle,
or when two files depend on each other through a cycle.

A module depends on another when one of its files names it as `crate::<module>` (in a `use`
line or a path). `app`, `config` and `main` assemble everything and may use any module; nothing
below them may use them. `lib.rs` only declares modules. Unit tests (`tests.rs` files and the
`#[cfg(test)] mod tests` block at the end of a file) may build fixtures from any module and are
left out.

Between files, a file depends on the file of every module path it names (`crate::a::b::Item`,
`super::x`, `self::y`, the groups of a `use` line): the longest prefix of the path that is a
module file. A module naming its own ancestors (`super::Item` from a child) is how Rust nests
modules, and is not counted; every other cycle between files is reported with the lines' files.
"""
import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "server" / "src"
ASSEMBLERS = {"app", "config", "main", "lib"}


def top_module(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".rs")


def edges():
    modules = {top_module(p) for p in SRC.rglob("*.rs")} - ASSEMBLERS
    graph = {m: {} for m in modules}
    pattern = re.compile(r"\bcrate::([a-z_]+)")
    for path in SRC.rglob("*.rs"):
        src = top_module(path)
        if src in ASSEMBLERS or path.name == "tests.rs":
            continue
        for m in pattern.finditer(code_of(path)):
            dst = m.group(1)
            if dst in ASSEMBLERS - {"lib"}:
                graph[src].setdefault(dst, set()).add(str(path.relative_to(SRC)))
                graph.setdefault(dst, {})
            elif dst != src and dst in graph:
                graph[src].setdefault(dst, set()).add(str(path.relative_to(SRC)))
    return graph


def module_files():
    """Module path (tuple) -> file, for every file under SRC."""
    out = {}
    for path in SRC.rglob("*.rs"):
        rel = path.relative_to(SRC)
        parts = list(rel.parts)
        parts[-1] = parts[-1].removesuffix(".rs")
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        out[tuple(parts)] = path
    return out


def code_of(path: Path) -> str:
    """A file's code: without its inline test module, and without line comments (doc comments
    may name other modules freely)."""
    text = path.read_text(encoding="utf-8")
    cut = text.find("#[cfg(test)]\nmod tests")
    if cut >= 0:
        text = text[:cut]
    return "\n".join(l.split("//", 1)[0] for l in text.splitlines())


def expand_use(body: str):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (whitespace removed)."""
    body = "".join(body.split())
    i = body.find("{")
    if i < 0:
        return [body]
    prefix, rest = body[:i], body[i + 1:]
    depth, start, items = 0, 0, []
    for j, ch in enumerate(rest):
        if ch == "{":
            depth += 1
        elif ch == "}":
            if depth == 0:
                items.append(rest[start:j])
                break
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(rest[start:j])
            start = j + 1
    out = []
    for it in items:
        if it:
            out.extend(prefix + e for e in expand_use(it))
    return out


def file_edges():
    mods = module_files()
    by_file = {v: k for k, v in mods.items()}
    graph = {}
    path_re = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
    use_re = re.compile(r"\buse\s+((?:crate|super|self)::[^;]*);", re.S)
    for path, mod in by_file.items():
        if path.name == "tests.rs" or mod and mod[0] in ASSEMBLERS:
            continue
        code = code_of(path)
        # A file's own module for `self::`; `super::` from it is its parent (mod.rs: the
        # module itself is the directory).
        here = list(mod)
        names = [m.group(1) for m in path_re.finditer(use_re.sub(" ", code))]
        for m in use_re.finditer(code):
            names.extend(expand_use(m.group(1)))
        deps = graph.setdefault(path, {})
        for name in names:
            segs = name.split("::")
            base = []
            if segs[0] == "crate":
                base, segs = [], segs[1:]
            else:
                base = list(here)
                while segs and segs[0] in ("super", "self"):
                    if segs[0] == "super":
                        base = base[:-1]
                    segs = segs[1:]
            full = base + segs
            target = None
            for n in range(len(full), 0, -1):
                if tuple(full[:n]) in mods:
                    target = mods[tuple(full[:n])]
                    break
            if target is None or target == path:
                continue
            tmod = by_file[target]
            # Naming an ancestor (or the crate root) is nesting, not a dependency.
            if tuple(mod[: len(tmod)]) == tmod:
                continue
            deps.setdefault(target, set()).add(name)
    return graph


def find_cycle(graph):
    state = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for d in sorted(graph[n]):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def main():
    graph = edges()
    for m in sorted(graph):
        print(f"{m} -> {', '.join(sorted(graph[m])) or '(nothing)'}")
    upward = [(a, b) for a in sorted(graph) for b in sorted(graph[a]) if b in ASSEMBLERS]
    for a, b in upward:
        print(f"{a} uses {b}, which assembles everything: {', '.join(sorted(graph[a][b]))}",
              file=sys.stderr)
    if upward:
        return 1
    cycle = find_cycle(graph)
    if cycle:
        print("cycle among top-level modules: " + " -> ".join(cycle), file=sys.stderr)
        for a, b in zip(cycle, cycle[1:]):
            print(f"  {a} -> {b}: {', '.join(sorted(graph[a][b]))}", file=sys.stderr)
        return 1
    print("no cycle among the top-level modules")
    files = file_edges()
    rel = lambda p: str(p.relative_to(SRC))
    found = False
    # Report one cycle, drop one of its edges, look again: every cycle shows up once.
    while (cycle := find_cycle(files)):
        found = True
        print("cycle between files: " + " -> ".join(rel(p) for p in cycle), file=sys.stderr)
        for a, b in zip(cycle, cycle[1:]):
            print(f"  {rel(a)} -> {rel(b)}: {', '.join(sorted(files[a][b])[:4])}", file=sys.stderr)
        del files[cycle[0]][cycle[1]]
    if found:
        return 1
    print(f"no cycle between the {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
