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

from typing import NamedTuple, Tuple

import jax.numpy as jnp

from ..registry import register
from ..spec import Algorithm, PublicOptimizer, Slot, check_adam_hyperparameters, like_param
from ..transforms import Transform, adam_moments, chain, ema, scale_by_learning_rate


class LambHyper(NamedTuple):
    beta1: float
    beta2: float
    eps: float
    adam: bool


class LambState(NamedTuple):
    exp_avg: Slot
    exp_avg_sq: Slot


def lamb_state(hp: LambHyper, shape: tuple) -> LambState:
    return LambState(like_param(), like_param())


def scale_by_trust_ratio():
    """u = r, with step size lr * q (see the module docstring)."""

    def apply(update, state: LambState, hp):
        p, g = update.p, update.u
        m, v = adam_moments(state, g, hp, first=ema)
        r = m / (jnp.sqrt(v) + hp.eps) + hp.weight_decay.astype(p.dtype) * p
        if hp.adam:
            q = jnp.ones((), p.dtype)
        else:
            w = jnp.clip(jnp.sqrt(jnp.sum(p * p)), 0.0, 10.0)
            r_norm = jnp.sqrt(jnp.sum(r * r))
            usable = (w > 0) & (r_norm > 0)
            q = jnp.where(usable, w / jnp.where(usable, r_norm, 1.0), 1.0)
        return update._replace(u=r, lr=update.lr * q), LambState(m, v)

    return Transform(lamb_state, apply)


LAMB_ALGORITHM = Algorithm("lamb_update", LambHyper, chain(scale_by_trust_ratio(), scale_by_learning_rate()))

LAMB = PublicOptimizer(
    "Lamb", LAMB_ALGORITHM,
    signature=(("lr", float, 1e-3), ("betas", Tuple[float, float], (0.9, 0.999)), ("eps", float, 1e-6),
               ("weight_decay", float, 0), ("adam", bool, False)),
    check=check_adam_hyperparameters,
    defaults=lambda a: dict(lr=a["lr"], betas=tuple(a["betas"]), eps=a["eps"], weight_decay=a["weight_decay"],
                            adam=a["adam"]),
    hyper=lambda g: LambHyper(float(g["betas"][0]), float(g["betas"][1]), float(g["eps"]), bool(g["adam"])),
    doc="LAMB. `weight_decay` is added to the Adam direction before the trust ratio; `adam=True` fixes the trust "
        "ratio at 1. One `cstorch::lamb_update` op per param group.")

register(LAMB_ALGORITHM, LAMB)
