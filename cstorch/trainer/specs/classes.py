"""Specs of the classes a trainer YAML names, with the arguments they are called with.

    ModelSpec         init.model: {name: <name>, **kwargs}
    DataLoaderSpec    {data_processor: <name>, **kwargs} (fit.train_dataloader, ...)
    CallbackSpec      an item of init.callbacks: {<name>: kwargs} or "<name>"
    LoggerSpec        an item of init.loggers: the same
    PrecisionSpec, LoopSpec, CheckpointSpec, LoggingSpec
                      init.precision / loop / checkpoint / logging: the arguments of the
                      Trainer's own MixedPrecision, TrainingLoop, Checkpoint, Logging

A name resolves with `registry.resolve` and must pass `registry.check_kind` for its
place (a registered name, or a class of the kind: an `nn.Module` subclass for a model,
a class with `create_dataloader()` for a data processor, a `Callback` / `Logger`
subclass) before anything else happens; the arguments are then checked against the
class's signature (unknown keys name the closest valid one, missing required ones are
listed). Nothing is called or instantiated while parsing; `build()` does that later.

Where a typed argument schema comes in (Model Zoo's `ModelConfig` / `DataConfig`
pydantic classes): `ClassSpec.check_arguments` is the one place the arguments of a
named class are checked, so a class that declares such a schema can have its `kwargs`
validated by it there instead of by its signature.
"""
from __future__ import annotations

import copy
import functools
from typing import Any, Callable, ClassVar, Optional

import cstorch

from .. import registry
from ..callbacks import Checkpoint, CoreCallback, Logger, Logging, MixedPrecision, TrainingLoop, ValidationLoop
from ..checks import ConfigError, check_dict, check_kwargs, is_int, try_build
from .base import At, Spec

#: the init section that configures each core callback (the error for one given as a user callback)
_CORE_SECTIONS = {"TrainingLoop": "loop", "ValidationLoop": "loop", "Checkpoint": "checkpoint",
                  "MixedPrecision": "precision", "Logging": "logging"}


def resolve(kind: str, name, base_dir: Optional[str], where: str):
    """`registry.resolve(kind, name, base_dir)`, a ConfigError naming `where` when it fails."""
    try:
        return registry.resolve(kind, name, base_dir)
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None


def check_kind(kind: str, name, obj, where: str) -> None:
    """`registry.check_kind(kind, name, obj)`, a ConfigError naming `where` when it fails."""
    try:
        registry.check_kind(kind, name, obj)
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None


class ClassSpec(Spec):
    """A class (or registered factory) a YAML names and the keyword arguments it is
    called with."""

    #: the name as the YAML gives it
    name: str
    #: what the name stands for: a class of the place's kind, or a registered object
    cls: Callable[..., Any]
    #: keyword arguments, checked against `cls` (`check_arguments`)
    kwargs: dict[str, Any] = {}

    #: the registry kind of the names this spec reads (`registry.KINDS`)
    kind: ClassVar[str] = ""

    @classmethod
    def named_by(cls, at: At, key: str, what: str) -> tuple[Any, Any, dict]:
        """(name, what it stands for, the other keys) of a mapping `at.value` naming a
        class of `cls.kind` under `key`: resolved and checked for its kind, nothing called."""
        spec = check_dict(at.value, at.path, allow_none=False)
        if key not in spec:
            raise ConfigError(f"{at.path}.{key} is missing: {what} (a registered name, package.module.Class or "
                              f"path/to/file.py:Class).")
        name, where = spec[key], f"{at.path}.{key}"
        target = resolve(cls.kind, name, at.base_dir, where)
        check_kind(cls.kind, name, target, where)
        return name, target, {k: v for k, v in spec.items() if k != key}

    @classmethod
    def check_arguments(cls, target, kwargs: dict, where: str) -> None:
        """The one check of the arguments of a named class: its signature takes them."""
        check_kwargs(target, kwargs, where)

    def build(self):
        """`cls(**kwargs)` (a deep copy of them), a ConfigError naming the key path when
        it refuses them."""
        return try_build(self.cls, copy.deepcopy(self.kwargs), self.path)


def _call_with_copy(fn, kwargs):
    return fn(**copy.deepcopy(kwargs))


class ModelSpec(ClassSpec):
    """`model: {name: <registered name | package.module.Class | path/to/file.py:Class>, **kwargs}`."""

    kind: ClassVar[str] = "model"

    @classmethod
    def from_yaml(cls, at: At) -> dict:
        name, target, kwargs = cls.named_by(at, "name", "name the model")
        cls.check_arguments(target, kwargs, at.path)
        return {"name": name, "cls": target, "kwargs": kwargs}

    def factory(self) -> Callable[[], Any]:
        """A zero-argument factory of the model: each call builds `cls` with a fresh copy
        of the arguments (the Trainer calls it once its backend exists)."""
        return functools.partial(_call_with_copy, self.cls, self.kwargs)


