"""Trainer specs -> `Trainer` objects: the building half of the `trainer:` format
(loading and parsing into typed specs: `config.py` and `specs/`; the run modes:
`modes.py`). Everything here reads only `specs.TrainerSpec` / `specs.InitSpec`, which
parsing has checked; the checks made here are the ones that need the objects
themselves (a class refusing its arguments is a `ConfigError` naming the key).

* `trainer_arguments(init, training)` -> the Trainer's keyword arguments except `model`
  (the optimizer as `model -> Optimizer` and schedulers as `optimizer -> Scheduler` when
  training, option callbacks, the loop, callbacks, loggers) from an `InitSpec`, and
  last the backend (or device), after everything else was built.
* `build_trainer(spec, mode)` -> `(Trainer, run_kwargs)`: the model as a zero-argument
  factory, the dataloaders, then `trainer_arguments` (so the backend is still created
  after every other check passed). `run_kwargs` are the arguments of the run method of
  `mode` (`RUN_MODES[mode].method`).
* `configure_trainer_from_config(trainer, mode)`: the same from one trainer dict (parsed
  first).
* `run_trainer(mode, params)`: parses every trainer of the file first (once), then
  `run_specs(mode, specs)`: checks each for the mode, builds and runs them one after the
  other; each trainer's loggers are closed (`Trainer.finalize`) after it ran, also when it
  failed.

What is built from which key (the `trainer:` structure and its checks: `config.py`),
in this order: the model, the dataloaders, the optimizer and schedulers, the option
callbacks and the loop, callbacks, loggers, and LAST the backend:

- `model`: `{name: <registered name | package.module.Class | file.py:Class>, **constructor
  kwargs}` -> a zero-argument factory (each call builds the class with a fresh copy of
  the kwargs).
- `optimizer`: `{ClassName: {lr | learning_rate, weight_decay, adjust_learning_rate,
  **constructor kwargs}}` (class from `cstorch.optim`, any case) -> `model -> Optimizer`;
  parameter groups come from `cstorch.optim.configure_param_groups` (no weight decay for
  biases and norms).
- `schedulers`: a list (or one) of `{ClassName: kwargs}` (a class of
  `cstorch.optim.lr_scheduler` or `.weight_decay_scheduler`, `optimizer` omitted) ->
  `optimizer -> Scheduler` each. `SequentialLR`/`ChainedLR` take a nested `schedulers:`
  list (any class taking `schedulers`); SequentialLR's `milestones` default to the
  running sum of its schedulers' `total_iters` (all but the last). `ScalePerParamLR`
  takes a nested `scheduler:`. A
  learning-rate scheduler is wrapped in `ScalePerParamLR` when the optimizer has
  `adjust_learning_rate`. An item `{learning_rate: <number | {scheduler: Name, ...} |
  [..]>}` is the cstorch 2.0-2.3 `optimizer.learning_rate` form, built with
  `cstorch.optim.configure_lr_scheduler`.
- `precision`, `loop`, `checkpoint`, `logging`: kwargs of `MixedPrecision`,
  `TrainingLoop`, `Checkpoint`, `Logging`. In the eval modes the trainer gets
  `ValidationLoop(eval_steps=loop.eval_steps)`.
- `callbacks`, `loggers`: lists of `{ClassName: kwargs}` (or a bare name), resolved by
  `cstorch.trainer.registry`, built in order.
- dataloaders: `{data_processor: <name>, **processor kwargs}`; the processor's
  `create_dataloader` (or a registered processor itself, when iterable) is wrapped in
  `cstorch.utils.data.DataLoader`. Mode fallbacks: eval uses `validate.val_dataloader`,
  else `fit.val_dataloader`; eval_all uses `validate_all.val_dataloaders`, else the eval
  one.
- `ckpt_path`: absent = autoload the latest checkpoint of model_dir, null = none, a path.
- `backend` / `device`, LAST: `device`: CSX, CPU or GPU. `backend`: `{backend_type: CSX,
  compile_dir, compile_only, validate_only, cluster_config: {ClusterConfig fields}}` (the
  CPU/GPU backends take only `artifact_dir`; default `<model_dir>/cerebras_logs`).
  Neither: the process's existing backend, else device CSX. An existing backend is
  reused when its settings match, else a `ConfigError` (one backend per process).
- Names: what a YAML names must be registered, or a class of the kind its place expects
  (`registry.check_kind`), checked while parsing, before anything is called.
- Relative paths: the class names of the form `path/to/file.py:Class` (`model.name`,
  `data_processor`, the `callbacks` and `loggers` items) resolve from `base_dir` (the
  YAML file's folder; the working directory when None). Every other path is used as
  given, so a relative one is taken from the working directory: `model_dir`,
  `ckpt_path`, `ckpt_paths`, `backend.compile_dir` / `artifact_dir`, and path
  arguments of classes (e.g. `CSVLogger: {path: ...}`).
"""
from __future__ import annotations

