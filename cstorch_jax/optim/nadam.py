"""NAdam (Adam with Nesterov momentum), as torch.optim.NAdam computes it.

For a parameter p with gradient g, moments m, v (starting at zero), the 0-d
momentum product P (starting at 1) and step count t (float32):

    t'    = t + 1
    g     = g + weight_decay * p
    mu    = beta1 * (1 - 0.5 * 0.96^(t' * momentum_decay))
    mu_n  = beta1 * (1 - 0.5 * 0.96^((t' + 1) * momentum_decay))
    P'    = P * mu
    m'    = m + (1 - beta1) * (g - m)
    v'    = beta2 * v + (1 - beta2) * g^2
    denom = sqrt(v' / (1 - beta2^t')) + eps
    p'    = p - lr * (1 - mu) / (1 - P') * g / denom
            - lr * mu_n / (1 - P' * mu_n) * m' / denom

Powers of t' are taken as exponentials of t' * log(base) and 1 - beta2^t' as an expm1,
so they keep float32 accuracy where torch evaluates them in float64.
"""
from __future__ import annotations

import math

import jax.numpy as jnp

from .adam import one_minus_power
from .update_op import define_update

_LOG_096 = math.log(0.96)


def nadam_rule(p, g, state, hp, *, beta1, beta2, eps, momentum_decay):
    lr = hp["lr"].astype(p.dtype)
    wd = hp["weight_decay"].astype(p.dtype)
    g = g + wd * p
    t = state["step"] + 1
    mu = beta1 * (1 - 0.5 * jnp.exp(t * (momentum_decay * _LOG_096)))
    mu_next = beta1 * (1 - 0.5 * jnp.exp((t + 1) * (momentum_decay * _LOG_096)))
    mu_product = state["mu_product"] * mu
    m = state["exp_avg"] + (1 - beta1) * (g - state["exp_avg"])
    v = beta2 * state["exp_avg_sq"] + (1 - beta2) * (g * g)
    denom = jnp.sqrt(v / one_minus_power(beta2, t).astype(p.dtype)) + eps
    grad_coef = (-lr * ((1 - mu) / (1 - mu_product)).astype(p.dtype))
    avg_coef = (-lr * (mu_next / (1 - mu_product * mu_next)).astype(p.dtype))
    p = p + grad_coef * (g / denom)
    p = p + avg_coef * (m / denom)
    return p, {"step": t, "mu_product": mu_product, "exp_avg": m, "exp_avg_sq": v}


nadam_update = define_update("nadam_update", nadam_rule)
