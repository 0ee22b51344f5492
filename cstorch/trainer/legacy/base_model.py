"""`PyTorchBaseModel(params, model_fn, device=None)`: the model a Model Zoo 1.8 runner
runs, as 1.8 wrapped it: `model_fn(params)` (or a torch.nn.Module) built after seeding
with `runconfig.seed`; `.model` / `.torch_model` is the module, `__call__` its forward,
`train()` / `eval()` set its mode. Its optimizer and learning-rate scheduler are the
runner's, built by the Trainer from `params["optimizer"]` (one set of optimizers):
`get_optimizer()` / `get_lr_scheduler()` return them once a runner was built on the
model (None before, and when the run does not train). The runner
(`cstorch.trainer.legacy.runner`) takes such a model in place of a torch module.

Differences from the real system:
    `PyTorchBaseModel` builds no optimizer of its own: `get_optimizer()` and
    `get_lr_scheduler()` return the runner's (built by the Trainer), None before a runner
    exists.
"""
from __future__ import annotations

import inspect
from typing import Callable, Optional, Protocol, Union

import torch

from .runconfig import Runconfig


class RunnerView(Protocol):
    """What the model reads of the runner built on it (`cstorch.trainer.legacy.runner`'s
    PyTorchBaseRunner, which imports this module: the model names no runner type)."""

    optimizer: Optional[torch.optim.Optimizer]
    lr_schedulers: list


def _seed(params: dict) -> None:
    seed = Runconfig.of(params).seed
    if seed is not None:
        torch.manual_seed(seed)


class PyTorchBaseModel:
    """The model a 1.8 runner runs (module doc).

    Args:
        params: the legacy flat params dict (`runconfig.seed` seeds torch before `model_fn` runs).
        model_fn: `params -> torch.nn.Module`, or the module itself.
        device: the device of a CPU/GPU runner; None on CSX.
    """

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
        settings = Runconfig.of(params)
        self.mode = settings.mode
        self.mixed_precision = settings.mixed_precision
        self.runner: Optional[RunnerView] = None  # set by the runner built on this model

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


__all__ = ["PyTorchBaseModel", "base_model"]
