"""Is a cstorch name compatible with its entry in `inventory_2_10.json`?

A signature is compatible when code written for the real one runs against ours: every
real parameter exists in ours with the same kind (positional or keyword-only), the
positional ones at the same position; a real default that is a literal is our default
too; a parameter real code may leave out is optional in ours; our extra parameters are
optional (or `*args`/`**kwargs`); `*args`/`**kwargs` of the real one are accepted.
"""
from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path
from typing import Any

INVENTORY = json.loads(Path(__file__).with_name("inventory_2_10.json").read_text())
REAL_PREFIX = "cerebras.pytorch"

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def our_module_name(real: str) -> str:
    return "cstorch" + real[len(REAL_PREFIX):]


def our_module(real: str):
    return importlib.import_module(our_module_name(real))


def _is_literal_default(d: Any) -> bool:
    return not isinstance(d, dict)


def _same_default(ours: Any, real: Any) -> bool:
    if isinstance(real, list):  # JSON has no tuples
        return isinstance(ours, (list, tuple)) and list(ours) == real
    if isinstance(real, bool) or isinstance(ours, bool):
        return type(ours) is type(real) and ours == real
    return ours == real and type(ours) in (type(real), int, float) if real is not None else ours is None


def signature_problems(ours: inspect.Signature, real: list[dict], what: str, method: bool = False) -> list[str]:
    """Differences that break real callers. For a method, a real `*args`/`**kwargs` that
    ours lacks is not one (a method forwarding them, e.g. to torch, is called without)."""
    problems = []
    params = list(ours.parameters.values())
    by_name = {p.name: p for p in params}
    positional = [p for p in params if p.kind in _POSITIONAL]
    has_var_pos = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    has_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    real_pos = [r for r in real if r["kind"] in ("positional", "positional_only")]
    for i, r in enumerate(real_pos):
        if i >= len(positional) or positional[i].name != r["name"]:
            got = positional[i].name if i < len(positional) else "nothing"
            problems.append(f"{what}: positional parameter {i} is {r['name']!r} in the real API, {got!r} here")
    for r in real:
        if r["kind"] == "var_positional":
            if not has_var_pos and not method:
                problems.append(f"{what}: the real API takes *{r['name']}")
            continue
        if r["kind"] == "var_keyword":
            if not has_var_kw and not method:
                problems.append(f"{what}: the real API takes **{r['name']}")
            continue
        p = by_name.get(r["name"])
        if p is None:
            if r["kind"] == "keyword_only":
                problems.append(f"{what}: missing keyword-only parameter {r['name']!r}")
            continue  # positional ones reported above
        if r["kind"] == "keyword_only" and p.kind is not inspect.Parameter.KEYWORD_ONLY and \
                p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            problems.append(f"{what}: {r['name']!r} must be accepted as a keyword")
        if "default" in r:
            if p.default is inspect.Parameter.empty:
                problems.append(f"{what}: {r['name']!r} is optional in the real API, required here")
            elif _is_literal_default(r["default"]) and not _same_default(p.default, r["default"]):
                problems.append(f"{what}: {r['name']!r} defaults to {r['default']!r} in the real API, "
                                f"{p.default!r} here")
    real_names = {r["name"] for r in real}
    for p in params:
        if p.name in real_names or p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if p.default is inspect.Parameter.empty:
            problems.append(f"{what}: extra required parameter {p.name!r} (the real API has no such parameter)")
    return problems


def _signature_of(obj) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def name_problems(obj: Any, entry: dict, what: str) -> list[str]:
    """Differences between our object and its inventory entry (empty: compatible)."""
    kind = entry["kind"]
    if kind == "module":
        return [] if inspect.ismodule(obj) else [f"{what}: a module in the real API, {type(obj).__name__} here"]
    if kind == "function":
        if not callable(obj):
            return [f"{what}: a function in the real API, not callable here"]
        sig = _signature_of(obj)
        return signature_problems(sig, entry["signature"], what) if sig is not None else []
    if kind == "class":
        if not callable(obj):  # a class, or a factory function in its place
            return [f"{what}: a class in the real API, not callable here"]
        problems = []
        if "init" in entry:
            target = obj.__init__ if inspect.isclass(obj) else obj
            sig = _signature_of(target)
            if sig is not None:
                if inspect.isclass(obj):
                    params = list(sig.parameters.values())[1:]
                    sig = sig.replace(parameters=params)
                problems += signature_problems(sig, entry["init"], f"{what}()")
        methods = entry.get("methods", {})
        if "torch.autograd.Function" in entry.get("bases", []):
            # an autograd Function is used through `apply(*inputs)`; autograd calls its forward/backward
            if not callable(getattr(obj, "apply", None)):
                problems.append(f"{what}.apply: missing")
            methods = {k: v for k, v in methods.items() if k not in ("forward", "backward")}
        for name, method_sig in methods.items():
            m = inspect.getattr_static(obj, name, None) if inspect.isclass(obj) else getattr(obj, name, None)
            if m is None:
                problems.append(f"{what}.{name}: missing method")
                continue
            if isinstance(m, (staticmethod, classmethod)):
                m = m.__func__
                sig = _signature_of(m)
                if sig is not None and isinstance(inspect.getattr_static(obj, name), classmethod):
                    sig = sig.replace(parameters=list(sig.parameters.values())[1:])
            elif isinstance(m, property):
                continue  # a property where the real one has a method of no arguments is a difference we report
            else:
                sig = _signature_of(m)
                if sig is not None and inspect.isclass(obj):
                    sig = sig.replace(parameters=list(sig.parameters.values())[1:])
            if sig is not None:
                problems += signature_problems(sig, method_sig, f"{what}.{name}()", method=True)
        for prop in entry.get("properties", []):
            if inspect.isclass(obj) and inspect.getattr_static(obj, prop, None) is None and \
                    prop not in getattr(obj, "__dataclass_fields__", {}) and \
                    prop not in getattr(obj, "__annotations__", {}):
                problems.append(f"{what}.{prop}: missing property")
        return problems
    return []
