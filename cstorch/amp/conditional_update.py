"""Updates kept only when the step's gradients were finite: `isfinite`,
`update_if_finite`, `setup_optimizer` (the mechanism is `cstorch.optim.if_finite`).

With dynamic loss scaling, `GradScaler.step(optimizer)` applies the update only when the
gradients are finite (a 0-d bool tensor, computed on the device).

* `isfinite(optimizer)`: that tensor for the optimizer's last step in this step, or `True`
  when no GradScaler decided it (static scaling, no scaler, not yet stepped).
* `update_if_finite(optimizer, tensor)`: called inside a `@cstorch.trace` step before
  `tensor` is changed, makes the change conditional: at the end of the step `tensor`
  becomes `where(isfinite(optimizer), new value, value when marked)`. Schedulers-like
  counters of the user's own code stay in step with the optimizer this way. Outside a
  traced step it does nothing (there is no step to condition on), as the real system does
  off CSX.
* `setup_optimizer(optimizer)`: the real system attaches its loss-scaling stash to the
  optimizer; GradScaler needs none here, so the optimizer is returned as it is.
"""
from __future__ import annotations

from typing import Union

import torch

from ..optim import if_finite

__all__ = ["isfinite", "update_if_finite", "setup_optimizer"]


def isfinite(optimizer) -> Union[torch.Tensor, bool]:
    """Whether `optimizer`'s last step in this step had finite gradients (see the module docstring).

    Args:
        optimizer: the optimizer stepped by a GradScaler.
    """
    applied = if_finite.step_applied(optimizer)
    return True if applied is None else applied


def update_if_finite(optimizer, tensor: torch.Tensor) -> None:
    """Keep the coming change of `tensor` only if this step's gradients are finite.

    Args:
        optimizer: the optimizer whose step decides.
        tensor: the tensor whose coming change is kept only when the gradients are finite.

    Differences from the real system:
        Outside a traced step it does nothing.
    """
    if_finite.update_if_finite(optimizer, tensor)


def setup_optimizer(optimizer):
    """`optimizer` itself (see the module docstring).

    Args:
        optimizer: the optimizer (returned unchanged).

    Differences from the real system:
        It returns the optimizer unchanged: the GradScaler needs no stash here.
    """
    return optimizer
