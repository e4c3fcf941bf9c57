#!/usr/bin/env python3
"""Generate the Rust model and the embedded structural schemas from the upstream CRD YAMLs.

Usage:
    scripts/gen-model.py [--crds DIR] [--check]

DIR defaults to crds/ in the repository (copied from upstream, see crds/README.md). The output is committed:
  server/src/model/generated.rs   serde types for every kind (spec/status trees)
  server/src/model/schemas/*.json the openAPIV3Schema of every served version, descriptions removed

--check regenerates in memory and exits 1 when the committed files differ (the drift test).
"""
import argparse
import glob
import json
import os
import re
import sys

try:
    import yaml
except ImportError:  # the test script installs PyYAML when it is missing
    sys.exit("PyYAML is required: pip install pyyaml")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_RS = os.path.join(ROOT, "server/src/model/generated.rs")
OUT_SCHEMAS = os.path.join(ROOT, "server/src/model/schemas")

# Which CRD version gives the Rust type of a kind (the name suffix keeps both NetworkNamespace versions).
TYPED = [
    ("ClusterStorageClass", "v1alpha1", "ClusterStorageClass"),
    ("ClusterStorage", "v1alpha1", "ClusterStorage"),
    ("ControlPlaneVirtualSharedIP", "v1alpha1", "ControlPlaneVirtualSharedIp"),
    ("EtcdBackup", "v1alpha1", "EtcdBackup"),
    ("KubernetesCluster", "v1alpha1", "KubernetesCluster"),
    ("KubernetesProvider", "v1alpha1", "KubernetesProvider"),
    ("KubevirtConfig", "v1alpha1", "KubevirtConfig"),
    ("MachineClass", "v1alpha1", "MachineClass"),
    ("MachineProvider", "v1alpha1", "MachineProvider"),
    ("Machine", "v1alpha1", "Machine"),
    ("NetworkConfiguration", "v1alpha1", "NetworkConfiguration"),
    ("NetworkNamespace", "v1alpha1", "NetworkNamespace"),
    ("NetworkNamespace", "v1alpha2", "NetworkNamespaceV2"),
    ("ProxmoxConfig", "v1alpha1", "ProxmoxConfig"),
    ("Vitistack", "v1alpha1", "Vitistack"),
    ("IPAllocation", "v1alpha2", "IpAllocation"),
]

# Field paths whose Rust type is an open vocabulary defined by hand in model/vocab.rs.
OVERRIDES = {
    ("Machine", "status.phase"): "MachinePhase",
    ("KubernetesCluster", "status.phase"): "ClusterPhase",
    ("NetworkNamespace", "status.phase"): "NetworkPhase",
    ("NetworkNamespace", "status.provisioningPhase"): "NetworkPhase",
    ("NetworkNamespaceV2", "status.phase"): "NetworkPhase",
    ("NetworkNamespaceV2", "status.provisioningPhase"): "NetworkPhase",
    ("NetworkConfiguration", "status.phase"): "NetworkPhase",
    ("ControlPlaneVirtualSharedIp", "status.phase"): "NetworkPhase",
    ("IpAllocation", "status.phase"): "NetworkPhase",
    ("MachineProvider", "status.phase"): "ProviderPhase",
    ("KubernetesProvider", "status.phase"): "ProviderPhase",
    ("Vitistack", "status.phase"): "ProviderPhase",
    ("EtcdBackup", "status.phase"): "ProviderPhase",
    ("ClusterStorage", "status.phase"): "ProviderPhase",
}

QUANTITY_PATTERN = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"

RUST_KEYWORDS = {"type", "match", "ref", "static", "enum", "struct", "fn", "mod", "use", "impl", "loop", "move", "self", "where", "async", "await", "dyn", "box", "final", "override", "priority", "macro", "crate", "super", "trait", "unsafe", "in", "as", "break", "const", "continue", "else", "extern", "false", "for", "if", "let", "mut", "pub", "return", "true", "while", "yield", "abstract", "become", "do", "try", "typeof", "unsized", "virtual", "gen"}


def snake(name):
    name = name.replace("IPs", "Ips")  # allocatedIPs -> allocated_ips, not allocated_i_ps
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    s = s.replace("-", "_").replace(".", "_").lower()
    if s in RUST_KEYWORDS and s not in ("priority",):
        return "r#" + s
    return s


def camel(name):
    parts = re.split(r"[^A-Za-z0-9]", name)
    return "".join(p[:1].upper() + p[1:] for p in parts if p)


