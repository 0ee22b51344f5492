"""`cstorch.optim.Adam` (weight decay as L2) and `AdamW` (decoupled weight decay): one
`cstorch::adam_update` op per param group (rule in cstorch_jax.optim.adam).

State per parameter, as torch.optim.Adam keeps it: `step` (float32 0-d), `exp_avg`,
`exp_avg_sq` and, with amsgrad, `max_exp_avg_sq`. A state dict of the real system's
layout (`beta1_power`/`beta2_power` instead of `step`) is converted on load.
"""
from __future__ import annotations


import torch

from cstorch_jax.optim import adam_update

from .optimizer import Optimizer, check_adam_hyperparameters, steps_from_beta_powers


class _AdamBase(Optimizer):
    _decoupled: bool

    def __init__(self, params, lr, betas, eps, weight_decay, amsgrad, correct_bias, maximize):
        check_adam_hyperparameters(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        correct_bias=correct_bias, maximize=maximize)
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        self._init_state("exp_avg", "exp_avg_sq", when={"max_exp_avg_sq": lambda g: g["amsgrad"]})

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            beta1, beta2 = group["betas"]
            self._apply_update(adam_update, group, params, dict(
                beta1=float(beta1), beta2=float(beta2), eps=float(group["eps"]), decoupled=self._decoupled,
                amsgrad=bool(group["amsgrad"]), correct_bias=bool(group["correct_bias"]),
                maximize=bool(group["maximize"])))
        return loss

    def convert_state_dict(self, state_dict: dict) -> dict:
        return steps_from_beta_powers(state_dict)


class Adam(_AdamBase):
    """Adam; `weight_decay` is L2 regularisation added to the gradient."""
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, amsgrad=False,
                 maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, True, maximize)


class AdamW(_AdamBase):
    """AdamW; `weight_decay` is decoupled (p *= 1 - lr*wd). `correct_bias=False` drops
    the bias correction (BERT's variant)."""
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, correct_bias=True,
                 amsgrad=False, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, correct_bias, maximize)
