"""Which optimizer steps were skipped because their gradients were not finite.

`GradScaler.step(optimizer)` records, for that optimizer, a bool 0-d tensor that is
True when the step was applied. Schedulers read it so that a skipped step does not
advance `last_epoch` either. A record lives from that step until the optimizer's next `step()` (which forgets it
first) or the start of the next traced step.
"""
from __future__ import annotations

import weakref
from typing import Optional

import torch

_APPLIED: "weakref.WeakKeyDictionary[object, torch.Tensor]" = weakref.WeakKeyDictionary()


def record_step_applied(optimizer, applied: torch.Tensor) -> None:
    _APPLIED[optimizer] = applied


def step_applied(optimizer) -> Optional[torch.Tensor]:
    """The bool 0-d tensor GradScaler recorded for `optimizer`'s last step, or None
    when no GradScaler stepped it (every step counts)."""
    return _APPLIED.get(optimizer)


def forget(optimizer) -> None:
    _APPLIED.pop(optimizer, None)


def clear() -> None:
    _APPLIED.clear()
