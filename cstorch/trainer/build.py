"""Validated trainer config -> `Trainer` objects: the building half of the `trainer:`
format (loading, validation and the run modes: `config.py`, which re-exports the three
public functions below; the shared checks and `ConfigError`: `checks.py`). Everything here takes a config that
`config.validate_trainer` has accepted; the checks it makes are the ones that need the
objects themselves (a class refusing its arguments is a `ConfigError` naming the key).

* `trainer_arguments(init, training)` -> the Trainer's keyword arguments except `model`
  (the optimizer as `model -> Optimizer` and schedulers as `optimizer -> Scheduler` when
  training, option callbacks, the loop, callbacks, loggers) from a validated `init`
  section, and last the backend (or device), after everything else was built.
* `configure_trainer_from_config(spec, mode)` -> `(Trainer, run_kwargs)`: validates the
  trainer, then builds the model as a zero-argument factory, the dataloaders, then
  `trainer_arguments` (so the backend is still created after every other check passed).
  `run_kwargs` are the arguments of the run method of `mode` (`RUN_MODES[mode].method`).
* `run_trainer(mode, params)`: validates every trainer of the file first (once), then
  builds and runs them one after the other; each trainer's loggers are closed
  (`Trainer.finalize`) after it ran, also when it failed.

What is built from which key (the `trainer:` structure and its checks: `config.py`),
in this order: the model, the dataloaders, the optimizer and schedulers, the option
callbacks and the loop, callbacks, loggers, and LAST the backend:

- `model`: `{name: <registry name>, **constructor kwargs}` -> a zero-argument factory
  (each call builds the class with a fresh copy of the kwargs).
- `optimizer`: `{ClassName: {lr | learning_rate, weight_decay, adjust_learning_rate,
  **constructor kwargs}}` (class from `cstorch.optim`, any case) -> `model -> Optimizer`;
  parameter groups come from `cstorch.optim.configure_param_groups` (no weight decay for
  biases and norms).
- `schedulers`: a list (or one) of `{ClassName: kwargs}` (a class of
  `cstorch.optim.lr_scheduler` or `.weight_decay_scheduler`, `optimizer` omitted) ->
  `optimizer -> Scheduler` each. `SequentialLR`/`ChainedLR` take a nested `schedulers:`
  list; SequentialLR's `milestones` default to the running sum of its schedulers'
  `total_iters` (all but the last). `ScalePerParamLR` takes a nested `scheduler:`. A
  learning-rate scheduler is wrapped in `ScalePerParamLR` when the optimizer has
  `adjust_learning_rate`. An item `{learning_rate: <number | {scheduler: Name, ...} |
  [..]>}` is the cstorch 2.0-2.3 `optimizer.learning_rate` form, built with
  `cstorch.optim.configure_lr_scheduler`.
- `precision`, `loop`, `checkpoint`, `logging`: kwargs of `MixedPrecision`,
  `TrainingLoop`, `Checkpoint`, `Logging`. In the eval modes the trainer gets
  `ValidationLoop(eval_steps=loop.eval_steps)`.
- `callbacks`, `loggers`: lists of `{ClassName: kwargs}` (or a bare name), resolved by
  `cstorch.trainer.registry.resolve`, built in order.
- dataloaders: `{data_processor: <name>, **processor kwargs}`; the processor's
  `create_dataloader` (or the processor itself, when iterable) is wrapped in
  `cstorch.utils.data.DataLoader`. Mode fallbacks: eval uses `validate.val_dataloader`,
  else `fit.val_dataloader`; eval_all uses `validate_all.val_dataloaders`, else the eval
  one.
- `ckpt_path`: absent = autoload the latest checkpoint of model_dir, null = none, a path.
- `backend` / `device`, LAST: `device`: CSX, CPU or GPU. `backend`: `{backend_type: CSX,
  compile_dir, compile_only, validate_only, cluster_config: {ClusterConfig fields}}` (the
  CPU/GPU backends take only `artifact_dir`; default `<model_dir>/cerebras_logs`).
  Neither: the process's existing backend, else device CSX. An existing backend is
  reused when its settings match, else a `ConfigError` (one backend per process).
- Relative paths: the class names of the form `path/to/file.py:Class` (`model.name`,
  `data_processor`, the `callbacks` and `loggers` items) resolve from `base_dir` (the
  YAML file's folder; the working directory when None). Every other path is used as
  given, so a relative one is taken from the working directory: `model_dir`,
  `ckpt_path`, `ckpt_paths`, `backend.compile_dir` / `artifact_dir`, and path
  arguments of classes (e.g. `CSVLogger: {path: ...}`).
"""
from __future__ import annotations

