"""`cstorch.optim.lr_scheduler` of the 1.8 API: the 2.x learning-rate schedulers, the
1.8 base class of custom schedulers, and `configure_lr_scheduler`.

- `LRScheduler(optimizer, total_iters=None, last_epoch=-1)`: a custom scheduler defines
  `_get_closed_form_lr()`, the learning rate as a tensor computed with torch ops from
  `self.last_epoch` (an int64 0-d tensor: the step). It is the 2.x scheduler whose
  closed form `_value(t)` is `_get_closed_form_lr()` evaluated with `last_epoch = t`,
  so a custom scheduler also works inside the 2.x composites (SequentialLR, ...).
  `isinstance(<a 2.x scheduler>, LRScheduler)` holds.
- `configure_lr_scheduler(optimizer, learning_rate)`: the 2.x helper (a number, a
  `{"scheduler": name, ...}` dict or a list of them). In a list, 1.8 wrote
  `main_scheduler: ChainedLR` (or `SequentialLR`) where 2.x writes `chained`
  (`sequential`); both spellings are accepted.
"""
from __future__ import annotations

import abc
from typing import Optional

import torch

import cstorch
from cstorch.optim.lr_scheduler import *  # noqa: F401,F403  (ConstantLR, LinearLR, CosineDecayLR, ...)
from cstorch.optim.lr_scheduler import __all__ as _lr_all

#: 1.8 spellings of main_scheduler -> 2.x
_MAIN_SCHEDULER = {"chainedlr": "chained", "chainedscheduler": "chained", "sequentiallr": "sequential"}


class LRScheduler(cstorch.optim.lr_scheduler.LRScheduler):
    """Base class of custom 1.8 learning-rate schedulers: a subclass defines
    `_get_closed_form_lr()`, the learning rate computed with torch ops from
    `self.last_epoch` (an int64 0-d tensor: the step). It is a 2.x scheduler, so it also
    works inside the 2.x composites (`SequentialLR`, ...);
    `isinstance(<a 2.x scheduler>, LRScheduler)` holds.

    Differences from the real system:
        `configure_lr_scheduler` does not find a custom scheduler by name in a config
        dict: it knows the classes of `cstorch.optim.lr_scheduler`.
    """

    def __init__(self, optimizer, total_iters: Optional[int] = None, last_epoch: int = -1):
        super().__init__(optimizer, total_iters=total_iters, last_epoch=last_epoch)

    @abc.abstractmethod
    def _get_closed_form_lr(self) -> torch.Tensor:
        """The learning rate at step `self.last_epoch`, with torch ops only."""

    def _value(self, t: torch.Tensor) -> torch.Tensor:
        step, self.last_epoch = self.__dict__.get("last_epoch"), t
        try:
            return torch.as_tensor(self._get_closed_form_lr(), dtype=torch.float32)
        finally:
            self.last_epoch = step

    @classmethod
    def __subclasshook__(cls, subclass):
        if cls is LRScheduler and cstorch.optim.lr_scheduler.LRScheduler in getattr(subclass, "__mro__", ()):
            return True
        return NotImplemented


def configure_lr_scheduler(optimizer, learning_rate, adjust_learning_rate: Optional[dict] = None):
    """The 2.x `configure_lr_scheduler` (a number, a `{"scheduler": name, ...}` dict or a
    list of them), also taking 1.8's `main_scheduler` names.

    Args:
        optimizer: the optimizer to schedule.
        learning_rate: a number, a `{"scheduler": name, ...}` dict or a list of them.
        adjust_learning_rate: the per-parameter learning-rate factors; with it, the scheduler is wrapped in
            ScalePerParamLR.

    Differences from the real system:
        In a list, `main_scheduler` takes 1.8's `ChainedLR`, `ChainedScheduler` and
        `SequentialLR` (any case) and 2.x's `chained` and `sequential`. Only the
        classes of `cstorch.optim.lr_scheduler` are found by name.
    """
    if isinstance(learning_rate, (list, tuple)):
        learning_rate = [_main_scheduler_2x(d) for d in learning_rate]
    return cstorch.optim.configure_lr_scheduler(optimizer, learning_rate, adjust_learning_rate)


def _main_scheduler_2x(spec):
    if isinstance(spec, dict) and isinstance(spec.get("main_scheduler"), str):
        name = spec["main_scheduler"]
        spec = {**spec, "main_scheduler": _MAIN_SCHEDULER.get(name.lower(), name)}
    return spec


__all__ = [*_lr_all, "configure_lr_scheduler"]
