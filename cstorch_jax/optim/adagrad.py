"""Adagrad, as torch.optim.Adagrad computes it.

For a parameter p with gradient g (negated when maximizing), the sum of squared
gradients S (starting at initial_accumulator_value) and the step count t:

    t'  = t + 1
    g   = g + weight_decay * p
    S'  = S + g^2
    clr = lr / (1 + (t' - 1) * lr_decay)
    p'  = p - clr * g / (sqrt(S') + eps)
"""
from __future__ import annotations

import jax.numpy as jnp

from .update_op import define_update


def adagrad_rule(p, g, state, hp, *, lr_decay, eps, maximize):
    lr = hp["lr"].astype(p.dtype)
    wd = hp["weight_decay"].astype(p.dtype)
    if maximize:
        g = -g
    g = g + wd * p
    t = state["step"] + 1
    total = state["sum"] + g * g
    clr = (lr / (1 + (t - 1) * lr_decay).astype(p.dtype))
    return p - clr * (g / (jnp.sqrt(total) + eps)), {"step": t, "sum": total}


adagrad_update = define_update("adagrad_update", adagrad_rule)
