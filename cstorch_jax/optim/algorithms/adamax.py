"""Adamax (Adam with the infinity norm), as torch.optim.Adamax computes it.

For a parameter p with gradient g (negated when maximizing), first moment m,
infinity norm u (both starting at zero) and step count t (float32):

    t' = t + 1
    g  = g + weight_decay * p
    m' = m + (1 - beta1) * (g - m)
    u' = max(beta2 * u, |g| + eps)
    p' = p - lr / (1 - beta1^t') * m' / u'

1 - beta1^t' is evaluated as -expm1(t' * log(beta1)) so that it keeps float32 accuracy
for beta1 close to 1. State per parameter, as torch.optim keeps it: `step`, `exp_avg`
and `exp_inf`; the real system's `beta1_power` layout is converted on load. The
defaults are the real system's (lr=1e-3, eps=1e-6; torch.optim's are 2e-3 and 1e-8).
"""
from __future__ import annotations

from typing import NamedTuple, Tuple

import jax.numpy as jnp

from ..registry import register
from ..spec import Algorithm, PublicOptimizer, Slot, check_adam_hyperparameters, counter, like_param, \
    steps_from_beta_powers
from ..transforms import Transform, add_l2_decay, chain, lerp_toward, maximize, one_minus_power, scale_by_learning_rate


class AdamaxHyper(NamedTuple):
    beta1: float
    beta2: float
    eps: float
    maximize: bool


class AdamaxState(NamedTuple):
    step: Slot
    exp_avg: Slot
    exp_inf: Slot


def adamax_state(hp: AdamaxHyper, shape: tuple) -> AdamaxState:
    return AdamaxState(counter(), like_param(), like_param())


def scale_by_adamax():
    def apply(update, state: AdamaxState, hp):
        g = update.u
        t = state.step + 1
        m = lerp_toward(state.exp_avg, g, hp.beta1)
        u = jnp.maximum(hp.beta2 * state.exp_inf, jnp.abs(g) + hp.eps)
        clr = update.lr / one_minus_power(hp.beta1, t).astype(update.p.dtype)
        return update._replace(u=m / u, lr=clr), AdamaxState(t, m, u)

    return Transform(adamax_state, apply)


ADAMAX_ALGORITHM = Algorithm(
    "adamax_update", AdamaxHyper, chain(maximize(), add_l2_decay(), scale_by_adamax(), scale_by_learning_rate()))

ADAMAX = PublicOptimizer(
    "Adamax", ADAMAX_ALGORITHM,
    signature=(("lr", float, 1e-3), ("betas", Tuple[float, float], (0.9, 0.999)), ("eps", float, 1e-6),
               ("weight_decay", float, 0.0), ("maximize", bool, False)),
    check=check_adam_hyperparameters,
    defaults=lambda a: dict(lr=a["lr"], betas=tuple(a["betas"]), eps=a["eps"], weight_decay=a["weight_decay"],
                            maximize=a["maximize"]),
    hyper=lambda g: AdamaxHyper(float(g["betas"][0]), float(g["betas"][1]), float(g["eps"]), bool(g["maximize"])),
    convert_state_dict=steps_from_beta_powers,
    doc="Adamax with torch.optim.Adamax's math; one `cstorch::adamax_update` op per param group.")

register(ADAMAX_ALGORITHM, ADAMAX)
