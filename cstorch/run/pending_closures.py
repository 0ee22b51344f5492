"""Step closures on their way through a run: what one queued call holds
(`PendingClosure`, its tensor arguments snapshotted at queue time), and what a CSX step's
capture records of the closures it calls (`ClosureRecorder`), so that every later step
queues them again with that step's output values."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from cstorch_jax import LazyTensor
from cstorch_jax.lazy_tensor import map_leaves


@dataclass
class PendingClosure:
    step: Optional[int]
    fn: Callable
    args: tuple
    kwargs: dict
    checkpoint: bool


def snapshot(x):
    """Closure arguments are values at queue time: plain tensors are cloned."""
    if isinstance(x, torch.Tensor) and not isinstance(x, LazyTensor):
        return x.detach().clone()
    return x


class ClosureRecorder:
    """Collects the step closures called while a CSX step is captured; their tensor
    arguments become extra outputs of the executable."""

    def __init__(self):
        self.records: list[tuple] = []
        self.tensors: list[torch.Tensor] = []

    def clear(self) -> None:
        """Forget what was recorded (the step's body is about to run again)."""
        self.records.clear()
        self.tensors.clear()

    def record(self, fn, args, kwargs, checkpoint: bool) -> None:
        def slot(x):
            if isinstance(x, torch.Tensor):
                self.tensors.append(x.detach().clone())
                return _Slot(len(self.tensors) - 1)
            return x

        self.records.append((fn, map_leaves(slot, (args, kwargs)), checkpoint))

    def replay(self, run, outputs: list) -> None:
        """Queue every recorded closure with this step's output values on `run` (a `Run`)."""
        def value(x):
            return outputs[x.index] if type(x) is _Slot else x

        for fn, template, checkpoint in self.records:
            args, kwargs = map_leaves(value, template)
            run.queue(fn, args, kwargs, checkpoint=checkpoint)


class _Slot:
    """Where a recorded closure argument takes the step's output `index`."""
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index
