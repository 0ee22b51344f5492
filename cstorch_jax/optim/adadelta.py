"""Adadelta, as torch.optim.Adadelta computes it.

For a parameter p with gradient g (negated when maximizing), running averages
s (squared gradients) and a (squared updates), both starting at zero:

    g  = g + weight_decay * p
    s' = rho * s + (1 - rho) * g^2
    d  = sqrt(a + eps) / sqrt(s' + eps) * g
    a' = rho * a + (1 - rho) * d^2
    p' = p - lr * d
    t' = t + 1                                        (kept only for torch's layout)
"""
from __future__ import annotations

import jax.numpy as jnp

from .update_op import define_update


def adadelta_rule(p, g, state, hp, *, rho, eps, maximize):
    lr = hp["lr"].astype(p.dtype)
    wd = hp["weight_decay"].astype(p.dtype)
    if maximize:
        g = -g
    g = g + wd * p
    square_avg = rho * state["square_avg"] + (1 - rho) * (g * g)
    delta = jnp.sqrt(state["acc_delta"] + eps) / jnp.sqrt(square_avg + eps) * g
    acc_delta = rho * state["acc_delta"] + (1 - rho) * (delta * delta)
    new = {"step": state["step"] + 1, "square_avg": square_avg, "acc_delta": acc_delta}
    return p - lr * delta, new


adadelta_update = define_update("adadelta_update", adadelta_rule)
