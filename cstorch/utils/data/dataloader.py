"""`cstorch.utils.data.DataLoader(input_fn, *args, **kwargs)`: a lazily built loader."""
from __future__ import annotations

import copy
from typing import Callable


class DataLoader:
    """Wraps `input_fn(*args, **kwargs)`, which returns a torch DataLoader or any
    iterable of (nested) tensors. The loader is built on first use; the arguments are
    deep-copied so later changes by the caller do not leak in."""

    def __init__(self, input_fn: Callable, *args, **kwargs):
        if not callable(input_fn):
            raise TypeError(f"Expected input_fn to be a callable that returns an iterable, got {type(input_fn)}")
        self.input_fn = input_fn
        self.input_args = copy.deepcopy(args)
        self.input_kwargs = copy.deepcopy(kwargs)
        self._loader = None

    @property
    def dataloader(self):
        if self._loader is None:
            self._loader = self.input_fn(*self.input_args, **self.input_kwargs)
        return self._loader

    def __iter__(self):
        return iter(self.dataloader)

    def __len__(self) -> int:
        return len(self.dataloader)

    def __copy__(self) -> "DataLoader":
        return DataLoader(self.input_fn, *self.input_args, **self.input_kwargs)
