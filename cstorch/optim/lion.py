"""`cstorch.optim.Lion`: the sign-of-interpolated-momentum optimizer; one
`cstorch::lion_update` op per param group (rule and formula in cstorch_jax.optim.lion)."""
from __future__ import annotations

import torch

from cstorch_jax.optim import lion_update

from .optimizer import Optimizer, check_hyperparameter


class Lion(Optimizer):
    """Lion. `weight_decay` is decoupled (p *= 1 - lr * weight_decay). State: `exp_avg`."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        check_hyperparameter("lr", lr, label="learning rate")
        for i, beta in enumerate(betas):
            check_hyperparameter("beta", beta, high=1.0, label=f"beta parameter at index {i}")
        check_hyperparameter("weight_decay", weight_decay, label="weight decay value")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), weight_decay=weight_decay))

    def preinitialize(self) -> None:
        self._init_state("exp_avg", step=False)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            beta1, beta2 = group["betas"]
            self._apply_update(lion_update, group, params, dict(beta1=float(beta1), beta2=float(beta2)))
        return loss
