"""Names in a `trainer:` YAML -> Python classes, and what a YAML may name.

`resolve(kind, name, base_dir=None)` finds what the name a YAML gives for a model
(`model.name`), a data processor (`data_processor:`), a callback or a logger (the
`{ClassName: kwargs}` items of `callbacks:` / `loggers:`) stands for, calling nothing.
`kind` is one of `KINDS`. The name is tried, in this order, as:

1. a name registered for that kind with `@register_model(name)` /
   `@register_data_processor(name)` (or `register(kind, name)`): the registered object,
   a class or a factory;
2. for callbacks and loggers: a class of `cstorch.trainer.callbacks` /
   `cstorch.trainer.loggers`;
3. a dotted import path, `package.module.Class` or `package.module:Class`: the module
   is imported, the object must be a class. A module of the Python standard library is
   refused without importing it (no model, data processor, callback or logger class
   lives there; this also keeps `os.system`, `subprocess.Popen`, `builtins.eval` out);
4. a Python file and a class in it, `path/to/file.py:Class`; a relative path is taken
   from `base_dir` (the YAML file's folder; the working directory when None). The file
   is imported once per process under a module name derived from its resolved path
   (`cstorch_user_<hash>_<stem>`), so naming it twice gives the same class object. A
   file of the Python installation (the standard library, site-packages) is refused
   without loading it: name installed code by its dotted path.

5. with the real Model Zoo installed (`real_modelzoo`), a plain name it knows: a model of
   its `registry.yaml`, a data processor that registry lists, a class of its trainer's
   callbacks or loggers;
6. for models and data processors, a plain name (no dot, no colon) that a Python file
   next to the YAML declares (`declared_in_folder`): the files of `base_dir` (and of its
   parent when `base_dir` is a folder named `configs`, the Model Zoo layout
   `<model>/configs/params.yaml` beside `<model>/model.py`) are *read*, not run
   (`ast`); a file declares a model name in a config class's
   `name: Literal["<name>", ...]` or a `register_model("<name>")` call, a data
   processor name as a top-level class `<name>`, a config's
   `data_processor: Literal["<name>", ...]` or a `register_data_processor("<name>")` /
   `register_datasetprocessor("<name>")` call. Only the declaring files are imported
   (as `path/to/file.py:Class` would), then the name stands for: what the import
   registered under it; else, for a model, the class of those files whose constructor
   takes a config (`config_classes.config_class`) whose `name` accepts it, the one whose
   config class derives from every other candidate's (an MLP's config and the config of
   the model wrapping it: the wrapper); for a data processor, the class `<name>`, else
   the class whose config's `data_processor` accepts it. Two unrelated candidates are
   an error that names them (name one as path/to/file.py:Class).

An unknown name is a ValueError that names the kind, the name, what was tried and the
closest registered names.

`check_kind(kind, name, obj)` is what a YAML may name at a place of `kind`: a name
registered for that kind (the registering code vouches for the object), or a class of
the kind (`KIND_CLASSES`): a model is a `torch.nn.Module` subclass, a data processor a
class with a `create_dataloader()` method (Model Zoo's data processors), a callback a
`Callback` subclass, a logger a `Logger` subclass. The YAML specs (`specs/`) call both,
so that a name is checked before anything it names is called or instantiated.

Differences from the real system:
    A name that is not registered is looked up in the Python files of the YAML's
    folder (and of its parent when that folder is `configs/`), which are read with `ast`
    before only the declaring files are imported; what is found must still be a class of
    its kind. The Model Zoo's own models and its `registry.yaml` are not included.
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import os
import site
import sys
import sysconfig
from typing import Callable, NamedTuple, Optional

import torch

from . import callbacks, loggers, real_modelzoo
from .callbacks.base import Callback
from .checks import suggest
from .config_classes import config_class, literal_values
from .loggers import Logger


class KindClass(NamedTuple):
    """What a class named (not registered) at a place of some kind must be."""

    #: `accepts(cls)` for a class `cls`
    accepts: Callable[[type], bool]
    #: the requirement in words, for the error
    what: str


#: the kinds of names a YAML gives, and what an unregistered name must be of each
KIND_CLASSES = {
    "model": KindClass(lambda c: issubclass(c, torch.nn.Module), "a subclass of torch.nn.Module"),
    "data_processor": KindClass(lambda c: callable(getattr(c, "create_dataloader", None)),
                                "a class with a create_dataloader() method"),
    "callback": KindClass(lambda c: issubclass(c, (Callback, *real_modelzoo.loaded_bases("callback"))),
                          "a subclass of cstorch.trainer.Callback (or of the real Model Zoo's Callback)"),
    "logger": KindClass(lambda c: issubclass(c, (Logger, *real_modelzoo.loaded_bases("logger"))),
                        "a subclass of cstorch.trainer.loggers.Logger (or of the real Model Zoo's Logger)"),
}
KINDS = tuple(KIND_CLASSES)
#: where `resolve` looks for callbacks and loggers besides the registry
_BUILTIN_MODULES = {"callback": (callbacks, loggers), "logger": (loggers, callbacks)}
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
    """Decorator: `@register_model("my_model")` makes `model: {name: my_model, ...}` work.

    Args:
        name: the name the YAML uses; None: the decorated class's or function's name.
    """
    return register("model", name)


def register_data_processor(name: Optional[str] = None) -> Callable:
    """Decorator: `@register_data_processor("MyProcessor")` makes `data_processor: MyProcessor` work.

    Args:
        name: the name the YAML uses; None: the decorated class's or function's name.
    """
    return register("data_processor", name)


def registered(kind: str) -> dict[str, object]:
    """A copy of the names registered for `kind`."""
    _check_kind(kind)
    return dict(_REGISTRY[kind])


def unregister(kind: str, name: str):
    """Remove `name` from the names of `kind`; returns what was registered (or None)."""
    _check_kind(kind)
    return _REGISTRY[kind].pop(name, None)


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
    for module in _BUILTIN_MODULES.get(kind, ()):
        tried.append(f"classes of {module.__name__}")
        obj = getattr(module, name, None)
        if isinstance(obj, type):
            return obj
        builtin_names += [k for k, v in vars(module).items() if isinstance(v, type) and not k.startswith("_")]

    if "." not in name and ":" not in name and "/" not in name and real_modelzoo.installed():
        tried.append(f"the real Model Zoo's {label}s")
        found = real_modelzoo.lookup(kind, name)
        if found is not None:
            return found

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
    if kind in _DECLARATIONS and base_dir is not None and "/" not in name and os.sep not in name:
        folders = scan_folders(base_dir)
        tried.append(f"classes declared in the Python files of {' and '.join(map(repr, folders))}")
        found = _from_folder(kind, name, folders)
        if found is not None:
            return found

    hint = suggest(name, list(_REGISTRY[kind]) + builtin_names)
    if kind in _BUILTIN_MODULES:
        how = (f"Name a class of {_BUILTIN_MODULES[kind][0].__name__}, or your own as package.module.Class or "
               f"path/to/file.py:Class.")
    else:
        how = (f"Register it with @cstorch.trainer.registry.register_{kind}({name!r}) in a module that is imported, "
               f"or name it as package.module.Class or path/to/file.py:Class.")
    raise ValueError(f"Unknown {label} {name!r}: tried {'; '.join(tried)}.{hint} {how}")


def _describe(obj) -> str:
    """What `obj` is, in words: "a builtin_function_or_method", "a class of package.module",
    "a class of file path/to/file.py"."""
    if not isinstance(obj, type):
        return f"a {type(obj).__name__}"
    module = sys.modules.get(obj.__module__)
    if obj.__module__.startswith("cstorch_user_") and getattr(module, "__file__", None):
        return f"a class of file {module.__file__}"
    return f"a class of {obj.__module__}"


def check_kind(kind: str, name: str, obj) -> None:
    """ValueError unless a YAML may name `obj` (what `resolve(kind, name)` found) at a
    place of `kind`: registered under `name` for `kind`, or a class of the kind
    (`KIND_CLASSES`). Calls nothing."""
    _check_kind(kind)
    if _REGISTRY[kind].get(str(name).strip()) is obj:
        return
    expected = KIND_CLASSES[kind]
    if not (isinstance(obj, type) and expected.accepts(obj)):
        label = kind.replace("_", " ")
        raise ValueError(f"{label} {name!r} is not a {label} class: a {label} that is not registered must be "
                         f"{expected.what}, and {name} is {_describe(obj)}. Nothing was called.")


def _get_attr(kind: str, name: str, module, attr: str, where: str):
    obj = module
    for part in attr.split("."):
        if not part or not hasattr(obj, part):
            names = [k for k in vars(module) if not k.startswith("_")]
            raise ValueError(f"Unknown {kind.replace('_', ' ')} {name!r}: {where} has no attribute {attr!r}."
                             f"{suggest(attr, names)}")
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise ValueError(f"{kind.replace('_', ' ')} {name!r}: {attr!r} in {where} is not a class (it is "
                         f"{_describe(obj)}); a {kind.replace('_', ' ')} named by import path or file must be a "
                         f"class. Nothing was called.")
    return obj


def _from_module(kind: str, name: str, module_name: str, attr: str):
    top = module_name.split(".")[0]
    if top in sys.stdlib_module_names:
        raise ValueError(f"{kind.replace('_', ' ')} {name!r}: {top!r} is a module of the Python standard library, "
                         f"which holds no {kind.replace('_', ' ')} class; name your own class (a registered name, "
                         f"package.module.Class or path/to/file.py:Class). Nothing was imported or called.")
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


def _installation_dirs() -> list[str]:
    """The folders of the Python installation: the standard library and site-packages."""
    paths = sysconfig.get_paths()
    dirs = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k)]
    dirs += site.getsitepackages() + [site.getusersitepackages()]
    return sorted({os.path.realpath(d) for d in dirs})


def _from_file(kind: str, name: str, file_part: str, attr: str, base_dir: Optional[str]):
    path = os.path.expanduser(file_part)
    if not os.path.isabs(path):
        path = os.path.join(base_dir if base_dir is not None else os.getcwd(), path)
    if not os.path.isfile(path):
        raise ValueError(f"Unknown {kind.replace('_', ' ')} {name!r}: the file {path!r} does not exist "
                         f"(a relative path is taken from {'the YAML file' if base_dir else 'the working'} "
                         f"directory {os.path.abspath(base_dir or os.getcwd())!r}).")
    real = os.path.realpath(path)
    inside = [d for d in _installation_dirs() if os.path.commonpath([real, d]) == d]
    if inside:
        raise ValueError(f"{kind.replace('_', ' ')} {name!r}: {path!r} is a file of the Python installation "
                         f"({inside[0]}); name installed code by its import path (package.module.Class), your own "
                         f"by file. Nothing was loaded or called.")
    if not attr:
        raise ValueError(f"{kind.replace('_', ' ')} {name!r}: name the class after the colon, "
                         f"e.g. {file_part}:MyClass.")
    return _get_attr(kind, name, load_file(path), attr, f"file {path!r}")


# ======================================================================================
# names declared by the Python files next to the YAML (rule 5 of the module doc)
# ======================================================================================
#: what declares a name of each kind: (call names whose first argument registers it,
#: the config field whose Literal lists it, whether a top-level class of that name does)
_DECLARATIONS = {
    "model": (("register_model",), "name", False),
    "data_processor": (("register_data_processor", "register_datasetprocessor"), "data_processor", True),
}


def scan_folders(base_dir: str) -> list[str]:
    """The folders whose Python files may declare a YAML's names: `base_dir`, and its
    parent when `base_dir` is named `configs`."""
    base = os.path.abspath(base_dir)
    return [base, os.path.dirname(base)] if os.path.basename(base) == "configs" else [base]


def _strings(node) -> list[str]:
    """The string constants of `node`: "x", ["x", "y"], ("x", "y")."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _declares(tree: ast.Module, kind: str, name: str) -> bool:
    """Whether the parsed file declares `name` for `kind` (module doc, rule 5)."""
    calls, field, by_class_name = _DECLARATIONS[kind]
    if by_class_name and any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in calls and name in _strings(node.args[0]):
                return True
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                        and stmt.target.id == field and isinstance(stmt.annotation, ast.Subscript)
                        and name in _strings(stmt.annotation.slice)):
                    return True
    return False


