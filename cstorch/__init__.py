"""cstorch: the Cerebras PyTorch API (`import cerebras.pytorch as cstorch`) on XLA.

The CSX backend (alias "XLA") captures the whole training step once, lowers it to
jax.numpy and runs it as one immutable XLA executable; the CPU/GPU backends run the
same script as eager PyTorch.

As in the real package, the attribute `cstorch.backend` is the function `backend(...)`
while `from cstorch.backend import use_cs` reads the module `cstorch/backend/` (see
`_shadowing`).
"""
from ._shadowing import shadow_submodules

shadow_submodules(__name__, "backend")  # before anything imports the cstorch.backend module

#: the real package's switch for building its documentation (it then skips its compiled
#: core); never set here, where there is no compiled core to skip
_generating_docs = False

from . import amp, checkpoint, distributed, metrics, optim, random, storage, utils
from . import core, experimental, mesh, nn, profiler, sparse
from . import backends
from .random import get_rng_state, manual_seed, set_rng_state
from ._version import __version__
from ._backend import Backend, BackendType, backend, current_backend, current_torch_device, use_cs
from .storage import InvalidCheckpointError, load, save
from .closures import checkpoint_closure, step_closure
from .compile import compile
from .trace import compile_step, trace
from .utils.data import current_executor
from .factories import from_numpy, full, full_like, make_constant, ones, ones_like, tensor, to_numpy, zeros, zeros_like
from .debug import add_debug_name, get_debug_name, name_scope, set_debug_scope
from .compiler_hints import current_pol, device, device_annotation, pol, register_decomposition
from .unsupported import UnsupportedAPIError, module_getattr as _unsupported_getattr
from .backends import backends  # the flag tree (cstorch.backends.csx...), as in the real package
from cstorch_jax import CstorchError, MaterializationError, StaticGraphError, UnsupportedOpError


def __getattr__(name):
    if name in ("summarize_scalar", "summarize_tensor"):  # removed from the real API as well
        raise AttributeError(
            f"cstorch.{name} is now removed. Create a SummaryWriter and write to it directly, inside a step "
            f"closure:\n\n\timport cerebras.pytorch.utils.tensorboard\n\n"
            f"\twriter = cstorch.utils.tensorboard.SummaryWriter(log_dir='./log_dir')\n"
            f"\twriter.add_{name.split('_')[1]}(...)\n")
    return _unsupported_getattr(__name__)(name)


__all__ = [
    "__version__", "backend", "Backend", "BackendType", "current_backend", "current_torch_device", "use_cs",
    "compile", "trace", "compile_step", "step_closure", "checkpoint_closure", "save", "load", "current_executor",
    "get_rng_state", "set_rng_state", "manual_seed", "amp", "checkpoint", "metrics", "random", "optim", "storage",
    "utils", "distributed", "CstorchError", "StaticGraphError", "MaterializationError", "UnsupportedOpError",
    "InvalidCheckpointError",
    "backends", "nn", "sparse", "mesh", "experimental", "profiler", "core", "full", "full_like", "ones", "ones_like",
    "zeros", "zeros_like", "tensor", "from_numpy", "to_numpy", "make_constant", "name_scope", "set_debug_scope",
    "add_debug_name", "get_debug_name", "pol", "current_pol", "device", "device_annotation",
    "register_decomposition", "UnsupportedAPIError",
]
