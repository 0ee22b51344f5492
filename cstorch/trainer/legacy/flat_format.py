"""The legacy flat format (Model Zoo <= 1.8: `runconfig:`, `train_input:`, ...) -> the
`trainer:` format of config.py / specs/ (`convert_legacy`). Every legacy key has a row; a key
with no row is a ConfigError naming it (nothing is dropped silently)::

    legacy key                                 trainer: key
    ----------------------------------------   ---------------------------------------------
    train_input                                fit.train_dataloader
    eval_input                                 fit.val_dataloader, validate.val_dataloader,
                                               validate_all.val_dataloaders: [eval_input]
    sparsity                                   init.sparsity (then rejected: not supported)
    runconfig.max_steps                        init.loop.max_steps
    runconfig.num_steps                        init.loop.num_steps
    runconfig.num_epochs                       init.loop.num_epochs
    runconfig.steps_per_epoch                  init.loop.steps_per_epoch
    runconfig.eval_steps                       init.loop.eval_steps
    runconfig.eval_frequency                   init.loop.eval_frequency
    runconfig.grad_accum_steps                 init.loop.grad_accum_steps
    runconfig.checkpoint_steps                 init.checkpoint.steps
    runconfig.save_initial_checkpoint          init.checkpoint.save_initial_checkpoint
    runconfig.autoload_last_checkpoint         init.checkpoint.autoload_last_checkpoint
    runconfig.disable_strict_checkpoint_loading init.checkpoint.disable_strict_checkpoint_loading
    runconfig.keep_checkpoint_max              init.callbacks: [{KeepNCheckpoints: {n: ...}}]
    runconfig.log_steps                        init.logging.log_steps
    runconfig.logging                          init.logging.log_level
    runconfig.model_dir                        init.model_dir
    runconfig.seed                             init.seed
    runconfig.checkpoint_path                  fit.ckpt_path, validate.ckpt_path,
                                               validate_all.ckpt_paths
    runconfig.target_device                    init.device, or init.backend.backend_type when
                                               a CSX setting below is present (on CPU/GPU those
                                               settings are dropped with a warning)
    runconfig.compile_dir / compile_only /     init.backend.compile_dir / compile_only /
              validate_only                    validate_only
    runconfig.<ClusterConfig field>            init.backend.cluster_config.<field>
      (num_csx, num_workers_per_csx, mgmt_address, job_labels, mount_dirs, ...)
    runconfig.mode                             not a setting: the subcommand / run mode decides
                                               (warns)
    model.name                                 init.model.name
    model.mixed_precision                      init.precision.enabled (false when absent and a
                                               precision key is present)
    model.fp16_type                            init.precision.fp16_type
    model.<other key>                          init.model.<key>
    optimizer.optimizer_type                   init.optimizer: {<Type>: {...}}
    optimizer.learning_rate (number)           init.optimizer.<Type>.lr
    optimizer.learning_rate (dict / list)      init.schedulers: [{learning_rate: <value>}]
    optimizer.loss_scaling_factor /            init.precision.<same key>
      initial_loss_scale / steps_per_increase /
      min_loss_scale / max_loss_scale /
      max_gradient_norm / max_gradient_value /
      log_loss_scale
    optimizer.grad_accum_steps                 init.loop.grad_accum_steps
    optimizer.<other key>                      init.optimizer.<Type>.<key>
"""
from __future__ import annotations

import copy
import warnings
from typing import Any, Optional

from cstorch.optim.catalog import optimizer_class

from ..checks import DEVICES, ConfigError, check_dict, check_keys, cluster_fields, is_number, show, suggest
from ..specs.backend import SHARED_BACKEND_KEYS

LEGACY_TOP_KEYS = ("train_input", "eval_input", "model", "optimizer", "runconfig", "sparsity")
_LEGACY_RUNCONFIG = {
    "max_steps": ("loop", "max_steps"),
    "num_steps": ("loop", "num_steps"),
    "num_epochs": ("loop", "num_epochs"),
    "steps_per_epoch": ("loop", "steps_per_epoch"),
    "eval_steps": ("loop", "eval_steps"),
    "eval_frequency": ("loop", "eval_frequency"),
    "grad_accum_steps": ("loop", "grad_accum_steps"),
    "checkpoint_steps": ("checkpoint", "steps"),
    "save_initial_checkpoint": ("checkpoint", "save_initial_checkpoint"),
    "autoload_last_checkpoint": ("checkpoint", "autoload_last_checkpoint"),
    "disable_strict_checkpoint_loading": ("checkpoint", "disable_strict_checkpoint_loading"),
    "log_steps": ("logging", "log_steps"),
    "logging": ("logging", "log_level"),
    "model_dir": ("model_dir",),
    "seed": ("seed",),
}
#: the runconfig keys that are `backend:` settings (those the process's one backend shares, but
#: the cluster config, whose fields are runconfig keys of their own)
_LEGACY_BACKEND = tuple(k for k in SHARED_BACKEND_KEYS if k != "cluster_config")
_LEGACY_SPECIAL = ("checkpoint_path", "target_device", "mode", "keep_checkpoint_max")
_LEGACY_PRECISION_OPTIMIZER = ("loss_scaling_factor", "initial_loss_scale", "steps_per_increase", "min_loss_scale",
                               "max_loss_scale", "max_gradient_norm", "max_gradient_value", "log_loss_scale")


def is_legacy(params) -> bool:
    """True when `params` is the flat format (runconfig, train_input, ...) rather than `trainer:`."""
    return isinstance(params, dict) and "trainer" not in params and any(k in params for k in LEGACY_TOP_KEYS)


