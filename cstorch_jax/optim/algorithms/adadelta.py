"""Adadelta, as torch.optim.Adadelta computes it.

For a parameter p with gradient g (negated when maximizing), running averages
s (squared gradients) and a (squared updates), both starting at zero:

    g  = g + weight_decay * p
    s' = rho * s + (1 - rho) * g^2
    d  = sqrt(a + eps) / sqrt(s' + eps) * g
    a' = rho * a + (1 - rho) * d^2
    p' = p - lr * d
    t' = t + 1                                        (kept only for torch's layout)

State per parameter, as torch.optim keeps it: `step` (float32 0-d, counted only so the
state dict has torch's layout; the update does not use it), `square_avg` and
`acc_delta`. The real system keeps no `step`; a checkpoint without one loads.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import torch

from ..registry import register
from ..spec import Algorithm, PublicOptimizer, Slot, check_hyperparameter, counter, like_param
from ..transforms import Transform, add_l2_decay, chain, ema, maximize, scale_by_learning_rate


class AdadeltaHyper(NamedTuple):
    rho: float
    eps: float
    maximize: bool


class AdadeltaState(NamedTuple):
    step: Slot
    square_avg: Slot
    acc_delta: Slot


def adadelta_state(hp: AdadeltaHyper, shape: tuple) -> AdadeltaState:
    return AdadeltaState(counter(), like_param(), like_param())


def scale_by_adadelta():
    def apply(update, state: AdadeltaState, hp):
        g = update.u
        square_avg = ema(state.square_avg, g * g, hp.rho)
        delta = jnp.sqrt(state.acc_delta + hp.eps) / jnp.sqrt(square_avg + hp.eps) * g
        acc_delta = ema(state.acc_delta, delta * delta, hp.rho)
        return update._replace(u=delta), AdadeltaState(state.step + 1, square_avg, acc_delta)

    return Transform(adadelta_state, apply)


ADADELTA_ALGORITHM = Algorithm(
    "adadelta_update", AdadeltaHyper, chain(maximize(), add_l2_decay(), scale_by_adadelta(), scale_by_learning_rate()))


def _check(a) -> None:
    check_hyperparameter(a["lr"], label="learning rate")
    check_hyperparameter(a["rho"], label="rho value")
    if not isinstance(a["rho"], torch.Tensor) and a["rho"] > 1.0:
        raise ValueError(f"Invalid rho value: {a['rho']}")
    check_hyperparameter(a["eps"], label="epsilon value")
    check_hyperparameter(a["weight_decay"], label="weight_decay value")


ADADELTA = PublicOptimizer(
    "Adadelta", ADADELTA_ALGORITHM,
    signature=(("lr", float, 1.0), ("rho", float, 0.9), ("eps", float, 1e-6), ("weight_decay", float, 0),
               ("maximize", bool, False)),
    check=_check,
    defaults=lambda a: dict(lr=a["lr"], rho=a["rho"], eps=a["eps"], weight_decay=a["weight_decay"],
                            maximize=a["maximize"]),
    hyper=lambda g: AdadeltaHyper(float(g["rho"]), float(g["eps"]), bool(g["maximize"])),
    doc="Adadelta with torch.optim.Adadelta's math; one `cstorch::adadelta_update` op per param group.")

register(ADADELTA_ALGORITHM, ADADELTA)
