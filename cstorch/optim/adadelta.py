"""`cstorch.optim.Adadelta`: the update is one `cstorch::adadelta_update` op per param
group (rule in cstorch_jax.optim.adadelta)."""
from __future__ import annotations

import torch

from cstorch_jax.optim import adadelta_update

from .optimizer import Optimizer, check_hyperparameter


class Adadelta(Optimizer):
    """Adadelta with torch.optim.Adadelta's math.

    State per parameter, as torch.optim keeps it: `step` (float32 0-d, counted only so
    the state dict has torch's layout; the update does not use it), `square_avg` and
    `acc_delta`. The real system keeps no `step`; a checkpoint without one loads.
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False):
        check_hyperparameter("lr", lr, label="learning rate")
        check_hyperparameter("rho", rho, label="rho value")
        if not isinstance(rho, torch.Tensor) and rho > 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_hyperparameter("eps", eps, label="epsilon value")
        check_hyperparameter("weight_decay", weight_decay, label="weight_decay value")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        self._init_state("square_avg", "acc_delta")

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            self._apply_update(adadelta_update, group, params, dict(
                rho=float(group["rho"]), eps=float(group["eps"]), maximize=bool(group["maximize"])))
        return loss
