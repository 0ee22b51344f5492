"""Backends: CSX (alias XLA) runs the compiled wafer executable; CPU/GPU run eager torch.

One backend per process, as on the real system.
"""
from __future__ import annotations

import enum
import os
import warnings
from pathlib import Path
from typing import Optional

import torch

import cstorch_jax

from . import backends
from .distributed.cluster_config import ClusterConfig
from .distributed.processes import join_from_environment
from .run import Run
from .state import StateRegistry


class BackendType(enum.Enum):
    CPU = "CPU"
    GPU = "GPU"
    CSX = "CSX"

    @property
    def is_cpu(self) -> bool:
        return self is BackendType.CPU

    @property
    def is_gpu(self) -> bool:
        return self is BackendType.GPU

    @property
    def is_csx(self) -> bool:
        return self is BackendType.CSX

    @classmethod
    def from_str(cls, backend_type: str) -> "BackendType":
        key = str(backend_type).upper()
        if key == "XLA":
            return cls.CSX
        try:
            return cls[key]
        except KeyError:
            raise ValueError(
                f"Invalid Cerebras PyTorch backend type specified: {backend_type!r}. Expected one of "
                f"{[t.name for t in cls] + ['XLA']} (case-insensitive)."
            ) from None


class Backend:
    """The active backend: device, the run's stateful objects (`registry`, see
    `cstorch.state.registry`) and the run machinery.

    Args:
        backend_type: the type of the backend.
        artifact_dir: where the run writes its files; None: `./cerebras_logs` on CSX, else the working
            directory.
        cluster_config: the cluster (`num_csx` devices) of a CSX backend; ignored by the others.
        compile_only: capture and compile the first step and run none.
        validate_only: like `compile_only` (the step is also compiled by XLA).
        compile_dir: the real system's compile directory (recorded, not used).
        placement: where a CSX run's arrays live (a `cstorch_jax` placement); None: one device.
    """

    def __init__(self, backend_type: BackendType, artifact_dir: Optional[str] = None,
                 cluster_config: Optional[ClusterConfig] = None, compile_only: bool = False,
                 validate_only: bool = False, compile_dir: str = "cached_compile", placement=None):
        self.backend_type = backend_type
        default_dir = "./cerebras_logs" if backend_type.is_csx else "./"
        # created by the first write into it (an executor's `artifact_dir`, a profiler's save)
        self.artifact_dir = Path(os.path.abspath(artifact_dir or default_dir))
        self.cluster_config = cluster_config if backend_type.is_csx else None
        self.compile_dir = compile_dir
        self.compile_only = compile_only
        self.validate_only = validate_only
        self.placement = placement  # where a CSX run's arrays live (a cstorch_jax.Placement)
        self.shard_state = False
        self.registry = StateRegistry()
        self.run = Run(self)

    @property
    def torch_device(self) -> torch.device:
        return torch.device("cuda") if self.backend_type.is_gpu else torch.device("cpu")

    @property
    def device(self) -> torch.device:
        return self.torch_device

    @property
    def is_cpu(self) -> bool:
        return self.backend_type.is_cpu

    @property
    def is_gpu(self) -> bool:
        return self.backend_type.is_gpu

    @property
    def is_csx(self) -> bool:
        return self.backend_type.is_csx

    @property
    def is_tracing(self) -> bool:
        return self.run.capturing is not None

    @property
    def is_e2e_execution(self) -> bool:
        return not (self.compile_only or self.validate_only)

    def to_cpu(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.to("cpu")

    @property
    def models(self) -> list[torch.nn.Module]:
        """The models compiled for this backend, in order."""
        return self.registry.models

    def register_model(self, model: torch.nn.Module) -> None:
        self.registry.register_model(model)

    def __repr__(self) -> str:
        return f"Backend({self.backend_type.name})"


_BACKEND: Optional[Backend] = None
#: the registry of objects created while no backend exists; the next backend adopts it
_PENDING = StateRegistry()


def run_registry() -> StateRegistry:
    """Where a stateful object registers: the current backend's registry, or (before any
    backend exists) the pending one that the next backend adopts."""
    return _BACKEND.registry if _BACKEND is not None else _PENDING


#: the arguments each backend type takes after its type, in order, with their defaults
#: (those of the real backends; `cstorch.backend.get_backend_args` shows them)
BACKEND_ARGS: dict = {
    BackendType.CPU: {"artifact_dir": None},
    BackendType.GPU: {"artifact_dir": None, "enable_distributed": False, "main_process_id": 0,
                      "dist_backend": "nccl", "init_method": None, "sync_batchnorm": False},
    BackendType.CSX: {"artifact_dir": None, "compile_dir": "cached_compile", "compile_only": False,
                      "validate_only": False, "cluster_config": None},
}


def _make(backend_type: BackendType, args, kwargs) -> Backend:
    if backend_type.is_cpu:
        if "mixed_precision" in kwargs:
            raise ValueError("The CPU backend does not take mixed_precision=; use cstorch.amp.autocast() instead.")
    elif backend_type.is_gpu:
        if not torch.cuda.is_available():
            raise RuntimeError("The GPU backend needs a CUDA device and a CUDA build of torch; none is available.")
    names = list(BACKEND_ARGS[backend_type])
    if len(args) > len(names):
        raise TypeError(f"{backend_type.name} backend takes at most {len(names)} positional arguments")
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"{backend_type.name} backend got an unexpected keyword argument {k!r}")
        if k in given:
            raise TypeError(f"{backend_type.name} backend got multiple values for argument {k!r}")
        given[k] = v
    if backend_type.is_gpu:
        unsupported = {k: v for k, v in given.items() if k != "artifact_dir" and v not in (None, False, 0, "nccl")}
        if unsupported:
            raise NotImplementedError(f"GPU backend options not supported yet: {sorted(unsupported)}")
        return Backend(backend_type, given.get("artifact_dir"))
    if backend_type.is_csx:
        cfg = given.get("cluster_config") or ClusterConfig()
        if not isinstance(cfg, ClusterConfig):
            raise TypeError(f"cluster_config must be a cstorch.distributed.ClusterConfig, got {type(cfg).__name__}")
        if cfg.num_csx <= 0:
            raise ValueError(f"ClusterConfig.num_csx must be >= 1 on the CSX backend, got {cfg.num_csx}")
        shard_state = backends.csx.cluster.shard_state
        cstorch_jax.apply_host_policies()  # the memory policy, before JAX starts (the placement may start it)
        b = Backend(backend_type, given.get("artifact_dir"), cluster_config=cfg,
                    compile_only=bool(given.get("compile_only", False)),
                    validate_only=bool(given.get("validate_only", False)),
                    compile_dir=given.get("compile_dir", "cached_compile"), placement=_placement(cfg, shard_state))
        b.shard_state = shard_state  # the flag this backend was made with (cstorch.backends checks later changes)
        return b
    return Backend(backend_type, given.get("artifact_dir"))


