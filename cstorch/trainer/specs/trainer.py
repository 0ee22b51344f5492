"""The spec of one trainer of a YAML (the value of `trainer:`, or an item of its list)::

    TrainerSpec
      init: InitSpec         device | backend (BackendSpec), model_dir (default "./model_dir"),
                             seed, model (ModelSpec), optimizer (OptimizerSpec), schedulers
                             (SchedulerSpec | LearningRateSpec items), precision, loop,
                             checkpoint, logging (OptionSpecs), callbacks (CallbackSpec
                             items), loggers (LoggerSpec items); sparsity and autorestart
                             are refused (not supported)
      fit: FitSpec           train_dataloader, val_dataloader (one or a list), ckpt_path
      validate: ValidateSpec val_dataloader, ckpt_path
      validate_all: ValidateAllSpec
                             val_dataloaders (one or a list), ckpt_paths (str, glob or list)

`TrainerSpec.parse(value, path, base_dir)` makes it, checking everything that needs no
backend and no model: unknown keys at every level, every class named and its arguments,
`device` and `backend` together, `model_dir` null, empty, a file (or under one) or a
folder this user cannot write (a relative one is taken from the working directory, as
the Trainer does), a seed
`torch.manual_seed` refuses, NaN or infinite optimizer / scheduler hyper-parameters and
negative learning rates (`specs/optim.py`), the train batch size not
divisible by `loop.grad_accum_steps`. `check_mode(mode)` adds what a run mode needs.
A `ckpt_path` / `ckpt_paths` the YAML leaves out is absent from the section's
`model_fields_set` (absent: autoload the latest checkpoint; null: none).
"""
from __future__ import annotations

import os
from typing import ClassVar, Optional, Union

from pydantic import Field

from ..checks import (DEVICES, ConfigError, check_dict, check_keys, device_name, is_int, model_dir_problem,
                      seed_problem, show)
from ..modes import RUN_MODES, check_mode, val_sources
from .backend import BackendSpec
from .base import At, Spec
from .classes import (CallbackSpec, CheckpointSpec, DataLoaderSpec, LoggerSpec, LoggingSpec, LoopSpec, ModelSpec,
                      PrecisionSpec)
from .optim import LearningRateSpec, OptimizerSpec, SchedulerSpec

DEFAULT_MODEL_DIR = "./model_dir"

#: one dataloader, or a list of them (a YAML list stays a tuple: the run method gets a list)
DataLoaders = Union[DataLoaderSpec, tuple[DataLoaderSpec, ...], None]


def _path_string(value, where: str, what: str) -> Optional[str]:
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise ConfigError(f"{where} must be {what}, got {show(value)}.")
    return None if value is None else os.fspath(value)


