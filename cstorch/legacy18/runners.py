"""The Model Zoo 1.8 runner classes (seeds/000_PyTorch_Runners.txt) over the runner of
`cstorch.trainer.runner`, which runs on the `Trainer`:

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
`cstorch.trainer.runner`) whose device is fixed: it writes its device (and, for the
compiler, compile_only) into a copy of the legacy flat `params`, and refuses params that
ask for another device. `PyTorchBaseRunner.create(model_fn, params)` is the 1.8
factory: it builds the `PyTorchBaseModel` (from `model_fn(params)`) and the runner
above; `SomeRunner.create(model_fn, params)` builds that class. Custom runners
subclass one of these (or the base) and override hooks, calling super(); `run()` uses
them when the factory returns them (the seed's "modify create": assign
`PyTorchBaseRunner.create`) or through its `runner_cls` argument.

`PyTorchBaseModel(params, model_fn, device=None)`: the model a runner runs, as 1.8
wrapped it: `model_fn(params)` (or a torch.nn.Module) built after seeding with
`runconfig.seed`; `.model` / `.torch_model` is the module, `__call__` its forward,
`train()` / `eval()` set its mode. Its optimizer and learning-rate scheduler are the
runner's, built by the Trainer from `params["optimizer"]` (one set of optimizers):
`get_optimizer()` / `get_lr_scheduler()` return them once a runner was built on the
model (None before, and when the run does not train).
"""
from __future__ import annotations

import copy
import inspect
from typing import Callable, Optional, Union

import torch

import cstorch
from cstorch.trainer.config import ConfigError
from cstorch.trainer.legacy import is_legacy
from cstorch.trainer.runner import PyTorchBaseRunner


def _seed(params: dict) -> None:
    seed = (params.get("runconfig") or {}).get("seed")
    if seed is not None:
        torch.manual_seed(seed)


class PyTorchBaseModel:
    """The model a 1.8 runner runs (module doc)."""

    def __init__(self, params: dict, model_fn: Union[Callable[[dict], torch.nn.Module], torch.nn.Module],
                 device: Optional[torch.device] = None):
        if isinstance(model_fn, torch.nn.Module):
            module = model_fn
        else:
            _seed(params)
            module = model_fn(params)
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"PyTorchBaseModel: model_fn(params) must return a torch.nn.Module, got "
                            f"{type(module).__name__}")
        self.params = params
        self.torch_model = self.model = module
        self.device = device
        runconfig = params.get("runconfig") or {}
        self.mode = runconfig.get("mode", "train")
        self.mixed_precision = bool((params.get("model") or {}).get("mixed_precision", False))
        self.runner: Optional[PyTorchBaseRunner] = None  # set by the runner built on this model

    def get_optimizer(self):
        """The runner's optimizer (None before a runner exists or when it does not train)."""
        return self.runner.optimizer if self.runner is not None else None

    def get_lr_scheduler(self):
        """The runner's learning-rate scheduler (None when there is none; the list when
        the params configure several)."""
        schedulers = self.runner.lr_schedulers if self.runner is not None else []
        return None if not schedulers else schedulers[0] if len(schedulers) == 1 else list(schedulers)

    def train(self) -> None:
        self.model.train()
        self.mode = "train"

    def eval(self) -> None:
        self.model.eval()
        self.mode = "eval"

    def __call__(self, *args, **kwargs):
        return self.model(*args, **kwargs)


def base_model(model_fn, params: dict, device: Optional[torch.device] = None) -> PyTorchBaseModel:
    """The PyTorchBaseModel of 1.8's create: `model_fn` is a PyTorchBaseModel subclass
    (built as `model_fn(params)`), or returns a torch.nn.Module or a PyTorchBaseModel."""
    if inspect.isclass(model_fn) and issubclass(model_fn, PyTorchBaseModel):
        return model_fn(params)
    if isinstance(model_fn, torch.nn.Module):
        return PyTorchBaseModel(params, model_fn, device)
    _seed(params)
    built = model_fn(params)
    return built if isinstance(built, PyTorchBaseModel) else PyTorchBaseModel(params, built, device)


