"""Hooks on the tensors a run brings back to the host (the real
`cerebras.pytorch.backend.ltc_backend` hooks of its lazy-tensor backend).

`register_before_tensor_to_cpu(hook)` / `register_after_tensor_to_cpu(hook)` register
`hook(tensor, name) -> None` and return a `torch.utils.hooks.RemovableHandle`; the
hooks live in ordered registries, in registration order, until their handle is
removed. `run_before_tensor_to_cpu_hooks` / `run_after_tensor_to_cpu_hooks` call
them; it is the runtime's job to call these where a device value reaches the host.

What differs from the wafer: the real backend calls the hooks whenever it fetches a
tensor from the appliance (a step's outputs for step closures, state for checkpoints).
cstorch's runtime does not call them yet, so registering a hook is harmless and the
hook is not called: code that uses them to time batches (the Model Zoo's throughput
profiler) must time them another way.
"""
from collections import OrderedDict
from typing import Callable, Dict

import torch
from torch.utils.hooks import RemovableHandle

TensorToCpuHook = Callable[[torch.Tensor, str], None]

_before_tensor_to_cpu_hooks: Dict[int, TensorToCpuHook] = OrderedDict()
_after_tensor_to_cpu_hooks: Dict[int, TensorToCpuHook] = OrderedDict()


def _register(registry: Dict[int, TensorToCpuHook], hook: TensorToCpuHook) -> RemovableHandle:
    if not callable(hook):
        raise TypeError(f"A tensor-to-cpu hook must be callable as hook(tensor, name), got {type(hook).__name__}")
    handle = RemovableHandle(registry)
    registry[handle.id] = hook
    return handle


def register_before_tensor_to_cpu(hook: TensorToCpuHook) -> RemovableHandle:
    """Register `hook(tensor, name)` to be called before a tensor is brought to the host."""
    return _register(_before_tensor_to_cpu_hooks, hook)


def register_after_tensor_to_cpu(hook: TensorToCpuHook) -> RemovableHandle:
    """Register `hook(tensor, name)` to be called with each tensor brought to the host."""
    return _register(_after_tensor_to_cpu_hooks, hook)


def run_before_tensor_to_cpu_hooks(tensor: torch.Tensor, name: str) -> None:
    """Call the registered before-hooks, in registration order."""
    for hook in list(_before_tensor_to_cpu_hooks.values()):
        hook(tensor, name)


def run_after_tensor_to_cpu_hooks(tensor: torch.Tensor, name: str) -> None:
    """Call the registered after-hooks, in registration order."""
    for hook in list(_after_tensor_to_cpu_hooks.values()):
        hook(tensor, name)


__all__ = ["TensorToCpuHook", "register_before_tensor_to_cpu", "register_after_tensor_to_cpu",
           "run_before_tensor_to_cpu_hooks", "run_after_tensor_to_cpu_hooks"]
