"""Lion (Chen et al., "Symbolic Discovery of Optimization Algorithms", 2023), as the
real system computes it.

For a parameter p with gradient g and momentum m (starts at zero):

    p  = p * (1 - lr * weight_decay)                  (decoupled weight decay)
    c  = beta1 * m + (1 - beta1) * g                  (interpolation for the update)
    p' = p - lr * sign(c)                             (sign(0) = 0)
    m' = beta2 * m + (1 - beta2) * g                  (momentum tracked with beta2)

State: `exp_avg` (m).
"""
from __future__ import annotations

import jax.numpy as jnp

from .update_op import define_update


def lion_rule(p, g, state, hp, *, beta1, beta2):
    lr = hp["lr"].astype(p.dtype)
    wd = hp["weight_decay"].astype(p.dtype)
    m = state["exp_avg"]
    p = p * (1 - lr * wd)
    direction = jnp.sign(beta1 * m + (1 - beta1) * g)
    p = p - lr * direction
    return p, {"exp_avg": beta2 * m + (1 - beta2) * g}


lion_update = define_update("lion_update", lion_rule)
