"""Names in a `trainer:` YAML -> Python classes.

`resolve(kind, name, base_dir=None)` turns the name a YAML gives for a model
(`model.name`), a data processor (`data_processor:`), a callback or a logger (the
`{ClassName: kwargs}` items of `callbacks:` / `loggers:`) into the object to call.
`kind` is one of `KINDS`. The name is tried, in this order, as:

1. a name registered for that kind with `@register_model(name)` /
   `@register_data_processor(name)` (or `register(kind, name)`);
2. for callbacks and loggers: a class of `cstorch.trainer.callbacks` /
   `cstorch.trainer.loggers`;
3. a dotted import path, `package.module.Class` or `package.module:Class`;
4. a Python file and a class in it, `path/to/file.py:Class`; a relative path is taken
   from `base_dir` (the YAML file's folder; the working directory when None). The file
   is imported once per process under a module name derived from its resolved path
   (`cstorch_user_<hash>_<stem>`), so naming it twice gives the same class object.

An unknown name is a ValueError that names the kind, the name, what was tried and the
closest registered names.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from typing import Callable, Optional

from .checks import suggest

#: the kinds of names a YAML gives, and where `resolve` looks for each besides the registry
KINDS = ("model", "data_processor", "callback", "logger")
_BUILTIN_MODULES = {
    "callback": ("cstorch.trainer.callbacks", "cstorch.trainer.loggers"),
    "logger": ("cstorch.trainer.loggers", "cstorch.trainer.callbacks"),
}
_REGISTRY: dict[str, dict[str, object]] = {kind: {} for kind in KINDS}


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"Unknown registry kind {kind!r}; expected one of {list(KINDS)}.")


def register(kind: str, name: Optional[str] = None) -> Callable:
    """Decorator: make the decorated class (or factory) resolvable as `name` (default:
    its `__name__`) for `kind`. Registering a different object under a taken name is
    a ValueError; registering the same object again is a no-op."""
    _check_kind(kind)

    def decorator(obj):
        key = name or getattr(obj, "__name__", None)
        if not isinstance(key, str) or not key:
            raise ValueError(f"register({kind!r}): give a name for {obj!r}.")
        table = _REGISTRY[kind]
        old = table.get(key)
        if old is not None and old is not obj and _qualname(old) != _qualname(obj):
            raise ValueError(f"A {kind.replace('_', ' ')} named {key!r} is already registered ({_qualname(old)}); "
                             f"pick another name for {_qualname(obj)}.")
        table[key] = obj  # a re-imported module registers its new class object under the same name
        return obj

    return decorator


def register_model(name: Optional[str] = None) -> Callable:
    """Decorator: `@register_model("my_model")` makes `model: {name: my_model, ...}` work."""
    return register("model", name)


def register_data_processor(name: Optional[str] = None) -> Callable:
    """Decorator: `@register_data_processor("MyProcessor")` makes `data_processor: MyProcessor` work."""
    return register("data_processor", name)


def registered(kind: str) -> dict[str, object]:
    """A copy of the names registered for `kind`."""
    _check_kind(kind)
    return dict(_REGISTRY[kind])


def _qualname(obj) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def resolve(kind: str, name: str, base_dir: Optional[str] = None):
    """The class (or factory) that `name` stands for as a `kind` (see the module doc)."""
    _check_kind(kind)
    label = kind.replace("_", " ")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"A {label} name must be a non-empty string, got {name!r}.")
    name = name.strip()
    tried = [f"registered {label} names ({len(_REGISTRY[kind])} registered)"]
    if name in _REGISTRY[kind]:
        return _REGISTRY[kind][name]

    builtin_names: list[str] = []
    for module_name in _BUILTIN_MODULES.get(kind, ()):
        tried.append(f"classes of {module_name}")
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        obj = getattr(module, name, None)
        if isinstance(obj, type):
            return obj
        builtin_names += [k for k, v in vars(module).items() if isinstance(v, type) and not k.startswith("_")]

    file_part, sep, attr = name.rpartition(":")
    if sep and file_part.endswith(".py"):
        return _from_file(kind, name, file_part, attr, base_dir)
    if sep and file_part:
        return _from_module(kind, name, file_part, attr)
    if "." in name and "/" not in name and os.sep not in name:
        module_name, _, attr = name.rpartition(".")
        return _from_module(kind, name, module_name, attr)
    tried.append("a dotted import path (package.module.Class or package.module:Class)")
    tried.append("a file and class (path/to/file.py:Class)")

    hint = suggest(name, list(_REGISTRY[kind]) + builtin_names)
    if kind in _BUILTIN_MODULES:
        how = (f"Name a class of {_BUILTIN_MODULES[kind][0]}, or your own as package.module.Class or "
               f"path/to/file.py:Class.")
    else:
        how = (f"Register it with @cstorch.trainer.registry.register_{kind}({name!r}) in a module that is imported, "
               f"or name it as package.module.Class or path/to/file.py:Class.")
    raise ValueError(f"Unknown {label} {name!r}: tried {'; '.join(tried)}.{hint} {how}")


def _get_attr(kind: str, name: str, module, attr: str, where: str):
    obj = module
    for part in attr.split("."):
        if not part or not hasattr(obj, part):
            names = [k for k in vars(module) if not k.startswith("_")]
            raise ValueError(f"Unknown {kind.replace('_', ' ')} {name!r}: {where} has no attribute {attr!r}."
                             f"{suggest(attr, names)}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{kind.replace('_', ' ')} {name!r}: {attr!r} in {where} is not a class or callable "
                         f"(it is a {type(obj).__name__}).")
    return obj


def _from_module(kind: str, name: str, module_name: str, attr: str):
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and module_name.startswith(e.name):
            raise ValueError(f"Unknown {kind.replace('_', ' ')} {name!r}: no module named {module_name!r} to import "
                             f"(is the package installed or on PYTHONPATH?).") from None
        raise
    return _get_attr(kind, name, module, attr, f"module {module_name!r}")


def module_name_for(path: str) -> str:
    """The stable module name a file loaded by `resolve` gets (one per resolved path)."""
    real = os.path.realpath(path)
    digest = hashlib.sha1(real.encode()).hexdigest()[:12]
    stem = "".join(c if c.isalnum() else "_" for c in os.path.splitext(os.path.basename(real))[0])
    return f"cstorch_user_{digest}_{stem}"


def load_file(path: str):
    """Import the Python file `path` once per process and return the module."""
    real = os.path.realpath(path)
    module_name = module_name_for(real)
    module = sys.modules.get(module_name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(module_name, real)
    if spec is None or spec.loader is None:
        raise ValueError(f"Cannot import {path!r} as a Python module.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # before executing, for dataclasses / pickling / self-imports
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def _from_file(kind: str, name: str, file_part: str, attr: str, base_dir: Optional[str]):
    path = os.path.expanduser(file_part)
    if not os.path.isabs(path):
        path = os.path.join(base_dir if base_dir is not None else os.getcwd(), path)
    if not os.path.isfile(path):
        raise ValueError(f"Unknown {kind.replace('_', ' ')} {name!r}: the file {path!r} does not exist "
                         f"(a relative path is taken from {'the YAML file' if base_dir else 'the working'} "
                         f"directory {os.path.abspath(base_dir or os.getcwd())!r}).")
    if not attr:
        raise ValueError(f"{kind.replace('_', ' ')} {name!r}: name the class after the colon, "
                         f"e.g. {file_part}:MyClass.")
    return _get_attr(kind, name, load_file(path), attr, f"file {path!r}")


__all__ = ["KINDS", "register", "register_model", "register_data_processor", "registered", "resolve", "load_file",
           "module_name_for"]
