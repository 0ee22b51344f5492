"""`MixedPrecision`: the half dtype of the step's compute, loss scaling and gradient clipping.

With `enabled`, the step computes in `fp16_type` (weights stay float32): on CSX through
`cstorch.amp.set_half_dtype`, on CPU/GPU under `cstorch.amp.autocast` (CPU supports
bfloat16 only, so float16 is replaced by bfloat16 there, with a warning). `cbfloat16`, the
wafer's own format, computes in its proxy dtype float16 (as the real package does off the
wafer; one warning says what differs, see `cstorch.amp.precision`), bfloat16 on CPU. Loss
scaling (`loss_scaling_factor`: a number, or "dynamic") applies to float16 and cbfloat16
only: bfloat16 has float32's exponent range and is never scaled. Gradients are clipped after unscaling, by
global norm (`max_gradient_norm`) or by value (`max_gradient_value`), which works with
`enabled=False` too. Every Trainer sets the process's mixed-precision switch from its
`MixedPrecision` (none given: off), so an earlier trainer's setting does not leak into
a later one. The loss scale is logged when it is dynamic (`log_loss_scale=True`: also a
static one; False: never).
"""
from __future__ import annotations

import contextlib
import logging
import warnings
from typing import Optional, Union

import torch

import cstorch
from cstorch.amp.optimizer_step import clip_grad_norm

from ..checks import show
from .base import CoreCallback

log = logging.getLogger("cstorch.trainer")

_HALF_TYPES = ("float16", "bfloat16", "cbfloat16")


class MixedPrecision(CoreCallback):
    """The step's compute dtype, loss scaling and gradient clipping (see the module
    docstring).

    Args:
        enabled: compute in `fp16_type` (weights stay float32); False: in float32.
        fp16_type: "bfloat16", "float16" or "cbfloat16" (CPU: bfloat16 only; another is replaced,
            with a warning).
        precision_opt_level: the wafer's numerics policy (no effect here; a warning).
        loss_scaling_factor: a static loss scale (> 0), or "dynamic"; applies to float16 and
            cbfloat16 only.
        initial_loss_scale: the first dynamic scale; None: GradScaler's default.
        steps_per_increase: the clean steps after which a dynamic scale doubles.
        min_loss_scale: the least dynamic scale; None: GradScaler's default.
        max_loss_scale: the largest dynamic scale; None: GradScaler's default.
        max_gradient_norm: clip the gradients to this global norm after unscaling (> 0; not with
            `max_gradient_value`).
        max_gradient_value: clip every gradient element to [-value, value] after unscaling (> 0).
        log_loss_scale: log the loss scale: None: when it is dynamic; True: always; False: never.
    """

    def __init__(self, enabled: bool = True, fp16_type: str = "bfloat16",
                 precision_opt_level: Optional[int] = None, loss_scaling_factor: Union[float, str] = 1.0,
                 initial_loss_scale: Optional[float] = None, steps_per_increase: int = 2000,
                 min_loss_scale: Optional[float] = None, max_loss_scale: Optional[float] = None,
                 max_gradient_norm: Optional[float] = None, max_gradient_value: Optional[float] = None,
                 log_loss_scale: Optional[bool] = None):
        if fp16_type not in _HALF_TYPES:
            raise ValueError(f"fp16_type must be one of {_HALF_TYPES}, got {show(fp16_type)}")
        if not (loss_scaling_factor == "dynamic" or (isinstance(loss_scaling_factor, (int, float))
                                                     and not isinstance(loss_scaling_factor, bool)
                                                     and loss_scaling_factor > 0)):
            raise ValueError(f"loss_scaling_factor must be a positive number or 'dynamic', got "
                             f"{show(loss_scaling_factor)}")
        for name, value in (("max_gradient_norm", max_gradient_norm), ("max_gradient_value", max_gradient_value)):
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"{name} must be a number > 0, got {show(value)}")
        if max_gradient_norm is not None and max_gradient_value is not None:
            raise ValueError("Set max_gradient_norm or max_gradient_value, not both: gradients are clipped by norm "
                             "or by value.")
        if precision_opt_level is not None:
            warnings.warn("precision_opt_level selects the wafer's numerics policy and has no effect here")
        self.enabled = bool(enabled)
        self.fp16_type = fp16_type
        self.loss_scaling_factor = loss_scaling_factor
        self.initial_loss_scale = initial_loss_scale
        self.steps_per_increase = steps_per_increase
        self.min_loss_scale = min_loss_scale
        self.max_loss_scale = max_loss_scale
        self.max_gradient_norm = max_gradient_norm
        self.max_gradient_value = max_gradient_value
        self.log_loss_scale = log_loss_scale
        self.grad_scaler = None

    def setup(self, trainer):
        cstorch.amp.enable_mixed_precision(self.enabled)
        if self.enabled:
            half = self.fp16_type
            if trainer.backend.is_cpu and half != "bfloat16":
                warnings.warn(f"Mixed precision on CPU supports bfloat16 only: using bfloat16 instead of {half}.")
                half = "bfloat16"
            self.fp16_type = half
            cstorch.amp.set_half_dtype(half)
        if self.enabled and self.fp16_type in ("float16", "cbfloat16") and self.loss_scaling_factor != 1.0:
            self.grad_scaler = cstorch.amp.GradScaler(
                loss_scale=self.loss_scaling_factor, init_scale=self.initial_loss_scale,
                steps_per_increase=self.steps_per_increase, min_loss_scale=self.min_loss_scale,
                max_loss_scale=self.max_loss_scale)

    def autocast(self):
        """The context the forward runs under."""

        if not self.enabled:
            return contextlib.nullcontext()
        return cstorch.amp.autocast(cstorch.amp.get_half_dtype())

    def backward(self, loss: torch.Tensor) -> None:
        if self.grad_scaler is not None:
            self.grad_scaler.scale(loss).backward()
        else:
            loss.backward()

    def unscale(self, optimizer) -> None:
        """Divide the gradients by the loss scale (with loss scaling; else nothing). The
        Trainer calls it before the `on_before_optimizer_step` hooks, so callbacks see the
        gradients the optimizer will use, as the real trainer's precision callback does."""
        if self.grad_scaler is not None:
            self.grad_scaler.unscale_(optimizer)

    def clip_and_step(self, optimizer) -> None:
        """Clip the (unscaled, `unscale`) gradients, step the optimizer (through the
        scaler, which skips non-finite steps) and update the loss scale."""
        params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        if self.max_gradient_norm is not None:
            clip_grad_norm(params, self.max_gradient_norm)
        elif self.max_gradient_value is not None:
            with torch.no_grad():
                for p in params:
                    p.grad.clamp_(-self.max_gradient_value, self.max_gradient_value)
        if self.grad_scaler is not None:
            self.grad_scaler.step(optimizer)
            self.grad_scaler.update()
        else:
            optimizer.step()

    def loss_scale(self):
        """The loss scale to log for this step (a tensor for dynamic scaling, a number for a
        static one), or None: without loss scaling, or when `log_loss_scale` says not to
        (default: log a dynamic scale only)."""
        if self.grad_scaler is None or self.log_loss_scale is False:
            return None
        if self.grad_scaler.dynamic or self.log_loss_scale:
            return self.grad_scaler.get_scale()
        return None
