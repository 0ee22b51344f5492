"""SGD with momentum, dampening, Nesterov, weight decay and maximize.

For a parameter p with gradient g (negated when maximizing):

    d  = g + weight_decay * p
    b' = momentum * b + (1 - dampening) * d          (b starts at zero)
    u  = d + momentum * b'  if nesterov  else  b'     (u = d when momentum == 0)
    p' = p - lr * u

Because b starts at zero, the first step with dampening != 0 moves by (1 - dampening)
of torch.optim.SGD's step (torch starts the buffer at d); with dampening == 0 the two agree.
State: `momentum_buffer` (only when momentum != 0).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from ..registry import register
from ..spec import REQUIRED, Algorithm, PublicOptimizer, Slot, check_hyperparameter, like_param
from ..transforms import Transform, add_l2_decay, chain, maximize, scale_by_learning_rate


class SGDHyper(NamedTuple):
    momentum: float
    dampening: float
    nesterov: bool
    maximize: bool


class SGDState(NamedTuple):
    momentum_buffer: Optional[Slot]


def sgd_state(hp: SGDHyper, shape: tuple) -> SGDState:
    return SGDState(momentum_buffer=like_param() if hp.momentum != 0 else None)


def scale_by_momentum():
    """u = b' or u + momentum * b' (Nesterov), b' = momentum * b + (1 - dampening) * u."""

    def apply(update, state: SGDState, hp: SGDHyper):
        if hp.momentum == 0:
            return update, state
        b = hp.momentum * state.momentum_buffer + (1 - hp.dampening) * update.u
        u = update.u + hp.momentum * b if hp.nesterov else b
        return update._replace(u=u), state._replace(momentum_buffer=b)

    return Transform(sgd_state, apply)


SGD_ALGORITHM = Algorithm(
    "sgd_update", SGDHyper, chain(maximize(), add_l2_decay(), scale_by_momentum(), scale_by_learning_rate()))


def _check(a) -> None:
    check_hyperparameter(a["lr"], label="learning rate")
    check_hyperparameter(a["momentum"], label="momentum value")
    check_hyperparameter(a["weight_decay"], label="weight_decay value")
    if a["nesterov"] and (a["momentum"] <= 0 or a["dampening"] != 0):
        raise ValueError("Nesterov momentum requires a momentum and zero dampening")


SGD = PublicOptimizer(
    "SGD", SGD_ALGORITHM,
    signature=(("lr", float, REQUIRED), ("momentum", float, 0.0), ("dampening", float, 0.0),
               ("weight_decay", float, 0.0), ("nesterov", bool, False), ("maximize", bool, False)),
    check=_check,
    defaults=lambda a: dict(lr=a["lr"], momentum=a["momentum"], dampening=a["dampening"],
                            weight_decay=a["weight_decay"], nesterov=a["nesterov"], maximize=a["maximize"]),
    hyper=lambda g: SGDHyper(float(g["momentum"]), float(g["dampening"]), bool(g["nesterov"]), bool(g["maximize"])),
    doc="SGD; the update is one `cstorch::sgd_update` op per param group. The momentum buffer starts at zero.\n\n"
        "Differences from the real system:\n"
        "    The real system's defaults and argument names; the same parameters as torch.optim.SGD after 50 "
        "steps (<= 1e-5). As the momentum buffer starts at zero, with `dampening != 0` the first step is "
        "`(1 - dampening)` of torch's.")

register(SGD_ALGORITHM, SGD)
