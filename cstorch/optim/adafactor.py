"""`cstorch.optim.Adafactor`: factored second moments for matrices, a full one for
vectors; one `cstorch::adafactor_update` op per param group (rule and formula in
cstorch_jax.optim.adafactor).

State per parameter: `step` (float32 0-d), `exp_avg` (only with `beta1`), and
`exp_avg_sq_row` (shape[:-1]) plus `exp_avg_sq_col` (shape[:-2] + shape[-1:]) for
parameters of two or more dimensions, else `exp_avg_sq` (the parameter's shape).
"""
from __future__ import annotations

import torch

from cstorch_jax.optim import adafactor_update

from .optimizer import Optimizer, check_hyperparameter


class Adafactor(Optimizer):
    """Adafactor. With `relative_step=True` the step size comes from the step count
    (pass `lr=None`); `warmup_init` needs `relative_step`; `scale_parameter` scales it
    by the parameter's RMS; `clip_threshold` caps the update's RMS; `beta1` adds a first
    moment; `weight_decay` is decoupled and scaled by the same step size."""

    def __init__(self, params, lr, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, beta1=None,
                 weight_decay=0.0, scale_parameter=True, relative_step=False, warmup_init=False):
        if relative_step and lr is not None:
            raise ValueError("Invalid learning rate: cannot combine a manual `lr` with `relative_step=True` "
                             f"(pass lr=None), got {lr}")
        if not relative_step:
            check_hyperparameter("lr", lr, label="learning rate")
        if warmup_init and not relative_step:
            raise ValueError(f"Invalid warmup_init: {warmup_init} (it needs relative_step=True)")
        if (not isinstance(eps, (tuple, list)) or len(eps) != 2
                or not all(isinstance(e, (int, float)) and not isinstance(e, bool) and e >= 0 for e in eps)):
            raise ValueError(f"Invalid epsilon value: {eps} (expected a pair of non-negative floats)")
        check_hyperparameter("clip_threshold", clip_threshold, label="clip_threshold")
        if not isinstance(clip_threshold, torch.Tensor) and clip_threshold == 0:
            raise ValueError(f"Invalid clip_threshold: {clip_threshold}")
        if decay_rate is None or decay_rate > 0:
            raise ValueError(f"Invalid decay_rate: {decay_rate} (expected <= 0)")
        if beta1 is not None:
            check_hyperparameter("beta1", beta1, high=1.0, label="beta1")
        check_hyperparameter("weight_decay", weight_decay, label="weight_decay value")
        defaults = dict(lr=lr, eps=tuple(eps), clip_threshold=clip_threshold, decay_rate=decay_rate, beta1=beta1,
                        weight_decay=weight_decay, scale_parameter=scale_parameter, relative_step=relative_step,
                        warmup_init=warmup_init)
        super().__init__(params, defaults, enable_global_step=True)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                if group["beta1"] is not None:
                    st["exp_avg"] = torch.zeros_like(p)
                if p.ndim >= 2:
                    st["exp_avg_sq_row"] = torch.zeros(p.shape[:-1], dtype=p.dtype, device=p.device)
                    st["exp_avg_sq_col"] = torch.zeros(p.shape[:-2] + p.shape[-1:], dtype=p.dtype, device=p.device)
                else:
                    st["exp_avg_sq"] = torch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            relative_step = bool(group["relative_step"])
            if not relative_step and group["lr"] is None:
                raise ValueError("Invalid learning rate: None (set one, or use relative_step=True)")
            beta1 = group["beta1"]
            self._apply_update(adafactor_update, group, params, dict(
                eps=tuple(float(e) for e in group["eps"]), clip_threshold=float(group["clip_threshold"]),
                decay_rate=float(group["decay_rate"]), beta1=None if beta1 is None else float(beta1),
                scale_parameter=bool(group["scale_parameter"]), relative_step=relative_step,
                warmup_init=bool(group["warmup_init"])),
                hparams=("weight_decay",) if relative_step else ("lr", "weight_decay"))
        return loss
