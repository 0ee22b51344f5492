"""RAdam (rectified Adam), as torch.optim.RAdam computes it.

For a parameter p with gradient g, moments m, v (starting at zero) and step count t
(float32):

    t'     = t + 1
    g      = g + weight_decay * p
    m'     = m + (1 - beta1) * (g - m)
    v'     = beta2 * v + (1 - beta2) * g^2
    rho_oo = 2 / (1 - beta2) - 1
    rho    = rho_oo - 2 t' beta2^t' / (1 - beta2^t')
    r      = sqrt((rho - 4)(rho - 2) rho_oo / ((rho_oo - 4)(rho_oo - 2) rho))
    a      = sqrt(1 - beta2^t') / (sqrt(v') + eps)
    p'     = p - lr * m' / (1 - beta1^t') * (a * r  if rho > 5  else  1)

rho is the difference of two numbers near rho_oo (about 2000 for beta2 = 0.999) while
the rectification needs rho - 4 to float32 accuracy, so it is evaluated without the
cancellation: with L = -log(beta2) and x = t' L,

    rho = (2 / (1 - beta2) - 1 - 2 / L) + t' * (1 - x/6 + x^3/360 - x^5/15120 + x^7/604800 - ...)

(the Bernoulli series of x / (e^x - 1); the constant is computed in float64) for x < 1,
and by the direct formula otherwise, where rho is large. When rho_oo <= 5 rho never
exceeds 5 and the update is p - lr * m' / (1 - beta1^t').
"""
from __future__ import annotations

import math

import jax.numpy as jnp

from .adam import one_minus_power
from .update_op import define_update

# (k, c_k) with (2/L) * (1 - x/(e^x - 1)) = t * (1 + sum c_k x^k), x = t L, for |x| < 2 pi
_SERIES = ((1, -1 / 6), (3, 1 / 360), (5, -1 / 15120), (7, 1 / 604800), (9, -1 / 23950080))


def sma_length(beta2: float, t):
    """rho_t = rho_oo - 2 t beta2^t / (1 - beta2^t) for a float32 step count t, accurate
    to float32 rounding of rho_t itself (see the module docstring); 0 < beta2 < 1."""
    log_b = -math.log(beta2)
    rho_inf = 2 / (1 - beta2) - 1
    x = t * log_b
    series = jnp.ones_like(x)
    for k, c in _SERIES:
        series = series + c * x ** k
    near = (rho_inf - 2 / log_b) + t * series
    far = rho_inf - 2 * t * jnp.exp(-x) / -jnp.expm1(-x)
    return jnp.where(x < 1, near, far)


def radam_rule(p, g, state, hp, *, beta1, beta2, eps):
    lr = hp["lr"].astype(p.dtype)
    wd = hp["weight_decay"].astype(p.dtype)
    g = g + wd * p
    t = state["step"] + 1
    m = state["exp_avg"] + (1 - beta1) * (g - state["exp_avg"])
    v = beta2 * state["exp_avg_sq"] + (1 - beta2) * (g * g)
    new = {"step": t, "exp_avg": m, "exp_avg_sq": v}
    m_hat = m / one_minus_power(beta1, t).astype(p.dtype)
    rho_inf = 2 / (1 - beta2) - 1
    if rho_inf <= 5:  # rho_t < rho_inf: never rectified
        return p - m_hat * lr, new
    rho = sma_length(beta2, t)
    rect = jnp.sqrt((rho - 4) * (rho - 2) * (rho_inf / ((rho_inf - 4) * (rho_inf - 2))) / rho)
    adaptive = jnp.sqrt(one_minus_power(beta2, t)).astype(p.dtype) / (jnp.sqrt(v) + eps)
    rectified = p - m_hat * lr * adaptive * rect.astype(p.dtype)
    return jnp.where(rho > 5, rectified, p - m_hat * lr), new


radam_update = define_update("radam_update", radam_rule)
