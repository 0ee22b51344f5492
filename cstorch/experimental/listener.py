"""Traced-tensor hooks (the real `cerebras.pytorch.experimental.listener`).

`register_traced_tensor_hook(hook)` registers `hook(tensor, name) -> None` and returns
a `torch.utils.hooks.RemovableHandle`; hooks are kept in registration order until
their handle is removed.

What differs from the wafer: the real system calls each hook with every tensor an op
creates while a step is traced (forward and backward), named after its scope, so that
tools can mark tensors for the wafer to dump. cstorch does not call the hooks, so
registering one is harmless and changes nothing that is computed; inspect values with
step closures instead.
"""
from collections import OrderedDict
from typing import Callable, Dict

import torch
from torch.utils.hooks import RemovableHandle

TracedTensorHook = Callable[[torch.Tensor, str], None]

_global_traced_tensor_hooks: Dict[int, TracedTensorHook] = OrderedDict()


def register_traced_tensor_hook(hook: TracedTensorHook) -> RemovableHandle:
    """Register `hook(tensor, name)` for the tensors created during tracing (never called
    here; see the module's doc). Returns the handle that removes it."""
    if not callable(hook):
        raise TypeError(f"A traced-tensor hook must be callable as hook(tensor, name), got {type(hook).__name__}")
    handle = RemovableHandle(_global_traced_tensor_hooks)
    _global_traced_tensor_hooks[handle.id] = hook
    return handle


__all__ = ["TracedTensorHook", "register_traced_tensor_hook"]
