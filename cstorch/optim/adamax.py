"""`cstorch.optim.Adamax`: the update is one `cstorch::adamax_update` op per param
group (rule in cstorch_jax.optim.adamax)."""
from __future__ import annotations


import torch

from cstorch_jax.optim import adamax_update

from .optimizer import Optimizer, check_adam_hyperparameters, steps_from_beta_powers


class Adamax(Optimizer):
    """Adamax with torch.optim.Adamax's math; the defaults are the real system's
    (lr=1e-3, eps=1e-6; torch.optim's are 2e-3 and 1e-8).

    State per parameter, as torch.optim keeps it: `step` (float32 0-d), `exp_avg` and
    `exp_inf`. The real system keeps beta1^(t+1) as `beta1_power` instead of `step`;
    such a state dict is converted on load.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, maximize=False):
        check_adam_hyperparameters(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        self._init_state("exp_avg", "exp_inf")

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            beta1, beta2 = group["betas"]
            self._apply_update(adamax_update, group, params, dict(
                beta1=float(beta1), beta2=float(beta2), eps=float(group["eps"]), maximize=bool(group["maximize"])))
        return loss

    def convert_state_dict(self, state_dict: dict) -> dict:
        return steps_from_beta_powers(state_dict)
