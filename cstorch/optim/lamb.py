"""`cstorch.optim.Lamb`: layer-wise adaptive moments (no bias correction, weight norm
clipped to 10); one `cstorch::lamb_update` op per param group (rule and formula in
cstorch_jax.optim.lamb)."""
from __future__ import annotations

import torch

from cstorch_jax.optim import lamb_update

from .optimizer import Optimizer, check_adam_hyperparameters


class Lamb(Optimizer):
    """LAMB. `weight_decay` is added to the Adam direction before the trust ratio;
    `adam=True` fixes the trust ratio at 1. State: `exp_avg`, `exp_avg_sq`."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0, adam=False):
        check_adam_hyperparameters(lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, adam=adam))

    def preinitialize(self) -> None:
        self._init_state("exp_avg", "exp_avg_sq", step=False)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            beta1, beta2 = group["betas"]
            self._apply_update(lamb_update, group, params, dict(
                beta1=float(beta1), beta2=float(beta2), eps=float(group["eps"]), adam=bool(group["adam"])))
        return loss