import logging
import os
from typing import Any, Callable, Optional

import cstorch

from . import config
from .checks import ConfigError
from .modes import CKPT_KEYS, RUN_MODES, check_mode, val_sources
from .specs import BackendSpec, InitSpec, LearningRateSpec, LoopSpec, OptimizerSpec, SchedulerSpec, TrainerSpec
from .trainer import Trainer

_log = logging.getLogger(__name__)


def _optimizer_factory(spec: OptimizerSpec) -> Callable:
    def make_optimizer(model):
        return spec.build(model)

    make_optimizer.__qualname__ = f"make_optimizer[{spec.name}]"
    return make_optimizer


def _scheduler_factory(spec) -> Callable:
    """`optimizer -> Scheduler` for one item of the schedulers list (a `SchedulerSpec` or
    `LearningRateSpec`); a learning-rate scheduler is wrapped in ScalePerParamLR when the
    optimizer's groups carry `adjust_learning_rate` factors."""
    def make_scheduler(optimizer):
        lr = cstorch.optim.lr_scheduler
        adjusted = any("adjust_learning_rate" in g for g in getattr(optimizer, "param_groups", ()))
        if isinstance(spec, LearningRateSpec):
            return spec.build(optimizer, adjusted)
        scheduler = spec.build(optimizer)
        if adjusted and isinstance(scheduler, lr.LRScheduler) and not isinstance(scheduler, lr.ScalePerParamLR):
            scheduler = lr.ScalePerParamLR(optimizer, scheduler)
        return scheduler

    name = spec.name if isinstance(spec, SchedulerSpec) else "learning_rate"
    make_scheduler.__qualname__ = f"make_scheduler[{name}]"
    return make_scheduler


def _make_backend(spec: BackendSpec, model_dir: str):
    """The CSX/CPU/GPU backend of `backend:` (the process's existing one when its settings match);
    artifacts go to `<model_dir>/cerebras_logs` unless the spec says `artifact_dir`."""
    btype, settings = spec.backend_type, spec.shared_settings()
    existing = cstorch.backend()
    if existing is not None:
        same = existing.backend_type.name == btype and all(
            getattr(existing, k, None) == v for k, v in settings.items())
        if not same:
            raise ConfigError(f"{spec.path}: this process already has a {existing.backend_type.name} backend with "
                              f"other settings (one backend per process); run this trainer in its own process.")
        return existing
    artifact_dir = spec.artifact_dir or os.path.join(os.path.abspath(model_dir), "cerebras_logs")
    try:
        return cstorch.backend(btype, **settings, artifact_dir=artifact_dir)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{spec.path}: {e}") from None


def trainer_arguments(init: InitSpec, training: bool) -> dict:
    """Every keyword argument of `Trainer` except `model`, from an `InitSpec`:
    model_dir, seed; when `training`, the optimizer (`model -> Optimizer`) and schedulers
    (`optimizer -> Scheduler`); precision, checkpoint, logging; the loop (`TrainingLoop`
    when `training` (None without `loop:`, the Trainer's default), else
    `ValidationLoop(eval_steps=loop.eval_steps)`); callbacks, loggers; and LAST the backend
    (`backend:`) or device, so that a backend is created only once everything else was
    built."""
    kwargs: dict[str, Any] = {"model_dir": init.model_dir, "seed": init.seed}
    if training and init.optimizer is not None:
        kwargs["optimizer"] = _optimizer_factory(init.optimizer)
        if init.schedulers:
            kwargs["schedulers"] = [_scheduler_factory(item) for item in init.schedulers]
    for key in ("precision", "checkpoint", "logging"):
        option = getattr(init, key)
        if option is not None:
            kwargs[key] = option.build()
    if training:
        kwargs["loop"] = init.loop.build() if init.loop is not None else None
    else:
        kwargs["loop"] = LoopSpec.validation_loop(init.loop, f"{init.path}.loop")
    for key in ("callbacks", "loggers"):
        if getattr(init, key):
            kwargs[key] = [item.build() for item in getattr(init, key)]

    # the backend last: every other mistake has been reported by now
    if init.backend is not None:
        kwargs["backend"] = _make_backend(init.backend, kwargs["model_dir"])
    elif init.device is not None:
        kwargs["device"] = init.device_type
    elif cstorch.backend() is None:
        kwargs["device"] = "CSX"
    return kwargs


