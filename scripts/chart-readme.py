#!/usr/bin/env python3
"""Write (or, with --check, verify) the values table of charts/vitistack-graphql/README.md.

The table is generated from values.yaml: each key's default and the comment lines right above it
(or above its parent section). `--check` exits 1 when the README's table is not what values.yaml
says, or when values.schema.json and the table name different keys.
"""

import json
import os
import re
import sys

import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
CHART = os.path.join(ROOT, "charts", "vitistack-graphql")
README = os.path.join(CHART, "README.md")
BEGIN, END = "<!-- values:begin (scripts/chart-readme.py) -->", "<!-- values:end -->"


def comments(lines):
    """Key path -> the comment block above its line; keys that follow one another without a blank
    line or a comment of their own share the block (`nodeSelector`, `tolerations`, ...)."""
    out, stack, pending, in_comment = {}, [], [], False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            if not in_comment:
                pending = []
            pending.append(stripped.lstrip("#").strip())
            in_comment = True
            continue
        in_comment = False
        m = re.match(r"^(\s*)([A-Za-z0-9_]+):", line)
        if not m:
            pending = []
            continue
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(2)))
        out[".".join(k for _, k in stack)] = " ".join(pending)
    return out


def leaves(value, prefix=""):
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else k)
    else:
        yield prefix, value


def schema_leaves(schema, prefix=""):
    props = schema.get("properties")
    if schema.get("type") == "object" and props:
        for k, v in props.items():
            yield from schema_leaves(v, f"{prefix}.{k}" if prefix else k)
    elif prefix:
        yield prefix


def table():
    with open(os.path.join(CHART, "values.yaml")) as f:
        text = f.read()
    notes = comments(text.splitlines())
    rows = ["| Key | Default | Description |", "| --- | --- | --- |"]
    for path, default in leaves(yaml.safe_load(text)):
        parts = path.split(".")
        # The key's own comment, else the nearest section's.
        note = next((notes.get(".".join(parts[:i]), "") for i in range(len(parts), 0, -1)
                     if notes.get(".".join(parts[:i]))), "")
        shown = json.dumps(default)
        rows.append(f"| `{path}` | `{shown}` | {note.replace('|', '&#124;')} |")
    return "\n".join(rows), [p for p, _ in leaves(yaml.safe_load(text))]


def main():
    generated, keys = table()
    with open(README) as f:
        readme = f.read()
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    if "--check" in sys.argv:
        problems = []
        undocumented = [line.split("`")[1] for line in generated.splitlines() if line.endswith("|  |")]
        if undocumented:
            problems.append(f"values.yaml has no comment for: {', '.join(undocumented)}")
        if readme[start:end].strip() != generated.strip():
            problems.append("the README's values table is stale: run scripts/chart-readme.py")
        with open(os.path.join(CHART, "values.schema.json")) as f:
            schema = set(schema_leaves(json.load(f))) - {"global"}
        documented = set(keys)
        for k in sorted(schema - documented):
            # Optional keys the schema allows without a default are documented by their section.
            if not any(k.startswith(d + ".") or d.startswith(k + ".") for d in documented):
                problems.append(f"{k}: in values.schema.json, not in the README")
        for k in sorted(documented - schema):
            if not any(k.startswith(s + ".") for s in schema):
                problems.append(f"{k}: in the README, not in values.schema.json")
        for p in problems:
            print(p)
        sys.exit(1 if problems else 0)
    with open(README, "w") as f:
        f.write(readme[:start] + "\n" + generated + "\n" + readme[end:])


if __name__ == "__main__":
    main()