class InitSpec(Spec):
    """`trainer.init`: the Trainer's arguments (module doc)."""

    device: Optional[str] = None
    backend: Optional[BackendSpec] = None
    model_dir: str = DEFAULT_MODEL_DIR
    seed: Optional[int] = None
    model: ModelSpec
    optimizer: Optional[OptimizerSpec] = None
    schedulers: tuple[Union[SchedulerSpec, LearningRateSpec], ...] = ()
    precision: Optional[PrecisionSpec] = None
    loop: Optional[LoopSpec] = None
    checkpoint: Optional[CheckpointSpec] = None
    logging: Optional[LoggingSpec] = None
    callbacks: tuple[CallbackSpec, ...] = ()
    loggers: tuple[LoggerSpec, ...] = ()

    extra_yaml_keys: ClassVar[tuple[str, ...]] = ("sparsity", "autorestart")

    @property
    def device_type(self) -> Optional[str]:
        """`device` as the trainer uses it (upper case, XLA read as CSX)."""
        return None if self.device is None else device_name(self.device)

    @classmethod
    def from_yaml(cls, at: At) -> dict:
        p = at.path
        init = check_dict(at.value, p)
        check_keys(init, cls.yaml_keys(), p, "Trainer")
        at = At(p, init, at.base_dir, at.parent)
        fields = {}
        if init.get("device") is not None and init.get("backend") is not None:
            raise ConfigError(f"{p}.device and {p}.backend are mutually exclusive: give device "
                              f"({show(init['device'])}) for defaults, or backend: {{backend_type: ..., ...}} for "
                              f"settings, not both.")
        if init.get("device") is not None:
            dev = init["device"]
            if not isinstance(dev, str) or device_name(dev) not in DEVICES:
                raise ConfigError(f"{p}.device must be one of {', '.join(DEVICES)}, got {show(dev)}.")
            fields["device"] = dev
        if init.get("backend") is not None:
            fields["backend"] = BackendSpec.sub(at.child("backend"))
        if "model_dir" in init:
            md = init["model_dir"]
            if md is None or (isinstance(md, str) and not md.strip()):
                raise ConfigError(f"model_dir is a required argument: {p}.model_dir is {show(md)}; give a folder "
                                  f"(leave the key out for the default {DEFAULT_MODEL_DIR!r}).")
            fields["model_dir"] = _path_string(md, f"{p}.model_dir", "a path string")
        problem = model_dir_problem(fields.get("model_dir", DEFAULT_MODEL_DIR))
        if problem is not None:
            raise ConfigError(f"{p}.model_dir {problem}")
        if init.get("seed") is not None:
            if not is_int(init["seed"]):
                raise ConfigError(f"{p}.seed must be an integer, got {show(init['seed'])}.")
            problem = seed_problem(init["seed"])
            if problem is not None:
                raise ConfigError(f"{p}.seed {problem}")
            fields["seed"] = init["seed"]
        for key, what in (("sparsity", "sparsity (cstorch.sparse is not implemented)"),
                          ("autorestart", "autorestart (runs restart in-process only)")):
            if init.get(key) is not None:
                raise ConfigError(f"{p}.{key}: {what} is not supported; remove the key.")

        if init.get("model") is None:
            raise ConfigError(f"{p}.model is missing: give {{name: <model name>, **constructor arguments}}.")
        fields["model"] = ModelSpec.sub(at.child("model"))
        if init.get("optimizer") is not None:
            fields["optimizer"] = OptimizerSpec.sub(at.child("optimizer"))
        if init.get("schedulers") is not None:
            fields["schedulers"] = cls._schedulers(at.child("schedulers"), has_optimizer="optimizer" in fields)
        for key, spec in (("precision", PrecisionSpec), ("loop", LoopSpec), ("checkpoint", CheckpointSpec),
                          ("logging", LoggingSpec)):
            if init.get(key) is not None:
                fields[key] = spec.sub(at.child(key))
        for key, spec in (("callbacks", CallbackSpec), ("loggers", LoggerSpec)):
            items = at.child(key)
            if items.value is None:
                continue
            if not isinstance(items.value, list):
                raise ConfigError(f"{items.path} must be a list of {{ClassName: arguments}} items, got "
                                  f"{show(items.value)}.")
            fields[key] = tuple(spec.sub(items.item(i, item)) for i, item in enumerate(items.value))
        return fields

    @staticmethod
    def _schedulers(at: At, has_optimizer: bool) -> tuple:
        if not has_optimizer:
            raise ConfigError(f"{at.path} is given without an optimizer to schedule; add the optimizer section.")
        if not isinstance(at.value, (list, dict)):
            raise ConfigError(f"{at.path} must be a list of {{SchedulerClass: arguments}} items, got {show(at.value)}.")
        items = at.value if isinstance(at.value, list) else [at.value]
        out = []
        for i, item in enumerate(items):
            item_at = at.item(i, item) if isinstance(at.value, list) else at
            if isinstance(item, dict) and set(item) == {"learning_rate"}:
                out.append(LearningRateSpec.sub(At(f"{item_at.path}.learning_rate", item["learning_rate"],
                                                   at.base_dir)))
            else:
                out.append(SchedulerSpec.sub(item_at))
        return tuple(out)


def _dataloaders(section: At, key: str, one_only: bool = False) -> dict:
    """{key: spec(s)} of the dataloader(s) under `key` of a section ({} when absent)."""
    at = section.child(key)
    if at.value is None:
        return {}
    if isinstance(at.value, list):
        if one_only:
            raise ConfigError(f"{at.path} must be one dataloader mapping, not a list.")
        return {key: tuple(DataLoaderSpec.sub(at.item(i, v)) for i, v in enumerate(at.value))}
    return {key: DataLoaderSpec.sub(at)}


class _SectionSpec(Spec):
    """A run method's section (`fit`, `validate`, `validate_all`): its keyword arguments."""

    @classmethod
    def from_yaml(cls, at: At) -> dict:
        section = check_dict(at.value, at.path)
        check_keys(section, cls.yaml_keys(), at.path)
        return cls._read(At(at.path, section, at.base_dir, at.parent, at.context))

    @classmethod
    def _read(cls, at: At) -> dict:
        """The field values of the checked section mapping `at.value`."""
        raise NotImplementedError


def _ckpt_path(section: At) -> dict:
    """{"ckpt_path": path or None} when the section gives the key, else {} (autoload)."""
    if "ckpt_path" not in section.value:
        return {}
    return {"ckpt_path": _path_string(section.value["ckpt_path"], f"{section.path}.ckpt_path",
                                      "a path (or null for no checkpoint)")}


class FitSpec(_SectionSpec):
    """`trainer.fit`: the arguments of `Trainer.fit`."""

    train_dataloader: Optional[DataLoaderSpec] = None
    val_dataloader: DataLoaders = None
    ckpt_path: Optional[str] = None

    @classmethod
    def _read(cls, at: At) -> dict:
        return {**_dataloaders(at, "train_dataloader", one_only=True), **_dataloaders(at, "val_dataloader"),
                **_ckpt_path(at)}