class DataLoaderSpec(ClassSpec):
    """`{data_processor: <name>, **kwargs}`: the processor's `create_dataloader()` (or,
    for a registered processor, the processor itself when iterable) is the loader."""

    #: the processor's batch_size argument, when given (a positive integer)
    batch_size: Optional[int] = None

    kind: ClassVar[str] = "data_processor"

    @classmethod
    def from_yaml(cls, at: At) -> dict:
        name, target, kwargs = cls.named_by(at, "data_processor", "name the data processor class")
        if "batch_size" in kwargs and (not is_int(kwargs["batch_size"]) or kwargs["batch_size"] <= 0):
            raise ConfigError(f"{at.path}.batch_size must be a positive integer, got {kwargs['batch_size']!r}.")
        cls.check_arguments(target, kwargs, at.path)
        return {"name": name, "cls": target, "kwargs": kwargs, "batch_size": kwargs.get("batch_size")}

    def build(self) -> cstorch.utils.data.DataLoader:
        """The processor, built, as a `cstorch.utils.data.DataLoader`."""
        processor = super().build()
        if callable(getattr(processor, "create_dataloader", None)):
            return cstorch.utils.data.DataLoader(processor.create_dataloader)
        if hasattr(processor, "__iter__"):
            return cstorch.utils.data.DataLoader(lambda: processor)
        raise ConfigError(f"{self.path}: data processor {self.name!r} ({type(processor).__name__}) has no "
                          f"create_dataloader() and is not iterable; give it one of the two.")


def _named_item(at: At) -> tuple[str, dict, str]:
    """(name, kwargs, key path of the kwargs) of a list item `{Name: kwargs}` or `"Name"`."""
    if isinstance(at.value, str):
        return at.value, {}, at.path
    if not isinstance(at.value, dict) or len(at.value) != 1:
        raise ConfigError(f"{at.path} must be a mapping with exactly one key, the class name, holding its "
                          f"arguments (e.g. {{ClassName: {{arg: value}}}}); got {at.value!r}.")
    (name, kwargs), = at.value.items()
    return str(name), check_dict(kwargs, f"{at.path}.{name}"), f"{at.path}.{name}"


class CallbackSpec(ClassSpec):
    """An item of `init.callbacks`: `{ClassName: kwargs}` or `"ClassName"` (a class of
    `cstorch.trainer.callbacks` / `.loggers`, a registered name, a dotted path or a file)."""

    kind: ClassVar[str] = "callback"

    @classmethod
    def check_place(cls, target, name: str, where: str, section: str) -> None:
        """Refuse a core callback (the Trainer builds those from their own init section)."""
        if isinstance(target, type) and issubclass(target, CoreCallback):
            key = _CORE_SECTIONS.get(target.__name__)
            raise ConfigError(f"{where}: {name} is a core callback, not a user callback; configure it under "
                              f"{section}.{key or '<its own section>'} instead.")

    @classmethod
    def from_yaml(cls, at: At) -> dict:
        name, kwargs, where = _named_item(at)
        target = resolve(cls.kind, name, at.base_dir, where)
        cls.check_place(target, name, where, at.parent)
        check_kind(cls.kind, name, target, where)
        cls.check_arguments(target, kwargs, where)
        return {"path": where, "name": name, "cls": target, "kwargs": kwargs}


class LoggerSpec(CallbackSpec):
    """An item of `init.loggers`: like a callback item, of a `Logger` class."""

    kind: ClassVar[str] = "logger"

    @classmethod
    def check_place(cls, target, name: str, where: str, section: str) -> None:
        if isinstance(target, type) and not issubclass(target, Logger):
            raise ConfigError(f"{where}: {name} is not a Logger (TensorBoardLogger, CSVLogger, ProgressLogger or a "
                              f"subclass of cstorch.trainer.loggers.Logger); user callbacks go under "
                              f"{section}.callbacks.")


class OptionSpec(ClassSpec):
    """The arguments of one of the Trainer's own callbacks (an init section)."""

    #: the core callback the section configures
    option_class: ClassVar[type]

    @classmethod
    def from_yaml(cls, at: At) -> dict:
        kwargs = check_dict(at.value, at.path)
        cls.check_arguments(cls.option_class, kwargs, at.path)
        return {"name": cls.option_class.__name__, "cls": cls.option_class, "kwargs": kwargs}


class PrecisionSpec(OptionSpec):
    """`init.precision`: MixedPrecision's arguments."""

    option_class: ClassVar[type] = MixedPrecision


class CheckpointSpec(OptionSpec):
    """`init.checkpoint`: Checkpoint's arguments."""

    option_class: ClassVar[type] = Checkpoint


class LoggingSpec(OptionSpec):
    """`init.logging`: Logging's arguments."""

    option_class: ClassVar[type] = Logging


class LoopSpec(OptionSpec):
    """`init.loop`: TrainingLoop's arguments; the eval modes use only `eval_steps`."""

    option_class: ClassVar[type] = TrainingLoop

    @property
    def grad_accum_steps(self):
        return self.kwargs.get("grad_accum_steps", 1)

    @staticmethod
    def validation_loop(loop: Optional["LoopSpec"], path: str) -> ValidationLoop:
        """`ValidationLoop(eval_steps=loop.eval_steps)` (`loop` None: no eval_steps);
        `path` is the key path of the loop section, for the error."""
        eval_steps = loop.kwargs.get("eval_steps") if loop is not None else None
        return try_build(ValidationLoop, {"eval_steps": eval_steps}, path)


__all__ = ["ClassSpec", "ModelSpec", "DataLoaderSpec", "CallbackSpec", "LoggerSpec", "OptionSpec", "PrecisionSpec",
           "CheckpointSpec", "LoggingSpec", "LoopSpec", "resolve", "check_kind"]
