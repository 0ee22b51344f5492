"""Averaged SGD, as torch.optim.ASGD computes it.

For a parameter p with gradient g (negated when maximizing), the averaged
parameter ax (starting at zero), the 0-d step size eta (starting at lr), averaging
rate mu (starting at 1) and step count t:

    t'   = t + 1
    g    = g + weight_decay * p
    p'   = p * (1 - lambd * eta) - eta * g
    ax'  = p'  if mu == 1  else  ax + mu * (p' - ax)
    eta' = lr / (1 + lambd * lr * t')^alpha
    mu'  = 1 / max(1, t' - t0)

The power is taken as exp(alpha * log1p(lambd * lr * t')), accurate to float32
rounding for any step count.
"""
from __future__ import annotations

import jax.numpy as jnp

from .update_op import define_update


def asgd_rule(p, g, state, hp, *, lambd, alpha, t0, maximize):
    lr = hp["lr"].astype(jnp.float32)
    wd = hp["weight_decay"].astype(p.dtype)
    if maximize:
        g = -g
    g = g + wd * p
    t = state["step"] + 1
    eta, mu, ax = state["eta"], state["mu"], state["ax"]
    p = p * (1 - lambd * eta).astype(p.dtype)
    p = p - eta.astype(p.dtype) * g
    ax = jnp.where(mu == 1, p, ax + (p - ax) * mu.astype(p.dtype))
    new_eta = lr * jnp.exp(-alpha * jnp.log1p(lambd * lr * t))
    new_mu = 1 / jnp.maximum(jnp.ones_like(t), t - t0)
    return p, {"step": t, "eta": new_eta, "mu": new_mu, "ax": ax}


asgd_update = define_update("asgd_update", asgd_rule)
