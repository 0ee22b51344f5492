"""`DeferredTensor`: a torch tensor whose value an XLA executable is still computing.

A compiled step returns at once; its outputs are DeferredTensors holding the device
arrays. Shape and dtype are known immediately. Any torch op, `.item()`, `print` or
`.numpy()` waits for the value, converts it once and works on the plain tensor.
"""
from __future__ import annotations

import torch
from torch.utils._pytree import tree_map

from .dtypes import to_torch


class DeferredTensor(torch.Tensor):
    @staticmethod
    def __new__(cls, array, dtype: torch.dtype):
        t = torch.Tensor._make_wrapper_subclass(cls, tuple(array.shape), dtype=dtype, device="cpu")
        t._array = array
        t._value = None
        return t

    def __init__(self, array, dtype: torch.dtype):
        pass

    def is_ready(self) -> bool:
        """True once the device has finished computing the value (never blocks)."""
        return self._value is not None or self._array.is_ready()

    def materialize(self) -> torch.Tensor:
        """The value as a plain host tensor (waits for the device if needed)."""
        if self._value is None:
            self._value = to_torch(self._array, self.dtype)
            self._array = None
        return self._value

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda t: t.materialize() if isinstance(t, DeferredTensor) else t  # noqa: E731
        return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))

    def __repr__(self, *, tensor_contents=None) -> str:
        return repr(self.materialize())

    # direct paths for the common host reads (skip the dispatcher round trip)
    def item(self):
        return self.materialize().item()

    def __float__(self):
        return float(self.materialize())

    def __int__(self):
        return int(self.materialize())

    def __bool__(self):
        return bool(self.materialize())

    def numpy(self, *, force: bool = False):
        return self.materialize().numpy()

    def tolist(self):
        return self.materialize().tolist()

    def __array__(self, dtype=None, copy=None):
        arr = self.materialize().numpy()
        return arr if dtype is None else arr.astype(dtype)


def materialize(x):
    """Plain host tensors for every DeferredTensor in a pytree."""
    return tree_map(lambda t: t.materialize() if isinstance(t, DeferredTensor) else t, x)
