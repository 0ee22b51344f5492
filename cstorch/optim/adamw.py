"""`cstorch.optim.AdamW`: the update is one `cstorch::adamw_update` op (rule in
cstorch_jax.optim.adamw). Bias correction uses running beta powers kept as state."""
from __future__ import annotations

import torch

import cstorch_jax.optim  # noqa: F401  (defines torch.ops.cstorch.adamw_update)

from .optimizer import Optimizer, as_tensor


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, correct_bias=True,
                 amsgrad=False):
        if not isinstance(lr, torch.Tensor) and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if amsgrad:
            raise NotImplementedError("AdamW(amsgrad=True) is not implemented yet")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, correct_bias=correct_bias,
                        amsgrad=amsgrad)
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                st["exp_avg"] = torch.zeros_like(p)
                st["exp_avg_sq"] = torch.zeros_like(p)
                st["beta1_power"] = torch.ones((), dtype=torch.float32)
                st["beta2_power"] = torch.ones((), dtype=torch.float32)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            st = [self.state[p] for p in params]
            lists = [[s[k] for s in st] for k in ("exp_avg", "exp_avg_sq", "beta1_power", "beta2_power")]
            beta1, beta2 = group["betas"]
            new = torch.ops.cstorch.adamw_update(
                params, [p.grad for p in params], *lists, as_tensor(group["lr"]), as_tensor(group["weight_decay"]),
                float(beta1), float(beta2), float(group["eps"]), 0.0, bool(group["correct_bias"]),
            )
            self._write_back([*params, *(t for ts in lists for t in ts)], new)
        return loss
