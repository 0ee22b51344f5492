"""cstorch's engine: capture a torch step as one pure core-ATen graph, lower it to
jax.numpy, compile it with XLA into one immutable executable, and run it.

Knows torch and jax; knows nothing of the `cstorch` facade."""
from . import explore  # noqa: F401  (StepReport, diff: look inside a compiled step)
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

__all__ = [
    "jit", "JitFunction", "apply_host_policies", "capture", "trace_signature", "DataParallel", "FullyShardedDataParallel", "SingleDevice", "join_processes", "process_index", "CapturedGraph", "TensorSpec", "Executable", "DeviceState",
    "StepsExecutable", "DeferredTensor", "LaunchValues", "WindowTensor", "UncomputedTensor", "LazyTensor", "materialize", "to_jax", "to_torch",
    "CstorchError", "StaticGraphError", "MaterializationError", "UnsupportedOpError", "UnsupportedDTypeError",
    "CaptureError",
]
