"""Adam and AdamW (optionally AMSGrad), as torch.optim computes them.

For a parameter p with gradient g, moments m, v, step count t (kept as float32):

    g  = g + l2 * p                                   (Adam's weight decay: L2)
    p  = p * (1 - lr * decoupled_wd)                  (AdamW's weight decay)
    t' = t + 1
    m' = m + (1 - beta1) * (g - m)
    v' = beta2 * v + (1 - beta2) * g^2
    v̂  = max(v_max, v')  if amsgrad  else  v'        (v_max' = v̂)
    c1 = 1 - beta1^t',  c2 = 1 - beta2^t'            (both 1 when correct_bias is False)
    p' = p - (lr / c1) * m' / (sqrt(v̂) / sqrt(c2) + eps)

The real system adds eps before the bias correction (sqrt(v) + eps, HF style); here it
is added after it, as in torch.optim, so checkpoints and runs agree with torch.optim.
"""
from __future__ import annotations

import math

import jax.numpy as jnp

from .update_op import define_update


def adam_rule(p, g, state, hp, *, beta1, beta2, eps, decoupled, amsgrad, correct_bias, maximize):
    lr = hp["lr"].astype(p.dtype)
    wd = hp["weight_decay"].astype(p.dtype)
    if maximize:
        g = -g
    if decoupled:
        p = p * (1 - lr * wd)
    else:
        g = g + wd * p
    t = state["step"] + 1
    m = state["exp_avg"] + (1 - beta1) * (g - state["exp_avg"])
    v = beta2 * state["exp_avg_sq"] + (1 - beta2) * (g * g)
    new = {"step": t, "exp_avg": m, "exp_avg_sq": v}
    if amsgrad:
        v = jnp.maximum(state["max_exp_avg_sq"], v)
        new["max_exp_avg_sq"] = v
    if correct_bias:
        c1 = one_minus_power(beta1, t)
        c2 = one_minus_power(beta2, t)
        step_size = (lr / c1.astype(p.dtype))
        denom = jnp.sqrt(v) / jnp.sqrt(c2).astype(p.dtype) + eps
    else:
        step_size = lr
        denom = jnp.sqrt(v) + eps
    return p - step_size * (m / denom), new


def one_minus_power(beta: float, t):
    """1 - beta^t for a float32 step count t, accurate to float32 rounding even when
    beta is close to 1 (1 - float32(0.999) alone is off by 1e-5 relative)."""
    return -jnp.expm1(t * math.log(beta)) if beta > 0 else jnp.where(t > 0, 1.0, 0.0).astype(t.dtype)


adam_update = define_update("adam_update", adam_rule)
