"""Lion (Chen et al., "Symbolic Discovery of Optimization Algorithms", 2023), as the
real system computes it.

For a parameter p with gradient g and momentum m (starts at zero):

    p  = p * (1 - lr * weight_decay)                  (decoupled weight decay)
    c  = beta1 * m + (1 - beta1) * g                  (interpolation for the update)
    p' = p - lr * sign(c)                             (sign(0) = 0)
    m' = beta2 * m + (1 - beta2) * g                  (momentum tracked with beta2)

State: `exp_avg` (m), the only state the rule has (optax's `scale_by_lion` computes the
same two expressions, in the same order, and also counts steps, which the rule never
reads: a count would be state without a use).
"""
from __future__ import annotations

from typing import NamedTuple, Tuple

import jax.numpy as jnp

from ..registry import register
from ..spec import Algorithm, PublicOptimizer, Slot, check_betas, check_hyperparameter, like_param
from ..transforms import Transform, chain, decay_weights, scale_by_learning_rate


class LionHyper(NamedTuple):
    beta1: float
    beta2: float


class LionState(NamedTuple):
    exp_avg: Slot


def lion_state(hp: LionHyper, shape: tuple) -> LionState:
    return LionState(like_param())


def scale_by_lion():
    """u = sign(c), m' = beta2 * m + (1 - beta2) * g (see the module docstring)."""

    def apply(update, state: LionState, hp):
        g, m = update.u, state.exp_avg
        direction = jnp.sign((1.0 - hp.beta1) * g + hp.beta1 * m)
        return update._replace(u=direction), LionState((1 - hp.beta2) * g + hp.beta2 * m)

    return Transform(lion_state, apply)


LION_ALGORITHM = Algorithm("lion_update", LionHyper, chain(decay_weights(), scale_by_lion(), scale_by_learning_rate()))


def _check(a) -> None:
    check_hyperparameter(a["lr"], label="learning rate")
    check_betas(a["betas"])
    check_hyperparameter(a["weight_decay"], label="weight decay value")


LION = PublicOptimizer(
    "Lion", LION_ALGORITHM,
    signature=(("lr", float, 1e-4), ("betas", Tuple[float, float], (0.9, 0.99)), ("weight_decay", float, 0.0)),
    check=_check,
    defaults=lambda a: dict(lr=a["lr"], betas=tuple(a["betas"]), weight_decay=a["weight_decay"]),
    hyper=lambda g: LionHyper(float(g["betas"][0]), float(g["betas"][1])),
    doc="Lion. `weight_decay` is decoupled (p *= 1 - lr * weight_decay). One `cstorch::lion_update` op per "
        "param group.")

register(LION_ALGORITHM, LION)
