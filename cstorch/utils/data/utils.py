"""Step bookkeeping for runs: `Schedule` (which 0-based iterations something happens
on), `compute_num_steps` (how many steps a run takes from epochs/steps/max-steps
settings) and `infer_batch_size` (dim 0 of the tensors in a batch).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Iterator, List, Optional

import torch
import torch.utils._pytree as pytree

from ..._backend import use_cs


@dataclass
class Schedule:
    """A set of 0-based iterations made of non-overlapping, ordered intervals.

    `Schedule([Schedule.Range(0, 10, 3, include_last=True)])` matches 0, 3, 6, 9;
    `Schedule([])` matches nothing.

    Args:
        intervals: the Schedule.Range intervals, ordered and non-overlapping.
    """

    @dataclass
    class Range:
        """Iterations `start, start+step, ...` below `end` (exclusive); with
        `include_last`, `end - 1` is matched too even when the stride misses it."""

        start: int
        end: int
        step: int
        include_last: bool

        def __post_init__(self):
            if not _is_int(self.start) or self.start < 0:
                raise ValueError(f"start ({self.start}) must an integer >= 0.")
            if not _is_int(self.end) or self.end <= self.start:
                raise ValueError(f"end ({self.end}) must be an integer greater than start {self.start}.")
            if not _is_int(self.step) or self.step < 1:
                raise ValueError(f"step ({self.step}) must be an integer greater than zero.")
            if not isinstance(self.include_last, bool):
                raise ValueError(f"include_last must be a bool, got {type(self.include_last)}")

        def range(self) -> range:
            """The strided part, without the `include_last` extra."""
            return range(self.start, self.end, self.step)

        def _extra_last(self) -> bool:
            return self.include_last and (self.end - 1 - self.start) % self.step != 0

        def match(self, index: int) -> bool:
            if not self.start <= index < self.end:
                return False
            return (index - self.start) % self.step == 0 or (self.include_last and index == self.end - 1)

        def __iter__(self) -> Iterator[int]:
            yield from self.range()
            if self._extra_last():
                yield self.end - 1

        def __len__(self) -> int:
            return len(self.range()) + int(self._extra_last())

        @property
        def final_step(self) -> int:
            return self.end - 1 if self.include_last else self.range()[-1]

        def next_immediate_step(self, target: int) -> int:
            """The first matched iteration at or after `target`."""
            last = self.final_step
            if target > last:
                raise ValueError(f"Target {target} exceeds the last interval step {last}")
            if target <= self.start:
                return self.start
            strides = -(-(target - self.start) // self.step)  # ceil
            return min(self.start + strides * self.step, last)

    intervals: List["Schedule.Range"] = field(default_factory=list)

    def __post_init__(self):
        self.intervals = list(self.intervals)
        if not all(isinstance(r, Schedule.Range) for r in self.intervals):
            raise ValueError(f"interval must of type {Schedule.Range}")
        for prev, nxt in zip(self.intervals, self.intervals[1:]):
            if nxt.start < prev.end:
                raise ValueError(f"Intervals must be non-overlapping ranges, but got {self.intervals}.")

    def match(self, index: int) -> bool:
        return any(r.match(index) for r in self.intervals)

    def __iter__(self) -> Iterator[int]:
        for r in self.intervals:
            yield from r

    def __len__(self) -> int:
        return sum(len(r) for r in self.intervals)

    def range(self) -> list:
        return [r.range() for r in self.intervals]

    @property
    def start(self) -> Optional[int]:
        return self.intervals[0].start if self.intervals else None

    @property
    def final_step(self) -> Optional[int]:
        return self.intervals[-1].final_step if self.intervals else None

    def next_immediate_step(self, target: int) -> Optional[int]:
        if not self.intervals:
            return None
        if target > self.final_step:
            raise ValueError(f"Target {target} exceeds the last interval step {self.final_step}")
        for r in self.intervals:
            if target <= r.final_step:
                return r.next_immediate_step(target)
        return None


def _is_int(v) -> bool:
    return isinstance(v, int)


def compute_num_steps(dataloader, initial_step: int = 0, num_steps: Optional[int] = None,
                      max_steps: Optional[int] = None, num_epochs: Optional[int] = None,
                      steps_per_epoch: Optional[int] = None, grad_accum_steps: int = 1) -> int:
    """How many steps a run takes: the smallest of `num_epochs * steps_per_epoch`,
    `num_steps` and `max_steps - initial_step` among those given.

    `steps_per_epoch` defaults to `len(dataloader)` and is divided by
    `grad_accum_steps` (one optimizer step per `grad_accum_steps` batches). When the
    loader has no length only `num_steps`/`max_steps` can bound the run.

    Args:
        dataloader: the loader; its length is the number of batches per epoch (it may have none).
        initial_step: the step the run starts from (for `max_steps`).
        num_steps: the number of steps to run.
        max_steps: the step at which the run ends.
        num_epochs: the number of passes over the loader (not with `num_steps`, nor for a loader without a
            length).
        steps_per_epoch: the batches of an epoch; None: `len(dataloader)`.
        grad_accum_steps: the batches per optimizer step.
    """

    def check(name, value, allow_none=True, allow_zero=False):
        if value is None:
            if not allow_none:
                raise ValueError(f"`{name}` cannot be None.")
            return
        if not isinstance(value, int):
            raise ValueError(f"`{name}` must be an integer, but got {type(value)}.")
        if value == 0 and not allow_zero:
            raise ValueError(f"`{name}` must be greater than zero.")
        if value < 0:
            raise ValueError(f"`{name}` cannot be negative, but got {value}.")

    if num_epochs is not None and num_steps is not None:
        raise ValueError("Only one of `num_epochs` or `num_steps` can be specified.")
    check("initial_step", initial_step, allow_none=False, allow_zero=True)
    check("num_steps", num_steps)
    check("max_steps", max_steps)
    check("num_epochs", num_epochs)
    check("steps_per_epoch", steps_per_epoch)
    check("grad_accum_steps", grad_accum_steps, allow_none=False)

    try:
        batches = len(dataloader)
    except TypeError:
        batches = None
    if batches is None:
        if num_epochs is not None:
            raise ValueError(
                "Specifying num_epochs for datasets with unknown length is not allowed. Please control training "
                "behavior through number of steps instead."
            )
        steps_per_epoch = 1
    else:
        if batches <= 0:
            raise AssertionError("Dataloader does not generate any batches.")
        if steps_per_epoch is None:
            steps_per_epoch = batches
        elif steps_per_epoch > batches:
            raise ValueError(
                f"The requested steps per epoch of {steps_per_epoch} exceeds total steps in an epoch, which is "
                f"{batches}."
            )
        if grad_accum_steps > steps_per_epoch:
            raise ValueError(
                f"Gradient accumulation steps of {grad_accum_steps} is greater than batches per epoch of "
                f"{steps_per_epoch}."
            )
        steps_per_epoch //= grad_accum_steps

    bounds = []
    if num_epochs is not None:
        bounds.append(num_epochs * steps_per_epoch)
    if num_steps is not None:
        bounds.append(num_steps)
    if max_steps is not None:
        left = max_steps - initial_step
        if left <= 0:
            raise RuntimeError(f"Initial global step {initial_step} already exceeds max step {max_steps}.")
        bounds.append(left)
    if not bounds:
        raise ValueError("One of num_epochs, num_steps, or max_steps must be provided")
    return min(bounds)


def tensor_leaves(data) -> list[torch.Tensor]:
    """The tensors among `data`'s pytree leaves, in leaf order. A tuple or list of
    tensors (the usual batch) is read without a pytree walk."""
    if type(data) in (tuple, list) and all(type(t) is torch.Tensor for t in data):
        return list(data)
    return [t for t in pytree.tree_leaves(data) if isinstance(t, torch.Tensor)]


def infer_batch_size(data, batch_size: Optional[int] = None, *, is_csx: Optional[bool] = None) -> Optional[int]:
    """Dim 0 shared by every tensor of `data` (a 0-d tensor counts as 1).

    Sizes that differ inside the batch, or from `batch_size` (the previous batch's),
    are an error on CSX, where every step must stream the same shape, and a warning
    elsewhere; a batch mixing sizes has no batch size (None). A batch without any
    tensor has size 1 (a batch of Python numbers).
    """
    if is_csx is None:
        is_csx = use_cs()
    sizes = {t.shape[0] if t.dim() > 0 else 1 for t in tensor_leaves(data)}
    if not sizes:
        return 1
    if len(sizes) > 1:
        if is_csx:
            raise RuntimeError(
                f"Only uniform batch sizes are supported in CS runs, but the dataloader returned a batch with "
                f"batch sizes {sizes}."
            )
        warnings.warn(
            f"Detected non-uniform batch sizes within the same batch: {sizes}. This is allowed off CSX but it "
            f"may throw off metrics such as rate profiling. The run continues with no batch size."
        )
        return None
    size = sizes.pop()
    if batch_size is not None and size != batch_size:
        if is_csx:
            raise RuntimeError(
                f"Only uniform batch sizes are supported in CS runs, but the dataloader returned two different "
                f"batches with batch sizes {batch_size} and {size}. Make sure to set `drop_last=True` in the "
                f"dataloader."
            )
        warnings.warn(
            f"Detected non-uniform batch sizes between batches ({batch_size} vs {size}). This is allowed off "
            f"CSX but it may throw off metrics such as rate profiling."
        )
    return size
