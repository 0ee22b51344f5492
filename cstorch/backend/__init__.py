"""`cerebras.pytorch.backend` as a module: the backend names of the real package's
`backend/` package (`from cerebras.pytorch.backend import use_cs, BackendType, ...`).

As in the real package, `cstorch.backend` itself is the function `backend(...)`; this
module is what `from cstorch.backend import ...` and `import cstorch.backend` read (see
cstorch/_shadowing.py). The backend itself is `cstorch._backend`; here are its public
names and the two helpers of the real module that the Model Zoo uses:

* `current_backend_impl(raise_exception=True)`: the backend's implementation object.
  The real system splits a backend into a facade and an implementation (`_impl`); here
  the one `Backend` object is both, so this is the current backend, or None (with
  `raise_exception=False`) when none exists. Unlike the engine-internal
  `cstorch._backend.current_backend_impl()`, it never creates one.
* `get_backend_args(backend_type)`: the parameters a backend of that type takes, as the
  `parameters` mapping of its constructor's signature (`self`, `backend_type`, then the
  arguments of `cstorch._backend.BACKEND_ARGS` with their defaults).
"""
import inspect
from typing import Optional, Union

from .._backend import (BACKEND_ARGS, Backend, BackendType, backend, current_backend, current_torch_device,
                        use_cs)
from . import ltc_backend


def current_backend_impl(raise_exception: bool = True) -> Optional[Backend]:
    """The current backend (its own implementation here). With no backend: a
    RuntimeError, or None when `raise_exception` is False."""
    return current_backend(raise_exception=raise_exception, raise_warning=False)


def get_backend_args(backend_type: Union[str, BackendType]):
    """The constructor parameters of a backend of `backend_type` ("CSX"/"XLA", "CPU",
    "GPU" or a BackendType): an ordered mapping name -> `inspect.Parameter`, starting
    with `self` and `backend_type` as in the real package. An unknown type is a
    ValueError."""
    if isinstance(backend_type, str):
        backend_type = BackendType.from_str(backend_type)
    if not isinstance(backend_type, BackendType):
        raise TypeError(f"backend_type must be a str or BackendType, got {type(backend_type).__name__}")
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter("self", kind), inspect.Parameter("backend_type", kind)]
    params += [inspect.Parameter(name, kind, default=default) for name, default in BACKEND_ARGS[backend_type].items()]
    return inspect.Signature(params).parameters


__all__ = ["Backend", "BackendType", "backend", "current_backend", "current_backend_impl", "current_torch_device",
           "get_backend_args", "use_cs", "ltc_backend"]
