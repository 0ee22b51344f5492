"""`DeferredTensor`: a torch tensor whose value an XLA executable is still computing.

A compiled step returns at once; its outputs are DeferredTensors holding the device
arrays. Shape and dtype are known immediately; the first use waits for the value,
converts it once and keeps it.

Calls launched together (a window of steps) give `WindowTensor`s, rows of their window's
stacked outputs (`LaunchValues`); reading one before the window was launched launches it.

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


class LaunchValues:
    """The outputs of calls of a compiled step that launch together (a window of steps,
    `cstorch_jax.window`), before and after the launch.

    Until `set` or `set_each` is called the values do not exist: reading one calls
    `launch` (which must launch the calls and set their outputs). After `set`, output
    `index` of the `row`-th call is row `row` of the output's stacked device array, fetched
    to the host whole at the first read of any of its rows; after `set_each`, it is the
    call's own array."""

    def __init__(self, launch):
        self._launch = launch
        self._stacked = None  # per output: the device array of every call's values, first axis the calls
        self._each = None  # per call: its outputs' device arrays (calls launched one by one)
        self._host: dict[int, np.ndarray] = {}

    @property
    def launched(self) -> bool:
        return self._stacked is not None or self._each is not None

    @property
    def ready(self) -> bool:
        """Whether the launched calls' outputs are computed (reading them would not wait)."""
        arrays = self._stacked if self._stacked is not None else (self._each[-1] if self._each else None)
        return arrays is not None and all(a.is_ready() for a in arrays)

    def set(self, arrays) -> None:
        """The launched calls' outputs, per output one array whose first axis runs over the calls."""
        self._stacked, self._launch = list(arrays), None

    def set_each(self, calls) -> None:
        """The launched calls' outputs, per call its outputs' arrays."""
        self._each, self._launch = [list(outs) for outs in calls], None

    def array(self, index: int, row: int):
        """The device array that holds output `index` of the `row`-th call (launches the
        calls first if they have not been)."""
        if not self.launched:
            self._launch()
            if not self.launched:
                raise MaterializationError("the launch of these steps did not complete, so their values do not exist")
        return self._stacked[index] if self._stacked is not None else self._each[row][index]

    def row(self, index: int, row: int) -> np.ndarray:
        """Output `index` of the `row`-th call, on the host."""
        array = self.array(index, row)
        if self._stacked is None:
            return np.asarray(array)
        found = self._host.get(index)
        if found is None:
            found = self._host[index] = np.asarray(array)
        return found[row]


class WindowTensor(LazyTensor):
    """Output `index` of the `row`-th call of a window of steps (`LaunchValues`): a
    deferred value whose computation may not have been launched yet; reading it launches
    the window first."""

    @staticmethod
    def __new__(cls, values: LaunchValues, row: int, index: int, shape, dtype: torch.dtype):
        t = LazyTensor.__new__(cls, shape, dtype)
        t._values, t._row, t._index = values, row, index
        return t

    def __init__(self, values: LaunchValues, row: int, index: int, shape, dtype: torch.dtype):
        pass

    def is_ready(self) -> bool:
        if self._value is not None:
            return True
        values = self._values
        return values.launched and values.array(self._index, self._row).is_ready()

    def _fetch(self) -> torch.Tensor:
        value = to_torch(self._values.row(self._index, self._row), self.dtype)
        self._values = None
        return value

    def _number(self):
        values = self._values
        if self._value is None and values is not None and not self.dtype.is_complex and self.numel() == 1:
            return values.row(self._index, self._row).item()  # launches the window if it has not been
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
