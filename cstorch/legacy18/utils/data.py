"""`cstorch.utils.data.DataLoader(input_fn, num_steps=, max_steps=, num_epochs=,
steps_per_epoch=, initial_step=0, *args, **kwargs)` of the 1.8 API: iterated directly.

It wraps a 2.x `cstorch.utils.data.DataLoader(input_fn, *args, **kwargs)` (the other
arguments go to `input_fn`), and each `iter()` runs one pass as a 2.x `DataExecutor`:

    total steps      compute_num_steps(loader, initial_step, num_steps, max_steps,
                     num_epochs, steps_per_epoch): min(num_steps, max_steps - initial_step)
                     or min(num_epochs * steps_per_epoch, max_steps - initial_step);
                     steps_per_epoch defaults to len(input_fn's loader)
    one pass         num_steps given: every step; num_epochs given: one epoch
                     (steps_per_epoch steps, fewer at the end). A pass takes the steps not
                     run yet, so `for _ in range(loader.num_epochs): for batch in loader:`
                     runs the whole run, and a pass that was left early (a peek with
                     `next(iter(loader))`) does not count the step it did not finish.
                     Once every step ran, iterating yields nothing.
    the executor     DataExecutor(loader, num_steps=<pass length>,
                     checkpoint_steps=<the schedule below, shifted to the pass>)

Checkpoint steps. With `configure(checkpoint_steps=N)`, weights can be fetched (with
`save` / `model.state_dict()` in a step closure, see `steps.py`) only on the
checkpoint steps and the last step of the run. Step g (0-based, counted from
`initial_step`) is a checkpoint step when it ends an interval of N steps ((g + 1) % N
== 0, the Model Zoo 1.8 loop's `global_step % checkpoint_steps == 0` after counting the
step) or starts one (g % N == 0, the porting guide's `i % checkpoint_steps == 0`
before counting it), or when it is the run's last step. N = 0: only the last step.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import cstorch
from cstorch.utils.data import DataExecutor, Schedule, compute_num_steps

from ..run_config import current_config

_RUNS: list = []  # the passes being iterated, innermost last


class Pass:
    """One pass of a 1.8 DataLoader: its executor and where its steps sit in the run."""

    def __init__(self, loader: "DataLoader", executor: DataExecutor, first: int):
        self.loader = loader
        self.executor = executor
        self.first = first  # the run step (0-based, from initial_step) of the pass's step 0

    @property
    def step(self) -> Optional[int]:
        """The run step being executed (None before the first batch)."""
        it = self.executor.iteration
        return None if it < 0 else self.first + it

    def is_checkpoint_step(self, step: int) -> bool:
        return self.loader.is_checkpoint_step(step)


def active_pass() -> Optional[Pass]:
    """The innermost 1.8 DataLoader pass being iterated, or None."""
    return _RUNS[-1] if _RUNS else None


def _reset() -> None:
    """Forget passes left unfinished (tests that start over)."""
    _RUNS.clear()


def _check_count(name: str, value, low: int) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
        raise ValueError(f"DataLoader: {name} must be an integer >= {low} or None, got {value!r}.")


class DataLoader:
    """The 1.8 data loader, iterated directly: it wraps a 2.x
    `cstorch.utils.data.DataLoader(input_fn, *args, **kwargs)` and each `iter()` runs one
    pass as a 2.x `DataExecutor` (the module's text says how long a pass is and which
    steps are checkpoint steps). `len()`, `num_epochs`, `total_steps`; other attributes
    (`dataset`, `batch_size`, ...) are those of the loader `input_fn` returned.

    Args:
        input_fn: the function that builds the loader (as for the 2.x DataLoader).
        *args: positional arguments for `input_fn`.
        num_steps: the steps of the run (not with `num_epochs`).
        max_steps: the step at which the run ends, counted like `initial_step`.
        num_epochs: the passes over the loader (not with `num_steps`).
        steps_per_epoch: the steps of one epoch; None: the loader's length.
        initial_step: the step the run starts from (a resumed run's).
        **kwargs: keyword arguments for `input_fn`.

    Differences from the real system:
        A checkpoint step is one where the 0-based step `g` (counted from
        `initial_step`) has `g % N == 0` (the porting guide's example) or
        `(g + 1) % N == 0` (Model Zoo 1.8's loop), or the run's last step: two per
        interval of N steps where the real system has one. A pass left early
        (`next(iter(loader))`) does not count the step it did not finish; iterating
        after the run's last step yields nothing.
    """

    def __init__(self, input_fn: Callable, *args, num_steps: Optional[int] = None, max_steps: Optional[int] = None,
                 num_epochs: Optional[int] = None, steps_per_epoch: Optional[int] = None, initial_step: int = 0,
                 **kwargs):
        for name, value in (("num_steps", num_steps), ("max_steps", max_steps), ("num_epochs", num_epochs),
                            ("steps_per_epoch", steps_per_epoch)):
            _check_count(name, value, 1)
        _check_count("initial_step", initial_step, 0)
        if num_steps is not None and num_epochs is not None:
            raise ValueError("DataLoader: num_steps and num_epochs are mutually exclusive; give one of them "
                             "(max_steps may bound either).")
        if num_steps is None and num_epochs is None and max_steps is None:
            raise ValueError("DataLoader: give num_steps, num_epochs (with steps_per_epoch or a loader that has a "
                             "length) or max_steps, so that the number of steps is known.")
        self.loader = cstorch.utils.data.DataLoader(input_fn, *args, **kwargs)
        self.num_steps = num_steps
        self.max_steps = max_steps
        self.steps_per_epoch = steps_per_epoch
        self.initial_step = initial_step
        self._num_epochs = num_epochs
        self._total: Optional[int] = None
        self.steps_done = 0  # steps of this run that finished

    # -- lengths -----------------------------------------------------------------------
    @property
    def total_steps(self) -> int:
        """The steps of the whole run (module doc)."""
        if self._total is None:
            self._total = compute_num_steps(self.loader, self.initial_step, self.num_steps, self.max_steps,
                                            self._num_epochs, self.steps_per_epoch)
        return self._total

    @property
    def pass_length(self) -> int:
        """Steps of one pass: an epoch with num_epochs, else the whole run."""
        if self._num_epochs is None:
            return self.total_steps
        return self.steps_per_epoch or len(self.loader)

    @property
    def num_epochs(self) -> int:
        """The passes the run takes (1 unless num_epochs was given)."""
        return math.ceil(self.total_steps / self.pass_length)

    def __len__(self) -> int:
        return self.pass_length

    # -- checkpoint steps --------------------------------------------------------------
    @property
    def checkpoint_every(self) -> int:
        return current_config().checkpoint_steps

    def is_checkpoint_step(self, step: int) -> bool:
        """Whether run step `step` (0-based, from initial_step) may fetch weights."""
        n = self.checkpoint_every
        last = step == self.total_steps - 1
        g = self.initial_step + step
        return last or (n > 0 and (g % n == 0 or (g + 1) % n == 0))

    def _schedule(self, first: int, steps: int) -> Schedule:
        """The checkpoint steps of the pass that runs run steps first .. first+steps-1,
        numbered from 0 within the pass, as a 2.x Schedule of consecutive stretches."""
        local = [i for i in self._candidates(first, steps) if self.is_checkpoint_step(first + i)]
        ranges = []
        for i in sorted(set(local)):
            if ranges and ranges[-1].end == i:
                ranges[-1].end = i + 1
            else:
                ranges.append(Schedule.Range(start=i, end=i + 1, step=1, include_last=False))
        return Schedule(ranges)

    def _candidates(self, first: int, steps: int):
        n = self.checkpoint_every
        yield steps - 1
        if n <= 0:
            return
        if n <= 2:
            yield from range(steps)
            return
        g0 = self.initial_step + first
        for r in (0, n - 1):  # g % n == 0 and (g + 1) % n == 0
            yield from range((r - g0) % n, steps, n)

    # -- iteration ---------------------------------------------------------------------
    def __iter__(self):
        steps = min(self.pass_length, self.total_steps - self.steps_done)
        if steps <= 0:
            return
        first = self.steps_done
        executor = DataExecutor(self.loader, num_steps=steps, checkpoint_steps=self._schedule(first, steps))
        run = Pass(self, executor, first)
        batches = iter(executor)
        _RUNS.append(run)
        try:
            for batch in batches:
                yield batch
                self.steps_done += 1
            if not cstorch.backend().is_e2e_execution:  # compile/validate only: one step stands for the run
                self.steps_done = self.total_steps
        finally:
            batches.close()
            _RUNS.remove(run)

    def __getattr__(self, name):
        """Other attributes (`dataset`, `batch_size`, `num_workers`, ...) are those of
        the loader `input_fn` returned."""
        if name.startswith("_") or name == "loader":
            raise AttributeError(name)
        return getattr(self.loader.dataloader, name)


__all__ = ["DataLoader", "active_pass"]
