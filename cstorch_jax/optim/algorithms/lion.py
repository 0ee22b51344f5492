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

from typing import NamedTuple, Tuple

import jax.numpy as jnp
import optax

from ..registry import register
from ..spec import Algorithm, PublicOptimizer, Slot, check_betas, check_hyperparameter, like_param
from ..transforms import chain, decay_weights, scale_by_learning_rate


class LionHyper(NamedTuple):
    beta1: float
    beta2: float


class LionState(NamedTuple):
    exp_avg: Slot


def lion_state(hp: LionHyper, shape: tuple) -> LionState:
    return LionState(like_param())


def scale_by_lion():
    """u = sign(c), optax's `scale_by_lion` (see the module docstring)."""

    def apply(update, state: LionState, hp):
        lion = optax.scale_by_lion(b1=hp.beta1, b2=hp.beta2)
        direction, new = lion.update(update.u, optax.ScaleByLionState(count=jnp.zeros((), jnp.int32),
                                                                        mu=state.exp_avg))
        return update._replace(u=direction), LionState(new.mu)

    return apply


LION_ALGORITHM = Algorithm("lion_update", LionHyper, lion_state,
                           chain(decay_weights(), scale_by_lion(), scale_by_learning_rate()))


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
