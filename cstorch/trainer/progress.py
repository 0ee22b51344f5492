"""Where a Trainer is in its training: one object the loops advance, a checkpoint saves
and restores whole, and the Trainer holds (`Trainer.progress`; `global_step` and
`fit_plan` read it).

    global_step        optimizer steps done
    batches_consumed   the train stream's position (batches taken), as of the last fit's
                       end or the last checkpoint loaded
    plan               the running (or last) fit's `FitPlan`: its steps, its validation
                       points and, with the Checkpoint callback, its checkpoint schedule
    fit_start          the global step the fit started from, and
    fit_batches        the stream's position then: a step s of the fit has consumed
                       `fit_batches + s - fit_start` batches (`batches_at`)
    stretch_start      the first global step of the running stretch (one DataExecutor run)
    step_pending       a train step has started (`on_train_batch_start`) and is not counted
    batch_size         the last train batch's size, and
    micro_batches      the micro-batches its step runs
    validation_hook    the running validation loop's hook name ("validate", ...)

A checkpoint holds `global_step` and `dataloader: {"batches_consumed": ...}` (the keys
of every earlier release: `state_dict`, `load_state_dict`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .callbacks.loop import FitPlan


@dataclass
class Progress:
    """A Trainer's progress (module docstring)."""

    global_step: int = 0
    batches_consumed: int = 0
    plan: Optional[FitPlan] = None
    fit_start: int = 0
    fit_batches: int = 0
    stretch_start: int = 0
    step_pending: bool = False
    batch_size: Optional[int] = None
    micro_batches: int = 1
    validation_hook: str = "validate"

    @property
    def current_step(self) -> int:
        """The global step being run: while a train step is pending, the one after
        `global_step` (which counts the steps done)."""
        return self.global_step + 1 if self.step_pending else self.global_step

    def start_fit(self, plan: FitPlan) -> None:
        """A fit runs `plan` from the stream's current position."""
        self.plan = plan
        self.fit_start, self.fit_batches = plan.start, self.batches_consumed

    def end_fit(self) -> None:
        """The fit is over: the stream stands where its last step left it."""
        self.batches_consumed = self.batches_at(self.global_step)

    def batches_at(self, step: int) -> int:
        """The batches the stream had given when global step `step` of this fit ended."""
        return self.fit_batches + step - self.fit_start

    def start_stretch(self, first: int) -> None:
        self.stretch_start = first

    def start_step(self) -> None:
        """A train step begins (before `on_train_batch_start`)."""
        self.step_pending = True

    def take_batch(self, batch_size: Optional[int], micro_batches: int) -> None:
        """The pending train step runs on a batch of `batch_size` samples, in
        `micro_batches` parts."""
        self.batch_size, self.micro_batches = batch_size, micro_batches

    def count_step(self) -> None:
        """The train step ended with an optimizer step."""
        self.global_step += 1
        self.step_pending = False

    def closure_step(self, iteration: Optional[int]) -> int:
        """The global step of the stretch's step `iteration` (0-based; None: outside a
        run, the current global step)."""
        return self.global_step if iteration is None else self.stretch_start + iteration + 1

    def state_dict(self, step: int) -> dict:
        """The checkpoint keys of global step `step` of this fit."""
        return {"global_step": step, "dataloader": {"batches_consumed": self.batches_at(step)}}

    def load_state_dict(self, state: dict) -> None:
        """Restore from a checkpoint's keys (a checkpoint without a stream position had
        consumed one batch per step)."""
        self.global_step = int(state.get("global_step", 0))
        self.batches_consumed = int(state.get("dataloader", {}).get("batches_consumed", self.global_step))
        self.step_pending = False