def declared_in_folder(kind: str, name: str, folders) -> list[str]:
    """The Python files of `folders` (not their subfolders, nor a folder of the Python
    installation) that declare `name` for `kind`, found by reading them (nothing is
    imported or run)."""
    files, installation = [], _installation_dirs()
    for folder in folders:
        real = os.path.realpath(folder)
        if not os.path.isdir(folder) or any(os.path.commonpath([real, d]) == d for d in installation):
            continue  # a folder of the Python installation is not the user's: never imported from here
        for entry in sorted(os.listdir(folder)):
            path = os.path.join(folder, entry)
            if not entry.endswith(".py") or not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), filename=path)
            except (SyntaxError, UnicodeDecodeError, OSError):
                continue  # not a file that can declare anything; naming it by path reports why
            if _declares(tree, kind, name):
                files.append(path)
    return files


def _config_accepts(cls, field: str, name: str) -> Optional[type]:
    config = config_class(cls)
    if config is not None and name in (literal_values(config, field) or ()):
        return config
    return None


def _from_folder(kind: str, name: str, folders):
    """What `name` stands for among the classes of the files of `folders` that declare
    it (None when no file does)."""
    files = declared_in_folder(kind, name, folders)
    if not files:
        return None
    modules = [load_file(path) for path in files]
    if name in _REGISTRY[kind]:
        return _REGISTRY[kind][name]
    _, field, by_class_name = _DECLARATIONS[kind]
    classes = [obj for module in modules for obj in vars(module).values()
               if isinstance(obj, type) and obj.__module__ == module.__name__]
    if by_class_name:
        named = [c for c in classes if c.__name__ == name]
        if named:
            return named[0]
    candidates = {c: cfg for c in classes if (cfg := _config_accepts(c, field, name)) is not None}
    # the class whose config derives from every other candidate's config
    best = [c for c, cfg in candidates.items() if all(issubclass(cfg, other) for other in candidates.values())]
    if len(best) == 1:
        return best[0]
    label = kind.replace("_", " ")
    if not candidates:
        raise ValueError(f"{label} {name!r}: {', '.join(files)} declare(s) it, but no class there takes a config "
                         f"whose `{field}` accepts {name!r} (and none registered it). Name the class as "
                         f"path/to/file.py:Class.")
    names = ", ".join(f"{c.__module__}.{c.__qualname__}" for c in candidates)
    raise ValueError(f"{label} {name!r} is ambiguous: several classes of {', '.join(files)} take a config that "
                     f"accepts it ({names}). Name the one to use as path/to/file.py:Class.")


__all__ = ["KINDS", "KIND_CLASSES", "register", "register_model", "register_data_processor", "registered", "unregister",
           "resolve", "check_kind", "load_file", "module_name_for", "scan_folders", "declared_in_folder"]
