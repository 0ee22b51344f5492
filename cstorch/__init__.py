"""cstorch: the Cerebras PyTorch API (`import cerebras.pytorch as cstorch`) on XLA.

The CSX backend (alias "XLA") captures the whole training step once, lowers it to
jax.numpy and runs it as one immutable XLA executable; the CPU/GPU backends run the
same script as eager PyTorch.
"""
from . import amp, checkpoint, distributed, metrics, optim, random, storage, utils
from . import backends
from .random import get_rng_state, manual_seed, set_rng_state
from ._version import __version__
from ._backend import Backend, BackendType, backend, current_backend, current_torch_device, use_cs
from .storage import InvalidCheckpointError, load, save
from .closures import checkpoint_closure, step_closure
from .compile import compile
from .trace import compile_step, trace
from .utils.data import current_executor
from cstorch_jax import CstorchError, MaterializationError, StaticGraphError, UnsupportedOpError

__all__ = [
    "__version__", "backend", "Backend", "BackendType", "current_backend", "current_torch_device", "use_cs",
    "compile", "trace", "compile_step", "step_closure", "checkpoint_closure", "save", "load", "current_executor",
    "get_rng_state", "set_rng_state", "manual_seed", "amp", "checkpoint", "metrics", "random", "optim", "storage",
    "utils", "distributed", "CstorchError", "StaticGraphError", "MaterializationError", "UnsupportedOpError",
    "InvalidCheckpointError",
]
