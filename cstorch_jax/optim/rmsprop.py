"""RMSprop (optionally centered, with momentum), as torch.optim.RMSprop computes it.

For a parameter p with gradient g, the running average of squared gradients s,
the running average of gradients a (centered only) and the momentum buffer b
(momentum > 0 only), all starting at zero:

    t'  = t + 1                                       (kept only for torch's layout)
    g   = g + weight_decay * p
    s'  = alpha * s + (1 - alpha) * g^2
    a'  = a + (1 - alpha) * (g - a)
    den = sqrt(s' - a'^2) + eps  if centered  else  sqrt(s') + eps
    b'  = momentum * b + g / den
    p'  = p - lr * b'  if momentum > 0  else  p - lr * g / den
"""
from __future__ import annotations

import jax.numpy as jnp

from .update_op import define_update


def rmsprop_rule(p, g, state, hp, *, alpha, eps, momentum, centered):
    lr = hp["lr"].astype(p.dtype)
    wd = hp["weight_decay"].astype(p.dtype)
    g = g + wd * p
    square_avg = alpha * state["square_avg"] + (1 - alpha) * (g * g)
    new = {"step": state["step"] + 1, "square_avg": square_avg}
    if centered:
        grad_avg = state["grad_avg"] + (1 - alpha) * (g - state["grad_avg"])
        new["grad_avg"] = grad_avg
        denom = jnp.sqrt(square_avg - grad_avg * grad_avg) + eps
    else:
        denom = jnp.sqrt(square_avg) + eps
    if momentum > 0:
        buf = momentum * state["momentum_buffer"] + g / denom
        new["momentum_buffer"] = buf
        return p - lr * buf, new
    return p - lr * (g / denom), new


rmsprop_update = define_update("rmsprop_update", rmsprop_rule)
