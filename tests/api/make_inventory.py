"""Write `inventory_2_10.json`: the public names of the real `cerebras.pytorch` 2.10.0
(and the `cstorch.backends` flags and `ClusterConfig` fields) as facts — names, kinds,
signatures, defaults, flag types and the error messages of their validators.

The real package is read with `ast` only, never imported (it needs its own torch build
and a compiled core). Get the sources and run:

    pip download cerebras-pytorch==2.10.0 cerebras-appliance==2.10.0 --no-deps -d SRC
    (cd SRC && for w in *.whl; do python -m zipfile -e "$w" .; done)
    python tests/api/make_inventory.py SRC            # rewrites tests/api/inventory_2_10.json

Public names of a module: its `__all__`, and for a package (`__init__.py`) also every
name it binds without a leading underscore by a relative import, `def`, `class` or
assignment; for a plain module without `__all__`, the names it defines itself. Names that
come from outside the two Cerebras packages (torch, typing, ...) are not recorded.
"""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

OUT = Path(__file__).with_name("inventory_2_10.json")

#: the modules a script may import; internal ones (core, lib, cs_op_lib, decomp, backend
#: implementations) are named only where a public module exports one of their names
MODULES = [
    "cerebras.pytorch",
    "cerebras.pytorch.amp",
    "cerebras.pytorch.distributed",
    "cerebras.pytorch.experimental",
    "cerebras.pytorch.mesh",
    "cerebras.pytorch.metrics",
    "cerebras.pytorch.metrics.utils",
    "cerebras.pytorch.nn",
    "cerebras.pytorch.nn.functional",
    "cerebras.pytorch.optim",
    "cerebras.pytorch.optim.lr_scheduler",
    "cerebras.pytorch.optim.scheduler",
    "cerebras.pytorch.optim.weight_decay_scheduler",
    "cerebras.pytorch.profiler",
    "cerebras.pytorch.sparse",
    "cerebras.pytorch.storage",
    "cerebras.pytorch.utils",
    "cerebras.pytorch.utils.data",
    "cerebras.pytorch.utils.nest",
    "cerebras.pytorch.utils.tensorboard",
    "cerebras.pytorch.utils.tracker",
    "cerebras.pytorch.utils.benchmark",
]


class Source:
    """The unpacked wheels: module name -> parsed file."""

    def __init__(self, root: Path):
        self.files: dict[str, Path] = {}
        for path in root.rglob("*.py"):
            rel = path.relative_to(root)
            parts = list(rel.with_suffix("").parts)
            while parts and parts[0] != "cerebras":
                parts.pop(0)
            if not parts or "_torch_mlir" in parts:
                continue
            if parts[-1] == "__init__":
                parts.pop()
            self.files.setdefault(".".join(parts), path)
        self._trees: dict[str, ast.Module] = {}

    def tree(self, module: str) -> ast.Module | None:
        if module not in self.files:
            return None
        if module not in self._trees:
            self._trees[module] = ast.parse(self.files[module].read_text())
        return self._trees[module]

    def is_package(self, module: str) -> bool:
        return module in self.files and self.files[module].name == "__init__.py"

    def resolve(self, module: str, level: int, name: str | None) -> str:
        """The absolute module of `from <level dots><name> import ...` inside `module`."""
        if level == 0:
            return name or ""
        base = module.split(".")
        if not self.is_package(module):
            base = base[:-1]
        base = base[: len(base) - (level - 1)]
        return ".".join(base + ([name] if name else []))


def _literal(node: ast.AST):
    """A default value as JSON: literals as themselves, anything else as {"expr": source}."""
    try:
        value = ast.literal_eval(node)
        json.dumps(value)
        return value
    except Exception:
        return {"expr": ast.unparse(node)}


def signature(fn: ast.FunctionDef | ast.AsyncFunctionDef, drop_first: bool) -> list[dict]:
    a = fn.args
    params: list[dict] = []
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for i, (arg, default) in enumerate(zip(positional, defaults)):
        kind = "positional_only" if i < len(a.posonlyargs) else "positional"
        p = {"name": arg.arg, "kind": kind}
        if default is not None:
            p["default"] = _literal(default)
        params.append(p)
    if a.vararg:
        params.append({"name": a.vararg.arg, "kind": "var_positional"})
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        p = {"name": arg.arg, "kind": "keyword_only"}
        if default is not None:
            p["default"] = _literal(default)
        params.append(p)
    if a.kwarg:
        params.append({"name": a.kwarg.arg, "kind": "var_keyword"})
    if drop_first and params and params[0]["kind"] in ("positional", "positional_only"):
        params = params[1:]
    return params


