"""Rprop (resilient backpropagation), as torch.optim.Rprop computes it.

For a parameter p with gradient g, the previous (masked) gradient q (starting at
zero) and the per-element step sizes s (starting at lr):

    t' = t + 1                                        (kept only for torch's layout)
    f  = etaplus  where g * q > 0,  etaminus  where g * q < 0,  1  elsewhere
    s' = clip(s * f, step_size_min, step_size_max)
    g  = 0  where g * q < 0                           (no move after a sign change)
    p' = p - sign(g) * s'
    q' = g

The learning rate only sets the initial step sizes.
"""
from __future__ import annotations

import jax.numpy as jnp

from .update_op import define_update


def rprop_rule(p, g, state, hp, *, etaminus, etaplus, step_size_min, step_size_max):
    direction = g * state["prev"]
    factor = jnp.where(direction > 0, etaplus, jnp.where(direction < 0, etaminus, 1.0)).astype(p.dtype)
    step_size = jnp.clip(state["step_size"] * factor, step_size_min, step_size_max)
    g = jnp.where(direction < 0, jnp.zeros_like(g), g)
    new = {"step": state["step"] + 1, "prev": g, "step_size": step_size}
    return p - jnp.sign(g) * step_size, new


rprop_update = define_update("rprop_update", rprop_rule)
