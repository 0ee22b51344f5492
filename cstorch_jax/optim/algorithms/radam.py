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

State per parameter, as torch.optim keeps it: `step` (the global step), `exp_avg`,
`exp_avg_sq`. The real signature has neither `maximize` nor `decoupled_weight_decay`;
the default eps is the real system's 1e-6 (torch.optim's is 1e-8).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Tuple

import jax.numpy as jnp

from ..registry import register
from ..spec import Algorithm, PublicOptimizer, Slot, check_adam_hyperparameters, counter, like_param
from ..transforms import Transform, add_l2_decay, adam_moments, chain, one_minus_power

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


class RAdamHyper(NamedTuple):
    beta1: float
    beta2: float
    eps: float


class RAdamState(NamedTuple):
    step: Slot
    exp_avg: Slot
    exp_avg_sq: Slot


def radam_state(hp: RAdamHyper, shape: tuple) -> RAdamState:
    return RAdamState(counter(), like_param(), like_param())


def rectified_adam():
    """The whole RAdam step after the gradient's weight decay: writes p."""

    def apply(update, state: RAdamState, hp):
        p, g, lr = update.p, update.u, update.lr
        t = state.step + 1
        m, v = adam_moments(state, g, hp)
        new = RAdamState(t, m, v)
        m_hat = m / one_minus_power(hp.beta1, t).astype(p.dtype)
        rho_inf = 2 / (1 - hp.beta2) - 1
        if rho_inf <= 5:  # rho_t < rho_inf: never rectified
            return update._replace(p=p - m_hat * lr), new
        rho = sma_length(hp.beta2, t)
        rect = jnp.sqrt((rho - 4) * (rho - 2) * (rho_inf / ((rho_inf - 4) * (rho_inf - 2))) / rho)
        adaptive = jnp.sqrt(one_minus_power(hp.beta2, t)).astype(p.dtype) / (jnp.sqrt(v) + hp.eps)
        rectified = p - m_hat * lr * adaptive * rect.astype(p.dtype)
        return update._replace(p=jnp.where(rho > 5, rectified, p - m_hat * lr)), new

    return Transform(radam_state, apply)


RADAM_ALGORITHM = Algorithm("radam_update", RAdamHyper, chain(add_l2_decay(), rectified_adam()))

RADAM = PublicOptimizer(
    "RAdam", RADAM_ALGORITHM,
    signature=(("lr", float, 1e-3), ("betas", Tuple[float, float], (0.9, 0.999)), ("eps", float, 1e-6),
               ("weight_decay", float, 0.0)),
    check=check_adam_hyperparameters,
    defaults=lambda a: dict(lr=a["lr"], betas=tuple(a["betas"]), eps=a["eps"], weight_decay=a["weight_decay"]),
    hyper=lambda g: RAdamHyper(float(g["betas"][0]), float(g["betas"][1]), float(g["eps"])),
    global_step=True,
    doc="RAdam with torch.optim.RAdam's math (weight decay as L2); one `cstorch::radam_update` op per param group.")

register(RADAM_ALGORITHM, RADAM)
