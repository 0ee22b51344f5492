"""`cstorch.optim.SGD`: the update is one `cstorch::sgd_update` op (rule in
cstorch_jax.optim.sgd); the momentum buffer starts at zero."""
from __future__ import annotations

import torch

import cstorch_jax.optim  # noqa: F401  (defines torch.ops.cstorch.sgd_update)

from .optimizer import Optimizer, as_tensor


class SGD(Optimizer):
    def __init__(self, params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
        if lr is None or (not isinstance(lr, torch.Tensor) and lr < 0.0):
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            if group["momentum"] != 0:
                for p in group["params"]:
                    self.state[p]["momentum_buffer"] = torch.zeros_like(p)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            bufs = [self.state[p]["momentum_buffer"] for p in params] if group["momentum"] != 0 else []
            new = torch.ops.cstorch.sgd_update(
                params, [p.grad for p in params], bufs, as_tensor(group["lr"]), as_tensor(group["weight_decay"]),
                float(group["momentum"]), float(group["dampening"]), bool(group["nesterov"]), bool(group["maximize"]),
            )
            self._write_back([*params, *bufs], new)
        return loss
