"""The Trainer's arguments: the constructor contract, checked before anything is created;
the run methods' dataloader arguments; the run folders made once the checks passed."""
from __future__ import annotations

import contextlib
import os
import time

import torch

import cstorch

from .callbacks.base import CoreCallback, is_callback
from .callbacks.checkpoint import Checkpoint
from .callbacks.logs import Logging
from .callbacks.loop import TrainingLoop, ValidationLoop
from .callbacks.precision import MixedPrecision
from .checks import DEVICES, model_dir_problem, seed_problem, show
from .loggers import Logger


def check_trainer_arguments(device, backend, model_dir, model, optimizer, schedulers, precision, sparsity, loop,
                     checkpoint, logging, callbacks, loggers, seed, autorestart) -> None:
    """Every check of the Trainer's arguments that needs nothing built: a mistake is an
    error before any directory, backend or model exists."""
    if model_dir is None or model_dir == "":
        raise ValueError("model_dir is a required argument")
    if not isinstance(model_dir, (str, os.PathLike)):
        raise TypeError(f"model_dir must be a path (str or os.PathLike), got {type(model_dir).__name__}")
    problem = model_dir_problem(model_dir)
    if problem is not None:
        raise ValueError(f"model_dir {problem}")
    if device is not None and backend is not None:
        raise ValueError(f"Exactly one of device and backend may be given, got device={show(device)} and "
                         f"backend={show(backend)}. Pass device='CSX'|'CPU'|'GPU', or a backend made with "
                         f"cstorch.backend(...).")
    if device is not None and (not isinstance(device, str) or device.upper() not in DEVICES):
        raise ValueError(f"device must be one of {DEVICES} (or None with backend=...), got {show(device)}")
    if backend is not None and not isinstance(backend, cstorch.Backend):
        raise TypeError(f"backend must be a cstorch backend (cstorch.backend(...)), got {type(backend).__name__}")
    if device is None and backend is None and cstorch.backend() is None:
        raise ValueError("The Trainer needs a device ('CSX', 'CPU' or 'GPU') or a backend "
                         "(cstorch.backend(...)); got neither and no backend exists yet.")
    if model is None:
        raise ValueError("model is a required argument: a torch.nn.Module or a function that returns one")
    if not isinstance(model, torch.nn.Module) and not callable(model):
        raise TypeError(f"model must be a torch.nn.Module or a callable returning one, got {type(model).__name__}")
    if isinstance(optimizer, cstorch.optim.Optimizer) and not isinstance(model, torch.nn.Module):
        raise ValueError("An optimizer instance needs the model instance it was built for, but model is a "
                         "factory: pass optimizer as a callable `lambda model: Optimizer(model.parameters(), "
                         "...)`, or pass the built model.")
    if optimizer is not None and not isinstance(optimizer, cstorch.optim.Optimizer) and not callable(optimizer):
        raise TypeError(f"optimizer must be a cstorch.optim.Optimizer, a callable model -> Optimizer, or None; "
                        f"got {type(optimizer).__name__}")
    for name, value, cls in (("precision", precision, MixedPrecision), ("checkpoint", checkpoint, Checkpoint),
                             ("logging", logging, Logging), ("loop", loop, (TrainingLoop, ValidationLoop))):
        if value is not None and not isinstance(value, cls):
            expected = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
            raise TypeError(f"{name} must be a {expected} instance, got {type(value).__name__}")
    for i, cb in enumerate(callbacks or []):
        if not is_callback(cb):
            raise TypeError(f"callbacks[{i}] must be a Callback instance, got {type(cb).__name__}")
        if isinstance(cb, CoreCallback):
            raise ValueError(f"callbacks[{i}] is a {type(cb).__name__}, a core callback: pass it as the "
                             f"Trainer's own argument (loop=, checkpoint=, precision=, logging=).")
    for i, lg in enumerate(loggers or []):
        if not isinstance(lg, Logger):
            raise TypeError(f"loggers[{i}] must be a Logger instance (TensorBoardLogger, CSVLogger, "
                            f"ProgressLogger, ...), got {type(lg).__name__}")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise TypeError(f"seed must be an int or None, got {show(seed)}")
    if seed is not None and seed_problem(seed) is not None:
        raise ValueError(f"seed {seed_problem(seed)}")
    if sparsity is not None:
        raise NotImplementedError("Weight sparsity (cstorch.sparse) is not supported by cstorch yet; remove "
                                  "`sparsity`.")
    if autorestart is not None:
        raise NotImplementedError("autorestart is not supported: rerun the same command instead, which "
                                  "autoloads the latest checkpoint.")
    items = list(schedulers) if isinstance(schedulers, (list, tuple)) else [] if schedulers is None else [schedulers]
    for i, s in enumerate(items):
        if not isinstance(s, cstorch.optim.scheduler.Scheduler) and not callable(s):
            raise TypeError(f"schedulers[{i}] must be a cstorch scheduler or a callable optimizer -> scheduler, "
                            f"got {type(s).__name__}")
    if items and optimizer is None:
        raise ValueError("schedulers were given without an optimizer: a scheduler drives an optimizer's "
                         "learning rate, so pass optimizer= too (or drop schedulers for validation only).")
    existing = cstorch.backend()
    if backend is not None and backend is not existing:
        raise ValueError("The backend given to the Trainer is not the process's current backend "
                         "(cstorch.backend()); a process has one backend.")
    if device is not None and existing is not None and existing.backend_type.name != device.upper():
        raise ValueError(f"Cannot instantiate multiple trainers with different device types: this process "
                         f"already has a {existing.backend_type.name} backend and the Trainer asks for "
                         f"{device.upper()}.")


