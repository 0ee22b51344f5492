"""`cstorch.optim.NAdam`: the update is one `cstorch::nadam_update` op per param group
(rule in cstorch_jax.optim.nadam)."""
from __future__ import annotations

import torch

from cstorch_jax.optim import nadam_update

from .optimizer import Optimizer, check_adam_hyperparameters, check_hyperparameter


class NAdam(Optimizer):
    """NAdam with torch.optim.NAdam's math (weight decay as L2; the real signature has
    neither `maximize` nor `decoupled_weight_decay`).

    State per parameter, as torch.optim keeps it: `step` (float32 0-d, the global
    step), `mu_product` (0-d, starting at 1), `exp_avg` and `exp_avg_sq`.

    Difference from the real system: its momentum term divides by 1 - P * mu * mu_next
    (the product P already includes this step's mu, so mu counts twice); here it is
    1 - P * mu_next, as in torch.optim.NAdam and the NAdam paper.
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3):
        check_adam_hyperparameters(lr, betas, eps, weight_decay)
        check_hyperparameter("momentum_decay", momentum_decay, label="momentum_decay value")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay)
        super().__init__(params, defaults, enable_global_step=True)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                st["step"] = torch.zeros((), dtype=torch.float32)
                st["mu_product"] = torch.ones((), dtype=torch.float32)
                st["exp_avg"] = torch.zeros_like(p)
                st["exp_avg_sq"] = torch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            beta1, beta2 = group["betas"]
            self._apply_update(nadam_update, group, params, dict(
                beta1=float(beta1), beta2=float(beta2), eps=float(group["eps"]),
                momentum_decay=float(group["momentum_decay"])))
        return loss
