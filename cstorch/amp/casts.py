"""Cast control of the real API's automatic mixed precision: `half_function`,
`float_function`, `promote_function`, `register_{half,float,promote}_function`,
`disable_casts`, `init`.

Casts are *active* while mixed precision is on (`cstorch.amp.set_half_dtype`) and either
a CSX backend exists (the real CSX backend initializes AMP when a run starts) or `init()`
was called; `disable_casts()` and `init(enabled=False)` turn them off. While active:

* `half_function(fn)`: floating-point tensor arguments are cast to the half dtype.
* `float_function(fn)`: they are cast to float32 and `fn` runs with autocast off, so its
  operations compute in float32 (the captured CSX step otherwise runs under autocast).
* `promote_function(fn)`: when the floating-point arguments mix half and float32, all are
  cast to float32.
When inactive all three call `fn` unchanged, as the real ones do.
`register_half_function(module, name)` (and the float/promote twins) replace
`module.name` by the wrapped function (ValueError when `module` has no `name`).
`disable_casts()` is a context manager: no cast wrapper casts and autocast is off inside.
`init(enabled=True, enable_caching=True, verbose=False, allow_banned=False)` activates
the casts (and mixed precision) for the process, once: later calls return the first
call's handle. `enable_caching`, `verbose` and `allow_banned` tune the real system's cast
tables and have no effect here.
"""
from __future__ import annotations

import contextlib
import functools
import threading

import torch
import torch.utils._pytree as pytree

from .._backend import backend, use_cs
from . import precision

__all__ = ["half_function", "float_function", "promote_function", "register_half_function",
           "register_float_function", "register_promote_function", "disable_casts", "init"]


class AmpHandle:
    """What `init()` returns: whether its casts are active (`is_active()`)."""

    def __init__(self, enabled: bool):
        self._enabled = enabled

    def is_active(self) -> bool:
        return self._enabled and casts_active()


_state = threading.local()
_init_handle: list = []
_init_lock = threading.Lock()


def _disabled_depth() -> int:
    return getattr(_state, "disabled", 0)


def casts_active() -> bool:
    """Whether the cast wrappers cast now (see the module docstring)."""
    if _disabled_depth() or not precision.mixed_precision():
        return False
    if _init_handle:
        return _init_handle[0]._enabled
    return use_cs()


def init(enabled=True, enable_caching=True, verbose=False, allow_banned=False) -> AmpHandle:
    """Activate the casts for the process (once; see the module docstring).

    Args:
        enabled: activate the casts and mixed precision; False: deactivate the casts.
        enable_caching: the real system's cast caching (no effect here).
        verbose: the real system's cast logging (no effect here).
        allow_banned: the real system's permission for banned functions (no effect here).
    """
    with _init_lock:
        if not _init_handle:
            if enabled:
                precision.enable_mixed_precision(True)
            _init_handle.append(AmpHandle(bool(enabled)))
        return _init_handle[0]


def _autocast_devices() -> list[str]:
    b = backend()
    return ["cpu", "cuda"] if b is not None and b.is_gpu else ["cpu"]


@contextlib.contextmanager
def _autocast_off():
    with contextlib.ExitStack() as stack:
        for device in _autocast_devices():
            stack.enter_context(torch.autocast(device, enabled=False))
        yield


@contextlib.contextmanager
def disable_casts():
    """No casts inside the block: the wrappers pass arguments through and autocast is off."""
    _state.disabled = _disabled_depth() + 1
    try:
        with _autocast_off():
            yield
    finally:
        _state.disabled -= 1


def _is_float_tensor(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def _cast(args, kwargs, dtype):
    return pytree.tree_map(lambda x: x.to(dtype) if _is_float_tensor(x) else x, (args, kwargs))


def half_function(fn):
    """`fn` with its floating-point tensor arguments cast to the half dtype while casts are active.

    Args:
        fn: the function to wrap.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not casts_active():
            return fn(*args, **kwargs)
        a, kw = _cast(args, kwargs, precision.get_half_dtype())
        return fn(*a, **kw)

    return wrapper


def float_function(fn):
    """`fn` computed in float32 (arguments cast, autocast off) while casts are active.

    Args:
        fn: the function to wrap.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not casts_active():
            return fn(*args, **kwargs)
        a, kw = _cast(args, kwargs, torch.float32)
        with _autocast_off():
            return fn(*a, **kw)

    return wrapper


def promote_function(fn):
    """`fn` with mixed half/float32 arguments all cast to float32 while casts are active.

    Args:
        fn: the function to wrap.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not casts_active():
            return fn(*args, **kwargs)
        dtypes = {x.dtype for x in pytree.tree_leaves((args, kwargs)) if _is_float_tensor(x)}
        if len(dtypes) == 2 and torch.float32 in dtypes and precision.get_half_dtype() in dtypes:
            args, kwargs = _cast(args, kwargs, torch.float32)
        return fn(*args, **kwargs)

    return wrapper


def _register(module, name, wrap) -> None:
    if not hasattr(module, name):
        raise ValueError(f"No function named {name} in module {module}.")
    setattr(module, name, wrap(getattr(module, name)))


def register_half_function(module, name) -> None:
    """Replace `module.name` by `half_function(module.name)`.

    Args:
        module: the module (or any object) holding the function.
        name: the function's attribute name.
    """
    _register(module, name, half_function)


def register_float_function(module, name) -> None:
    """Replace `module.name` by `float_function(module.name)`.

    Args:
        module: the module (or any object) holding the function.
        name: the function's attribute name.
    """
    _register(module, name, float_function)


def register_promote_function(module, name) -> None:
    """Replace `module.name` by `promote_function(module.name)`.

    Args:
        module: the module (or any object) holding the function.
        name: the function's attribute name.
    """
    _register(module, name, promote_function)


def _reset() -> None:
    """Forget `init()` (for tests)."""
    _init_handle.clear()
