"""The Model Zoo 1.8 device runner classes (seeds/000_PyTorch_Runners.txt) over the runner
of `cstorch.trainer.legacy.runner`, which runs on the `Trainer`:

    class                       what it runs                      built by create() when
    --------------------------  --------------------------------  -------------------------------
    PyTorchRunner(device,       CPU ("cpu") or GPU ("cuda")       runconfig.target_device CPU/GPU
      model, params)
    PyTorchCSCompiler(model,    CSX, compile only (or validate    target CSX and compile_only or
      params)                   only): the steps are compiled,    validate_only
                                nothing runs
    PyTorchCSRunner(model,      CSX: training / evaluation        target CSX otherwise
      params)

Each is a `PyTorchBaseRunner` (hooks, overridable steps and drivers: see
`cstorch.trainer.legacy.runner`) whose device is fixed: it writes its device (and, for the
compiler, compile_only) into a copy of the legacy flat `params`, and refuses params that
ask for another device. Each class declares the kind of run it serves (`runner_kind`:
"device", "system", "compiler"), which registers it with `PyTorchBaseRunner`, whose
`create(model_fn, params)` is the 1.8 factory: it builds the `PyTorchBaseModel`
(`cstorch.trainer.legacy.base_model`, from `model_fn(params)`) and the runner of the kind the
params ask for (`runner_kind(params)`); `SomeRunner.create(model_fn, params)` builds
that class. The package `cstorch.trainer` imports this module, so the classes are
registered whenever the base runner can be used. Custom runners
subclass one of these (or the base) and override hooks, calling super(); `run()` uses
them when the factory returns them (the seed's "modify create": assign
`PyTorchBaseRunner.create`) or through its `runner_cls` argument.

Differences from the real system:
    Legacy flat params only. There is no `PyTorchDistRunner` nor
    `PyTorchCSAppliance`, and the runners' private attributes (`_model`, `_optimizer`,
    ...) do not exist.
"""
from __future__ import annotations

import copy

import torch

import cstorch

from ..checks import show
from ..config import ConfigError
from .base_model import base_model
from .flat_format import is_legacy
from .runconfig import Runconfig
from .runner import PyTorchBaseRunner


def _runconfig(params: dict) -> Runconfig:
    """The runners' settings of the legacy flat `params` (`Runconfig`)."""
    if not isinstance(params, dict) or not is_legacy(params):
        raise ConfigError("The 1.8 runners take the legacy flat params (runconfig, optimizer, train_input, ...).")
    return Runconfig.of(params)


def target_device(params: dict) -> str:
    """runconfig.target_device ("CPU", "GPU", "CSX"); unset: the existing backend's
    type, else CSX (as the Trainer)."""
    target = _runconfig(params).target_device
    if target is None:
        b = cstorch.backend()
        return b.backend_type.name if b is not None else "CSX"
    return target


def compiles_only(params: dict) -> bool:
    return _runconfig(params).compiles_only


def _on_device(params: dict, target: str, runner: str) -> dict:
    """A copy of `params` whose runconfig says `target` (refusing another device); with
    `compile_only`, it says that too unless it asks to validate only."""
    given = _runconfig(params)
    if given.target_device not in (None, target):
        raise ConfigError(f"{runner} runs on {target}, but runconfig.target_device is "
                          f"{show(params['runconfig']['target_device'])}; build the runner for that device "
                          f"(PyTorchBaseRunner.create picks it from the params).")
    params = copy.deepcopy(params)
    params["runconfig"] = {**(params.get("runconfig") or {}), "target_device": target}
    return params


class PyTorchRunner(PyTorchBaseRunner, device_runner=True):
    """Runs on CPU (`device` "cpu") or GPU ("cuda"): eager PyTorch, every hook every step.

    Args:
        device: "cpu", "cuda" or a torch.device; None: "cpu".
        model: the model, as for PyTorchBaseRunner.
        params: the legacy params (their target device must be this device's).
        **kwargs: PyTorchBaseRunner's keyword arguments (callbacks, loggers, base_dir).
    """

    @classmethod
    def serves(cls, params: dict) -> bool:
        if target_device(params) == "CSX":
            return False
        if compiles_only(params):
            raise ConfigError(f"compile_only / validate_only compile for the Cerebras system; the target device is "
                              f"{target_device(params)}: target CSX.")
        return True

    def __init__(self, device, model, params: dict, **kwargs):
        self.device = torch.device(device if device is not None else "cpu")
        targets = {"cpu": "CPU", "cuda": "GPU"}
        if self.device.type not in targets:
            raise ValueError(f"PyTorchRunner runs on a cpu or cuda device, got {self.device}")
        super().__init__(model, _on_device(params, targets[self.device.type], type(self).__name__), **kwargs)

    @classmethod
    def _create(cls, model_fn, params: dict, **kwargs) -> "PyTorchRunner":
        device = torch.device("cuda" if target_device(params) == "GPU" else "cpu")
        return cls(device, base_model(model_fn, params, device), params, **kwargs)


class PyTorchCSRunner(PyTorchBaseRunner, device_runner=True):
    """Trains and evaluates on the Cerebras system (CSX): the steps are compiled.

    Args:
        model: the model, as for PyTorchBaseRunner.
        params: the legacy params (target device CSX, neither compile_only nor validate_only).
        **kwargs: PyTorchBaseRunner's keyword arguments (callbacks, loggers, base_dir).
    """

    @classmethod
    def serves(cls, params: dict) -> bool:
        return target_device(params) == "CSX" and not compiles_only(params)

    def __init__(self, model, params: dict, **kwargs):
        if compiles_only(params):
            raise ConfigError(f"{type(self).__name__} runs the model; with compile_only / validate_only use "
                              f"PyTorchCSCompiler.")
        super().__init__(model, _on_device(params, "CSX", type(self).__name__), **kwargs)

    @classmethod
    def _create(cls, model_fn, params: dict, **kwargs) -> "PyTorchCSRunner":
        return cls(base_model(model_fn, params), params, **kwargs)


class PyTorchCSCompiler(PyTorchBaseRunner, device_runner=True):
    """Compiles the model for the Cerebras system and runs nothing (compile_only, or
    validate_only when the params say so): each driver compiles its step(s) once.

    Args:
        model: the model, as for PyTorchBaseRunner.
        params: the legacy params (target device CSX, with compile_only or validate_only).
        **kwargs: PyTorchBaseRunner's keyword arguments (callbacks, loggers, base_dir).
    """

    @classmethod
    def serves(cls, params: dict) -> bool:
        return target_device(params) == "CSX" and compiles_only(params)

    def __init__(self, model, params: dict, **kwargs):
        validate_only = _runconfig(params).validate_only  # both set: an error
        params = _on_device(params, "CSX", type(self).__name__)
        if not validate_only:
            params["runconfig"]["compile_only"] = True
        super().__init__(model, params, **kwargs)

    @classmethod
    def _create(cls, model_fn, params: dict, **kwargs) -> "PyTorchCSCompiler":
        return cls(base_model(model_fn, params), params, **kwargs)


__all__ = ["PyTorchRunner", "PyTorchCSCompiler", "PyTorchCSRunner"]
