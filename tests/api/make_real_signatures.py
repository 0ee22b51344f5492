"""Write `real_signatures_2_10.json`: the `__init__` signatures of the optimizer and
scheduler classes of the real `cerebras.pytorch` 2.10.0, with their annotations, as facts.

Config builders (the Model Zoo trainer's `create_config_class`) make pydantic models from
`inspect.signature(cls.__init__)` of every subclass of `Optimizer`, `LRScheduler` and
`WeightDecayScheduler`, keyed on the annotations (`ParamsT`, `torch.optim.Optimizer`,
`(float, "lr")`, ...), so cstorch's classes must carry the same parameter names, kinds,
defaults and annotation objects. `test_real_signatures.py` checks them against this file.

The real package is read with `ast` only, never imported. Get the sources and run:

    pip download cerebras-pytorch==2.10.0 --no-deps -d SRC
    (cd SRC && for w in *.whl; do python -m zipfile -e "$w" .; done)
    python tests/api/make_real_signatures.py SRC     # rewrites tests/api/real_signatures_2_10.json

For each class the file records the `__init__` it uses (its own, or the first one along
its method resolution order), each parameter's name, kind, default (a literal, or
{"expr": source}) and annotation (source text), and where each name used in those
annotations comes from (a qualified name: "typing.List", "torch",
"cerebras.pytorch.optim.optimizer.ParamsT", ...), so the annotation can be evaluated
against cstorch's objects.
"""
from __future__ import annotations

import ast
import json
import sys
import warnings
from pathlib import Path

try:  # a module of the tests package, or run as a script
    from .make_inventory import _literal
except ImportError:
    from make_inventory import _literal

OUT = Path(__file__).with_name("real_signatures_2_10.json")
PACKAGE = "cerebras.pytorch.optim"

#: the modules whose public classes are recorded; "optim" is the package (its `__all__`)
MODULES = [PACKAGE, f"{PACKAGE}.lr_scheduler", f"{PACKAGE}.weight_decay_scheduler", f"{PACKAGE}.scheduler"]


