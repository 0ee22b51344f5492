"""`compile(model, backend="wse_ws")` of the 1.8 API: turns the run configuration of
`configure` (`run_config`) into the process's one backend and registers the model with
it (`cstorch.compile`); see `run_config` for what each configuration argument becomes.
"""
from __future__ import annotations

import functools

import torch

import cstorch

from .run_config import RunConfig, configured, current_config
from .steps import guard_weights

#: backend names of `compile` -> 2.x backend type
BACKENDS = {"wse_ws": "CSX", "cpu": "CPU", "gpu": "GPU"}
_PIPELINE = ("wse_pipeline", "wse_pl", "pipeline")


def _backend_type(name) -> str:
    if not isinstance(name, str):
        raise TypeError(f"compile: backend must be a string such as \"wse_ws\", got {type(name).__name__}.")
    key = name.lower()
    if key in _PIPELINE:
        raise NotImplementedError(
            f"compile(backend={name!r}): pipeline execution is not supported; this engine runs the weight "
            f"streaming model (backend=\"wse_ws\")."
        )
    if key not in BACKENDS:
        raise ValueError(f"compile: unknown backend {name!r}; expected one of {sorted(BACKENDS)} (any case).")
    return BACKENDS[key]


def _make_backend(kind: str, config: RunConfig):
    if kind != "CSX":
        if config.compile_only or config.validate_only:
            raise ValueError(f"configure(compile_only/validate_only=True) compiles for the Cerebras system: compile "
                             f"with backend=\"wse_ws\", not {kind.lower()!r}.")
        b = cstorch.backend(kind, artifact_dir=config.model_dir)
    else:
        b = cstorch.backend("CSX", artifact_dir=config.model_dir, compile_dir=config.compile_dir,
                            compile_only=config.compile_only, validate_only=config.validate_only,
                            cluster_config=config.cluster_config())
        if configured():  # configure() was called: its value (default 5) holds
            cstorch.backends.csx.performance.transfer_processes = config.transfer_processes
    if config.seed is not None:
        cstorch.manual_seed(config.seed)
    return b


class BackendView:
    """`compiled_model.backend` as 1.8 code reads it (`is_wse()`, `is_cpu()`,
    `is_gpu()`, `name`); everything else is the 2.x backend's."""

    def __init__(self, backend):
        self._backend = backend

    def is_wse(self) -> bool:
        return self._backend.is_csx

    def is_cpu(self) -> bool:
        return self._backend.is_cpu

    def is_gpu(self) -> bool:
        return self._backend.is_gpu

    @property
    def name(self) -> str:
        return "WSE_WS" if self._backend.is_csx else self._backend.backend_type.name

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def __repr__(self) -> str:
        return f"BackendView({self.name})"


class CompiledModel:
    """What 1.8 `compile` returns: calls the model (through `cstorch.compile`'s compiled
    model); `.backend` is a `BackendView`; other attributes are the model's."""

    def __init__(self, compiled):
        self._compiled = compiled
        self.backend = BackendView(compiled.backend)
        functools.update_wrapper(self, compiled.model.forward, updated=())

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._compiled, name)

    def __repr__(self) -> str:
        return f"CompiledModel({type(self._compiled.model).__name__}, backend={self.backend.name})"


def compile(model: torch.nn.Module, backend: str = "wse_ws") -> CompiledModel:  # noqa: A001  (the 1.8 name)
    """Prepare `model` for `backend` ("wse_ws", any case: the Cerebras system, i.e. CSX;
    "cpu"; "gpu"): creates the process's backend from the `configure` configuration (its
    defaults without it) on first use, then `cstorch.compile(model)`.

    Args:
        model: the module to run.
        backend: "wse_ws" (CSX), "cpu" or "gpu", any case.

    Differences from the real system:
        Pipeline execution (`"wse_pipeline"`, `"wse_pl"`, `"pipeline"`) is a
        `NotImplementedError`. The returned model's `.backend` offers 1.8's `is_wse()`,
        `is_cpu()`, `is_gpu()` and `name` over the 2.x backend.
    """
    kind = _backend_type(backend)
    b = cstorch.backend()
    if b is None:
        b = _make_backend(kind, current_config())
    elif b.backend_type.name != kind:
        raise RuntimeError(f"compile(backend={backend!r}) needs a {kind} backend, but this process already runs on "
                           f"{b.backend_type.name}; one backend per process.")
    compiled = cstorch.compile(model, backend=b)
    guard_weights(model)
    return CompiledModel(compiled)
