"""A digest of what a Python callable does, the same in every process that runs the same
code: the part of the compile cache's key that names the user's additions to the tables a
program is made with (decompositions, lowerings).

`digest(fn)` hashes, for a function of the user's code: its bytecode, its constants
(nested functions' code included), the names it reads, its defaults, the values its
closure holds and the globals it reads, each value digested the same way (functions and
classes recursively, plain literals by value). A function of torch, jax, numpy, cstorch,
cstorch_jax or Python's standard library is named only (module and qualified name): their
versions and sources are in the engine fingerprint (`compile_cache.engine_fingerprint`).
Anything else (an arbitrary object) is named by its type only: its state is not in the
digest, which is why the compile cache also compares the captured graph when user
decompositions are registered. Never an address, so the digest is stable across processes.
"""
from __future__ import annotations

import enum
import functools
import hashlib
import sys
import types

import torch

#: root packages whose code the engine fingerprint covers (versions, or source digests)
COVERED = frozenset({"torch", "jax", "jaxlib", "numpy", "cstorch", "cstorch_jax", "optax", "ml_dtypes"}) | frozenset(
    sys.stdlib_module_names)
_MAX_DEPTH = 12
_LITERALS = (type(None), bool, int, float, complex, str, bytes)


def digest(obj) -> str:
    """sha256 (hex) of what `obj` does (see the module docstring)."""
    h = hashlib.sha256()
    _feed(h, obj, set(), 0)
    return h.hexdigest()


def _covered(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in COVERED


def _name(obj) -> str:
    return f"{getattr(obj, '__module__', None)}.{getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}"


def _feed(h, obj, seen: set, depth: int) -> None:
    put = lambda *parts: h.update(("\x1f".join(str(p) for p in parts) + "\x1e").encode())  # noqa: E731
    if depth > _MAX_DEPTH:
        put("deep")
        return
    if isinstance(obj, _LITERALS):
        put("lit", type(obj).__name__, repr(obj))
        return
    if isinstance(obj, enum.Enum):
        put("enum", _name(type(obj)), obj.name)
        return
    if isinstance(obj, (tuple, list, frozenset, set)):
        items = sorted(obj, key=repr) if isinstance(obj, (set, frozenset)) else obj
        put("seq", type(obj).__name__, len(items))
        for v in items:
            _feed(h, v, seen, depth + 1)
        return
    if isinstance(obj, dict):
        put("dict", len(obj))
        for k in sorted(obj, key=repr):
            _feed(h, k, seen, depth + 1)
            _feed(h, obj[k], seen, depth + 1)
        return
    if id(obj) in seen:  # a cycle (a recursive function): its name says enough
        put("seen", _name(obj))
        return
    seen.add(id(obj))
    if isinstance(obj, types.CodeType):
        _code(h, put, obj, seen, depth)
    elif isinstance(obj, types.FunctionType):
        put("function", _name(obj))
        if not _covered(obj.__module__):
            _function(h, put, obj, seen, depth)
    elif isinstance(obj, types.MethodType):
        put("method")
        _feed(h, obj.__func__, seen, depth + 1)
        _feed(h, type(obj.__self__), seen, depth + 1)
    elif isinstance(obj, functools.partial):
        put("partial")
        _feed(h, obj.func, seen, depth + 1)
        _feed(h, obj.args, seen, depth + 1)
        _feed(h, obj.keywords, seen, depth + 1)
    elif isinstance(obj, type):
        put("class", _name(obj))
        if not _covered(obj.__module__):
            for k, v in sorted(vars(obj).items()):
                if isinstance(v, (types.FunctionType, staticmethod, classmethod, property)) or isinstance(v, _LITERALS):
                    put("attr", k)
                    _feed(h, getattr(v, "__func__", getattr(v, "fget", v)), seen, depth + 1)
    elif isinstance(obj, types.ModuleType):
        put("module", obj.__name__)
    elif callable(obj) and not _covered(type(obj).__module__) and hasattr(type(obj), "__call__"):
        put("callable object")
        _feed(h, type(obj), seen, depth + 1)
    else:  # a library callable, an op overload, a dtype; or some object's state: its type only
        put("object", _name(obj) if hasattr(obj, "__qualname__") else _name(type(obj)), _named(obj))


def _named(obj) -> str:
    """The name of an op overload (`aten.gelu.default`), a dtype or a device; else nothing."""
    if isinstance(obj, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch.dtype, torch.device)):
        return str(obj)
    return ""


def _code(h, put, code: types.CodeType, seen: set, depth: int) -> None:
    put("code", code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags,
        code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars)
    h.update(code.co_code)
    for c in code.co_consts:
        _feed(h, c, seen, depth + 1)


def _globals_read(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _globals_read(c)
    return names


def _function(h, put, fn: types.FunctionType, seen: set, depth: int) -> None:
    _feed(h, fn.__code__, seen, depth + 1)
    _feed(h, fn.__defaults__, seen, depth + 1)
    _feed(h, fn.__kwdefaults__, seen, depth + 1)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        put("cell", name)
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            put("empty")
            continue
        _feed(h, value, seen, depth + 1)
    for name in sorted(_globals_read(fn.__code__)):
        if name in fn.__globals__:
            put("global", name)
            _feed(h, fn.__globals__[name], seen, depth + 1)
