"""`cstorch.compile(model, backend=None)`: register a model with the backend."""
from __future__ import annotations

import functools

import torch

from . import _backend


class CompiledModel:
    """Calls the model's forward; carries the model's public methods (`.train`,
    `.eval`, `.parameters`, ...) and `.device`. Returned by `cstorch.compile`."""

    def __init__(self, model: torch.nn.Module, backend: _backend.Backend):
        self.model = model
        self.backend = backend
        functools.update_wrapper(self, model.forward, updated=())

    def __call__(self, *args, **kwargs):
        return self.model(*args, **kwargs)

    @property
    def device(self) -> torch.device:
        return self.backend.torch_device

    def __getattr__(self, name):
        if name.startswith("_") or name in ("model", "backend"):
            raise AttributeError(name)
        return getattr(self.model, name)

    def __repr__(self) -> str:
        return f"CompiledModel({self.model.__class__.__name__}, backend={self.backend.backend_type.name})"


def compile(model: torch.nn.Module, backend=None) -> CompiledModel:  # noqa: A001  (the real API's name)
    """Prepare `model` to run on `backend` (default: the current one, else CPU). As in the
    real API, `model.device` is then the backend's torch device (Model Zoo callbacks make
    their tensors there: `torch.tensor(0.0).to(model.device)`).

    Args:
        model: the module to run.
        backend: a Backend (the current one), a backend type string (creates the backend) or None (the
            current backend, else a new CPU backend).

    Differences from the real system:
        Returns a callable wrapper of `model`; there is no sparsity `.apply` patching.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"cstorch.compile expects a torch.nn.Module, got {type(model).__name__}")
    if backend is None:
        b = _backend.current_backend_impl()
    elif isinstance(backend, str):
        b = _backend.backend(backend)
    elif isinstance(backend, _backend.Backend):
        b = backend
        if b is not _backend.backend():
            raise RuntimeError("Compile got a different backend than the current backend.")
    else:
        raise TypeError(f"backend must be None, a str or a Backend, got {type(backend).__name__}")
    if b.is_gpu:
        model.to(b.torch_device)
    try:
        model.device = b.torch_device
    except AttributeError:  # the model's own read-only `device` (Hugging Face models) already says it
        pass
    b.register_model(model)
    return CompiledModel(model, b)
