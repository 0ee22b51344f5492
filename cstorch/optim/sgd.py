"""`cstorch.optim.SGD`: the update is one `cstorch::sgd_update` op (rule in
cstorch_jax.optim.sgd); the momentum buffer starts at zero."""
from __future__ import annotations

import torch

from cstorch_jax.optim import sgd_update

from .optimizer import Optimizer, check_hyperparameter


class SGD(Optimizer):
    def __init__(self, params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
        check_hyperparameter("lr", lr, label="learning rate")
        check_hyperparameter("momentum", momentum, label="momentum value")
        check_hyperparameter("weight_decay", weight_decay, label="weight_decay value")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        self._init_state(step=False, when={"momentum_buffer": lambda g: g["momentum"] != 0})

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            self._apply_update(sgd_update, group, params, dict(
                momentum=float(group["momentum"]), dampening=float(group["dampening"]),
                nesterov=bool(group["nesterov"]), maximize=bool(group["maximize"])))
        return loss