class Source:
    """The `cerebras/pytorch/optim` sources of an unpacked wheel: module -> parsed file."""

    def __init__(self, root: Path):
        self.trees: dict[str, ast.Module] = {}
        self.packages: set[str] = set()
        found = [p for p in root.rglob("cerebras/pytorch/optim/*.py")]
        if not found:
            raise SystemExit(f"no cerebras/pytorch/optim/*.py under {root}")
        for path in found:
            module = PACKAGE if path.name == "__init__.py" else f"{PACKAGE}.{path.stem}"
            if path.name == "__init__.py":
                self.packages.add(module)
            with warnings.catch_warnings():  # the real sources have invalid escapes in docstrings
                warnings.simplefilter("ignore", SyntaxWarning)
                warnings.simplefilter("ignore", DeprecationWarning)
                self.trees[module] = ast.parse(path.read_text())

    def resolve(self, module: str, level: int, name: str | None) -> str:
        """The absolute module of `from <level dots><name> import ...` inside `module`."""
        if level == 0:
            return name or ""
        base = module.split(".")
        if module not in self.packages:
            base = base[:-1]
        base = base[: len(base) - (level - 1)]
        return ".".join(base + ([name] if name else []))

    def names(self, module: str) -> dict[str, tuple]:
        """Top-level bindings: name -> ("class", node) | ("import", qualified) | ("module", name)
        | ("defined", qualified)."""
        out: dict[str, tuple] = {}
        conditional: dict[str, tuple] = {}
        for node in self.trees[module].body:
            if isinstance(node, ast.If):  # `if _generating_docs:` stand-ins: only names bound nowhere else
                for n in [*node.body, *node.orelse]:
                    self._bind(module, n, conditional)
            else:
                self._bind(module, node, out)
        return {**conditional, **out}

    def _bind(self, module: str, n: ast.AST, out: dict) -> None:
        if isinstance(n, ast.ClassDef):
            out[n.name] = ("class", n)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[n.name] = ("defined", f"{module}.{n.name}")
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                if isinstance(t, ast.Name):
                    out[t.id] = ("defined", f"{module}.{t.id}")
        elif isinstance(n, ast.ImportFrom):
            origin = self.resolve(module, n.level, n.module)
            for alias in n.names:
                out[alias.asname or alias.name] = ("import", f"{origin}.{alias.name}")
        elif isinstance(n, ast.Import):
            for alias in n.names:
                bound = alias.asname or alias.name.split(".")[0]
                out[bound] = ("module", alias.name if alias.asname else bound)

    def find_class(self, qualified: str) -> tuple[str, ast.ClassDef] | None:
        """(defining module, class node) of a qualified name, following imports."""
        for _ in range(10):
            module, _, name = qualified.rpartition(".")
            if module not in self.trees:
                return None
            binding = self.names(module).get(name)
            if binding is None:
                return None
            if binding[0] == "class":
                return module, binding[1]
            if binding[0] != "import":
                return None
            qualified = binding[1]
        return None

    def qualify(self, module: str, expr: ast.AST) -> str:
        """The qualified name a (dotted) name expression of `module` refers to."""
        parts = []
        while isinstance(expr, ast.Attribute):
            parts.insert(0, expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            raise ValueError(f"{module}: cannot qualify {ast.unparse(expr)}")
        binding = self.names(module).get(expr.id)
        if binding is None:
            root = f"builtins.{expr.id}"
        elif binding[0] == "class":
            root = f"{module}.{expr.id}"
        else:
            root = binding[1]
        return ".".join([root, *parts])


class Classes:
    def __init__(self, src: Source):
        self.src = src

    def bases(self, module: str, node: ast.ClassDef) -> list[str]:
        return [self.src.qualify(module, b) for b in node.bases]

    def mro(self, qualified: str) -> list[str]:
        """C3 linearisation; a base outside the parsed sources is a leaf (no further bases)."""
        found = self.src.find_class(qualified)
        if found is None:
            return [qualified]
        module, node = found
        qualified = f"{module}.{node.name}"
        bases = self.bases(module, node)
        seqs = [self.mro(b) for b in bases] + [bases]
        out = [qualified]
        while any(seqs):
            seqs = [s for s in seqs if s]
            for s in seqs:
                head = s[0]
                if not any(head in t[1:] for t in seqs):
                    break
            else:
                raise ValueError(f"inconsistent MRO for {qualified}")
            out.append(head)
            seqs = [t[1:] if t[0] == head else t for t in seqs]
        return out

    def init_of(self, qualified: str) -> tuple[str, str, ast.FunctionDef]:
        """(class that defines it, its module, node) of the `__init__` the class uses."""
        for cls in self.mro(qualified):
            found = self.src.find_class(cls)
            if found is None:
                raise ValueError(f"{qualified}: reached {cls}, outside the sources, before an __init__")
            module, node = found
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    return f"{module}.{node.name}", module, item
        raise ValueError(f"{qualified}: no __init__")

    def is_subclass(self, qualified: str, base: str) -> bool:
        return base in self.mro(qualified)

    def record(self, qualified: str) -> dict:
        owner, module, fn = self.init_of(qualified)
        a = fn.args
        if a.posonlyargs:
            raise ValueError(f"{owner}.__init__ has positional-only parameters")
        params = []
        names: dict[str, str] = {}

        def annotate(p: dict, arg: ast.arg) -> None:
            if arg.annotation is None:
                return
            p["annotation"] = ast.unparse(arg.annotation)
            for n in ast.walk(arg.annotation):
                if isinstance(n, ast.Name):
                    names[n.id] = self.src.qualify(module, n)

        def add(arg, kind, default=None):
            p = {"name": arg.arg, "kind": kind}
            if default is not None:
                p["default"] = _literal(default)
            annotate(p, arg)
            params.append(p)

        defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
        for arg, default in zip(a.args, defaults):
            add(arg, "POSITIONAL_OR_KEYWORD", default)
        if a.vararg:
            add(a.vararg, "VAR_POSITIONAL")
        for arg, default in zip(a.kwonlyargs, a.kw_defaults):
            add(arg, "KEYWORD_ONLY", default)
        if a.kwarg:
            params.append({"name": a.kwarg.arg, "kind": "VAR_KEYWORD"})
            annotate(params[-1], a.kwarg)
        return {"init_of": owner, "params": params[1:], "names": dict(sorted(names.items()))}


def public_classes(src: Source, classes: Classes) -> list[str]:
    """The public optimizer and scheduler classes, as `<module>.<name>` of the module
    that exports them."""
    out = []
    tree = src.trees[PACKAGE]
    exported = next(ast.literal_eval(n.value) for n in tree.body
                    if isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in n.targets))
    for name in exported:
        qualified = f"{PACKAGE}.{name}"
        if src.find_class(qualified) is not None and qualified not in out:
            out.append(qualified)
    scheduler = f"{PACKAGE}.scheduler.Scheduler"
    for module in MODULES[1:]:
        for name, binding in src.names(module).items():
            if binding[0] != "class" or name.startswith("_"):
                continue
            qualified = f"{module}.{name}"
            if classes.is_subclass(qualified, scheduler):
                out.append(qualified)
    return out


def _dump(data: dict) -> str:
    """JSON with one line per class entry field and per parameter (a diff shows the change)."""
    out = ["{", f' "source": {json.dumps(data["source"])},', ' "classes": {']
    classes = list(data["classes"].items())
    for i, (name, entry) in enumerate(classes):
        params = ",\n".join(f"   {json.dumps(p)}" for p in entry["params"])
        out.append(f"  {json.dumps(name)}: {{\n   \"init_of\": {json.dumps(entry['init_of'])},\n"
                   f"   \"names\": {json.dumps(entry['names'])},\n   \"params\": [\n{params}\n   ]}}"
                   + ("," if i < len(classes) - 1 else ""))
    out += [" }", "}"]
    return "\n".join(out) + "\n"


def collect(root: str | Path) -> dict:
    """The file's content from the unpacked sources under `root`."""
    src = Source(Path(root))
    classes = Classes(src)
    return {
        "source": "cerebras-pytorch 2.10.0 (cerebras/pytorch/optim), read with ast by tests/api/make_real_signatures.py",
        "classes": {q: classes.record(q) for q in public_classes(src, classes)},
    }


def main(root: str) -> None:
    data = collect(root)
    OUT.write_text(_dump(data))
    print(f"wrote {OUT} ({len(data['classes'])} classes)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
