"""Batches copied to the device ahead of the step that takes them."""
from __future__ import annotations

import weakref
from typing import Callable

import torch
import torch.utils._pytree as pytree

from cstorch_jax import LazyTensor


class StagedBatches:
    """Copies of batch tensors (`Placement.batch_arrays`) made ahead of their step, found
    again by tensor identity. A copy is used only while its tensor is unchanged (same
    `_version`); an entry goes away with its tensor, when it is used, or at the end of
    the run."""

    def __init__(self, placement: Callable):
        self._placement = placement
        self._entries: dict[int, tuple] = {}

    def stage(self, batch) -> None:
        tensors = [t for t in pytree.tree_leaves(batch)
                   if isinstance(t, torch.Tensor) and not isinstance(t, LazyTensor)]
        for t in tensors:
            try:
                (array,) = self._placement().batch_arrays([t], ["batch tensor"])
            except Exception:  # the step that takes it reports the problem with the argument's name
                continue
            key = id(t)
            gone = weakref.ref(t, lambda _, key=key: self._entries.pop(key, None))
            self._entries[key] = (gone, t._version, array)

    def take(self, tensors: list) -> list:
        """The staged copy of each tensor, or None where there is no valid one."""
        out = []
        for t in tensors:
            entry = self._entries.pop(id(t), None)
            ok = entry is not None and entry[0]() is t and entry[1] == t._version
            out.append(entry[2] if ok else None)
        return out

    def clear(self) -> None:
        self._entries.clear()
