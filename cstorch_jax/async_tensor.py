"""`DeferredTensor`: a torch tensor whose value an XLA executable is still computing.

A compiled step returns at once; its outputs are DeferredTensors holding the device
arrays. Shape and dtype are known immediately; the first use waits for the value,
converts it once and keeps it.
"""
from __future__ import annotations

import torch

from .dtypes import to_torch
from .lazy_tensor import LazyTensor


class DeferredTensor(LazyTensor):
    @staticmethod
    def __new__(cls, array, dtype: torch.dtype):
        t = LazyTensor.__new__(cls, array.shape, dtype)
        t._array = array
        return t

    def __init__(self, array, dtype: torch.dtype):
        pass

    def is_ready(self) -> bool:
        """True once the device has finished computing the value (never blocks)."""
        return self._value is not None or self._array.is_ready()

    def _fetch(self) -> torch.Tensor:
        value = to_torch(self._array, self.dtype)
        self._array = None
        return value
