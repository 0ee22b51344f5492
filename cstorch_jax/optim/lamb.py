"""LAMB (You et al., "Large Batch Optimization for Deep Learning: Training BERT in 76
minutes", 2019), with the real system's choices: no bias correction (the paper's v3),
the weight norm clipped to [0, 10] as the scaling function phi, weight decay added to
the Adam direction before the trust ratio, and a ratio of 1 where either norm is zero.

For a parameter p with gradient g and moments m, v (both start at zero):

    m' = beta1 * m + (1 - beta1) * g
    v' = beta2 * v + (1 - beta2) * g^2
    r  = m' / (sqrt(v') + eps) + weight_decay * p
    w  = min(||p||_2, 10)
    q  = w / ||r||_2    if w > 0 and ||r||_2 > 0,  else 1       (q = 1 when adam=True)
    p' = p - lr * q * r

State: `exp_avg` (m), `exp_avg_sq` (v).
"""
from __future__ import annotations

import jax.numpy as jnp

from .update_op import define_update


def lamb_rule(p, g, state, hp, *, beta1, beta2, eps, adam):
    lr = hp["lr"].astype(p.dtype)
    wd = hp["weight_decay"].astype(p.dtype)
    m = beta1 * state["exp_avg"] + (1 - beta1) * g
    v = beta2 * state["exp_avg_sq"] + (1 - beta2) * (g * g)
    r = m / (jnp.sqrt(v) + eps) + wd * p
    if adam:
        q = jnp.ones((), p.dtype)
    else:
        w = jnp.clip(jnp.sqrt(jnp.sum(p * p)), 0.0, 10.0)
        r_norm = jnp.sqrt(jnp.sum(r * r))
        usable = (w > 0) & (r_norm > 0)
        q = jnp.where(usable, w / jnp.where(usable, r_norm, 1.0), 1.0)
    return p - lr * q * r, {"exp_avg": m, "exp_avg_sq": v}


lamb_update = define_update("lamb_update", lamb_rule)
