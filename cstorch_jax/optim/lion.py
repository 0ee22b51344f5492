"""Lion (Chen et al., "Symbolic Discovery of Optimization Algorithms", 2023), as the
real system computes it.

For a parameter p with gradient g and momentum m (starts at zero):

    p  = p * (1 - lr * weight_decay)                  (decoupled weight decay)
    c  = beta1 * m + (1 - beta1) * g                  (interpolation for the update)
    p' = p - lr * sign(c)                             (sign(0) = 0)
    m' = beta2 * m + (1 - beta2) * g                  (momentum tracked with beta2)

State: `exp_avg` (m). The sign direction and the moment update are optax's
`scale_by_lion` (the same math); its step count is not kept.
"""
from __future__ import annotations

import jax.numpy as jnp
import optax

from .update_op import define_update


def lion_rule(p, g, state, hp, *, beta1, beta2):
    lr = hp["lr"].astype(p.dtype)
    wd = hp["weight_decay"].astype(p.dtype)
    lion = optax.scale_by_lion(b1=beta1, b2=beta2)
    direction, new = lion.update(g, optax.ScaleByLionState(count=jnp.zeros((), jnp.int32), mu=state["exp_avg"]))
    return p * (1 - lr * wd) - lr * direction, {"exp_avg": new.mu}


lion_update = define_update("lion_update", lion_rule)