import copy
import functools
import inspect
import itertools
import logging
import os
from typing import Any, Callable, Optional

from . import config as _config
from . import registry
from .checks import (SHARED_BACKEND_KEYS, ConfigError, backend_request, device_name, is_kind, named_items,
                     scheduler_class, try_build)
from .config import (_CKPT_KEYS, _OPTION_CLASSES, DEFAULT_MODEL_DIR, RUN_MODES, _check_mode, _val_dataloaders,
                     _val_sources, _validated_specs, unwrap_trainer)

_log = logging.getLogger(__name__)


def _model_factory(spec: dict, base_dir) -> Callable:
    cls = registry.resolve("model", spec["name"], base_dir)
    kwargs = {k: v for k, v in spec.items() if k != "name"}
    return functools.partial(_call_with_copy, cls, kwargs)


def _call_with_copy(fn, kwargs):
    return fn(**copy.deepcopy(kwargs))


def _optimizer_factory(opt_spec: dict) -> Callable:
    (name, kwargs), = opt_spec.items()
    kwargs = dict(kwargs or {})

    def make_optimizer(model):
        from cstorch.optim import configure_optimizer, configure_param_groups

        params = copy.deepcopy(kwargs)
        groups = configure_param_groups(model, params)  # takes weight_decay and adjust_learning_rate
        return configure_optimizer(str(name), groups, **params)

    make_optimizer.__qualname__ = f"make_optimizer[{name}]"
    return make_optimizer


def _has_adjusted_groups(optimizer) -> bool:
    return any("adjust_learning_rate" in g for g in getattr(optimizer, "param_groups", ()))


def _build_scheduler(optimizer, item):
    (name, kwargs), = item.items()
    cls = scheduler_class(str(name), "schedulers")
    kwargs = copy.deepcopy(kwargs or {})
    if is_kind(cls, "SequentialScheduler", "ChainedScheduler"):
        specs = kwargs.pop("schedulers")
        children = []
        durations = []
        for child in specs:
            (cname, ckw), = child.items()
            ckw = dict(ckw or {})
            ccls = scheduler_class(str(cname), "schedulers")
            durations.append(ckw.get("total_iters"))
            if "total_iters" in ckw and "total_iters" not in inspect.signature(ccls).parameters:
                ckw.pop("total_iters")
            children.append(_build_scheduler(optimizer, {cname: ckw}))
        if is_kind(cls, "SequentialScheduler"):
            if kwargs.get("milestones") is None:  # each child runs its total_iters
                kwargs["milestones"] = list(itertools.accumulate(int(d) for d in durations[:-1]))
            return cls(optimizer, children, **kwargs)
        return cls(children, **kwargs)
    if is_kind(cls, "ScalePerParamScheduler"):
        return cls(optimizer, _build_scheduler(optimizer, kwargs.pop("scheduler")), **kwargs)
    return cls(optimizer, **kwargs)


def _scheduler_factory(item) -> Callable:
    """`optimizer -> Scheduler` for one item of the schedulers list."""
    item = copy.deepcopy(item)

    def make_scheduler(optimizer):
        from cstorch.optim import configure_lr_scheduler, lr_scheduler

        adjusted = _has_adjusted_groups(optimizer)
        if set(item) == {"learning_rate"}:
            return configure_lr_scheduler(optimizer, item["learning_rate"],
                                          adjust_learning_rate=True if adjusted else None)
        scheduler = _build_scheduler(optimizer, item)
        if adjusted and isinstance(scheduler, lr_scheduler.LRScheduler) \
                and not isinstance(scheduler, lr_scheduler.ScalePerParamLR):
            scheduler = lr_scheduler.ScalePerParamLR(optimizer, scheduler)
        return scheduler

    make_scheduler.__qualname__ = f"make_scheduler[{next(iter(item))}]"
    return make_scheduler


