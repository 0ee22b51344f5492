"""Which optimizer steps were skipped because their gradients were not finite.

`GradScaler.step(optimizer)` records, on that optimizer, a bool 0-d tensor that is
True when the step was applied. Schedulers read it so that a skipped step does not
advance `last_epoch` either. A record lives from that step until the optimizer's next
`step()` (which forgets it first) or the start of the next traced step: each record
carries the run's step serial (`StateRegistry.step_serial`), and `clear()` starts a new
serial, so every record made before is stale at once.
"""
from __future__ import annotations

from typing import Optional

import torch

from .. import _backend


def record_step_applied(optimizer, applied: torch.Tensor) -> None:
    optimizer.record_skip(applied, _backend.run_registry().step_serial)


def step_applied(optimizer) -> Optional[torch.Tensor]:
    """The bool 0-d tensor GradScaler recorded for `optimizer`'s last step, or None
    when no GradScaler stepped it (every step counts)."""
    return optimizer.skip_record(_backend.run_registry().step_serial)


def forget(optimizer) -> None:
    optimizer.forget_skip_record()


def clear() -> None:
    """Forget every record (the start of a traced step)."""
    _backend.run_registry().step_serial += 1
