"""Tensor factories of the real API: `full`, `ones`, `zeros` (and `*_like`), `tensor`,
`from_numpy` / `to_numpy`, `make_constant`.

* `full(shape, value, dtype=None)`, `ones(shape, dtype=None)`, `zeros(shape, dtype=None)`
  and `full_like(other, value, dtype=None)`, `ones_like(other, dtype=None)`,
  `zeros_like(other, dtype=None)`: the torch factory's tensor on the current device
  (`cstorch.current_torch_device()`); `*_like` keep `other`'s dtype unless `dtype` is
  given. The real CSX backend fills such tensors lazily on the device (for optimizer
  state created up front); here state tensors are host tensors lifted into the compiled
  step, so the value is the same and is made at once. Inside a traced step they are
  constants of the graph, as torch's factories are.
* `tensor(*args, **kwargs)`: `torch.tensor(*args, **kwargs)` on the backend's device
  (a tensor passed alone is returned as it is). Without a backend it warns that the
  tensor is not tracked; while a step is being traced it is a RuntimeError (stateful
  tensors are made during initialization).
* `to_numpy(t)` / `from_numpy(a)`: `t.numpy()` / `torch.from_numpy(a)` that also handle
  bfloat16 (numpy's `ml_dtypes.bfloat16`, which has no torch counterpart in
  `torch.from_numpy`); an array already of the other kind is returned as it is, and a
  read-only array is copied first.
* `make_constant(t)`: a compile-time constant of the step with `t`'s values. While a CSX
  step is being captured, a tensor from outside the step (not an input, not registered
  state) becomes a constant of the compiled program, where reading it directly is a
  CaptureError; a tensor computed in the step, and every tensor outside a capture, is
  returned as it is (XLA folds values that depend on no input into constants itself).
"""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import torch

from ._backend import backend as _current_backend, current_torch_device

__all__ = ["full", "full_like", "ones", "ones_like", "zeros", "zeros_like", "tensor", "from_numpy", "to_numpy",
           "make_constant"]


def full(shape, value: float, dtype=None) -> torch.Tensor:
    """A tensor of `shape` filled with `value` on the current device.

    Args:
        shape: the shape of the tensor.
        value: the value of every element.
        dtype: the dtype; None: torch's default for `value`.

    Differences from the real system:
        The tensor is filled at once (the real CSX backend fills it lazily on the
        device: the same value).
    """
    return torch.full(shape, value, dtype=dtype, device=current_torch_device())


def full_like(other: torch.Tensor, value: float, dtype=None) -> torch.Tensor:
    """A tensor shaped like `other` filled with `value` (`other`'s dtype by default).

    Args:
        other: the tensor whose shape the result takes.
        value: the value of every element.
        dtype: the dtype; None: `other`'s.
    """
    return torch.full(other.shape, value, dtype=dtype or other.dtype, device=current_torch_device())


def ones(shape, dtype=None) -> torch.Tensor:
    """A tensor of `shape` filled with ones on the current device.

    Args:
        shape: the shape of the tensor.
        dtype: the dtype; None: torch's default dtype.
    """
    return full(shape, 1, dtype=dtype if dtype is not None else torch.get_default_dtype())


def ones_like(other: torch.Tensor, dtype=None) -> torch.Tensor:
    """A tensor shaped like `other` filled with ones on the current device.

    Args:
        other: the tensor whose shape the result takes.
        dtype: the dtype; None: `other`'s.
    """
    return full_like(other, 1, dtype)


def zeros(shape, dtype=None) -> torch.Tensor:
    """A tensor of `shape` filled with zeros on the current device.

    Args:
        shape: the shape of the tensor.
        dtype: the dtype; None: torch's default dtype.
    """
    return full(shape, 0, dtype=dtype if dtype is not None else torch.get_default_dtype())


def zeros_like(other: torch.Tensor, dtype=None) -> torch.Tensor:
    """A tensor shaped like `other` filled with zeros on the current device.

    Args:
        other: the tensor whose shape the result takes.
        dtype: the dtype; None: `other`'s.
    """
    return full_like(other, 0, dtype)


def tensor(*args, **kwargs) -> torch.Tensor:
    """`torch.tensor(*args, **kwargs)` on the backend's device (see the module docstring).

    Args:
        *args: the arguments of `torch.tensor` (the data first); a tensor alone is moved as it is.
        **kwargs: the keyword arguments of `torch.tensor` (dtype, ...).

    Differences from the real system:
        On CSX the tensor is not yet state of the run: inside a step it is a constant
        of the step, like any tensor that nothing owns.
    """
    b = _current_backend()
    alone = len(args) == 1 and not kwargs and isinstance(args[0], torch.Tensor)
    if b is None:
        warnings.warn("Attempting to construct a stateful tensor without a backend initialized. This tensor will "
                      "not be tracked.")
        return args[0] if alone else torch.tensor(*args, **kwargs)
    if b.is_tracing:
        raise RuntimeError("Cannot construct a stateful tensor while tracing the forward/backward pass. Please only "
                           "construct stateful tensors during initialization.")
    out = args[0] if alone else torch.tensor(*args, **kwargs)
    return out if out.device == b.torch_device else out.to(b.torch_device)


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """The tensor's values as a numpy array (bfloat16 as `ml_dtypes.bfloat16`).

    Args:
        tensor: a CPU tensor (a numpy array is returned as it is).

    Differences from the real system:
        bfloat16 values travel as `ml_dtypes.bfloat16` arrays (also in `from_numpy`).
    """
    if isinstance(tensor, np.ndarray):
        return tensor
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def from_numpy(array: np.ndarray) -> torch.Tensor:
    """The array as a torch tensor sharing its memory (bfloat16 included).

    Args:
        array: the array (a read-only array is copied first); a torch tensor is returned as it is.
    """
    if isinstance(array, torch.Tensor):
        return array
    if not array.flags.writeable:
        array = array.copy()
    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def make_constant(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` as a constant of the step being captured (see the module docstring).

    Args:
        tensor: a tensor from outside the step; its values are read now and frozen into the program.

    Differences from the real system:
        Turns a tensor from outside the step into a constant of the compiled
        program; reading such a tensor directly inside the step is a `CaptureError`.
    """
    from torch._subclasses.fake_tensor import is_fake

    b = _current_backend()
    if b is None or not b.is_tracing or is_fake(tensor):
        return tensor
    # values read on the host now, at capture (tolist, which no tracing mode intercepts): baked into the program
    return torch.tensor(tensor.tolist(), dtype=tensor.dtype)