def _runconfig(params: dict) -> dict:
    if not isinstance(params, dict) or not is_legacy(params):
        raise ConfigError("The 1.8 runners take the legacy flat params (runconfig, optimizer, train_input, ...).")
    return params.get("runconfig") or {}


def target_device(params: dict) -> str:
    """runconfig.target_device ("CPU", "GPU", "CSX"); unset: the existing backend's
    type, else CSX (as the Trainer)."""
    target = _runconfig(params).get("target_device")
    if target is None:
        b = cstorch.backend()
        return b.backend_type.name if b is not None else "CSX"
    target = str(target).upper()
    if target not in ("CPU", "GPU", "CSX"):
        raise ConfigError(f"runconfig.target_device must be CPU, GPU or CSX, got {target!r}")
    return target


def compiles_only(params: dict) -> bool:
    runconfig = _runconfig(params)
    if runconfig.get("compile_only") and runconfig.get("validate_only"):
        raise ConfigError("Please set one of compile_only and validate_only, not both.")
    return bool(runconfig.get("compile_only") or runconfig.get("validate_only"))


def _on_device(params: dict, target: str, runner: str) -> dict:
    """A copy of `params` whose runconfig says `target` (refusing another device)."""
    params = copy.deepcopy(params)
    _runconfig(params)
    runconfig = params.setdefault("runconfig", {})
    given = runconfig.get("target_device")
    if given is not None and str(given).upper() != target:
        raise ConfigError(f"{runner} runs on {target}, but runconfig.target_device is {given!r}; build the runner "
                          f"for that device (PyTorchBaseRunner.create picks it from the params).")
    runconfig["target_device"] = target
    return params


class PyTorchRunner(PyTorchBaseRunner):
    """Runs on CPU (`device` "cpu") or GPU ("cuda"): eager PyTorch, every hook every step."""

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


class PyTorchCSRunner(PyTorchBaseRunner):
    """Trains and evaluates on the Cerebras system (CSX): the steps are compiled."""

    def __init__(self, model, params: dict, **kwargs):
        if compiles_only(params):
            raise ConfigError(f"{type(self).__name__} runs the model; with compile_only / validate_only use "
                              f"PyTorchCSCompiler.")
        super().__init__(model, _on_device(params, "CSX", type(self).__name__), **kwargs)

    @classmethod
    def _create(cls, model_fn, params: dict, **kwargs) -> "PyTorchCSRunner":
        return cls(base_model(model_fn, params), params, **kwargs)


class PyTorchCSCompiler(PyTorchBaseRunner):
    """Compiles the model for the Cerebras system and runs nothing (compile_only, or
    validate_only when the params say so): each driver compiles its step(s) once."""

    def __init__(self, model, params: dict, **kwargs):
        compiles_only(params)  # both set: an error
        params = _on_device(params, "CSX", type(self).__name__)
        runconfig = params["runconfig"]
        if not runconfig.get("validate_only"):
            runconfig["compile_only"] = True
        super().__init__(model, params, **kwargs)

    @classmethod
    def _create(cls, model_fn, params: dict, **kwargs) -> "PyTorchCSCompiler":
        return cls(base_model(model_fn, params), params, **kwargs)


def create_runner(model_fn, params: dict, **kwargs) -> PyTorchBaseRunner:
    """1.8's `PyTorchBaseRunner.create`: the runner of the params' device (module doc)."""
    only = compiles_only(params)
    target = target_device(params)
    if target == "CSX":
        cls = PyTorchCSCompiler if only else PyTorchCSRunner
    elif only:
        raise ConfigError(f"compile_only / validate_only compile for the Cerebras system; the target device is "
                          f"{target}: target CSX.")
    else:
        cls = PyTorchRunner
    return cls._create(model_fn, params, **kwargs)


__all__ = ["PyTorchBaseModel", "PyTorchRunner", "PyTorchCSCompiler", "PyTorchCSRunner", "create_runner",
           "base_model"]
