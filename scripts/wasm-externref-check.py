#!/usr/bin/env python3
"""Exit non-zero when a wasm module exports `__wbindgen_externrefs` as anything but an externref
table. Some wasm-opt builds rewrite that export to the funcref table, and the page then dies in
`WebAssembly.Table.set()`; this catches it at build time instead."""
import sys

EXTERNREF = 0x6F


class Reader:
    def __init__(self, data, pos=0):
        self.data, self.pos = data, pos

    def byte(self):
        b = self.data[self.pos]
        self.pos += 1
        return b

    def uleb(self):
        value = shift = 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value

    def name(self):
        n = self.uleb()
        self.pos += n
        return self.data[self.pos - n : self.pos].decode()

    def limits(self):
        flags = self.byte()
        self.uleb()
        if flags & 1:
            self.uleb()


def table_types_and_exports(data):
    tables, exports = [], {}
    r = Reader(data, 8)
    while r.pos < len(data):
        section = r.byte()
        size = r.uleb()
        end = r.pos + size
        if section == 2:  # imports: imported tables come first in the table index space
            for _ in range(r.uleb()):
                r.name(), r.name()
                kind = r.byte()
                if kind == 0:
                    r.uleb()
                elif kind == 1:
                    tables.append(r.byte())
                    r.limits()
                elif kind == 2:
                    r.limits()
                elif kind == 3:
                    r.pos += 2
                else:
                    r.byte(), r.uleb()
        elif section == 4:
            for _ in range(r.uleb()):
                if data[r.pos] == 0x40:  # a table with an initialiser: not wasm-bindgen's output
                    return None, None
                tables.append(r.byte())
                r.limits()
        elif section == 7:
            for _ in range(r.uleb()):
                name = r.name()
                kind = r.byte()
                index = r.uleb()
                if kind == 1:
                    exports[name] = index
        r.pos = end
    return tables, exports


def main(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\0asm":
        sys.exit(f"{path}: not a wasm module")
    tables, exports = table_types_and_exports(data)
    if tables is None:
        return
    index = exports.get("__wbindgen_externrefs")
    if index is not None and tables[index] != EXTERNREF:
        sys.exit(f"{path}: __wbindgen_externrefs is table {index} of type {tables[index]:#x}, not externref")


if __name__ == "__main__":
    main(sys.argv[1])
