"""Adagrad, as torch.optim.Adagrad computes it.

For a parameter p with gradient g (negated when maximizing), the sum of squared
gradients S (starting at initial_accumulator_value) and the step count t:

    t'  = t + 1
    g   = g + weight_decay * p
    S'  = S + g^2
    clr = lr / (1 + (t' - 1) * lr_decay)
    p'  = p - clr * g / (sqrt(S') + eps)

State per parameter, as torch.optim keeps it: `step` (float32 0-d, the global step)
and `sum`. The default eps is the real system's 1e-6 (torch.optim's is 1e-10).
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from ..registry import register
from ..spec import Algorithm, PublicOptimizer, Slot, check_hyperparameter, counter, like_param
from ..transforms import Transform, add_l2_decay, chain, maximize, scale_by_learning_rate


class AdagradHyper(NamedTuple):
    lr_decay: float
    eps: float
    maximize: bool


class AdagradState(NamedTuple):
    step: Slot
    sum: Slot


def adagrad_state(hp: AdagradHyper, shape: tuple) -> AdagradState:
    return AdagradState(counter(), like_param("initial_accumulator_value"))


def scale_by_adagrad():
    def apply(update, state: AdagradState, hp):
        g = update.u
        t = state.step + 1
        total = state.sum + g * g
        clr = (update.lr / (1 + (t - 1) * hp.lr_decay).astype(update.p.dtype))
        return update._replace(u=g / (jnp.sqrt(total) + hp.eps), lr=clr), AdagradState(t, total)

    return Transform(adagrad_state, apply)


ADAGRAD_ALGORITHM = Algorithm(
    "adagrad_update", AdagradHyper, chain(maximize(), add_l2_decay(), scale_by_adagrad(), scale_by_learning_rate()))


def _check(a) -> None:
    check_hyperparameter(a["lr"], label="learning rate")
    check_hyperparameter(a["lr_decay"], label="lr_decay value")
    check_hyperparameter(a["weight_decay"], label="weight_decay value")
    check_hyperparameter(a["initial_accumulator_value"], label="initial_accumulator_value value")
    check_hyperparameter(a["eps"], label="epsilon value")


ADAGRAD = PublicOptimizer(
    "Adagrad", ADAGRAD_ALGORITHM,
    signature=(("lr", float, 1e-2), ("lr_decay", float, 0), ("weight_decay", float, 0),
               ("initial_accumulator_value", float, 0), ("eps", float, 1e-6), ("maximize", bool, False)),
    check=_check,
    defaults=lambda a: dict(lr=a["lr"], lr_decay=a["lr_decay"], eps=a["eps"], weight_decay=a["weight_decay"],
                            initial_accumulator_value=a["initial_accumulator_value"], maximize=a["maximize"]),
    hyper=lambda g: AdagradHyper(float(g["lr_decay"]), float(g["eps"]), bool(g["maximize"])),
    global_step=True,
    doc="Adagrad with torch.optim.Adagrad's math; one `cstorch::adagrad_update` op per param group.")

register(ADAGRAD_ALGORITHM, ADAGRAD)
