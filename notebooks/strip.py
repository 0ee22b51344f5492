"""Strip notebooks for committing: no outputs, no execution counts, no execution timing
metadata (what `tests/project/test_notebooks.py` checks). Needs only nbformat (in the `dev` extra).

    python notebooks/strip.py                 # every notebook of this folder
    python notebooks/strip.py path/to/a.ipynb # the ones named
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat


def strip(path: Path) -> bool:
    """Strip the notebook at `path` in place; whether it changed."""
    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if cell.get("outputs") or cell.get("execution_count") is not None or "execution" in cell.metadata:
            cell.outputs, cell.execution_count = [], None
            cell.metadata.pop("execution", None)
            changed = True
    if changed:
        nbformat.write(nb, path)
    return changed


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(Path(__file__).resolve().parent.glob("*.ipynb"))
    for path in paths:
        print(f"{path}: {'stripped' if strip(path) else 'already stripped'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
