"""Hints for the real system's compiler: `pol`, `current_pol`, `device_annotation`,
`device`, `register_decomposition`.

* `pol(level=None, bwd_level=None, enable_fwd=True, enable_bwd=True)` and
  `device_annotation(device, enable_fwd=True, enable_bwd=True)` return decorators that
  annotate a function's operations with a precision optimization level (POL, 0-2) or a
  placement on the cluster ("wgth", "acth", "wafer"). Their arguments are validated with
  the real errors; the decorators return the function unchanged and warn once that they
  have no effect here, as the real ones do off the wafer (XLA computes in the dtype
  `cstorch.amp` sets, on one kind of device).
* `current_pol()`: `cstorch.backends.csx.precision.optimization_level`.
* `device(backend_type)`: the torch device a backend of that type keeps tensors on
  (CSX and CPU: cpu, GPU: cuda); usable as `with cstorch.device("CSX"):`.
* `register_decomposition(op, device="CSX")(fn)`: `fn` replaces `op` (an ATen overload, or
  every overload of a packet) in the steps compiled from then on, on CSX; with
  `device="CPU"` it becomes the op's eager CPU kernel (torch.library.register_kernel), as
  in the real system. Registering an op twice, or detach/lift/lift_fresh, is an error.
"""
from __future__ import annotations

import warnings
from typing import Callable, Literal, Optional, Union

import torch

from cstorch_jax.capture import register_decomposition as register_in_capture
from cstorch_jax.capture import remove_decomposition as remove_from_capture

from ._backend import BackendType
from .backends import csx

__all__ = ["pol", "current_pol", "device_annotation", "device", "register_decomposition"]

_warned: set = set()


def _no_effect(what: str) -> Callable:
    if what not in _warned:
        _warned.add(what)
        warnings.warn(f"Setting {what} doesn't have any effect here: it tunes the wafer's compiler, while XLA "
                      f"computes in the dtype cstorch.amp sets, on the backend's device.")
    return lambda fn: fn


def pol(level: Optional[int] = None, bwd_level: Optional[int] = None, enable_fwd: bool = True,
        enable_bwd: bool = True):
    """A decorator setting the POL of a function's operations (no effect here).

    Args:
        level: the forward POL, None or 0, 1 or 2.
        bwd_level: the backward POL, None or 0, 1 or 2.
        enable_fwd: whether the level applies to the forward operations.
        enable_bwd: whether the level applies to the backward operations.

    Differences from the real system:
        Recorded and validated (the real errors), and changes nothing: it warns
        once, as the real one does off the wafer.
    """
    for which, value in (("forward", level), ("backward", bwd_level)):
        if value is not None and value not in range(0, 3):
            raise ValueError(f"POL must be None or an integer in range [0, 3) but got {which} level {value}.")
    return _no_effect("a precision optimization level (cstorch.pol)")


def current_pol() -> int:
    """The precision optimization level in effect (the backend flag)."""

    return csx.precision.optimization_level


DeviceType = Literal["wgth", "acth", "wafer"]


def device_annotation(device: DeviceType, enable_fwd=True, enable_bwd=True):
    """A decorator placing a function's operations on a part of the cluster (no effect here).

    Args:
        device: the part of the cluster: "wgth", "acth" or "wafer".
        enable_fwd: whether the placement applies to the forward operations.
        enable_bwd: whether the placement applies to the backward operations.

    Differences from the real system:
        The device is validated (the real error) and nothing changes: it warns once,
        as the real one does off the wafer.
    """
    if device not in ("wgth", "acth", "wafer"):
        raise TypeError("Expected `device` to be one of ('wgth', 'acth', 'wafer').")
    return _no_effect("a device annotation (cstorch.device_annotation)")


def device(backend_type: str, *args, **kwargs) -> torch.device:
    """The torch device of a backend of this type (extra arguments configure the real
    system's device object and are not used).

    Args:
        backend_type: "CSX", "CPU", "GPU" or a BackendType.
        *args: the real device's further arguments (not used).
        **kwargs: the real device's further keyword arguments (not used).
    """

    t = BackendType.from_str(backend_type) if isinstance(backend_type, str) else backend_type
    return torch.device("cuda") if t.is_gpu else torch.device("cpu")


_DENY = ("detach", "lift", "lift_fresh")


def _overloads(op) -> list:
    if isinstance(op, torch._ops.OpOverloadPacket):
        return [getattr(op, name) for name in op.overloads()]
    if isinstance(op, torch._ops.OpOverload):
        return [op]
    raise TypeError(f"register_decomposition takes an ATen op (torch.ops.aten.<op> or one of its overloads), "
                    f"got {op!r}")


def register_decomposition(op: Union[torch._ops.OpOverloadPacket, torch._ops.OpOverload],
                           device: Literal["CSX", "CPU"] = "CSX") -> Callable:
    """A decorator making its function the decomposition of `op` (see the module docstring).

    Args:
        op: an ATen op (`torch.ops.aten.<op>`) or one of its overloads.
        device: "CSX": the decomposition replaces `op` in the steps captured from now on; "CPU": it becomes
            `op`'s eager CPU kernel.

    Differences from the real system:
        `register_decomposition(op)(fn)` replaces `op` by `fn` in the steps compiled
        after it; with `device="CPU"`, `fn` becomes the eager CPU kernel of `op`.
    """
    device = str(device).upper()
    if device not in ("CSX", "CPU"):
        raise ValueError(f"Registering decompositions for device {device} is not supported. Supported devices are: "
                         f"['CSX', 'CPU']")
    overloads = _overloads(op)
    for o in overloads:
        if o._opname in _DENY:
            raise RuntimeError(f"Decomposition for aten.{o._opname} is not supported.")

    def decorator(fn: Callable) -> Callable:
        for o in overloads:
            if device == "CSX":
                register_in_capture(o, fn)
            else:
                torch.library.register_kernel(o, "cpu", fn)
        return fn

    return decorator


def remove_decomposition(op, device: Literal["CSX", "CPU"] = "CSX") -> None:
    """Undo `register_decomposition(op)` on CSX."""
    if str(device).upper() != "CSX":
        raise ValueError("Only CSX decompositions can be removed here (a CPU kernel registration is permanent).")

    for o in _overloads(op):
        remove_from_capture(o)
