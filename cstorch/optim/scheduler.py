"""Schedulers of optimizer hyper-parameters as closed forms of the step.

A scheduler is a pure function `f(t)` of an int64 0-d step tensor, `last_epoch`,
written with torch ops only (no Python branch on a tensor value, no `.item()`), so the
same code runs eagerly on CPU/GPU and inside a compiled CSX step.

Invariant on every backend: each param group a scheduler applies to holds, under the
scheduler's `param_group_key` ("lr" or "weight_decay"), a float32 0-d tensor equal to
`f(last_epoch)`. The constructor creates that tensor (replacing a Python number) and
sets `last_epoch` to 0 ("one initial step"); `step()` advances `last_epoch` and
rewrites the value, both **in place**, because a compiled step is bound to the tensor
objects. With `scheduler.step()` after `optimizer.step()`, optimizer step k (0-based)
uses `f(k)`. A step that a GradScaler skipped (non-finite gradients) does not advance
the schedule.

`step()` is the two halves of the real API, which may also be called on their own:
`increment_last_epoch()` (the counter, skip-aware) and `update_last_value()` (the
closed form at the counter, written through `update_groups(values)`).

On CSX the live schedulers' `last_epoch` tensors are state of the compiled step
(`cstorch.state.StepState`), so one executable serves the whole schedule and the host
tensors hold the device values after the run.

This module gathers the generic schedulers (generic argument names `val`,
`initial_val`, `end_val`, ...): the base class (`scheduler_base`), the closed forms
(`closed_form_schedulers`) and the composites (`composite_schedulers`);
`lr_scheduler` and `weight_decay_scheduler` bind them to "lr" and "weight_decay".
Every closed form is written once.
"""
from .closed_form_schedulers import (
    ConstantScheduler,
    CosineAnnealingScheduler,
    CosineAnnealingWarmRestartsScheduler,
    CosineDecayScheduler,
    CyclicScheduler,
    ExponentialScheduler,
    InverseExponentialTimeDecayScheduler,
    InverseSquareRootDecayScheduler,
    LambdaScheduler,
    LinearScheduler,
    MultiStepScheduler,
    MultiplicativeScheduler,
    OneCycleScheduler,
    PolynomialScheduler,
    StepScheduler,
)
from .composite_schedulers import (
    ChainedScheduler,
    PiecewiseConstantScheduler,
    ScalePerParamScheduler,
    SequentialScheduler,
)
from .scheduler_base import (
    Scheduler,
    live_schedulers,
)

__all__ = [
    "Scheduler", "ConstantScheduler", "PolynomialScheduler", "LinearScheduler", "ExponentialScheduler",
    "InverseExponentialTimeDecayScheduler", "InverseSquareRootDecayScheduler", "CosineDecayScheduler",
    "CosineAnnealingScheduler", "CosineAnnealingWarmRestartsScheduler", "StepScheduler", "MultiStepScheduler",
    "MultiplicativeScheduler", "LambdaScheduler", "CyclicScheduler", "OneCycleScheduler", "SequentialScheduler",
    "PiecewiseConstantScheduler", "ChainedScheduler", "ScalePerParamScheduler", "live_schedulers",
]
