"""`TrainingLoop` and `ValidationLoop`: how many steps a run takes and when it validates.

Training length. Exactly one of `num_steps` (steps this `fit` runs), `num_epochs` (times
`steps_per_epoch`, default the train loader's length) may be given, optionally with
`max_steps`, the global step training stops at; `max_steps` alone trains up to it.
So a run restarted from a checkpoint at global step g finishes at `max_steps` (or at
g + num_steps). Validation during fit: `eval_frequency` is a number of steps (int), a
fraction of the fit's steps (float in (0, 1]), or None/0 for none; validation also
runs after the last step whenever it is enabled. Global steps divisible by the
frequency are validation points, so a restarted run validates where the first run would
have. `eval_steps` is the number of validation batches (default: one pass over the
validation loader).

Gradient accumulation. `grad_accum_steps = N` splits every batch on dim 0 into N
micro-batches inside the one compiled step: forward and backward per micro-batch with
the loss divided by N, gradients accumulating, then one optimizer step. The update
equals one step on the whole batch (for a per-sample mean loss) while the activations
held at once are those of a micro-batch. The batch size must be divisible by N.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ...utils.data import Schedule
from ..checks import show
from .base import CoreCallback

_MAX_STEPS = 2**31 - 1


def _check_count(name: str, value, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= _MAX_STEPS:
        raise ValueError(f"{name} must be an integer in [1, {_MAX_STEPS}], got {show(value)}")


@dataclass(frozen=True)
class FitPlan:
    """The global steps of one `fit`: it trains from `start` to `end` (global steps after
    the step) in chunks ending at `boundaries` (each a validation point, the last = end)."""

    start: int
    end: int
    boundaries: tuple[int, ...]
    validate_at: frozenset

    def chunks(self):
        """(loop_idx, first global step - 1, number of steps, validate after) per chunk."""
        previous = self.start
        for i, b in enumerate(self.boundaries):
            yield i, previous, b - previous, b in self.validate_at
            previous = b

    def executor_schedules(self, first: int, steps: int, checkpoint_every: Optional[int], log_steps: int):
        """The checkpoint `Schedule` and activation frequency of the executor that runs the
        global steps first+1 .. first+steps: `Checkpoint(steps=checkpoint_every)` saves
        after global steps divisible by it and after the fit's last step; the steps that
        log (`Logging(log_steps)`) and save must be activation steps."""
        every = checkpoint_every
        Range = Schedule.Range
        last = first + steps == self.end and every != 0  # the fit's last step always saves
        if every:  # global steps divisible by `every`: iterations offset, offset + every, ...
            offset = (every - (first + 1) % every) % every
            ranges = [Range(offset, steps, every, last)] if offset < steps else []
        else:
            offset, ranges = steps, []
        if last and not ranges:
            ranges = [Range(steps - 1, steps, 1, False)]
        # closures fetch values on activation steps: every log step and checkpoint step
        # (before the last, which always is one) must be one
        log_offset = (log_steps - (first - self.start + 1) % log_steps) % log_steps
        activation = 0
        for start, stride in ((offset, every), (log_offset, log_steps)):
            if stride and start < steps - 1:
                activation = math.gcd(activation, math.gcd(start + 1, stride))
        return Schedule(ranges), activation or steps


class TrainingLoop(CoreCallback):
    """How long `fit` trains, when it validates and how it accumulates gradients (see
    the module docstring).

    Args:
        num_steps: the steps this `fit` runs (not with `num_epochs`).
        max_steps: the global step at which training stops (with or without the other two).
        num_epochs: the passes over the train loader (not with `num_steps`).
        steps_per_epoch: the steps of one epoch (only with `num_epochs`); None: the train loader's length.
        eval_frequency: validate during `fit`: every this many steps (int), at this fraction of the fit's
            steps (float in (0, 1]), or never (None or 0); with validation on, it also runs after the last
            step.
        eval_steps: the validation batches; None: one pass over the validation loader.
        grad_accum_steps: N: every batch is split into N micro-batches inside the one step (the batch size
            must be divisible by N).

    Differences from the real system:
        `grad_accum_steps=N` splits each batch into N micro-batches inside the one
        compiled step, on every device (the real CSX does this through
        `micro_batch_size`; the real CPU/GPU path steps every N batches instead): the
        batch size must be a multiple of N.
    """

    def __init__(self, num_steps: Optional[int] = None, max_steps: Optional[int] = None,
                 num_epochs: Optional[int] = None, steps_per_epoch: Optional[int] = None,
                 eval_frequency=1.0, eval_steps: Optional[int] = None, grad_accum_steps: int = 1):
        for name, value in (("num_steps", num_steps), ("max_steps", max_steps), ("num_epochs", num_epochs),
                            ("steps_per_epoch", steps_per_epoch), ("eval_steps", eval_steps)):
            _check_count(name, value)
        _check_count("grad_accum_steps", grad_accum_steps, allow_none=False)
        if num_steps is not None and num_epochs is not None:
            raise ValueError(f"TrainingLoop takes num_steps ({num_steps}) or num_epochs ({num_epochs}), not both.")
        if steps_per_epoch is not None and num_epochs is None:
            raise ValueError("steps_per_epoch is only meaningful with num_epochs; set num_epochs too.")
        if num_steps is None and max_steps is None and num_epochs is None:
            raise ValueError("TrainingLoop needs the training length: set num_steps, max_steps or num_epochs.")
        if isinstance(eval_frequency, bool) or not (
                eval_frequency is None
                or (isinstance(eval_frequency, int) and eval_frequency >= 0)
                or (isinstance(eval_frequency, float) and 0.0 < eval_frequency <= 1.0)):
            raise ValueError(
                f"eval_frequency must be an int number of steps (>= 0), a float fraction of the training steps in "
                f"(0, 1], or None (no validation during fit); got {show(eval_frequency)}")
        self.num_steps = num_steps
        self.max_steps = max_steps
        self.num_epochs = num_epochs
        self.steps_per_epoch = steps_per_epoch
        self.eval_frequency = eval_frequency
        self.eval_steps = eval_steps
        self.grad_accum_steps = grad_accum_steps

    def on_train_batch_end(self, trainer, model, outputs, batch, batch_idx):
        if trainer.should_run_optimizer_step:
            trainer.count_step()

    @property
    def needs_loader_length(self) -> bool:
        """Whether the training length depends on the train loader's length (an epoch
        count without `steps_per_epoch`)."""
        return self.num_epochs is not None and self.steps_per_epoch is None

    def train_steps(self, start: int, loader_length: Optional[int]) -> int:
        """Steps a fit starting at global step `start` runs."""
        if self.num_epochs is not None:
            per_epoch = self.steps_per_epoch or loader_length
            if loader_length == 0 and not self.steps_per_epoch:
                raise ValueError("num_epochs counts passes over the train dataloader, but it is empty (length 0): it "
                                 "yields no batch, so an epoch has no step. Often the dataset is smaller than one "
                                 "batch (batch_size) and drop_last drops it; give the loader at least one batch (more "
                                 "samples, a smaller batch_size or drop_last=False).")
            if not per_epoch:
                raise ValueError("num_epochs needs the train dataloader's length or steps_per_epoch; the loader has "
                                 "no length, so set steps_per_epoch.")
            steps = self.num_epochs * per_epoch
        else:
            steps = self.num_steps
        if self.max_steps is not None:
            remaining = self.max_steps - start
            steps = remaining if steps is None else min(steps, remaining)
        return max(int(steps), 0)

    def plan(self, start: int, loader_length: Optional[int], validate: bool) -> FitPlan:
        steps = self.train_steps(start, loader_length)
        end = start + steps
        boundaries, points = [], set()
        frequency = self.eval_frequency
        if validate and frequency:
            if isinstance(frequency, float):
                total = self.train_steps(0, loader_length) if self.max_steps is not None else steps
                frequency = max(1, math.ceil(frequency * total))
            points = {g for g in range((start // frequency + 1) * frequency, end, frequency)}
            points.add(end)
            boundaries = sorted(points)
        if not boundaries or boundaries[-1] != end:
            boundaries.append(end)
        return FitPlan(start, end, tuple(b for b in boundaries if b > start), frozenset(points))


class ValidationLoop(CoreCallback):
    """`eval_steps` batches per validation (None: one pass over the loader). `hook` names
    the hooks called (`on_<hook>_start`, `on_<hook>_batch_end`, ...).

    Args:
        eval_steps: the validation batches; None: one pass over the loader.
        hook: the name in the hooks called (`on_<hook>_start`, `on_<hook>_batch_end`, ...).
    """

    def __init__(self, eval_steps: Optional[int] = None, hook: str = "validate"):
        _check_count("eval_steps", eval_steps)
        if not isinstance(hook, str) or not hook.isidentifier():
            raise ValueError(f"hook must be an identifier such as 'validate', got {hook!r}")
        self.eval_steps = eval_steps
        self.hook = hook
