"""Step closures on their way through a run: what one queued call holds
(`PendingClosure`, its tensor arguments snapshotted at queue time), and what a CSX step's
capture records of the closures it calls (`ClosureRecorder`), so that every later step
queues them again with that step's output values."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.utils._pytree as pytree

from cstorch_jax import LazyTensor


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
        leaves, spec = pytree.tree_flatten((args, kwargs))
        slots = []
        for x in leaves:
            if isinstance(x, torch.Tensor):
                slots.append(len(self.tensors))
                self.tensors.append(x.detach().clone())
            else:
                slots.append(None)
        self.records.append((fn, spec, leaves, slots, checkpoint))

    def replay(self, run, outputs: list) -> None:
        """Queue every recorded closure with this step's output values on `run` (a `Run`)."""
        for fn, spec, leaves, slots, checkpoint in self.records:
            vals = [leaf if s is None else outputs[s] for leaf, s in zip(leaves, slots)]
            args, kwargs = pytree.tree_unflatten(vals, spec)
            run.queue(fn, args, kwargs, checkpoint=checkpoint)
