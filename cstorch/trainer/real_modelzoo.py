"""The real Cerebras Model Zoo, where it is installed beside cstorch: its names.

When a real Model Zoo is importable, `cerebras.modelzoo` is that package (see
`cerebras/modelzoo/__init__.py`), and the names a Model Zoo YAML gives resolve through
it, as its own trainer resolves them:

- a model name (`model.name: gpt3`) through its registry (`registry.yaml`:
  `cerebras.modelzoo.registry.registry.get_model_class`);
- a data processor name (`data_processor: GptHDF5DataProcessor`) among the data processors
  the registry lists for any model (`data_processor_paths`), by class name;
- a callback or logger name (`ComputeNorm`, `ScopedTrainFlags`, ...) as a class of
  `cerebras.modelzoo.trainer.callbacks` / `.loggers`.

The real package is imported only when one of these is asked for and it is installed;
nothing here imports it otherwise. Every import of it here (`_import`) first declares
torchvision's operators where torchvision's extension cannot load (`torchvision_ops`): the
real package may come first on `sys.path`, so cstorch's `cerebras/modelzoo/__init__.py`
does not always run.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Optional

from .torchvision_ops import declare_torchvision_ops

_PACKAGE = "cerebras.modelzoo"


def _import(name: str):
    """`importlib.import_module(name)` of a module of the real Model Zoo, torchvision's
    operators declared first (module docstring)."""
    declare_torchvision_ops()
    return importlib.import_module(name)


def installed() -> bool:
    """Whether `cerebras.modelzoo` is the real Model Zoo (it has a `models` package and a
    registry), not cstorch's own layer."""
    try:
        _import(_PACKAGE)
    except ImportError:
        return False
    return importlib.util.find_spec(_PACKAGE + ".registry.registry") is not None \
        and importlib.util.find_spec(_PACKAGE + ".models") is not None


def _registry():
    return _import(_PACKAGE + ".registry").registry


def model_class(name: str) -> Optional[type]:
    """The model class the real registry has for `name`, or None."""
    registry = _registry()
    if name not in registry.get_model_names():
        return None
    return registry.get_model_class(name)


def data_processor_class(name: str) -> Optional[type]:
    """The data processor class named `name` among those the real registry lists, or None."""
    registry = _registry()
    for model in registry.get_model_names():
        for path in registry.get_model(model).data_processor_paths:
            module_name, _, class_name = str(path).rpartition(".")
            if class_name == name:
                return getattr(_import(module_name), class_name)
    return None


def trainer_class(kind: str, name: str) -> Optional[type]:
    """The class `name` of the real trainer's callbacks (kind "callback") or loggers
    (kind "logger") package, or None."""
    module = _import(_PACKAGE + (".trainer.callbacks" if kind == "callback" else ".trainer.loggers"))
    obj = getattr(module, name, None)
    return obj if isinstance(obj, type) else None


def lookup(kind: str, name: str) -> Optional[type]:
    """What `name` stands for as a `kind` ("model", "data_processor", "callback",
    "logger") in the real Model Zoo, or None (also when it is not installed)."""
    if not installed():
        return None
    if kind == "model":
        return model_class(name)
    if kind == "data_processor":
        return data_processor_class(name)
    return trainer_class(kind, name)


def loaded_bases(kind: str) -> tuple:
    """`(Callback,)` / `(Logger,)` of the real trainer for kind "callback" / "logger" when
    the real Model Zoo's trainer is loaded, else `()`. Reads `sys.modules` only: a class
    of the real trainer cannot exist before its module is loaded."""
    module = sys.modules.get(_PACKAGE + (".trainer.callbacks" if kind == "callback" else ".trainer.loggers"))
    base = getattr(module, "Callback" if kind == "callback" else "Logger", None)
    return (base,) if isinstance(base, type) else ()


def global_callbacks() -> list:
    """The callbacks the real trainer registered globally (its `register_global_callback`:
    the summaries behind `summarize_scalar`), when it is loaded, in registration order."""
    module = sys.modules.get(_PACKAGE + ".trainer.callbacks.callback")
    registry = getattr(module, "GLOBAL_CALLBACK_REGISTRY", None)
    return list(registry.values()) if registry is not None else []
