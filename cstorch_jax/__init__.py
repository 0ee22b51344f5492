"""cstorch's engine: capture a torch step as one pure core-ATen graph, lower it to
jax.numpy, compile it with XLA into one immutable executable, and run it.

Knows torch and jax; knows nothing of the `cstorch` facade.

Importing it loads neither the lowering tables (`cstorch_jax.lowering`: when a step is
first compiled) nor the report layer (`cstorch_jax.explore`: when a report is asked for).
"""
import importlib

from . import optim  # noqa: F401  (registers the optimizer ops and their lowerings)
from .async_tensor import DeferredTensor, LaunchValues, UncomputedTensor, WindowTensor
from .lazy_tensor import LazyTensor, materialize
from .capture import CapturedGraph, TensorSpec, capture, trace_signature
from .errors import (
    CaptureError,
    CstorchError,
    MaterializationError,
    StaticGraphError,
    UnsupportedDTypeError,
    UnsupportedOpError,
)
from .dtypes import to_jax, to_torch
from .executable import Executable
from .jit import JitFunction, jit
from .platform_policy import apply_host_policies
from .placement import DataParallel, FullyShardedDataParallel, SingleDevice, join_processes, process_index
from .runtime import DeviceState
from .window import StepsExecutable

#: submodules loaded when first used, still reachable as attributes of the package
_LAZY_SUBMODULES = ("explore", "lowering", "passes")


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "jit", "JitFunction", "apply_host_policies", "capture", "trace_signature", "DataParallel", "FullyShardedDataParallel", "SingleDevice", "join_processes", "process_index", "CapturedGraph", "TensorSpec", "Executable", "DeviceState",
    "StepsExecutable", "DeferredTensor", "LaunchValues", "WindowTensor", "UncomputedTensor", "LazyTensor", "materialize", "to_jax", "to_torch",
    "CstorchError", "StaticGraphError", "MaterializationError", "UnsupportedOpError", "UnsupportedDTypeError",
    "CaptureError",
]