def loader_list(value, name: str) -> list:
    if value is None:
        return []
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for i, dl in enumerate(items):
        if not isinstance(dl, cstorch.utils.data.DataLoader):
            where = name if len(items) == 1 else f"{name}[{i}]"
            raise TypeError(f"{where} must be a cstorch.utils.data.DataLoader (wrap your loader as "
                            f"cstorch.utils.data.DataLoader(input_fn)), got {type(dl).__name__}")
    return items


def _timestamp_dir(parent: str) -> str:
    """`parent/<YYYYmmdd_HHMMSS>` (with a suffix if taken), created."""
    stamp = time.strftime("%Y%m%d_%H%M%S")
    path, n = os.path.join(parent, stamp), 1
    while True:
        try:
            os.makedirs(path)
            return path
        except FileExistsError:
            path, n = os.path.join(parent, f"{stamp}_{n}"), n + 1


def make_run_dirs(model_dir: str) -> tuple[str, str]:
    """(artifact_dir, summary_dir) of a new Trainer: `model_dir/cerebras_logs/<timestamp>`
    (with a `latest` link to it) and `model_dir/<timestamp>`, created."""
    os.makedirs(model_dir, exist_ok=True)
    artifact_dir = _timestamp_dir(os.path.join(model_dir, "cerebras_logs"))
    latest = os.path.join(model_dir, "cerebras_logs", "latest")
    with contextlib.suppress(OSError):
        if os.path.islink(latest):
            os.remove(latest)
        os.symlink(os.path.basename(artifact_dir), latest)
    return artifact_dir, _timestamp_dir(model_dir)


def remove_empty_run_dirs(artifact_dir, summary_dir) -> None:
    """Undo `make_run_dirs` where nothing was written: an empty `artifact_dir` (with the
    `latest` link to it, and `cerebras_logs` when that leaves it empty) and an empty
    `summary_dir` are removed, so a run leaves no empty folder behind."""
    artifact_dir, summary_dir = os.fspath(artifact_dir), os.fspath(summary_dir)
    logs = os.path.dirname(artifact_dir)
    latest = os.path.join(logs, "latest")
    for folder in (artifact_dir, summary_dir):
        with contextlib.suppress(OSError):  # not empty, already gone, or not ours to remove
            os.rmdir(folder)
    if not os.path.exists(artifact_dir):
        with contextlib.suppress(OSError):
            if os.path.islink(latest) and os.readlink(latest) == os.path.basename(artifact_dir):
                os.remove(latest)
        with contextlib.suppress(OSError):
            os.rmdir(logs)
