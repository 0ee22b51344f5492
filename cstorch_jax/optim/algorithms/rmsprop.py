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

State per parameter, as torch.optim keeps it: `step` (counted only for torch's layout;
the real system keeps none and a checkpoint without one loads), `square_avg`,
`momentum_buffer` (momentum > 0) and `grad_avg` (centered). The real signature has no
`maximize`.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import jax.numpy as jnp

from ..registry import register
from ..spec import Algorithm, PublicOptimizer, Slot, check_hyperparameter, counter, like_param
from ..transforms import Transform, add_l2_decay, chain, scale_by_learning_rate


class RMSpropHyper(NamedTuple):
    alpha: float
    eps: float
    momentum: float
    centered: bool


class RMSpropState(NamedTuple):
    step: Slot
    square_avg: Slot
    momentum_buffer: Optional[Slot]
    grad_avg: Optional[Slot]


def rmsprop_state(hp: RMSpropHyper, shape: tuple) -> RMSpropState:
    return RMSpropState(counter(), like_param(), like_param() if hp.momentum > 0 else None,
                        like_param() if hp.centered else None)


def scale_by_rms():
    def apply(update, state: RMSpropState, hp):
        g = update.u
        square_avg = hp.alpha * state.square_avg + (1 - hp.alpha) * (g * g)
        new = state._replace(step=state.step + 1, square_avg=square_avg)
        if hp.centered:
            grad_avg = state.grad_avg + (1 - hp.alpha) * (g - state.grad_avg)
            new = new._replace(grad_avg=grad_avg)
            denom = jnp.sqrt(square_avg - grad_avg * grad_avg) + hp.eps
        else:
            denom = jnp.sqrt(square_avg) + hp.eps
        if hp.momentum > 0:
            buf = hp.momentum * state.momentum_buffer + g / denom
            return update._replace(u=buf), new._replace(momentum_buffer=buf)
        return update._replace(u=g / denom), new

    return Transform(rmsprop_state, apply)


RMSPROP_ALGORITHM = Algorithm("rmsprop_update", RMSpropHyper,
                              chain(add_l2_decay(), scale_by_rms(), scale_by_learning_rate()))


def _check(a) -> None:
    check_hyperparameter(a["lr"], label="learning rate")
    check_hyperparameter(a["eps"], label="epsilon value")
    check_hyperparameter(a["momentum"], label="momentum value")
    check_hyperparameter(a["weight_decay"], label="weight_decay value")
    check_hyperparameter(a["alpha"], label="alpha value")


RMSPROP = PublicOptimizer(
    "RMSprop", RMSPROP_ALGORITHM,
    signature=(("lr", float, 1e-2), ("alpha", float, 0.99), ("eps", float, 1e-8), ("weight_decay", float, 0),
               ("momentum", float, 0), ("centered", bool, False)),
    check=_check,
    defaults=lambda a: dict(lr=a["lr"], momentum=a["momentum"], alpha=a["alpha"], eps=a["eps"],
                            centered=a["centered"], weight_decay=a["weight_decay"]),
    hyper=lambda g: RMSpropHyper(float(g["alpha"]), float(g["eps"]), float(g["momentum"]), bool(g["centered"])),
    doc="RMSprop with torch.optim.RMSprop's math; one `cstorch::rmsprop_update` op per param group.")

register(RMSPROP_ALGORITHM, RMSPROP)
