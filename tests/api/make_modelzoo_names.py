"""Write `modelzoo_names_2_10.json`: what the real `cerebras.pytorch` 2.10.0 has under each
name the real Model Zoo 2.10 uses (found by `modelzoo_uses.scan`), as facts: kind,
signature, methods, ... in the format of `inventory_2_10.json` (the same reader,
`make_inventory.Inventory`). `test_modelzoo_names.py` checks cstorch's objects against it.

The real package is read with `ast` only, never imported. Get the sources and run:

    pip download cerebras-pytorch==2.10.0 --no-deps -d SRC
    (cd SRC && for w in *.whl; do python -m zipfile -e "$w" .; done)
    python tests/api/make_modelzoo_names.py SRC     # rewrites tests/api/modelzoo_names_2_10.json

For a use `module.a.b.c`, each step whose parent is a module of the wheel is described
(`module.a`; then `module.a.b` if `a` is a module, ...); the first step that is not a
module ends it (a class's members are in its entry). A step the wheel does not define
is recorded as {"kind": "unresolved"} (the Model Zoo calls `get_rank` on
`cerebras.pytorch.distributed`, which has none).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

try:
    from .make_inventory import Inventory, Source, _dump
    from .modelzoo_uses import SOURCE, scan
except ImportError:  # run as a script
    from make_inventory import Inventory, Source, _dump
    from modelzoo_uses import SOURCE, scan

OUT = Path(__file__).with_name("modelzoo_names_2_10.json")


def describe_uses(inv: Inventory, uses) -> dict:
    names: dict[str, dict] = {}
    for use in uses:
        module = use.module
        for i, attr in enumerate(use.attrs):
            if module not in inv.src.files:
                break
            key = ".".join((use.module, *use.attrs[: i + 1]))
            entry = names.get(key) or inv.describe(module, attr)
            if entry["kind"] == "unresolved" and f"{module}.{attr}" in inv.src.files:
                entry = {"kind": "module", "module": f"{module}.{attr}"}  # a submodule the package does not bind
            names[key] = entry
            if entry["kind"] != "module":
                break
            module = entry["module"]
    return dict(sorted(names.items()))


def main(root: str) -> None:
    src = Source(Path(root))
    inv = Inventory(src)
    version = {node.targets[0].id: node.value.value for node in src.tree("cerebras.pytorch._version").body
               if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)}
    out = {"source": {"package": "cerebras-pytorch", "version": version["__version__"],
                      "githash": version["__githash__"],
                      "modelzoo": "modelzoo-2.10 snapshot (src/cerebras/modelzoo)"},
           "names": describe_uses(inv, scan(SOURCE))}
    OUT.write_text(_dump(out) + "\n")
    print(f"wrote {len(out['names'])} names to {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
