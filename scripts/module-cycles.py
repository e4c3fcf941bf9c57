#!/usr/bin/env python3
"""Print the dependency graph of the server's top-level modules and fail when it has a cycle.

A module depends on another when one of its files names it as `crate::<module>` (in a `use`
line or a path). `app`, `config` and `main` assemble everything and may use any module; nothing
below them may use them. `lib.rs` only declares modules. Unit tests (`tests.rs` files and the
`#[cfg(test)] mod tests` block at the end of a file) may build fixtures from any module and are
left out.
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
        text = path.read_text(encoding="utf-8")
        cut = text.find("#[cfg(test)]\nmod tests")
        if cut >= 0:
            text = text[:cut]
        # Only code: drop line comments (doc comments may name other modules freely).
        code = "\n".join(l.split("//", 1)[0] for l in text.splitlines())
        for m in pattern.finditer(code):
            dst = m.group(1)
            if dst in ASSEMBLERS - {"lib"}:
                graph[src].setdefault(dst, set()).add(str(path.relative_to(SRC)))
                graph.setdefault(dst, {})
            elif dst != src and dst in graph:
                graph[src].setdefault(dst, set()).add(str(path.relative_to(SRC)))
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