class ValidateSpec(_SectionSpec):
    """`trainer.validate`: the arguments of `Trainer.validate`."""

    val_dataloader: DataLoaders = None
    ckpt_path: Optional[str] = None

    @classmethod
    def _read(cls, at: At) -> dict:
        return {**_dataloaders(at, "val_dataloader"), **_ckpt_path(at)}


class ValidateAllSpec(_SectionSpec):
    """`trainer.validate_all`: the arguments of `Trainer.validate_all`."""

    val_dataloaders: DataLoaders = None
    ckpt_paths: Union[str, list[str], None] = None

    @classmethod
    def _read(cls, at: At) -> dict:
        fields = _dataloaders(at, "val_dataloaders")
        if "ckpt_paths" in at.value:
            paths = at.value["ckpt_paths"]
            if paths is not None and not isinstance(paths, str) and not (
                    isinstance(paths, list) and all(isinstance(x, str) for x in paths)):
                raise ConfigError(f"{at.path}.ckpt_paths must be a path, a glob or a list of paths, got {show(paths)}.")
            fields["ckpt_paths"] = paths
        return fields


class TrainerSpec(Spec):
    """One trainer (module doc)."""

    init: InitSpec
    fit: FitSpec
    validate_: ValidateSpec = Field(alias="validate")
    validate_all: ValidateAllSpec

    @classmethod
    def from_yaml(cls, at: At) -> dict:
        path = at.path
        spec = check_dict(at.value, path, allow_none=False)
        check_keys(spec, cls.yaml_keys(), path)
        if spec.get("init") is None:
            raise ConfigError(f"{path}.init is missing; it holds the Trainer's arguments (model, optimizer, "
                              f"model_dir...).")
        at = At(path, spec, at.base_dir, at.parent)
        init = InitSpec.sub(at.child("init"))
        # the dataloaders' config classes see the model's arguments in post_init's context
        at = At(path, spec, at.base_dir, at.parent, {"model": init.model.arguments_for_context()})
        sections = {"fit": FitSpec.sub(at.child("fit")), "validate": ValidateSpec.sub(at.child("validate")),
                    "validate_all": ValidateAllSpec.sub(at.child("validate_all"))}
        train = sections["fit"].train_dataloader
        if train is not None and train.batch_size is not None and init.loop is not None:
            bs, accum = train.batch_size, init.loop.grad_accum_steps
            if is_int(accum) and accum > 0 and bs % accum:
                raise ConfigError(
                    f"{train.path}.batch_size ({bs}) is not divisible by {init.loop.path}.grad_accum_steps "
                    f"({accum}): every batch is split into grad_accum_steps equal micro-batches. Pick a batch size "
                    f"that is a multiple of {accum}, or another grad_accum_steps.")
        return {"init": init, **sections}

    def section(self, method: str) -> Union[FitSpec, ValidateSpec, ValidateAllSpec]:
        """The section of the Trainer method `method` (fit, validate, validate_all)."""
        return {"fit": self.fit, "validate": self.validate_, "validate_all": self.validate_all}[method]

    def val_dataloaders(self, mode: str) -> Optional[tuple[DataLoaders, str]]:
        """(the val dataloader spec(s) `mode` runs on, "section.key" they came from), with
        the fallbacks of `modes.val_sources`; None when there are none."""
        for section, key in val_sources(mode):
            value = getattr(self.section(section), key)
            if value:
                return value, f"{section}.{key}"
        return None

    def check_mode(self, mode: str) -> None:
        """What run mode `mode` needs beyond the mode-independent checks of parsing: the
        train dataloader and optimizer when it trains, val dataloader(s) when it cannot run
        without, and a loop it can build."""
        check_mode(mode)
        run_mode, p = RUN_MODES[mode], self.init.path
        if run_mode.trains:
            if self.fit.train_dataloader is None:
                raise ConfigError(f"mode {mode!r} needs {self.path}.fit.train_dataloader.")
            if self.init.optimizer is None:
                raise ConfigError(f"mode {mode!r} needs {p}.optimizer (e.g. {{AdamW: {{lr: 0.001}}}}).")
        if run_mode.val_required and self.val_dataloaders(mode) is None:
            first, *rest = (f"{self.path}.{section}.{key}" for section, key in val_sources(mode))
            alternatives = f" (or {' or '.join(rest)})" if rest else ""
            raise ConfigError(f"mode {mode!r} needs {first}{alternatives}.")
        if not run_mode.trains:
            LoopSpec.validation_loop(self.init.loop, f"{p}.loop")
        elif self.init.loop is not None:  # absent: the Trainer's default TrainingLoop(num_epochs=1)
            self.init.loop.build()


__all__ = ["TrainerSpec", "InitSpec", "FitSpec", "ValidateSpec", "ValidateAllSpec", "DataLoaders",
           "DEFAULT_MODEL_DIR"]
