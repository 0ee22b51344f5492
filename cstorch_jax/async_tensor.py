"""`DeferredTensor`: a torch tensor whose value an XLA executable is still computing.

A compiled step returns at once; its outputs are DeferredTensors holding the device
arrays. Shape and dtype are known immediately; the first use waits for the value,
converts it once and keeps it.

A one-element value read as a Python number (`float(loss)`, `loss.item()`, `int`,
`bool`: a training loop's read of its loss, every step) comes straight from the device
array, with no torch tensor made and no torch op run; the number is the one the torch
tensor would give (the array holds the tensor's dtype, or int32 for an int64 tensor).
"""
from __future__ import annotations

import numpy as np
import torch

from .dtypes import to_torch
from .errors import MaterializationError
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

    def _number(self):
        array = self._array
        if self._value is None and array is not None and array.size == 1 and not self.dtype.is_complex:
            return np.asarray(array).item()  # waits for the device (module docstring)
        return None


class UncomputedTensor(LazyTensor):
    """An output of a step that was compiled but not run (compile-only or
    validate-only): its shape and dtype are known; reading its value raises."""

    @staticmethod
    def __new__(cls, shape, dtype: torch.dtype, reason: str):
        t = LazyTensor.__new__(cls, shape, dtype)
        t._reason = reason
        return t

    def __init__(self, shape, dtype: torch.dtype, reason: str):
        pass

    def _fetch(self) -> torch.Tensor:
        raise MaterializationError(self._reason)
