"""`cstorch.optim.Adagrad`: the update is one `cstorch::adagrad_update` op per param
group (rule in cstorch_jax.optim.adagrad)."""
from __future__ import annotations

import torch

from cstorch_jax.optim import adagrad_update

from .optimizer import Optimizer, check_hyperparameter


class Adagrad(Optimizer):
    """Adagrad with torch.optim.Adagrad's math; the default eps is the real system's
    1e-6 (torch.optim's is 1e-10).

    State per parameter: `step` (float32 0-d, the global step) and `sum` (starting at
    `initial_accumulator_value`), as torch.optim keeps them.
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-6,
                 maximize=False):
        check_hyperparameter("lr", lr, label="learning rate")
        check_hyperparameter("lr_decay", lr_decay, label="lr_decay value")
        check_hyperparameter("weight_decay", weight_decay, label="weight_decay value")
        check_hyperparameter("initial_accumulator_value", initial_accumulator_value,
                             label="initial_accumulator_value value")
        check_hyperparameter("eps", eps, label="epsilon value")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, maximize=maximize)
        super().__init__(params, defaults, enable_global_step=True)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                st["step"] = torch.zeros((), dtype=torch.float32)
                st["sum"] = torch.full_like(p, float(group["initial_accumulator_value"]))

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            self._apply_update(adagrad_update, group, params, dict(
                lr_decay=float(group["lr_decay"]), eps=float(group["eps"]), maximize=bool(group["maximize"])))
        return loss
