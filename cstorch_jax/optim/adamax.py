"""Adamax (Adam with the infinity norm), as torch.optim.Adamax computes it.

For a parameter p with gradient g (negated when maximizing), first moment m,
infinity norm u (both starting at zero) and step count t (float32):

    t' = t + 1
    g  = g + weight_decay * p
    m' = m + (1 - beta1) * (g - m)
    u' = max(beta2 * u, |g| + eps)
    p' = p - lr / (1 - beta1^t') * m' / u'

1 - beta1^t' is evaluated as -expm1(t' * log(beta1)) so that it keeps float32 accuracy
for beta1 close to 1.
"""
from __future__ import annotations

import jax.numpy as jnp

from .adam import one_minus_power
from .update_op import define_update


def adamax_rule(p, g, state, hp, *, beta1, beta2, eps, maximize):
    lr = hp["lr"].astype(p.dtype)
    wd = hp["weight_decay"].astype(p.dtype)
    if maximize:
        g = -g
    g = g + wd * p
    t = state["step"] + 1
    m = state["exp_avg"] + (1 - beta1) * (g - state["exp_avg"])
    u = jnp.maximum(beta2 * state["exp_inf"], jnp.abs(g) + eps)
    clr = lr / one_minus_power(beta1, t).astype(p.dtype)
    return p - clr * (m / u), {"step": t, "exp_avg": m, "exp_inf": u}


adamax_update = define_update("adamax_update", adamax_rule)
