"""`cstorch.amp.optimizer_step`: backward, unscale, clip, step, update, zero_grad."""
from __future__ import annotations

import torch

from ..optim.optimizer import Optimizer
from .grad_scaler import GradScaler


def optimizer_step(loss: torch.Tensor, optimizer, grad_scaler: GradScaler, max_gradient_norm: float | None = None,
                   max_gradient_value: float | None = None) -> None:
    """Run `grad_scaler.scale(loss).backward()` (do not call backward yourself), unscale
    the gradients, clip them by global norm or by value (not both), step every optimizer
    through the scaler, update the scale and zero the gradients. `optimizer` is one
    cstorch optimizer or a list of them.

    Args:
        loss: the loss tensor of the step.
        optimizer: a cstorch optimizer or a list of them.
        grad_scaler: the GradScaler that scales the loss.
        max_gradient_norm: clip the gradients to this global norm (>= 0); None: no norm clipping.
        max_gradient_value: clip every gradient element to [-value, value] (>= 0); None: no value clipping.
    """
    if not isinstance(loss, torch.Tensor):
        raise ValueError(f"Expected the loss to be a single tensor, got {type(loss).__name__}")
    optimizers = list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer]
    for i, opt in enumerate(optimizers):
        if not isinstance(opt, Optimizer):
            raise TypeError(f"Expected optimizer {i} to be a cstorch.optim.Optimizer, got {type(opt).__name__}")
    if not isinstance(grad_scaler, GradScaler):
        raise TypeError(f"Expected grad_scaler to be a cstorch.amp.GradScaler, got {type(grad_scaler).__name__}")
    for name, value in (("max_gradient_norm", max_gradient_norm), ("max_gradient_value", max_gradient_value)):
        if value is not None and value < 0.0:
            raise ValueError(f"{name} has to be a non-negative float, got {value}")
    if max_gradient_norm is not None and max_gradient_value is not None:
        raise ValueError(
            f"Gradients can be clipped by norm (={max_gradient_norm}) or by value (={max_gradient_value}), not "
            f"both: set only one of max_gradient_norm and max_gradient_value."
        )
    grad_scaler.scale(loss).backward()
    for opt in optimizers:
        grad_scaler.unscale_(opt)
    params = [p for opt in optimizers for g in opt.param_groups for p in g["params"] if p.grad is not None]
    if max_gradient_norm is not None:
        clip_grad_norm(params, max_gradient_norm)
    elif max_gradient_value is not None:
        for p in params:
            p.grad.clamp_(-max_gradient_value, max_gradient_value)
    for opt in optimizers:
        grad_scaler.step(opt)
    grad_scaler.update()
    for opt in optimizers:
        opt.zero_grad()


def clip_grad_norm(params, max_norm: float) -> torch.Tensor:
    """Scale the gradients by min(1, max_norm / (norm + 1e-6)), norm the global L2 norm
    (torch.nn.utils.clip_grad_norm_'s rule, with no host read: a non-finite norm passes
    through to the grads, where the GradScaler's finite check sees it)."""
    with torch.no_grad():
        norm = torch.sqrt(sum(torch.sum(p.grad.float() ** 2) for p in params))
        coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
        for p in params:
            p.grad.mul_(coef.to(p.grad.dtype))
    return norm
