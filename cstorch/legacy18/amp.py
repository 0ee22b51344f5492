"""`cstorch.amp` of the 1.8 API: the 2.x `GradScaler` and `optimizer_step` with the
1.8 defaults and argument names.

- `GradScaler(loss_scale, init_scale, steps_per_increase, min_loss_scale,
  max_loss_scale, overflow_tolerance=0.05, max_gradient_norm=None)`: the 2.x scaler
  (`scale`, `unscale_`, `step`, `update`, `state_dict`, ...) with 1.8's default
  overflow tolerance. `max_gradient_norm` was a pipeline-mode setting ("only used in
  pipeline mode"); in weight streaming it has no effect, here too (with a warning).
- `optimizer_step(loss, optimizer, grad_scaler, max_gradient_norm=None,
  max_gradient_val=None)`: the 2.x `optimizer_step` (which calls backward itself).
  `max_gradient_val` is 1.8's name of 2.x's `max_gradient_value` (both accepted, not
  together). `grad_scaler=None`, as the guide's example passes when it does not scale
  the loss, steps through a static scaler of 1.0, whose scale, unscale and step are
  exact no-ops: backward, clip, optimizer.step(), zero_grad().
"""
from __future__ import annotations

import warnings
from typing import Optional, Union

import cstorch
from cstorch.amp import *  # noqa: F401,F403  (set_half_dtype, autocast, ...: the 2.x helpers)
from cstorch.amp import __all__ as _amp_all


class GradScaler(cstorch.amp.GradScaler):
    """The 2.x GradScaler (`scale`, `unscale_`, `step`, `update`, `state_dict`, ...) with
    1.8's arguments and its default `overflow_tolerance=0.05`.

    Args:
        loss_scale: "dynamic", or a number: a static scale; None: 1.0.
        init_scale: the first dynamic scale; None: 2**15.
        steps_per_increase: the clean steps after which a dynamic scale doubles; None: 2000.
        min_loss_scale: the least dynamic scale; None: 2**-14.
        max_loss_scale: the largest dynamic scale; None: 2**15.
        overflow_tolerance: the fraction of overflowing steps above which a dynamic scale halves.
        max_gradient_norm: 1.8's pipeline-mode clipping (no effect here; a warning).

    Differences from the real system:
        `max_gradient_norm` (a pipeline-mode setting in 1.8) has no effect, with a
        warning: clip with `optimizer_step(..., max_gradient_norm=...)`.
    """

    def __init__(self, loss_scale: Union[str, float, None] = None, init_scale: Optional[float] = None,
                 steps_per_increase: Optional[int] = None, min_loss_scale: Optional[float] = None,
                 max_loss_scale: Optional[float] = None, overflow_tolerance: float = 0.05,
                 max_gradient_norm: Optional[float] = None):
        if max_gradient_norm is not None:
            warnings.warn("GradScaler(max_gradient_norm=...) applies only in pipeline mode and has no effect in "
                          "weight streaming; clip with cstorch.amp.optimizer_step(..., max_gradient_norm=...) or "
                          "torch.nn.utils.clip_grad_norm_ after unscale_().")
        super().__init__(loss_scale=loss_scale, init_scale=init_scale, steps_per_increase=steps_per_increase,
                         min_loss_scale=min_loss_scale, max_loss_scale=max_loss_scale,
                         overflow_tolerance=overflow_tolerance)


def optimizer_step(loss, optimizer, grad_scaler: Optional[cstorch.amp.GradScaler] = None,
                   max_gradient_norm: Optional[float] = None, max_gradient_val: Optional[float] = None, *,
                   max_gradient_value: Optional[float] = None) -> None:
    """Backward, unscale, clip (by norm or by value), step, update, zero_grad: the 2.x
    `cstorch.amp.optimizer_step`. `max_gradient_val` is 1.8's name of 2.x's
    `max_gradient_value` (both accepted, not together).

    Args:
        loss: the loss tensor of the step.
        optimizer: a cstorch optimizer or a list of them.
        grad_scaler: the GradScaler; None: a static scaler of 1.0 (no scaling).
        max_gradient_norm: clip the gradients to this global norm.
        max_gradient_val: 1.8's name of `max_gradient_value`.
        max_gradient_value: clip every gradient element to [-value, value] (not with `max_gradient_val`).

    Differences from the real system:
        `grad_scaler=None`, as the porting guide's example passes when it does not scale
        the loss, steps through a static scaler of 1.0, whose scale, unscale and step
        are exact no-ops: backward, clip, `optimizer.step()`, `zero_grad()`.
    """
    if max_gradient_val is not None and max_gradient_value is not None:
        raise ValueError("optimizer_step: max_gradient_val and max_gradient_value are the same setting (1.8 and 2.x "
                         "names); give one.")
    if max_gradient_val is not None:
        max_gradient_value = max_gradient_val
    if grad_scaler is None:
        grad_scaler = cstorch.amp.GradScaler(loss_scale=1.0)
    cstorch.amp.optimizer_step(loss, optimizer, grad_scaler, max_gradient_norm=max_gradient_norm,
                               max_gradient_value=max_gradient_value)


__all__ = [*_amp_all]
