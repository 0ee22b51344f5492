"""`cstorch.optim.RAdam`: the update is one `cstorch::radam_update` op per param group
(rule in cstorch_jax.optim.radam)."""
from __future__ import annotations

import torch

from cstorch_jax.optim import radam_update

from .optimizer import Optimizer, check_adam_hyperparameters


class RAdam(Optimizer):
    """RAdam with torch.optim.RAdam's math (weight decay as L2; the real signature has
    neither `maximize` nor `decoupled_weight_decay`); the default eps is the real
    system's 1e-6 (torch.optim's is 1e-8).

    State per parameter, as torch.optim keeps it: `step` (float32 0-d, the global
    step), `exp_avg` and `exp_avg_sq`.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0):
        check_adam_hyperparameters(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults, enable_global_step=True)

    def preinitialize(self) -> None:
        self._init_state("exp_avg", "exp_avg_sq")

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            beta1, beta2 = group["betas"]
            self._apply_update(radam_update, group, params, dict(
                beta1=float(beta1), beta2=float(beta2), eps=float(group["eps"])))
        return loss