def _build_dataloader(spec: dict, base_dir, where: str):
    from cstorch.utils.data import DataLoader

    cls = registry.resolve("data_processor", spec["data_processor"], base_dir)
    kwargs = copy.deepcopy({k: v for k, v in spec.items() if k != "data_processor"})
    processor = try_build(cls, kwargs, where)
    if callable(getattr(processor, "create_dataloader", None)):
        return DataLoader(processor.create_dataloader)
    if hasattr(processor, "__iter__"):
        return DataLoader(lambda: processor)
    raise ConfigError(f"{where}: data processor {spec['data_processor']!r} ({type(processor).__name__}) has no "
                      f"create_dataloader() and is not iterable; give it one of the two.")


def _build_dataloaders(value, base_dir, where: str):
    if isinstance(value, list):
        return [_build_dataloader(v, base_dir, f"{where}[{i}]") for i, v in enumerate(value)]
    return _build_dataloader(value, base_dir, where)


def _make_backend(spec: dict, where: str, model_dir: str):
    """The CSX/CPU/GPU backend of `backend:` (the process's existing one when its settings match);
    artifacts go to `<model_dir>/cerebras_logs` unless the spec says `artifact_dir`."""
    import cstorch

    btype, settings = backend_request({"backend": spec})
    existing = cstorch.backend()
    if existing is not None:
        same = existing.backend_type.name == btype and all(
            getattr(existing, k, None) == v for k, v in settings.items())
        if not same:
            raise ConfigError(f"{where}: this process already has a {existing.backend_type.name} backend with other "
                              f"settings (one backend per process); run this trainer in its own process.")
        return existing
    kwargs = {k: v for k, v in spec.items() if k not in ("backend_type", *SHARED_BACKEND_KEYS)}
    kwargs.setdefault("artifact_dir", os.path.join(os.path.abspath(model_dir), "cerebras_logs"))
    try:
        return cstorch.backend(btype, **settings, **kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from None


def trainer_arguments(init: dict, training: bool, base_dir: Optional[str] = None,
                      path: str = "trainer.init") -> dict:
    """Every keyword argument of `Trainer` except `model`, from a validated `init` section:
    model_dir, seed; when `training`, the optimizer (`model -> Optimizer`) and schedulers
    (`optimizer -> Scheduler`); precision, checkpoint, logging; the loop (`TrainingLoop`
    when `training` (None without `loop:`, the Trainer's default), else
    `ValidationLoop(eval_steps=loop.eval_steps)`); callbacks, loggers; and LAST the backend
    (`backend:`) or device, so that a backend is created only once everything else was
    built. `base_dir` anchors relative file names; `path` (the key path of `init`)
    prefixes the key paths in errors."""
    from . import callbacks as cb

    kwargs: dict[str, Any] = {"model_dir": init.get("model_dir", DEFAULT_MODEL_DIR), "seed": init.get("seed")}
    if training and init.get("optimizer") is not None:
        kwargs["optimizer"] = _optimizer_factory(init["optimizer"])
        items = init.get("schedulers")
        if items is not None:
            items = items if isinstance(items, list) else [items]
            kwargs["schedulers"] = [_scheduler_factory(item) for item in items]
    for key in ("precision", "checkpoint", "logging"):
        if init.get(key) is not None:
            kwargs[key] = try_build(getattr(cb, _OPTION_CLASSES[key]), copy.deepcopy(init[key]), f"{path}.{key}")
    loop = copy.deepcopy(init.get("loop") or {})
    if training:
        kwargs["loop"] = try_build(cb.TrainingLoop, loop, f"{path}.loop") if init.get("loop") is not None else None
    else:
        kwargs["loop"] = try_build(cb.ValidationLoop, {"eval_steps": loop.get("eval_steps")}, f"{path}.loop")
    for kind, key in (("callback", "callbacks"), ("logger", "loggers")):
        if init.get(key) is None:
            continue
        objs = []
        for name, ckw, where in named_items(init[key], f"{path}.{key}"):
            objs.append(try_build(registry.resolve(kind, name, base_dir), copy.deepcopy(ckw), where))
        kwargs[key] = objs

    # the backend last: every other mistake has been reported by now
    import cstorch

    if init.get("backend") is not None:
        kwargs["backend"] = _make_backend(init["backend"], f"{path}.backend", kwargs["model_dir"])
    elif init.get("device") is not None:
        kwargs["device"] = device_name(init["device"])
    elif cstorch.backend() is None:
        kwargs["device"] = "CSX"
    return kwargs


def _run_arguments(spec: dict, mode: str, base_dir, path: str) -> dict:
    """The keyword arguments of the run method of `mode` (the dataloaders built)."""
    run_mode = RUN_MODES[mode]
    section = spec.get(run_mode.method) or {}
    run_kwargs: dict[str, Any] = {}
    if run_mode.trains:
        run_kwargs["train_dataloader"] = _build_dataloader(section["train_dataloader"], base_dir,
                                                           f"{path}.{run_mode.method}.train_dataloader")
    if run_mode.validates:
        found = _val_dataloaders(spec, mode, with_path=True)
        if found is None:  # validation let it through: the mode runs without
            _log.warning("mode %s: this trainer has no %s.%s; it does not validate.", mode, *_val_sources(mode)[0])
        else:
            value, where = found
            dls = _build_dataloaders(value, base_dir, f"{path}.{where}")
            key = _val_sources(mode)[0][1]  # the method's argument: val_dataloader(s)
            run_kwargs[key] = [dls] if key.endswith("s") and not isinstance(dls, list) else dls
    ckpt_key = _CKPT_KEYS[run_mode.method]
    if ckpt_key in section:
        run_kwargs[ckpt_key] = section[ckpt_key]
    return run_kwargs


def _build_trainer(spec: dict, mode: str, base_dir, path: str):
    """`(Trainer, run_kwargs)` of a validated trainer dict."""
    init = spec["init"]
    model = _model_factory(init["model"], base_dir)
    run_kwargs = _run_arguments(spec, mode, base_dir, path)
    kwargs = trainer_arguments(init, RUN_MODES[mode].trains, base_dir, f"{path}.init")

    from .trainer import Trainer

    return Trainer(model=model, **kwargs), run_kwargs


def configure_trainer_from_config(trainer_params: dict, mode: str, base_dir: Optional[str] = None,
                                  path: str = "trainer"):
    """`(Trainer, run_kwargs)` for one trainer dict (the value of `trainer:`, or
    `{"trainer": <it>}`) and `mode`; `getattr(trainer, RUN_MODES[mode].method)(**run_kwargs)`
    runs it. Validates first; the backend is created last (by `trainer_arguments`), after
    the dataloaders and everything else were built. `base_dir` anchors relative file
    names; `path` prefixes the key paths in errors."""
    _check_mode(mode)
    spec = unwrap_trainer(trainer_params, path)
    _config.validate_trainer(spec, mode, base_dir, path)
    return _build_trainer(spec, mode, base_dir, path)


def run_trainer(mode: str, params: dict, base_dir: Optional[str] = None) -> list:
    """Validate every trainer of `params` for `mode` (`validate_params`), then build and
    run each in order; each trainer's loggers are closed (`Trainer.finalize`) once it ran,
    also when it raised. Returns the trainers."""
    _check_mode(mode)
    trainers = []
    for path, spec in _validated_specs(params, mode, base_dir):
        trainer, run_kwargs = _build_trainer(spec, mode, base_dir, path)
        try:
            getattr(trainer, RUN_MODES[mode].method)(**run_kwargs)
        finally:
            trainer.finalize()
        trainers.append(trainer)
    return trainers


__all__ = ["trainer_arguments", "configure_trainer_from_config", "run_trainer"]
