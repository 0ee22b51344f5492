"""`cstorch.optim.Rprop`: the update is one `cstorch::rprop_update` op per param group
(rule in cstorch_jax.optim.rprop)."""
from __future__ import annotations

import torch

from cstorch_jax.optim import rprop_update

from .optimizer import Optimizer, check_hyperparameter


class Rprop(Optimizer):
    """Rprop with torch.optim.Rprop's math (the real signature has no `maximize`); the
    default lr is the real system's 1e-3 (torch.optim's is 1e-2).

    State per parameter, as torch.optim keeps it: `step` (float32 0-d, counted only so
    the state dict has torch's layout), `prev` (the last gradient, zero after a sign
    change) and `step_size` (per element, starting at the lr given at construction;
    torch.optim takes the lr of its first step, the same unless a scheduler changed it
    in between). The learning rate is not used after that.

    Like torch.optim (unlike the real system, which checks only lr), etas outside
    0 < etaminus < 1 < etaplus raise ValueError.
    """

    def __init__(self, params, lr=1e-3, etas=(0.5, 1.2), step_sizes=(1e-6, 50.0)):
        check_hyperparameter("lr", lr, label="learning rate")
        etaminus, etaplus = etas
        if not 0.0 < etaminus < 1.0 < etaplus:
            raise ValueError(f"Invalid eta values: {etaminus}, {etaplus}")
        defaults = dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes))
        super().__init__(params, defaults)

    def preinitialize(self) -> None:
        for group in self.param_groups:
            lr = group["lr"]
            for p in group["params"]:
                st = self.state[p]
                st["step"] = torch.zeros((), dtype=torch.float32)
                st["prev"] = torch.zeros_like(p)
                st["step_size"] = (torch.zeros_like(p) + lr.detach().to(p.dtype)) if isinstance(lr, torch.Tensor) \
                    else torch.full_like(p, float(lr))

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._call_closure(closure)
        for group, params in self._groups_with_grads():
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            self._apply_update(rprop_update, group, params, dict(
                etaminus=float(etaminus), etaplus=float(etaplus), step_size_min=float(step_size_min),
                step_size_max=float(step_size_max)), hparams=("lr",))
        return loss
