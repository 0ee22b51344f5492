"""YAML -> validated trainer specs (the `trainer:` format of the Model Zoo,
research/cerebras_api.md §3.5): loading, validation and the run modes. Building objects
from a validated spec is `build.py` (`trainer_arguments`, `configure_trainer_from_config`,
`run_trainer`; its docstring says what each key builds, the backend
last). The legacy flat format is converted by `legacy.py` (`is_legacy` /
`convert_legacy`, re-exported here); the shared checks and `ConfigError` live in
`checks.py`.

Pipeline, and the contract of each step:

* `load_params(path)`: the YAML file as a dict (`ConfigError` naming the path when the
  file is missing or is not valid YAML). Two YAML pitfalls are closed: `1e-3` is read
  as a float (YAML 1.1 would read it as a string) and a key given twice in one mapping
  is an error (YAML would silently keep the last one).
* `is_legacy(params)` / `convert_legacy(params)`: the flat `runconfig:` format -> the
  `trainer:` format (the mapping table is in `legacy.py`).
* `validate_params(params, mode)` / `validate_trainer(spec, mode)`: every check that
  needs no backend and no model: unknown keys at every level (the error names the full
  key path, e.g. `trainer.init.loop.max_step`, and the closest valid keys), keyword
  arguments of every class named in the YAML checked against its signature (nothing is
  instantiated except `ClusterConfig` and the loop, plain value objects), `device` and
  `backend` together, `model_dir` null or empty, the train batch size not divisible by
  `loop.grad_accum_steps`, what the run mode needs; across a `trainer:` list, that every
  trainer resolves to the same device type and backend settings (a process has one
  backend; `validate_params` only). Every mistake raises `ConfigError` (a ValueError)
  with its own message.

Run modes (`RUN_MODES`, the one table of them; the CLI and the legacy runner use it)::

    mode            Trainer method  train dataloader  val dataloader(s)
    train           fit             required          -
    train_and_eval  fit             required          optional (without: it only trains)
    eval            validate        -                 required
    eval_all        validate_all    -                 required

The `trainer:` structure (a list under `trainer:` = several trainers run in sequence;
each item is `{trainer: {...}}` or the trainer dict itself)::

    trainer:
      init:         device | backend, model_dir (default "./model_dir"), seed, model,
                    optimizer, schedulers, precision, loop, checkpoint, logging,
                    callbacks, loggers (sparsity and autorestart: not supported)
      fit:          train_dataloader, val_dataloader (one or a list), ckpt_path
      validate:     val_dataloader, ckpt_path
      validate_all: val_dataloaders (one or a list), ckpt_paths (str, glob or list)

- Mode fallbacks: eval uses `validate.val_dataloader`, else `fit.val_dataloader`;
  eval_all uses `validate_all.val_dataloaders`, else the eval one.
"""
from __future__ import annotations

import inspect
import os
import re
from typing import Any, NamedTuple, Optional

import yaml

from .checks import (DEVICES, ConfigError, check_dict, check_keys, check_kwargs, check_one_backend, cluster_fields,
                     device_name, is_int, is_kind, is_number, named_items, resolve, scheduler_class, suggest,
                     try_build)
from .legacy import convert_legacy, is_legacy


class RunMode(NamedTuple):
    """What a run mode runs (table in the module doc)."""

    #: the Trainer method that runs it; also the YAML section holding its arguments
    method: str
    #: it trains: needs fit.train_dataloader, an optimizer, a TrainingLoop
    trains: bool
    #: it takes val dataloader(s) (`_val_dataloaders`: where they are looked up)
    validates: bool
    #: ... and cannot run without
    val_required: bool
    #: the legacy runner's driver for it (a `PyTorchBaseRunner` method; its arguments: the
    #: train dataloader when `trains`, then the eval dataloader when `validates`)
    runner: str


#: run mode -> what it runs: the one table of the run modes
RUN_MODES = {
    "train": RunMode("fit", trains=True, validates=False, val_required=False, runner="train"),
    "train_and_eval": RunMode("fit", trains=True, validates=True, val_required=False, runner="train_and_eval"),
    "eval": RunMode("validate", trains=False, validates=True, val_required=True, runner="evaluate"),
    "eval_all": RunMode("validate_all", trains=False, validates=True, val_required=True, runner="evaluate_all"),
}
MODES = tuple(RUN_MODES)
DEFAULT_MODEL_DIR = "./model_dir"