def _decorators(node) -> list[str]:
    """The decorators' names (their arguments left out)."""
    return [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]


class Inventory:
    def __init__(self, src: Source):
        self.src = src

    # -- finding what a name is ---------------------------------------------------
    def bindings(self, module: str) -> dict[str, tuple]:
        """Top-level names of `module`: name -> ("def"|"class"|"assign"|"module"|"import", ...)."""
        tree = self.src.tree(module)
        out: dict[str, tuple] = {}
        if tree is None:
            return out
        for node in tree.body:
            nodes = [node]
            if isinstance(node, ast.If):  # `if not _generating_docs:` blocks
                nodes = [*node.body, *node.orelse]
            for n in nodes:
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[n.name] = ("def", n)
                elif isinstance(n, ast.ClassDef):
                    out[n.name] = ("class", n)
                elif isinstance(n, (ast.Assign, ast.AnnAssign)):
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    for t in targets:
                        if isinstance(t, ast.Name):
                            out[t.id] = ("assign", n)
                elif isinstance(n, ast.ImportFrom):
                    origin = self.src.resolve(module, n.level, n.module)
                    for alias in n.names:
                        name = alias.asname or alias.name
                        if alias.name == "*":
                            continue
                        sub = f"{origin}.{alias.name}"
                        # `from pkg import x` takes pkg's attribute x first, the submodule only if pkg binds no x
                        if sub in self.src.files and (origin == module or alias.name not in self._own_names(origin)):
                            out[name] = ("module", sub, n.level > 0)
                        else:
                            out[name] = ("import", origin, alias.name, n.level > 0)
                elif isinstance(n, ast.Import):
                    for alias in n.names:
                        out[alias.asname or alias.name.split(".")[0]] = ("external_module", alias.name)
        return out

    def _own_names(self, module: str) -> set[str]:
        tree = self.src.tree(module)
        names = set()
        for node in tree.body if tree else []:
            if isinstance(node, ast.ImportFrom):
                names |= {a.asname or a.name for a in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
        return names

    def all_names(self, module: str) -> list[str] | None:
        tree = self.src.tree(module)
        for node in tree.body if tree else []:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                     for t in node.targets):
                return [n for n in _str_list(node.value)]
        return None

    def star_exports(self, module: str) -> list[str]:
        tree = self.src.tree(module)
        names = []
        for node in tree.body if tree else []:
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                origin = self.src.resolve(module, node.level, node.module)
                names += self.all_names(origin) or []
        return names

    def public_names(self, module: str) -> list[str]:
        b = self.bindings(module)
        declared = self.all_names(module)
        names = set(declared or [])
        if self.src.is_package(module):
            names |= set(self.star_exports(module))
            for name, what in b.items():
                if name.startswith("_"):
                    continue
                if what[0] in ("def", "class", "assign") or (what[0] in ("module", "import") and what[-1]):
                    names.add(name)
        elif declared is None:
            names |= {n for n, w in b.items() if not n.startswith("_") and w[0] in ("def", "class", "assign")}
        names.discard("__all__")
        return sorted(names)

    def locate(self, module: str, name: str, depth: int = 0):
        """Follow imports to where `name` is defined: (module, binding) or None."""
        if depth > 20:
            return None
        b = self.bindings(module)
        if name not in b:
            tree = self.src.tree(module)
            for node in tree.body if tree else []:
                if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                    origin = self.src.resolve(module, node.level, node.module)
                    if name in (self.all_names(origin) or []):
                        return self.locate(origin, name, depth + 1)
            return None
        what = b[name]
        if what[0] == "import":
            _, origin, orig_name, _ = what
            if origin in self.src.files:
                return self.locate(origin, orig_name, depth + 1) or (origin, ("external", f"{origin}.{orig_name}"))
            return module, ("external", f"{origin}.{orig_name}")
        return module, what

    # -- describing a name ---------------------------------------------------------
    def describe(self, module: str, name: str) -> dict:
        found = self.locate(module, name)
        if found is None:
            return {"kind": "unresolved"}
        where, what = found
        if what[0] == "module":
            return {"kind": "module", "module": what[1]}
        if what[0] == "external":
            return {"kind": "external", "origin": what[1]}
        if what[0] == "external_module":
            return {"kind": "external", "origin": what[1]}
        if what[0] == "def":
            fn = what[1]
            return {"kind": "function", "defined_in": where, "decorators": _decorators(fn),
                    "signature": signature(fn, drop_first=False)}
        if what[0] == "class":
            return self.describe_class(where, what[1])
        node = what[1]
        value = node.value
        if value is None:
            return {"kind": "object", "defined_in": where}
        if isinstance(value, ast.Name):  # an alias of another name of the module
            alias = self.describe(where, value.id)
            alias["alias_of"] = value.id
            return alias
        return {"kind": "object", "defined_in": where, "value": _literal(value)}

    def class_node(self, module: str, name: str):
        found = self.locate(module, name)
        if found and found[1][0] == "class":
            return found[0], found[1][1]
        return None

    def describe_class(self, module: str, node: ast.ClassDef) -> dict:
        out = {"kind": "class", "defined_in": module, "bases": [ast.unparse(b) for b in node.bases],
               "decorators": _decorators(node)}
        methods: dict[str, list] = {}
        properties: list[str] = []
        init = None
        is_dataclass = any("dataclass" in d for d in out["decorators"]) or "NamedTuple" in out["bases"]
        fields: list[dict] = []
        chain = self.mro(module, node)
        for cls_module, cls in reversed(chain):  # base first, so subclasses override
            for item in cls.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    decos = _decorators(item)
                    if any(d.endswith("setter") or d.endswith("deleter") for d in decos):
                        continue
                    if "property" in decos or "functools.cached_property" in decos or "cached_property" in decos:
                        properties.append(item.name)
                        methods.pop(item.name, None)
                        continue
                    static = "staticmethod" in decos
                    if item.name == "__init__":
                        init = signature(item, drop_first=True)
                    elif not item.name.startswith("_"):
                        methods[item.name] = signature(item, drop_first=not static)
                        if item.name in properties:
                            properties.remove(item.name)
                elif isinstance(item, ast.Assign):
                    for t in item.targets:
                        if (isinstance(t, ast.Name) and not t.id.startswith("_") and isinstance(item.value, ast.Call)
                                and ast.unparse(item.value.func) in ("property", "functools.cached_property")):
                            properties.append(t.id)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and (
                        is_dataclass and cls is node or any("dataclass" in d for d in _decorators(cls))):
                    f = {"name": item.target.id, "annotation": ast.unparse(item.annotation)}
                    if item.value is not None:
                        f["default"] = _field_default(item.value)
                    fields = [x for x in fields if x["name"] != f["name"]] + [f]
        if is_dataclass and init is None:
            init = [{"name": f["name"], "kind": "positional", **({"default": f["default"]} if "default" in f else {})}
                    for f in fields if not f["name"].isupper() and not f["annotation"].startswith("ClassVar")]
            out["fields"] = fields
        if init is not None:
            out["init"] = init
        out["methods"] = dict(sorted(methods.items()))
        out["properties"] = sorted({p for p in properties if not p.startswith("_")})
        return out

    def mro(self, module: str, node: ast.ClassDef) -> list[tuple[str, ast.ClassDef]]:
        """Python's method resolution order (C3) of the class, over the bases defined in
        the Cerebras sources (others, such as torch's, are left out)."""
        bases = []
        for base in node.bases:
            found = self.class_node(module, ast.unparse(base)) if "." not in ast.unparse(base) else None
            if found:
                bases.append(found)
        seqs = [self.mro(*b) for b in bases] + [bases]
        out = [(module, node)]
        seqs = [[x for x in s] for s in seqs if s]
        while seqs:
            for seq in seqs:
                head = seq[0]
                if not any(head[1] is x[1] for s in seqs for x in s[1:]):
                    break
            else:
                raise ValueError(f"no consistent MRO for {node.name}")
            out.append(head)
            seqs = [[x for x in s if x[1] is not head[1]] for s in seqs]
            seqs = [s for s in seqs if s]
        return out


