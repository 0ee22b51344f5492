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
so they keep float32 accuracy where torch evaluates them in float64. State per
parameter, as torch.optim keeps it: `step` (the global step), `mu_product`, `exp_avg`,
`exp_avg_sq`. The real signature has neither `maximize` nor `decoupled_weight_decay`.

Difference from the real system: its momentum term divides by 1 - P * mu * mu_next
(the product P already includes this step's mu, so mu counts twice); here it is
1 - P * mu_next, as in torch.optim.NAdam and the NAdam paper.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Tuple

import jax.numpy as jnp

from ..registry import register
from ..spec import Algorithm, PublicOptimizer, Slot, check_adam_hyperparameters, check_hyperparameter, counter, \
    like_param
from ..transforms import Transform, add_l2_decay, adam_moments, chain, one_minus_power

_LOG_096 = math.log(0.96)


class NAdamHyper(NamedTuple):
    beta1: float
    beta2: float
    eps: float
    momentum_decay: float


class NAdamState(NamedTuple):
    step: Slot
    mu_product: Slot
    exp_avg: Slot
    exp_avg_sq: Slot


def nadam_state(hp: NAdamHyper, shape: tuple) -> NAdamState:
    return NAdamState(counter(), counter(1.0), like_param(), like_param())


def nadam_step():
    """The whole NAdam step after the gradient's weight decay: writes p."""

    def apply(update, state: NAdamState, hp):
        p, g, lr = update.p, update.u, update.lr
        t = state.step + 1
        mu = hp.beta1 * (1 - 0.5 * jnp.exp(t * (hp.momentum_decay * _LOG_096)))
        mu_next = hp.beta1 * (1 - 0.5 * jnp.exp((t + 1) * (hp.momentum_decay * _LOG_096)))
        mu_product = state.mu_product * mu
        m, v = adam_moments(state, g, hp)
        denom = jnp.sqrt(v / one_minus_power(hp.beta2, t).astype(p.dtype)) + hp.eps
        grad_coef = (-lr * ((1 - mu) / (1 - mu_product)).astype(p.dtype))
        avg_coef = (-lr * (mu_next / (1 - mu_product * mu_next)).astype(p.dtype))
        p = p + grad_coef * (g / denom)
        p = p + avg_coef * (m / denom)
        return update._replace(p=p), NAdamState(t, mu_product, m, v)

    return Transform(nadam_state, apply)


NADAM_ALGORITHM = Algorithm("nadam_update", NAdamHyper, chain(add_l2_decay(), nadam_step()))


def _check(a) -> None:
    check_adam_hyperparameters(a)
    check_hyperparameter(a["momentum_decay"], label="momentum_decay value")


NADAM = PublicOptimizer(
    "NAdam", NADAM_ALGORITHM,
    signature=(("lr", float, 2e-3), ("betas", Tuple[float, float], (0.9, 0.999)), ("eps", float, 1e-8),
               ("weight_decay", float, 0), ("momentum_decay", float, 4e-3)),
    check=_check,
    defaults=lambda a: dict(lr=a["lr"], betas=tuple(a["betas"]), eps=a["eps"], weight_decay=a["weight_decay"],
                            momentum_decay=a["momentum_decay"]),
    hyper=lambda g: NAdamHyper(float(g["betas"][0]), float(g["betas"][1]), float(g["eps"]),
                               float(g["momentum_decay"])),
    global_step=True,
    doc="NAdam with torch.optim.NAdam's math (weight decay as L2); one `cstorch::nadam_update` op per param group.\n\n"
        "Differences from the real system:\n"
        "    The momentum term follows torch.optim.NAdam.")

register(NADAM_ALGORITHM, NADAM)
