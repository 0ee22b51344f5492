"""`cstorch.optim.RMSprop`: the update is one `cstorch::rmsprop_update` op per param
group (rule in cstorch_jax.optim.rmsprop)."""
from __future__ import annotations

import torch

from cstorch_jax.optim import rmsprop_update

from .optimizer import Optimizer, check_hyperparameter


class RMSprop(Optimizer):
    """RMSprop with torch.optim.RMSprop's math (the real signature has no `maximize`).

    State per parameter, as torch.optim keeps it: `step` (float32 0-d, counted only so
    the state dict has torch's layout; the update does not use it), `square_avg`,
    `momentum_buffer` (momentum > 0) and `grad_avg` (centered). The real system keeps
    no `step`; a checkpoint without one loads.
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False):
        check_hyperparameter("lr", lr, label="learning rate")
        check_hyperparameter("eps", eps, label="epsilon value")
        check_hyperparameter("momentum", momentum, label="momentum value")
        check_hyperparameter("weight_decay", weight_decay, label="weight_decay value")
        check_hyperparameter("alpha", alpha, label="alpha value")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay)
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        self._init_state("square_avg", when={"momentum_buffer": lambda g: g["momentum"] > 0,
                                             "grad_avg": lambda g: g["centered"]})

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            self._apply_update(rmsprop_update, group, params, dict(
                alpha=float(group["alpha"]), eps=float(group["eps"]), momentum=float(group["momentum"]),
                centered=bool(group["centered"])))
        return loss