def strip(node):
    """The structural schema without prose: what validation needs. A *property* named
    `description` (MachineClass.spec.description) is data, not prose, and is kept."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "description":
                continue
            if k == "properties" and isinstance(v, dict):
                out[k] = {name: strip(sub) for name, sub in v.items()}
            else:
                out[k] = strip(v)
        return out
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def is_condition(schema):
    props = schema.get("properties", {})
    return "type" in props and "status" in props and ("lastTransitionTime" in props or "reason" in props)


def compact(ty):
    """A field's type as the store keeps it: strings as `Str` (model/text.rs) and lists as boxed
    slices, 16 bytes inline where a String or Vec took 24, and no spare capacity (a list read from
    JSON grows to 4 places for one item: a Machine's one status disk took 4 x 248 bytes)."""
    if ty == "String":
        return "Str"
    if ty.startswith("Vec<") and ty.endswith(">"):
        inner = ty[4:-1]
        return f"Box<[{'Str' if inner == 'String' else inner}]>"
    return ty


# Optional integers and times as the packed types of model/packed.rs (8 and 16 bytes, where
# `Option<i64>` took 16 and `Option<Time>` 24).
PACKED = {"i64": "OptInt", "Time": "OptTime"}


class Gen:
    def __init__(self):
        self.structs = []  # rendered struct texts in order
        self.names = set()

    def rust_type(self, owner, path, name_hint, schema, required):
        """Return the Rust type for a schema node, emitting structs as needed."""
        override = OVERRIDES.get((owner, path))
        if override:
            return override
        if schema.get("x-kubernetes-int-or-string"):
            if schema.get("pattern") == QUANTITY_PATTERN:
                return "Quantity"
            return "IntOrString"
        t = schema.get("type")
        if t == "object":
            props = schema.get("properties")
            if props:
                return self.emit_struct(owner, path, name_hint, schema)
            add = schema.get("additionalProperties")
            if isinstance(add, dict):
                inner = self.rust_type(owner, path + ".*", name_hint + "Value", add, True)
                # Maps (tags, labels, config, quotas) as the compact sorted pairs of model/pairs.rs.
                if inner == "String":
                    return "Pairs"
                return f"Pairs<{inner}>"
            return "serde_json::Value"
        if t == "array":
            items = schema.get("items", {})
            if path.endswith("conditions") and is_condition(items):
                return "Vec<Condition>"
            inner = self.rust_type(owner, path + "[]", name_hint, items, True)
            return f"Vec<{inner}>"
        if t == "string":
            if schema.get("format") == "date-time":
                return "Time"
            return "String"
        if t == "integer":
            return "i64"
        if t == "number":
            return "f64"
        if t == "boolean":
            return "bool"
        return "serde_json::Value"

    def emit_struct(self, owner, path, name, schema):
        if name in self.names:
            raise SystemExit(f"duplicate struct name {name} at {owner}.{path}")
        self.names.add(name)
        required = set(schema.get("required", []))
        fields = []
        seen = set()
        for prop, sub in sorted(schema.get("properties", {}).items()):
            field = snake(prop)
            if field in seen:
                raise SystemExit(f"field name clash {field} in {name}")
            seen.add(field)
            sub_path = f"{path}.{prop}" if path else prop
            ty = self.rust_type(owner, sub_path, name + camel(prop), sub, prop in required)
            attrs = []
            if field.lstrip("r#") != prop or field.startswith("r#"):
                attrs.append(f'rename = "{prop}"')
            if prop in required:
                attrs.append("default")
                decl = compact(ty)
            else:
                attrs.append("default")
                attrs.append('skip_serializing_if = "Option::is_none"')
                # Optional sub-objects are boxed: most are absent, and an absent box costs 8 bytes
                # instead of the whole struct inline (the store holds tens of thousands of objects).
                boxed = ty in self.names
                if boxed:
                    decl = f"Option<Box<{ty}>>"
                elif ty in PACKED:
                    # An optional integer or time in the room of the value (model/packed.rs).
                    decl = PACKED[ty]
                    attrs[-1] = f'skip_serializing_if = "{decl}::is_none"'
                else:
                    decl = f"Option<{compact(ty)}>"
            fields.append(f"    #[serde({', '.join(attrs)})]\n    pub {field}: {decl},")
        text = (
            f"/// `{owner}` `{path or '.'}` (generated from the CRD schema).\n"
            "#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]\n"
            f"pub struct {name} {{\n" + "\n".join(fields) + "\n}\n"
        )
        self.structs.append(text)
        return name


def rustfmt(text):
    """Format as `cargo fmt` would, so formatting the tree never makes the drift check fail."""
    import subprocess

    done = subprocess.run(
        ["rustfmt", "--edition", "2024", "--emit", "stdout"],
        input=text, capture_output=True, text=True, check=True,
    )
    return done.stdout


def load_crds(crd_dir):
    versions = {}
    for f in sorted(glob.glob(os.path.join(crd_dir, "*", "*.yaml"))):
        doc = yaml.safe_load(open(f))
        spec = doc["spec"]
        kind = spec["names"]["kind"]
        for v in spec["versions"]:
            key = (kind, v["name"])
            meta = {
                "group": spec["group"],
                "kind": kind,
                "version": v["name"],
                "plural": spec["names"]["plural"],
                "shortNames": spec["names"].get("shortNames", []),
                "scope": spec["scope"],
                "schema": strip(v["schema"]["openAPIV3Schema"]),
            }
            # crds/v1alpha2 carries NetworkNamespace v1alpha1 too, as common >= v1.0.0 serves it:
            # the main file's schema plus `status.provisioningPhase`. That superset is the source
            # (the files are read in order, so the v1alpha2 directory's copy comes last and wins).
            versions[key] = meta
    return versions


def render(crd_dir):
    versions = load_crds(crd_dir)
    gen = Gen()
    tops = []
    for kind, version, rust in TYPED:
        meta = versions[(kind, version)]
        props = meta["schema"]["properties"]
        spec_ty = gen.emit_struct(rust, "spec", rust + "Spec", props["spec"]) if "spec" in props else None
        status_ty = gen.emit_struct(rust, "status", rust + "Status", props["status"]) if "status" in props else None
        fields = ["    #[serde(default)]\n    pub metadata: ObjectMeta,"]
        # Not part of the CRD: where the object was read (set by its source, never serialised).
        fields.append("    #[serde(skip)]\n    pub datacenter: Datacenter,")
        if spec_ty:
            # An object sent without `spec` is written back without it (not as a spec of empty
            # required strings, which reading it again would refuse).
            fields.append(f'    #[serde(default, skip_serializing_if = "is_default")]\n    pub spec: {spec_ty},')
        if status_ty:
            fields.append(f'    #[serde(default, skip_serializing_if = "Option::is_none")]\n    pub status: Option<Box<{status_ty}>>,')
        tops.append(
            f"/// `{meta['group']}/{version}` `{kind}` ({meta['scope']}-scoped).\n"
            "#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]\n"
            f"pub struct {rust} {{\n" + "\n".join(fields) + "\n}\n"
        )
    header = (
        "// @generated by scripts/gen-model.py from the upstream vitistack.io CRDs. Do not edit by hand.\n"
        "#![allow(clippy::all, missing_docs, unused_imports)]\n\n"
        "use super::meta::ObjectMeta;\n"
        "use super::packed::{OptInt, OptTime};\n"
        "use super::pairs::Pairs;\n"
        "use super::text::Str;\n"
        "use serde::{Deserialize, Serialize};\n\n"
        "use super::datacenter::Datacenter;\n"
        "use super::quantity::{IntOrString, Quantity};\n"
        "use super::vocab::*;\n\n"
    )
    rs = rustfmt(header + "\n".join(tops) + "\n" + "\n".join(gen.structs))
    schemas = {}
    for (kind, version), meta in sorted(versions.items()):
        fname = f"{meta['plural']}.{version}.json"
        schemas[fname] = json.dumps(meta, indent=1, sort_keys=True) + "\n"
    return rs, schemas


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--crds", default=os.path.join(ROOT, "crds"))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    rs, schemas = render(args.crds)
    if args.check:
        drift = []
        if not os.path.exists(OUT_RS) or open(OUT_RS).read() != rs:
            drift.append(OUT_RS)
        for name, text in schemas.items():
            p = os.path.join(OUT_SCHEMAS, name)
            if not os.path.exists(p) or open(p).read() != text:
                drift.append(p)
        present = set(os.listdir(OUT_SCHEMAS)) if os.path.isdir(OUT_SCHEMAS) else set()
        drift += [os.path.join(OUT_SCHEMAS, n) for n in present - set(schemas)]
        if drift:
            print("generated model drifted from the CRDs; run scripts/gen-model.py:\n  " + "\n  ".join(drift))
            sys.exit(1)
        print(f"model up to date: {len(schemas)} schemas")
        return
    os.makedirs(OUT_SCHEMAS, exist_ok=True)
    for old in os.listdir(OUT_SCHEMAS):
        if old not in schemas:
            os.remove(os.path.join(OUT_SCHEMAS, old))
    for name, text in schemas.items():
        open(os.path.join(OUT_SCHEMAS, name), "w").write(text)
    open(OUT_RS, "w").write(rs)
    print(f"wrote {OUT_RS} and {len(schemas)} schemas")


if __name__ == "__main__":
    main()
