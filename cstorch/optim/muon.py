"""`cstorch.optim.Muon`: momentum orthogonalised by a Newton-Schulz iteration, for
parameters of two or more dimensions; one `cstorch::muon_update` op per param group
(rule, formula and the differences from the real system in cstorch_jax.optim.muon)."""
from __future__ import annotations

import torch

from cstorch_jax.optim import muon_update

from .optimizer import Optimizer, check_hyperparameter


class Muon(Optimizer):
    """Muon for matrices (and stacks of them / conv kernels). Biases, norm gains and
    other 1-D parameters are rejected: give them their own optimizer, e.g. AdamW.
    State: `momentum_buffer` (only when momentum != 0)."""

    def __init__(self, params, lr=0.02, weight_decay=0.01, momentum=0.95, nesterov=True, ns_steps=5):
        check_hyperparameter("lr", lr, label="learning rate")
        check_hyperparameter("weight_decay", weight_decay, high=1.0, label="weight decay parameter")
        check_hyperparameter("momentum", momentum, high=1.0, label="momentum parameter")
        if isinstance(ns_steps, bool) or not isinstance(ns_steps, int) or ns_steps < 0:
            raise ValueError(f"Invalid number of steps: {ns_steps}")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                                      ns_steps=ns_steps))

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim < 2 and p.requires_grad:
                    raise ValueError(
                        f"Muon only updates parameters with two or more dimensions, but got one of shape "
                        f"{tuple(p.shape)}. Optimize biases, norm gains and other 1-D parameters with a separate "
                        f"optimizer such as cstorch.optim.AdamW (one Muon over the matrices, one AdamW over the "
                        f"rest).")
                if group["momentum"] != 0:
                    self.state[p]["momentum_buffer"] = torch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            self._apply_update(muon_update, group, params, dict(
                momentum=float(group["momentum"]), nesterov=bool(group["nesterov"]),
                ns_steps=int(group["ns_steps"])))
        return loss
