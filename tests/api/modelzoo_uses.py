"""Where the real Cerebras Model Zoo uses `cerebras.pytorch`: every import of it and every
attribute chain read from what it imports, found in the snapshot's source with `ast`.

A use is how the code reaches a name, so that it can be replayed against cstorch:

* `import cerebras.pytorch.x [as y]`: kind "import", `module` "cerebras.pytorch.x", no
  attributes;
* `from cerebras.pytorch.x import n [as m]`: kind "from", `attrs` ("n",) (Python reads
  the attribute `n` of the module, or else imports the submodule `x.n`);
* `y.a.b` where `y` is bound by such an import: kind "attr" from an `import` binding
  (`module` imported, then the attributes read), kind "from" from a `from` binding
  (the imported name, then the attributes). Only the longest chain is kept (`y.a.b.c`,
  not also `y.a`); a chain is cut at a call or subscript (`y.f().g` is `y.f`).

`import_time` says whether the use runs when its file is imported (module level, class
bodies, decorators, default values and annotations of functions) rather than only when
a function runs. Bindings are per file: the last import in a file that binds a name
decides what the name is throughout the file (`import torch.distributed as dist` then
`import cerebras.pytorch.distributed as dist` makes `dist` the latter, as it is for the
module-level code of that file).
"""
from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "cerebras.pytorch"

#: the snapshot of the real Model Zoo 2.10 (test data beside the repository, read only)
SNAPSHOT = Path(__file__).resolve().parents[2].parent / "shared" / "third_party" / "modelzoo-2.10"
SOURCE = SNAPSHOT / "src" / "cerebras" / "modelzoo"


@dataclass(frozen=True)
class Use:
    kind: str  # "import", "from" or "attr"
    module: str  # the module imported
    attrs: tuple  # the names read from it, in order
    import_time: bool
    file: str  # relative to the snapshot's src/
    line: int

    @property
    def name(self) -> str:
        """The dotted name used: the module and the attributes."""
        return ".".join((self.module, *self.attrs))

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def _ours(module: str) -> bool:
    return module == PACKAGE or module.startswith(PACKAGE + ".")


def _chain(node: ast.AST):
    """`a.b.c` as ["a", "b", "c"] (None when it does not start at a name)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


class _Bindings(ast.NodeVisitor):
    """The names the imports of a file bind to `cerebras.pytorch` things, the last import
    of a name (in source order) deciding."""

    def __init__(self):
        self.ours: dict[str, tuple] = {}  # name -> ("import", module) | ("from", module, attr) | ("root",)
        self.root_imports: list[str] = []  # modules of plain `import cerebras.pytorch...`

    def _other(self, name: str) -> None:
        self.ours.pop(name, None)

    def visit_Import(self, node):
        for alias in node.names:
            if _ours(alias.name):
                if alias.asname:
                    self.ours[alias.asname] = ("import", alias.name)
                else:
                    self.ours["cerebras"] = ("root",)
                    self.root_imports.append(alias.name)
            else:
                self._other(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node):
        module = node.module or ""
        for alias in node.names:
            bound = alias.asname or alias.name
            if node.level == 0 and _ours(module):
                self.ours[bound] = ("from", module, alias.name)
            elif node.level == 0 and module == "cerebras" and alias.name == "pytorch":
                self.ours[bound] = ("import", PACKAGE)
            else:
                self._other(bound)


class _Uses(ast.NodeVisitor):
    def __init__(self, bindings: _Bindings, file: str):
        self.b, self.file = bindings, file
        self.depth = 0  # function bodies entered
        self.uses: list[Use] = []

    def _add(self, kind, module, attrs, node):
        self.uses.append(Use(kind, module, tuple(attrs), self.depth == 0, self.file, node.lineno))

    # -- imports ---------------------------------------------------------------------
    def visit_Import(self, node):
        for alias in node.names:
            if _ours(alias.name):
                self._add("import", alias.name, (), node)

    def visit_ImportFrom(self, node):
        if node.level == 0 and node.module and _ours(node.module):
            for alias in node.names:
                self._add("from", node.module, (alias.name,), node)
        elif node.level == 0 and node.module == "cerebras" and any(a.name == "pytorch" for a in node.names):
            self._add("import", PACKAGE, (), node)

    # -- attribute chains ----------------------------------------------------------------
    def visit_Attribute(self, node):
        parts = _chain(node)
        if parts is None or parts[0] not in self.b.ours:
            self.generic_visit(node)
            return
        binding = self.b.ours[parts[0]]
        if binding[0] == "import":
            self._add("attr", binding[1], parts[1:], node)
        elif binding[0] == "from":
            self._add("from", binding[1], (binding[2], *parts[1:]), node)
        else:  # `import cerebras.pytorch.x` then `cerebras.pytorch.x.y`
            dotted = ".".join(parts)
            if not _ours(dotted):
                return
            base = max((m for m in self.b.root_imports if dotted == m or dotted.startswith(m + ".")),
                       key=len, default=PACKAGE)
            self._add("attr", base, dotted[len(base) + 1:].split(".") if dotted != base else (), node)

    # -- what runs at import time ------------------------------------------------------------
    def _function(self, node, body):
        for d in getattr(node, "decorator_list", []):
            self.visit(d)
        self.visit(node.args)  # defaults and annotations run when the def runs
        if getattr(node, "returns", None) is not None:
            self.visit(node.returns)
        self.depth += 1
        for stmt in body if isinstance(body, list) else [body]:
            self.visit(stmt)
        self.depth -= 1

    def visit_FunctionDef(self, node):
        self._function(node, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self._function(node, node.body)


def scan(source: Path = SOURCE) -> list[Use]:
    """Every use of `cerebras.pytorch` in the `.py` files under `source`."""
    uses = []
    root = source.parents[1]  # the snapshot's src/
    for path in sorted(source.rglob("*.py")):
        with warnings.catch_warnings():  # the snapshot's own invalid escape sequences
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            tree = ast.parse(path.read_text(), filename=str(path))
        bindings = _Bindings()
        bindings.visit(tree)
        visitor = _Uses(bindings, str(path.relative_to(root)))
        visitor.visit(tree)
        uses += visitor.uses
    return uses