def _str_list(node) -> list[str]:
    if isinstance(node, (ast.List, ast.Tuple)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant)]
    if isinstance(node, ast.BinOp):
        return _str_list(node.left) + _str_list(node.right)
    return []


def _field_default(value: ast.AST):
    """The default a dataclass field or flag declares: a literal, the `default=` of a
    descriptor or `field(...)`, else the expression."""
    if isinstance(value, ast.Call):
        for kw in value.keywords:
            if kw.arg == "default":
                return _literal(kw.value)
            if kw.arg == "default_factory":
                return {"factory": ast.unparse(kw.value)}
        func = ast.unparse(value.func)
        return {"descriptor": func, **({"args": [ast.unparse(a) for a in value.args]} if value.args else {})}
    return _literal(value)


def _text(node: ast.AST, names: dict) -> str:
    """A message expression as text: f-string fields as `{source}`, names of strings
    assigned in the same scope replaced by their text."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
                       for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left, names) + _text(node.right, names)
    if isinstance(node, ast.Name) and node.id in names:
        return _text(names[node.id], names)
    return "{" + ast.unparse(node) + "}"


def _messages(node: ast.AST) -> list[str]:
    """The distinct error messages a validator raises, as `ExceptionType: text`."""
    names = {t.id: n.value for n in ast.walk(node) if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name)}
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and n.exc.args:
            msg = f"{ast.unparse(n.exc.func)}: {_text(n.exc.args[0], names)}"
            if msg not in out:
                out.append(msg)
    return out


def _descriptor_default(desc: ast.ClassDef | None, consts: dict):
    """The default a descriptor class passes to `super().__init__(default=...)`."""
    for n in ast.walk(desc) if desc is not None else []:
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "super().__init__":
            for kw in n.keywords:
                if kw.arg == "default":
                    if isinstance(kw.value, ast.Name) and kw.value.id in consts:
                        return consts[kw.value.id]
                    return _literal(kw.value)
                if kw.arg == "default_factory":
                    return {"factory": ast.unparse(kw.value)}
    return _NO_DEFAULT


_NO_DEFAULT = object()
_ARITHMETIC = (ast.Expression, ast.Constant, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.operator, ast.unaryop,
               ast.List, ast.Tuple)


def _constant(node: ast.AST, known: dict):
    """The value of a constant expression: literals, arithmetic, names of known constants."""
    expr = ast.Expression(node)
    if not all(isinstance(n, _ARITHMETIC) for n in ast.walk(expr)):
        raise ValueError("not a constant")
    if any(isinstance(n, ast.Name) and n.id not in known for n in ast.walk(expr)):
        raise ValueError("unknown name")
    return eval(compile(expr, "<constant>", "eval"), {"__builtins__": {}}, dict(known))


def _string_constants(inv: "Inventory", module: str) -> dict:
    """Module-level str/int constants of `module` and of the modules it imports them from."""
    out = {}
    tree = inv.src.tree(module)
    for node in tree.body if tree else []:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = _constant(node.value, out)
            except Exception:
                pass
        elif isinstance(node, ast.ImportFrom):
            origin = inv.src.resolve(module, node.level, node.module)
            if origin != module and origin in inv.src.files:
                sub = _string_constants(inv, origin)
                out.update({a.asname or a.name: sub[a.name] for a in node.names if a.name in sub})
    return out


def flags(inv: Inventory) -> dict:
    """The `cstorch.backends` tree: flag path -> type, default, validator messages."""
    module = "cerebras.pytorch.backends"
    tree = inv.src.tree(module)
    root = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_backends")
    out: dict[str, dict] = {}
    consts = _string_constants(inv, module)

    def walk(cls: ast.ClassDef, path: str, outer: dict):
        nested = {**outer, **{c.name: c for c in cls.body if isinstance(c, ast.ClassDef)}}
        for item in cls.body:
            if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                continue
            name, ann = item.target.id, ast.unparse(item.annotation)
            if ann in nested and any(ast.unparse(b) == "_flags" for b in nested[ann].bases):
                walk(nested[ann], f"{path}.{name}" if path else name, nested)
                continue
            entry = {"type": ann}
            if item.value is not None:
                entry["default"] = _field_default(item.value)
                if isinstance(item.value, ast.Call):
                    for kw in item.value.keywords:
                        if kw.arg == "default" and isinstance(kw.value, ast.Name) and kw.value.id in consts:
                            entry["default"] = consts[kw.value.id]
                if isinstance(item.value, ast.Call):
                    validator = ast.unparse(item.value.func)
                    entry["validator"] = validator
                    desc = nested.get(validator)
                    if desc is None:
                        found = inv.class_node(module, validator)
                        desc = found[1] if found else None
                    if desc is not None:
                        entry["errors"] = _messages(desc)
                        if isinstance(entry["default"], dict) and "descriptor" in entry["default"]:
                            found = _descriptor_default(desc, consts)
                            entry["default"] = entry["default"] if found is _NO_DEFAULT else found
            out[f"{path}.{name}"] = entry

    walk(root, "", {})
    return out


def cluster_config(inv: Inventory) -> dict:
    module = "cerebras.appliance.cluster_config"
    tree = inv.src.tree(module)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    cfg = classes["ClusterConfig"]
    out = {}
    for item in cfg.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            entry = {"type": ast.unparse(item.annotation), "default": _field_default(item.value)}
            if isinstance(item.value, ast.Call) and ast.unparse(item.value.func) in classes:
                validator = ast.unparse(item.value.func)
                entry["validator"] = validator
                entry["errors"] = _messages(classes[validator])
                if isinstance(entry["default"], dict) and "descriptor" in entry["default"]:
                    found = _descriptor_default(classes[validator], _string_constants(inv, module))
                    entry["default"] = entry["default"] if found is _NO_DEFAULT else found
            out[item.target.id] = entry
    return out


def constants(inv: Inventory) -> dict:
    """Values the flag and ClusterConfig messages refer to."""
    flags_consts = _string_constants(inv, "cerebras.pytorch.backends")
    cluster = _string_constants(inv, "cerebras.appliance.cluster_config")
    return {"MAX_MESSAGE_LENGTH": flags_consts["MAX_MESSAGE_LENGTH"], "VALID_JOB_PRIORITIES": cluster["VALID_JOB_PRIORITIES"]}


def _flat(value) -> bool:
    """A value written on one line: a scalar, or a dict/list of scalars (a parameter)."""
    if isinstance(value, dict):
        return all(not isinstance(v, (dict, list)) or (isinstance(v, dict) and _flat(v)) for v in value.values())
    if isinstance(value, list):
        return all(not isinstance(v, (dict, list)) for v in value)
    return True


def _dump(value, indent: int = 0) -> str:
    """Indented JSON (keys sorted) with every parameter, field or list of names on one line."""
    pad, inner = " " * indent, " " * (indent + 1)
    if _flat(value):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {_dump(v, indent + 1)}" for k, v in sorted(value.items())]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    items = [f"{inner}{_dump(v, indent + 1)}" for v in value]
    return "[\n" + ",\n".join(items) + f"\n{pad}]"


def main(root: str) -> None:
    src = Source(Path(root))
    inv = Inventory(src)
    version = {}
    for node in src.tree("cerebras.pytorch._version").body:
        if isinstance(node, ast.Assign):
            version[node.targets[0].id] = node.value.value
    modules = {}
    for module in MODULES:
        if src.tree(module) is None:
            raise SystemExit(f"{module} is not in {root}: unpack cerebras_pytorch-2.10.0 there")
        modules[module] = {name: inv.describe(module, name) for name in inv.public_names(module)}
    data = {
        "source": {"package": "cerebras-pytorch", "version": version["__version__"],
                   "githash": version["__githash__"], "also_read": "cerebras-appliance 2.10.0 (ClusterConfig)"},
        "modules": modules,
        "flags": flags(inv),
        "cluster_config": cluster_config(inv),
        "cluster_config_order": list(cluster_config(inv)),  # the fields' (constructor) order
        "cluster_types": {n: inv.describe("cerebras.appliance.cluster.types", n)
                          for n in ("MountDir", "NotificationTarget")},
        "constants": constants(inv),
    }
    OUT.write_text(_dump(data) + "\n")
    n = sum(len(v) for v in modules.values())
    print(f"wrote {OUT}: {len(modules)} modules, {n} names, {len(data['flags'])} flags")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/work/wt/cerebras_src")
