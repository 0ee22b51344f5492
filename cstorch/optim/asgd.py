"""`cstorch.optim.ASGD`: the update is one `cstorch::asgd_update` op per param group
(rule in cstorch_jax.optim.asgd)."""
from __future__ import annotations

import torch

from cstorch_jax.optim import asgd_update

from .optimizer import Optimizer, check_hyperparameter


def _filled(p: torch.Tensor, value) -> torch.Tensor:
    """A float32 0-d tensor holding `value` (a float or a 0-d tensor)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to(torch.float32).reshape(()).clone()
    return torch.tensor(float(value), dtype=torch.float32)


class ASGD(Optimizer):
    """Averaged SGD with torch.optim.ASGD's math.

    State per parameter, as torch.optim keeps it: `step` (float32 0-d, the global step),
    `eta` (0-d, starting at lr), `mu` (0-d, starting at 1) and `ax` (the average).
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, maximize=False):
        check_hyperparameter("lr", lr, label="learning rate")
        check_hyperparameter("weight_decay", weight_decay, label="weight_decay value")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults, enable_global_step=True)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                st["step"] = torch.zeros((), dtype=torch.float32)
                st["eta"] = _filled(p, group["lr"])
                st["mu"] = torch.ones((), dtype=torch.float32)
                st["ax"] = torch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            self._apply_update(asgd_update, group, params, dict(
                lambd=float(group["lambd"]), alpha=float(group["alpha"]), t0=float(group["t0"]),
                maximize=bool(group["maximize"])))
        return loss