def convert_legacy(params: dict, model_name: Optional[str] = None) -> dict:
    """The `{"trainer": {...}}` equivalent of a legacy flat config (table in the module
    doc). `model_name` names the model when the legacy `model:` section has no `name`
    (the old per-model run.py knew it). The input is not modified."""
    if not isinstance(params, dict):
        raise ConfigError(f"a legacy config must be a mapping, got {type(params).__name__}.")
    if "trainer" in params:
        raise ConfigError("this config has a `trainer:` section, it is not in the legacy format.")
    check_keys(params, LEGACY_TOP_KEYS, "<top level>", "the legacy format")
    params = copy.deepcopy(params)
    init: dict[str, Any] = {}
    trainer: dict[str, Any] = {"init": init}

    # runconfig
    run = check_dict(params.get("runconfig"), "runconfig")
    fields = cluster_fields()
    known = tuple(_LEGACY_RUNCONFIG) + _LEGACY_BACKEND + _LEGACY_SPECIAL + fields
    for key in run:
        if key not in known:
            raise ConfigError(f"Legacy key runconfig.{key} has no equivalent in the trainer: format; remove it."
                              f"{suggest(key, known)}")
    for key, target in _LEGACY_RUNCONFIG.items():
        if key in run and len(target) == 1:
            init[target[0]] = run[key]
        elif key in run:
            init.setdefault(target[0], {})[target[1]] = run[key]
    if run.get("keep_checkpoint_max") is not None:
        init.setdefault("callbacks", []).append({"KeepNCheckpoints": {"n": run["keep_checkpoint_max"]}})
    if run.get("mode") is not None:
        warnings.warn(f"runconfig.mode ({show(run['mode'])}) is not a setting of the trainer: format; the subcommand "
                      f"(fit / validate / validate_all) or run_trainer's mode decides what runs.")
    backend: dict[str, Any] = {k: run[k] for k in _LEGACY_BACKEND if k in run}
    cluster = {k: run[k] for k in fields if k in run}
    if cluster:
        backend["cluster_config"] = cluster
    device = run.get("target_device")
    if device is not None:
        device = device.upper() if isinstance(device, str) else None
        if device not in DEVICES:
            raise ConfigError(f"runconfig.target_device must be one of {', '.join(DEVICES)}, "
                              f"got {show(run['target_device'])}.")
    if backend and device in (None, "CSX"):
        init["backend"] = {"backend_type": "CSX", **backend}
    else:
        if backend:
            ignored = sorted(k for k in run if k in _LEGACY_BACKEND or k in fields)
            warnings.warn(f"runconfig.target_device is {device}: the CSX-only settings "
                          f"{', '.join('runconfig.' + k for k in ignored)} are ignored.")
        if device is not None:
            init["device"] = device

    # model
    model = check_dict(params.get("model"), "model")
    precision: dict[str, Any] = {}
    if "mixed_precision" in model:
        precision["enabled"] = model.pop("mixed_precision")
    if "fp16_type" in model:
        precision["fp16_type"] = model.pop("fp16_type")
    if model or model_name or "model" in params:
        spec = {}
        name = model.pop("name", None) or model_name
        if name is not None:
            spec["name"] = name
        spec.update(model)
        init["model"] = spec

    # optimizer
    if params.get("optimizer") is not None:
        opt = dict(check_dict(params["optimizer"], "optimizer"))
        if "optimizer_type" not in opt:
            raise ConfigError("Legacy key optimizer needs optimizer.optimizer_type (the optimizer class, e.g. AdamW).")
        otype = opt.pop("optimizer_type")
        if not isinstance(otype, str):
            raise ConfigError(f"optimizer.optimizer_type must be the optimizer class name (e.g. AdamW), got "
                              f"{show(otype)}.")
        try:
            otype = optimizer_class(str(otype)).__name__
        except ValueError:
            otype = str(otype)  # validation reports it with suggestions
        for key in _LEGACY_PRECISION_OPTIMIZER:
            if key in opt:
                precision[key] = opt.pop(key)
        if "grad_accum_steps" in opt:
            init.setdefault("loop", {})["grad_accum_steps"] = opt.pop("grad_accum_steps")
        if "learning_rate" in opt:
            lr = opt.pop("learning_rate")
            if isinstance(lr, str):
                try:
                    lr = float(lr)
                except ValueError:
                    pass  # validation reports it
            if is_number(lr):
                opt["lr"] = lr
            else:
                init["schedulers"] = [{"learning_rate": lr}]
        init["optimizer"] = {otype: opt}
    if precision:
        precision.setdefault("enabled", False)
        init["precision"] = precision
    if "sparsity" in params:
        init["sparsity"] = params["sparsity"]

    # inputs and checkpoints
    ckpt = {"ckpt_path": run["checkpoint_path"]} if "checkpoint_path" in run else {}
    if params.get("train_input") is not None:
        trainer["fit"] = {"train_dataloader": params["train_input"]}
        if params.get("eval_input") is not None:
            trainer["fit"]["val_dataloader"] = copy.deepcopy(params["eval_input"])
        trainer["fit"].update(ckpt)
    if params.get("eval_input") is not None:
        trainer["validate"] = {"val_dataloader": copy.deepcopy(params["eval_input"]), **ckpt}
        trainer["validate_all"] = {"val_dataloaders": [copy.deepcopy(params["eval_input"])]}
        if ckpt:
            trainer["validate_all"]["ckpt_paths"] = ckpt["ckpt_path"]
    return {"trainer": trainer}


__all__ = ["LEGACY_TOP_KEYS", "is_legacy", "convert_legacy"]