def _placement(cfg: ClusterConfig, shard_state: bool = False):
    """Join the processes of a multi-process run (see `cstorch.distributed.processes`),
    then place the run on `num_csx` devices: one device, a data-parallel mesh, or with
    `shard_state` (`cstorch.backends.csx.cluster.shard_state`) a data-parallel mesh
    whose devices each hold a slice of the state."""
    join_from_environment(cfg)
    if cfg.num_csx == 1:
        return cstorch_jax.SingleDevice()
    if shard_state:
        return cstorch_jax.FullyShardedDataParallel(cfg.num_csx)
    return cstorch_jax.DataParallel(cfg.num_csx)


def backend(backend_type=None, *args, **kwargs) -> Optional[Backend]:
    """With no arguments: the current backend (or None). With a type ("CSX"/"XLA",
    "CPU", "GPU" or a BackendType): create the process's one backend. It adopts the
    objects registered before it existed (models, optimizers, ... made earlier).

    Args:
        backend_type: "CSX" (or its alias "XLA"), "CPU", "GPU" (any case) or a BackendType; None: return the
            current backend.
        *args: the backend's further arguments, by position: `artifact_dir` for every type; then on CSX
            `compile_dir`, `compile_only`, `validate_only`, `cluster_config`; on GPU the real GPU backend's
            `enable_distributed`, `main_process_id`, `dist_backend`, `init_method`, `sync_batchnorm` (only
            their defaults are accepted).
        **kwargs: the same arguments by name. `artifact_dir`: where the run writes its files (on CSX by
            default `./cerebras_logs`, created when a run writes there; elsewhere the working directory).
            `cluster_config`: a ClusterConfig (`num_csx` devices). `compile_only` / `validate_only`: the
            executor captures and compiles one step without running it.

    Differences from the real system:
        "CSX" runs on the devices XLA has (the host CPU or a GPU), not on a wafer. "GPU"
        needs a CUDA build of torch, and the GPU backend's DDP options are not supported
        yet. With `compile_only=True` or `validate_only=True` the executor runs one step,
        captured and compiled but not run; `validate_only` also compiles with XLA (the real
        system stops before compiling).
    """
    global _BACKEND, _PENDING
    if backend_type is None:
        if args or kwargs:
            raise TypeError("cstorch.backend() got arguments but no backend_type; pass the backend type first.")
        return _BACKEND
    if isinstance(backend_type, str):
        backend_type = BackendType.from_str(backend_type)
    elif not isinstance(backend_type, BackendType):
        raise TypeError(f"backend_type must be a str or BackendType, got {type(backend_type).__name__}")
    if _BACKEND is not None:
        raise RuntimeError(
            f"Cannot instantiate multiple backends. A backend with type {_BACKEND.backend_type.name} has already "
            f"been instantiated. Use cstorch.backend() to access the existing backend, or "
            f"cstorch.backend().torch_device for its device."
        )
    made = _make(backend_type, args, kwargs)
    made.registry, _PENDING = _PENDING, StateRegistry()
    _BACKEND = made
    backends.attach(made)
    return _BACKEND


def current_backend(raise_exception: bool = True, raise_warning: bool = True) -> Optional[Backend]:
    """Deprecated: use cstorch.backend().

    Args:
        raise_exception: raise RuntimeError when there is no backend (else return None).
        raise_warning: issue the DeprecationWarning.
    """
    if raise_warning:
        warnings.warn("cstorch.current_backend() is deprecated; use cstorch.backend()", DeprecationWarning,
                      stacklevel=2)
    if _BACKEND is None and raise_exception:
        raise RuntimeError("No active Cerebras backend found. Create one first with cstorch.backend(...).")
    return _BACKEND


def current_backend_impl() -> Backend:
    """The current backend, creating the default CPU backend if none exists."""
    return _BACKEND if _BACKEND is not None else backend("CPU")


def current_torch_device() -> torch.device:
    return _BACKEND.torch_device if _BACKEND is not None else torch.device("cpu")


def use_cs() -> bool:
    return _BACKEND is not None and _BACKEND.is_csx


def _reset_backend() -> None:
    """Forget the process's backend and every object registered with it or pending (for
    tests and notebooks that start over): a step compiled afterwards lifts only the
    state of objects created after the reset."""
    global _BACKEND, _PENDING
    if _BACKEND is not None:
        _BACKEND.run.abandon()
    _BACKEND = None
    backends.attach(None)
    _PENDING = StateRegistry()