def _run_arguments(spec: TrainerSpec, mode: str) -> dict:
    """The keyword arguments of the run method of `mode` (the dataloaders built)."""
    run_mode = RUN_MODES[mode]
    section = spec.section(run_mode.method)
    run_kwargs: dict[str, Any] = {}
    if run_mode.trains:
        run_kwargs["train_dataloader"] = section.train_dataloader.build()
    if run_mode.validates:
        found = spec.val_dataloaders(mode)
        if found is None:  # validation let it through: the mode runs without
            _log.warning("mode %s: this trainer has no %s.%s; it does not validate.", mode, *val_sources(mode)[0])
        else:
            key = val_sources(mode)[0][1]  # the method's argument: val_dataloader(s)
            value, _ = found
            dls = [dl.build() for dl in value] if isinstance(value, tuple) else value.build()
            run_kwargs[key] = [dls] if key.endswith("s") and not isinstance(dls, list) else dls
    ckpt_key = CKPT_KEYS[run_mode.method]
    if ckpt_key in section.model_fields_set:
        run_kwargs[ckpt_key] = getattr(section, ckpt_key)
    return run_kwargs


def build_trainer(spec: TrainerSpec, mode: str):
    """`(Trainer, run_kwargs)` of a trainer spec checked for `mode`;
    `getattr(trainer, RUN_MODES[mode].method)(**run_kwargs)` runs it."""
    model = spec.init.model.factory()
    run_kwargs = _run_arguments(spec, mode)
    kwargs = trainer_arguments(spec.init, RUN_MODES[mode].trains)
    return Trainer(model=model, **kwargs), run_kwargs


def configure_trainer_from_config(trainer_params: dict, mode: str, base_dir: Optional[str] = None,
                                  path: str = "trainer"):
    """`(Trainer, run_kwargs)` for one trainer dict (the value of `trainer:`, or
    `{"trainer": <it>}`) and `mode`: parsed and checked first (`config.validate_trainer`),
    then built (`build_trainer`; the backend last). `base_dir` anchors relative file
    names; `path` prefixes the key paths in errors.

    Args:
        trainer_params: the value of `trainer:` in a YAML file, or `{"trainer": <it>}`.
        mode: "train", "train_and_eval", "eval" or "eval_all".
        base_dir: the folder relative file names in the config are taken from; None: the working directory.
        path: the prefix of the key paths in error messages.
    """
    check_mode(mode)
    spec = config.validate_trainer(config.unwrap_trainer(trainer_params, path), mode, base_dir, path)
    return build_trainer(spec, mode)


def run_trainer(mode: str, params: dict, base_dir: Optional[str] = None) -> list:
    """Parse every trainer of `params` (`config.validate_params`), then `run_specs`.
    Returns the trainers.

    Args:
        mode: the run mode, as for `configure_trainer_from_config`.
        params: the whole config: `{"trainer": ...}` or `{"trainer": [...]}` for several trainers.
        base_dir: the folder relative file names in the config are taken from; None: the working directory.
    """
    check_mode(mode)
    return run_specs(mode, config.validate_params(params, None, base_dir))


def run_specs(mode: str, specs: list) -> list:
    """Check that every parsed trainer can run `mode` (`TrainerSpec.check_mode`), then
    build and run each in order; each trainer's loggers are closed (`Trainer.finalize`)
    once it ran, also when it raised. Returns the trainers."""
    check_mode(mode)
    for spec in specs:
        spec.check_mode(mode)
    trainers = []
    for spec in specs:
        trainer, run_kwargs = build_trainer(spec, mode)
        try:
            getattr(trainer, RUN_MODES[mode].method)(**run_kwargs)
        finally:
            trainer.finalize()
        trainers.append(trainer)
    return trainers


__all__ = ["trainer_arguments", "build_trainer", "configure_trainer_from_config", "run_trainer", "run_specs"]
