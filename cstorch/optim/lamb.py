"""`cstorch.optim.Lamb`: layer-wise adaptive moments (no bias correction, weight norm
clipped to 10); one `cstorch::lamb_update` op per param group (rule and formula in
cstorch_jax.optim.lamb)."""
from __future__ import annotations

import torch

from cstorch_jax.optim import lamb_update

from .optimizer import Optimizer, check_hyperparameter


class Lamb(Optimizer):
    """LAMB. `weight_decay` is added to the Adam direction before the trust ratio;
    `adam=True` fixes the trust ratio at 1. State: `exp_avg`, `exp_avg_sq`."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0, adam=False):
        check_hyperparameter("lr", lr, label="learning rate")
        check_hyperparameter("eps", eps, label="epsilon value")
        for i, beta in enumerate(betas):
            check_hyperparameter("beta", beta, high=1.0, label=f"beta parameter at index {i}")
        check_hyperparameter("weight_decay", weight_decay, label="weight_decay value")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, adam=adam))

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["exp_avg"] = torch.zeros_like(p)
                self.state[p]["exp_avg_sq"] = torch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            beta1, beta2 = group["betas"]
            self._apply_update(lamb_update, group, params, dict(
                beta1=float(beta1), beta2=float(beta2), eps=float(group["eps"]), adam=bool(group["adam"])))
        return loss
