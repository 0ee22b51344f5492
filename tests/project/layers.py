"""The project's import graph, read from the source with `ast` (no module is imported).

An edge `a -> b` means module `a` imports module `b` (a package stands for its
`__init__.py`). `from p import x` is an edge to `p.x` when `p.x` is a module of the
project, else to `p`. The packages a module sits in are not edges of their own: every
submodule of `cstorch` runs `cstorch/__init__.py` first, so counting them would make
every package a cycle with its children and hide the real ones. Each edge records
whether the import runs when the module is loaded (module level, including `if` and
`try` blocks) or only when a function runs (a function-local import).
"""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cstorch", "cstorch_jax", "cerebras", "cstorch_cli")


@dataclasses.dataclass(frozen=True)
class Import:
    source: str       # importing module
    target: str       # imported module (a project module, or the top name of an outside one)
    line: int
    local: bool       # inside a function (runs when the function is called)
    type_only: bool = False  # inside `if TYPE_CHECKING:` (read by type checkers only)


def module_files() -> dict[str, Path]:
    """Every project module by dotted name."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of a (possibly relative) `from` import's base."""
    if level == 0:
        return name or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, modules: set[str]):
        self.module, self.is_package, self.modules = module, is_package, modules
        self.depth = 0
        self.type_only = 0
        self.found: list[Import] = []

    def _add(self, target: str, line: int) -> None:
        if target.split(".")[0] not in PACKAGES:
            target = target.split(".")[0]
        self.found.append(Import(self.module, target, line, self.depth > 0, self.type_only > 0))

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" not in ast.unparse(node.test):
            self.generic_visit(node)
            return
        self.type_only += 1
        for child in node.body:
            self.visit(child)
        self.type_only -= 1
        for child in node.orelse:
            self.visit(child)

    def _function(self, node) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = _resolve(self.module, self.is_package, node.level, node.module)
        for alias in node.names:
            full = f"{base}.{alias.name}"
            self._add(full if full in self.modules else base, node.lineno)


def imports() -> list[Import]:
    """Every import statement of the project, those of `if TYPE_CHECKING:` blocks included
    (marked `type_only`: a cycle through them is a cycle of the design all the same)."""
    files = module_files()
    names = set(files)
    out = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        visitor = _Visitor(module, path.name == "__init__.py", names)
        visitor.visit(tree)
        out.extend(visitor.found)
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, ()):
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")