_TRAINER_KEYS = ("init", "fit", "validate", "validate_all")
_INIT_KEYS = ("device", "backend", "model_dir", "seed", "model", "optimizer", "schedulers", "precision", "sparsity",
              "loop", "checkpoint", "logging", "callbacks", "loggers", "autorestart")
_SECTION_KEYS = {
    "fit": ("train_dataloader", "val_dataloader", "ckpt_path"),
    "validate": ("val_dataloader", "ckpt_path"),
    "validate_all": ("val_dataloaders", "ckpt_paths"),
}
#: the val dataloader key of each run method's section, in fallback order: a mode takes its
#: own section's, else those of the sections after it (eval_all: validate_all, validate, fit)
_VAL_KEYS = (("validate_all", "val_dataloaders"), ("validate", "val_dataloader"), ("fit", "val_dataloader"))
#: the checkpoint key of each run method's section (also the method's argument)
_CKPT_KEYS = {"fit": "ckpt_path", "validate": "ckpt_path", "validate_all": "ckpt_paths"}
#: keyword arguments of `cstorch.backend(type, ...)` per backend type (see cstorch/_backend.py `_make`)
_BACKEND_KEYS = {
    "CSX": ("backend_type", "artifact_dir", "compile_dir", "compile_only", "validate_only", "cluster_config"),
    "CPU": ("backend_type", "artifact_dir"),
    "GPU": ("backend_type", "artifact_dir"),
}
#: the option sections of `init` and the class (in cstorch.trainer.callbacks) each one configures
_OPTION_CLASSES = {"precision": "MixedPrecision", "loop": "TrainingLoop", "checkpoint": "Checkpoint",
                   "logging": "Logging"}
_CORE_CALLBACKS = {"TrainingLoop": "loop", "ValidationLoop": "loop", "Checkpoint": "checkpoint",
                   "MixedPrecision": "precision", "Logging": "logging"}
#: optimizer keys handled by the configuration layer, besides the optimizer's own arguments
_OPTIMIZER_EXTRA_KEYS = ("lr", "learning_rate", "weight_decay", "adjust_learning_rate")


