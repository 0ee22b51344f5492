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

A model or data processor whose constructor takes one config object (Model Zoo 2.x:
`def __init__(self, config: MNISTModelConfig)`, a `ModelConfig` / `DataConfig` pydantic
class; `config_classes.config_class`) has its section validated into that class instead
(`ClassSpec.arguments`): unknown keys, types, the config's validators and `post_init`,
each error naming its key path; the section's name goes in as the config's `name` /
`data_processor` when the config's `Literal` accepts it. The spec keeps the validated
config, and `build()` / `factory()` call `cls(<a deep copy of it>)`. A data processor's
config sees `{"model": <the model's arguments>}` as `post_init`'s context (the model's
config under `"config"` when the model takes one).
"""
from __future__ import annotations

import copy
import functools
from typing import Any, Callable, ClassVar, Optional

import cstorch

from .. import registry
from ..callbacks import Checkpoint, CoreCallback, Logger, Logging, MixedPrecision, TrainingLoop, ValidationLoop
from ..checks import ConfigError, check_dict, check_kwargs, is_int, show, try_build
from ..config_classes import config_class, config_section, validate_config
from .base import At, Spec

#: the init section that configures each core callback (the error for one given as a user callback)
_CORE_SECTIONS = {"TrainingLoop": "loop", "ValidationLoop": "loop", "Checkpoint": "checkpoint",
                  "MixedPrecision": "precision", "Logging": "logging"}


def resolve(kind: str, name, base_dir: Optional[str], where: str):
    """`registry.resolve(kind, name, base_dir)`, a ConfigError naming `where` when it fails."""
    if not isinstance(name, str) or not name.strip():  # before the registry: its message is unbounded
        raise ConfigError(f"{where}: A {kind.replace('_', ' ')} name must be a non-empty string, got {show(name)}.")
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
    #: the validated config object `cls` is built with, when its constructor takes one
    #: (module doc; None: `cls(**kwargs)`)
    config: Optional[Any] = None

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
        """The check of the arguments of a named class that takes keyword arguments: its
        signature takes them."""
        check_kwargs(target, kwargs, where)

    @classmethod
    def arguments(cls, name: str, key: str, target, kwargs: dict, at: At) -> dict:
        """The spec fields `name`, `cls`, `kwargs` and, when `target` takes a config,
        `config` (the section validated into it; `key`: the YAML key holding the name),
        else the signature check of `check_arguments`."""
        taken = config_class(target)
        if taken is None:
            cls.check_arguments(target, kwargs, at.path)
            return {"name": name, "cls": target, "kwargs": kwargs}
        config = validate_config(taken, config_section(taken, key, str(name), kwargs), at.path, at.context)
        return {"name": name, "cls": target, "kwargs": kwargs, "config": config}

    def arguments_for_context(self) -> dict:
        """The arguments the class is built with, as later configs' `post_init` context
        sees them: `{"config": <config>}`, or the keyword arguments."""
        return {"config": self.config} if self.config is not None else dict(self.kwargs)

    def build(self):
        """`cls(config)` or `cls(**kwargs)` (a deep copy of them), a ConfigError naming
        the key path when it refuses them."""
        return _build(self.cls, self.kwargs, self.config, self.path)


def _build(cls, kwargs: dict, config, path: str):
    """`cls(deepcopy(config))` when there is a config, else `cls(**deepcopy(kwargs))`;
    a TypeError / ValueError of the constructor is a ConfigError naming `path`."""
    if config is None:
        return try_build(cls, copy.deepcopy(kwargs), path)
    try:
        return cls(copy.deepcopy(config))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{path}: {e}") from None


class ModelSpec(ClassSpec):
    """`model: {name: <registered name | package.module.Class | path/to/file.py:Class>, **kwargs}`."""

    kind: ClassVar[str] = "model"

    @classmethod
    def from_yaml(cls, at: At) -> dict:
        name, target, kwargs = cls.named_by(at, "name", "name the model")
        return cls.arguments(name, "name", target, kwargs, at)

    def factory(self) -> Callable[[], Any]:
        """A zero-argument factory of the model: each call builds `cls` with a fresh copy
        of the arguments or config (the Trainer calls it once its backend exists)."""
        return functools.partial(_build, self.cls, self.kwargs, self.config, self.path)


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
            raise ConfigError(f"{at.path}.batch_size must be a positive integer, got {show(kwargs['batch_size'])}.")
        return {**cls.arguments(name, "data_processor", target, kwargs, at), "batch_size": kwargs.get("batch_size")}

    def build(self) -> cstorch.utils.data.DataLoader:
        """A `cstorch.utils.data.DataLoader` whose input function builds the processor
        and returns its `create_dataloader()` (or the processor itself, when iterable).
        So, as in the Model Zoo, the processor is made when the run first iterates the
        loader, once per data worker: after the Trainer set up the backend and the
        precision (`cstorch.use_cs()`, `cstorch.amp.get_floating_point_dtype()` answer
        for the run) and inside the worker (`cstorch.distributed.is_streamer()`)."""
        return cstorch.utils.data.DataLoader(functools.partial(_processor_loader, self))


def _processor_loader(spec: DataLoaderSpec):
    processor = ClassSpec.build(spec)
    if callable(getattr(processor, "create_dataloader", None)):
        return processor.create_dataloader()
    if hasattr(processor, "__iter__"):
        return processor
    raise ConfigError(f"{spec.path}: data processor {spec.name!r} ({type(processor).__name__}) has no "
                      f"create_dataloader() and is not iterable; give it one of the two.")


def _named_item(at: At) -> tuple[str, dict, str]:
    """(name, kwargs, key path of the kwargs) of a list item `{Name: kwargs}` or `"Name"`."""
    if isinstance(at.value, str):
        return at.value, {}, at.path
    if not isinstance(at.value, dict) or len(at.value) != 1:
        raise ConfigError(f"{at.path} must be a mapping with exactly one key, the class name, holding its "
                          f"arguments (e.g. {{ClassName: {{arg: value}}}}); got {show(at.value)}.")
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