# ======================================================================================
# loading
# ======================================================================================
class _Loader(yaml.SafeLoader):
    """safe_load, plus floats without a dot (`1e-3`) and an error on duplicate keys."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                continue  # let the base class report the unhashable key
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def load_params(path: str) -> dict:
    """The YAML file at `path` as a dict (ConfigError naming the path on any problem)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ConfigError(f"params file {path!r} does not exist"
                          f"{'' if os.path.isabs(path) else f' (relative to {os.getcwd()!r})'}.")
    try:
        with open(path, encoding="utf-8") as f:
            params = yaml.load(f, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as e:
        raise ConfigError(f"params file {path!r} is not valid YAML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read params file {path!r}: {e}") from None
    if params is None:
        raise ConfigError(f"params file {path!r} is empty; it needs a `trainer:` section.")
    if not isinstance(params, dict):
        raise ConfigError(f"params file {path!r} must hold a mapping with a `trainer:` key at the top, "
                          f"got a {type(params).__name__}.")
    return params


# ======================================================================================
# validation (no backend, no model)
# ======================================================================================
def unwrap_trainer(item, path: str = "trainer") -> dict:
    """One trainer dict: `item` itself, or X of `{trainer: X}` (ConfigError naming `path`
    when it is not a mapping)."""
    if isinstance(item, dict) and set(item) == {"trainer"}:
        item = item["trainer"]
    return check_dict(item, path, allow_none=False)


def trainer_specs(params: dict) -> list[tuple[str, dict]]:
    """[(path, trainer dict)] of a params dict (legacy converted; a list under `trainer:`
    gives several, with paths `trainer[i]`). The trainer dicts are those of `params`
    itself (not copies) unless it was converted from the legacy format."""
    if not isinstance(params, dict):
        raise ConfigError(f"params must be a mapping with a `trainer:` key, got {type(params).__name__}.")
    if is_legacy(params):
        params = convert_legacy(params)
    if "trainer" not in params:
        raise ConfigError(f"params need a top-level `trainer:` section (or the legacy runconfig format); found "
                          f"{sorted(map(str, params)) or 'nothing'}.")
    check_keys(params, ("trainer",), "<top level>")
    value = params["trainer"]
    if isinstance(value, list):
        if not value:
            raise ConfigError("trainer is an empty list; give at least one trainer.")
        return [(f"trainer[{i}]", unwrap_trainer(item, f"trainer[{i}]")) for i, item in enumerate(value)]
    return [("trainer", unwrap_trainer(value, "trainer"))]


def validate_params(params: dict, mode: Optional[str] = None, base_dir: Optional[str] = None) -> list[dict]:
    """Validate every trainer of `params`, and that they all resolve to the same device
    type and backend settings; returns the trainer dicts in run order."""
    return [spec for _, spec in _validated_specs(params, mode, base_dir)]


def _validated_specs(params: dict, mode: Optional[str], base_dir: Optional[str]) -> list[tuple[str, dict]]:
    specs = trainer_specs(params)
    for path, spec in specs:
        validate_trainer(spec, mode, base_dir, path)
    check_one_backend(specs)
    return specs


def _check_mode(mode) -> None:
    if mode not in MODES:
        raise ConfigError(f"Unknown mode {mode!r}; expected one of {', '.join(MODES)}.")


def mode_for(method: str, params: dict) -> str:
    """The run mode of the Trainer method `method` (fit, validate, validate_all) for
    `params`: fit is train_and_eval when some trainer has a fit.val_dataloader, else
    train; validate is eval; validate_all is eval_all."""
    modes = [mode for mode, m in RUN_MODES.items() if m.method == method]
    if not modes:
        methods = sorted({m.method for m in RUN_MODES.values()})
        raise ConfigError(f"Unknown Trainer method {method!r}; expected one of {', '.join(methods)}.")
    if len(modes) == 1:
        return modes[0]
    validating = next(mode for mode in modes if RUN_MODES[mode].validates)
    if any(_val_dataloaders(spec, validating) is not None for _, spec in trainer_specs(params)):
        return validating
    return next(mode for mode in modes if not RUN_MODES[mode].validates)


def validate_trainer(spec: dict, mode: Optional[str] = None, base_dir: Optional[str] = None,
                     path: str = "trainer") -> None:
    """Check one trainer dict (the value of `trainer:`) for `mode` (None: mode-independent checks only)."""
    if mode is not None:
        _check_mode(mode)
    spec = check_dict(spec, path, allow_none=False)
    check_keys(spec, _TRAINER_KEYS, path)
    if "init" not in spec or spec["init"] is None:
        raise ConfigError(f"{path}.init is missing; it holds the Trainer's arguments (model, optimizer, model_dir...).")
    init = check_dict(spec["init"], f"{path}.init")
    p = f"{path}.init"
    check_keys(init, _INIT_KEYS, p, "Trainer")
    for name in _SECTION_KEYS:
        section = check_dict(spec.get(name), f"{path}.{name}")
        check_keys(section, _SECTION_KEYS[name], f"{path}.{name}")

    _check_device(init, p)
    if "model_dir" in init:
        md = init["model_dir"]
        if md is None or (isinstance(md, str) and not md.strip()):
            raise ConfigError(f"model_dir is a required argument: {p}.model_dir is {md!r}; give a folder "
                              f"(leave the key out for the default {DEFAULT_MODEL_DIR!r}).")
        if not isinstance(md, (str, os.PathLike)):
            raise ConfigError(f"{p}.model_dir must be a path string, got {md!r}.")
    if init.get("seed") is not None and not is_int(init["seed"]):
        raise ConfigError(f"{p}.seed must be an integer, got {init['seed']!r}.")
    for key, what in (("sparsity", "sparsity (cstorch.sparse is not implemented)"),
                      ("autorestart", "autorestart (runs restart in-process only)")):
        if init.get(key) is not None:
            raise ConfigError(f"{p}.{key}: {what} is not supported; remove the key.")

    if init.get("model") is None:
        raise ConfigError(f"{p}.model is missing: give {{name: <model name>, **constructor arguments}}.")
    _check_model(init["model"], f"{p}.model", base_dir)
    optimizer = _check_optimizer(init.get("optimizer"), f"{p}.optimizer")
    _check_schedulers(init.get("schedulers"), f"{p}.schedulers", has_optimizer=optimizer is not None)

    from . import callbacks as cb

    for key, cls_name in _OPTION_CLASSES.items():
        kwargs = check_dict(init.get(key), f"{p}.{key}")
        check_kwargs(getattr(cb, cls_name), kwargs, f"{p}.{key}")
    for kind, key in (("callback", "callbacks"), ("logger", "loggers")):
        if init.get(key) is not None and not isinstance(init[key], list):
            raise ConfigError(f"{p}.{key} must be a list of {{ClassName: arguments}} items, got {init[key]!r}.")
        for name, kwargs, where in named_items(init.get(key), f"{p}.{key}"):
            cls = resolve(kind, name, base_dir, where)
            if kind == "callback" and isinstance(cls, type) and issubclass(cls, cb.CoreCallback):
                section = _CORE_CALLBACKS.get(cls.__name__)
                raise ConfigError(f"{where}: {name} is a core callback, not a user callback; configure it under "
                                  f"{p}.{section or '<its own section>'} instead.")
            if kind == "logger" and isinstance(cls, type) and not issubclass(cls, cb.Logger):
                raise ConfigError(f"{where}: {name} is not a Logger (TensorBoardLogger, CSVLogger, ProgressLogger or a "
                                  f"subclass of cstorch.trainer.loggers.Logger); user callbacks go under "
                                  f"{p}.callbacks.")
            check_kwargs(cls, kwargs, where)

    loop = check_dict(init.get("loop"), f"{p}.loop")
    fit = spec.get("fit") or {}
    for where, dl in _dataloader_specs(spec, path):
        _check_dataloader(dl, where, base_dir)
    train_dl = fit.get("train_dataloader")
    if isinstance(train_dl, dict) and "batch_size" in train_dl:
        bs, accum = train_dl["batch_size"], loop.get("grad_accum_steps", 1)
        if is_int(bs) and is_int(accum) and accum > 0 and bs % accum:
            raise ConfigError(
                f"{path}.fit.train_dataloader.batch_size ({bs}) is not divisible by {p}.loop.grad_accum_steps "
                f"({accum}): every batch is split into grad_accum_steps equal micro-batches. Pick a batch size that "
                f"is a multiple of {accum}, or another grad_accum_steps.")
    for name, key in (("fit", "ckpt_path"), ("validate", "ckpt_path")):
        value = (spec.get(name) or {}).get(key)
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise ConfigError(f"{path}.{name}.{key} must be a path (or null for no checkpoint), got {value!r}.")
    paths = (spec.get("validate_all") or {}).get("ckpt_paths")
    if paths is not None and not isinstance(paths, str) and not (
            isinstance(paths, list) and all(isinstance(x, str) for x in paths)):
        raise ConfigError(f"{path}.validate_all.ckpt_paths must be a path, a glob or a list of paths, got {paths!r}.")

    if mode is None:
        return
    run_mode = RUN_MODES[mode]
    if run_mode.trains:
        if train_dl is None:
            raise ConfigError(f"mode {mode!r} needs {path}.fit.train_dataloader.")
        if optimizer is None:
            raise ConfigError(f"mode {mode!r} needs {p}.optimizer (e.g. {{AdamW: {{lr: 0.001}}}}).")
    if run_mode.val_required and _val_dataloaders(spec, mode) is None:
        first, *rest = (f"{path}.{section}.{key}" for section, key in _val_sources(mode))
        alternatives = f" (or {' or '.join(rest)})" if rest else ""
        raise ConfigError(f"mode {mode!r} needs {first}{alternatives}.")
    if not run_mode.trains:
        try_build(cb.ValidationLoop, {"eval_steps": loop.get("eval_steps")}, f"{p}.loop")
    elif init.get("loop") is not None:  # absent: the Trainer's default TrainingLoop(num_epochs=1)
        try_build(cb.TrainingLoop, loop, f"{p}.loop")


def _check_device(init: dict, p: str) -> None:
    has_backend = init.get("backend") is not None
    if init.get("device") is not None and has_backend:
        raise ConfigError(f"{p}.device and {p}.backend are mutually exclusive: give device ({init['device']!r}) "
                          f"for defaults, or backend: {{backend_type: ..., ...}} for settings, not both.")
    if init.get("device") is not None:
        dev = init["device"]
        if not isinstance(dev, str) or device_name(dev) not in DEVICES:
            raise ConfigError(f"{p}.device must be one of {', '.join(DEVICES)}, got {dev!r}.")
    if not has_backend:
        return
    b = check_dict(init["backend"], f"{p}.backend")
    btype = device_name(b.get("backend_type", "CSX"))
    if btype not in _BACKEND_KEYS:
        raise ConfigError(f"{p}.backend.backend_type must be one of {', '.join(DEVICES)}, got {b['backend_type']!r}.")
    check_keys(b, _BACKEND_KEYS[btype], f"{p}.backend", f"the {btype} backend")
    if b.get("compile_only") and b.get("validate_only"):
        raise ConfigError(f"{p}.backend: compile_only and validate_only are mutually exclusive; set at most one.")
    if b.get("cluster_config") is not None:
        cc = check_dict(b["cluster_config"], f"{p}.backend.cluster_config")
        check_keys(cc, cluster_fields(), f"{p}.backend.cluster_config", "ClusterConfig")
        from cstorch.distributed import ClusterConfig

        try_build(ClusterConfig, cc, f"{p}.backend.cluster_config")


def _check_model(model, where: str, base_dir) -> None:
    model = check_dict(model, where, allow_none=False)
    if "name" not in model:
        raise ConfigError(f"{where}.name is missing: name the model (a registered name, package.module.Class or "
                          f"path/to/file.py:Class).")
    kwargs = {k: v for k, v in model.items() if k != "name"}
    check_kwargs(resolve("model", model["name"], base_dir, f"{where}.name"), kwargs, where)


def _check_optimizer(opt, where: str):
    """(class, kwargs) of the optimizer spec, or None."""
    if opt is None:
        return None
    opt = check_dict(opt, where)
    if len(opt) != 1:
        raise ConfigError(f"{where} must have exactly one key, the optimizer class (e.g. {{AdamW: {{lr: 0.001}}}}); "
                          f"got {sorted(map(str, opt)) or 'none'}.")
    (name, kwargs), = opt.items()
    from cstorch.optim.configure import _RENAMED_KEYS, _subclasses, optimizer_class
    from cstorch.optim.optimizer import Optimizer

    try:
        cls = optimizer_class(str(name))
    except ValueError:
        known = sorted({c.__name__ for c in _subclasses(Optimizer) if not c.__name__.startswith("_")})
        raise ConfigError(f"{where}: unknown optimizer {name!r}.{suggest(name, known)} Optimizers (any case): "
                          f"{', '.join(known)}.") from None
    p = f"{where}.{name}"
    kwargs = check_dict(kwargs, p)
    accepted = {k for k in inspect.signature(cls).parameters if k != "params"}
    old = [k for k in kwargs if k in _RENAMED_KEYS and k not in accepted]
    if old:
        fixes = ", ".join(f"{k} -> {_RENAMED_KEYS[k]}" if _RENAMED_KEYS[k] else f"{k} (remove)" for k in old)
        raise ConfigError(f"{p}: keys of an older format are not accepted: {fixes}.")
    check_kwargs(cls, kwargs, p, skip=("params", "lr"), extra=_OPTIMIZER_EXTRA_KEYS)
    if "lr" in kwargs and "learning_rate" in kwargs:
        raise ConfigError(f"{p}: give lr or learning_rate, not both.")
    for key in ("lr", "learning_rate"):
        if key in kwargs and not is_number(kwargs[key]):
            if isinstance(kwargs[key], (dict, list)):
                raise ConfigError(f"{p}.{key} is a schedule; move it to the schedulers section as "
                                  f"schedulers: [{{learning_rate: <this value>}}] (or use {{ClassName: kwargs}} "
                                  f"scheduler items).")
            raise ConfigError(f"{p}.{key} must be a number, got {kwargs[key]!r}.")
    adjust = kwargs.get("adjust_learning_rate")
    if adjust is not None and not (isinstance(adjust, dict) and all(is_number(v) for v in adjust.values())):
        raise ConfigError(f"{p}.adjust_learning_rate must map parameter-name substrings to numbers, got {adjust!r}.")
    return cls, kwargs


def _check_schedulers(value, where: str, has_optimizer: bool) -> None:
    if value is None:
        return
    if not has_optimizer:
        raise ConfigError(f"{where} is given without an optimizer to schedule; add the optimizer section.")
    if not isinstance(value, (list, dict)):
        raise ConfigError(f"{where} must be a list of {{SchedulerClass: arguments}} items, got {value!r}.")
    items = value if isinstance(value, list) else [value]
    for i, item in enumerate(items):
        item_where = f"{where}[{i}]" if isinstance(value, list) else where
        if isinstance(item, dict) and set(item) == {"learning_rate"}:
            _check_legacy_lr(item["learning_rate"], f"{item_where}.learning_rate")
        else:
            _check_scheduler_item(item, item_where)


def _check_scheduler_item(item, where: str, in_sequence: bool = False) -> None:
    name, kwargs, p = _named_item(item, where)
    cls = scheduler_class(name, where)
    kwargs = dict(kwargs)
    if in_sequence and "total_iters" in kwargs and "total_iters" not in inspect.signature(cls).parameters:
        kwargs.pop("total_iters")  # how long it runs inside the sequence; used for the milestones only
    if is_kind(cls, "SequentialScheduler", "ChainedScheduler"):
        children = kwargs.get("schedulers")
        if not isinstance(children, list) or not children:
            raise ConfigError(f"{p}.schedulers must be a non-empty list of {{SchedulerClass: arguments}} items.")
        sequential = is_kind(cls, "SequentialScheduler")
        for j, child in enumerate(children):
            _check_scheduler_item(child, f"{p}.schedulers[{j}]", in_sequence=sequential)
        if sequential and kwargs.get("milestones") is None:
            for j, child in enumerate(children[:-1]):
                (_, ckw), = child.items()
                total = (ckw or {}).get("total_iters")
                if not is_int(total) or total <= 0:
                    raise ConfigError(f"{p}.schedulers[{j}] needs a positive integer total_iters: {name}'s "
                                      f"milestones are computed from the total_iters of all but the last scheduler "
                                      f"(or give {p}.milestones).")
        milestones = kwargs.get("milestones")
        if sequential and milestones is not None and not (
                isinstance(milestones, list) and len(milestones) == len(children) - 1
                and all(is_int(m) and m >= 0 for m in milestones)):
            raise ConfigError(f"{p}.milestones must be a list of {len(children) - 1} step number(s), one fewer than "
                              f"the schedulers (or leave it out to use their total_iters); got {milestones!r}.")
        kwargs = {k: v for k, v in kwargs.items() if k not in ("schedulers", "milestones")}
        skip = ("optimizer", "schedulers", "milestones")
    elif is_kind(cls, "ScalePerParamScheduler"):
        if kwargs.get("scheduler") is None:
            raise ConfigError(f"{p}.scheduler is missing: {name} scales one scheduler, {{SchedulerClass: arguments}}.")
        _check_scheduler_item(kwargs.pop("scheduler"), f"{p}.scheduler")
        skip = ("optimizer", "scheduler")
    else:
        skip = ("optimizer",)
    check_kwargs(cls, kwargs, p, skip=skip)


def _named_item(item, where: str) -> tuple[str, dict, str]:
    """(class name, kwargs, key path of the kwargs) of a scheduler item `{Name: kwargs}`."""
    if not isinstance(item, dict) or len(item) != 1:
        raise ConfigError(f"{where} must be a mapping with exactly one key, the scheduler class, holding its "
                          f"arguments (e.g. {{CosineDecayLR: {{initial_learning_rate: 0.001, ...}}}}); got {item!r}.")
    (name, kwargs), = item.items()
    return str(name), check_dict(kwargs, f"{where}.{name}"), f"{where}.{name}"


def _check_legacy_lr(value, where: str) -> None:
    """Static checks of the cstorch 2.0-2.3 `learning_rate` form (built by configure_lr_scheduler)."""
    from cstorch.optim import scheduler_config as sc

    if isinstance(value, str):
        try:
            float(value)
            return
        except ValueError:
            raise ConfigError(f"{where} {value!r} is a string but not a number.") from None
    if is_number(value):
        return
    specs = value if isinstance(value, list) else [value]
    if not isinstance(value, (list, dict)) or not specs:
        raise ConfigError(f"{where} must be a number, a scheduler dict or a non-empty list of scheduler dicts, "
                          f"got {value!r}.")
    for i, spec in enumerate(specs):
        w = f"{where}[{i}]" if isinstance(value, list) else where
        if not isinstance(spec, dict) or "scheduler" not in spec:
            raise ConfigError(f"{w} must be a dict with a `scheduler` key naming the scheduler class "
                              f"(e.g. scheduler: CosineDecay), got {spec!r}.")
        try:
            cls = sc._find_class(spec["scheduler"])
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{w}.scheduler: {e}") from None
        # in a list, total_iters is also the scheduler's duration inside the sequence
        extra = ("scheduler", "main_scheduler") + (("total_iters",) if isinstance(value, list) else ())
        check_kwargs(cls, spec, w, skip=("optimizer",), extra=extra, renamed=sc._OLD_KEYS)


def _dataloader_specs(spec: dict, path: str) -> list[tuple[str, Any]]:
    out = []
    for section, key in (("fit", "train_dataloader"), ("fit", "val_dataloader"), ("validate", "val_dataloader"),
                         ("validate_all", "val_dataloaders")):
        value = (spec.get(section) or {}).get(key)
        if value is None:
            continue
        if isinstance(value, list):
            if key == "train_dataloader":
                raise ConfigError(f"{path}.{section}.{key} must be one dataloader mapping, not a list.")
            out += [(f"{path}.{section}.{key}[{i}]", v) for i, v in enumerate(value)]
        else:
            out.append((f"{path}.{section}.{key}", value))
    return out


def _check_dataloader(dl, where: str, base_dir) -> type:
    dl = check_dict(dl, where, allow_none=False)
    if "data_processor" not in dl:
        raise ConfigError(f"{where}.data_processor is missing: name the data processor class (a registered name, "
                          f"package.module.Class or path/to/file.py:Class).")
    cls = resolve("data_processor", dl["data_processor"], base_dir, f"{where}.data_processor")
    kwargs = {k: v for k, v in dl.items() if k != "data_processor"}
    if "batch_size" in kwargs and (not is_int(kwargs["batch_size"]) or kwargs["batch_size"] <= 0):
        raise ConfigError(f"{where}.batch_size must be a positive integer, got {kwargs['batch_size']!r}.")
    check_kwargs(cls, kwargs, where)
    return cls


def _val_sources(mode: str) -> tuple[tuple[str, str], ...]:
    """The (section, key) places the val dataloader(s) of `mode` are taken from, first
    found wins: its own section's, then those of the sections after it in `_VAL_KEYS`."""
    if not RUN_MODES[mode].validates:
        return ()
    sections = [section for section, _ in _VAL_KEYS]
    return _VAL_KEYS[sections.index(RUN_MODES[mode].method):]


def _val_dataloaders(spec: dict, mode: str, with_path: bool = False):
    """The val dataloader spec(s) `mode` runs on (with the documented fallbacks), or None;
    with `with_path`, `(spec(s), "section.key")` (None when there are none)."""
    for section, key in _val_sources(mode):
        values = spec.get(section)
        value = values.get(key) if isinstance(values, dict) else None  # not a mapping: validation reports it
        if value:
            return (value, f"{section}.{key}") if with_path else value
    return None


__all__ = ["ConfigError", "RunMode", "RUN_MODES", "MODES", "DEFAULT_MODEL_DIR", "load_params",
           "is_legacy", "convert_legacy", "unwrap_trainer", "trainer_specs", "mode_for", "validate_params",
           "validate_trainer"]
