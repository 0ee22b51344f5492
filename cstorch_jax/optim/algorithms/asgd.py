"""Averaged SGD, as torch.optim.ASGD computes it.

For a parameter p with gradient g (negated when maximizing), the averaged
parameter ax (starting at zero), the 0-d step size eta (starting at lr), averaging
rate mu (starting at 1) and step count t:

    t'   = t + 1
    g    = g + weight_decay * p
    p'   = p * (1 - lambd * eta) - eta * g
    ax'  = p'  if mu == 1  else  ax + mu * (p' - ax)
    eta' = lr / (1 + lambd * lr * t')^alpha
    mu'  = 1 / max(1, t' - t0)

The power is taken as exp(alpha * log1p(lambd * lr * t')), accurate to float32
rounding for any step count. State per parameter, as torch.optim keeps it: `step`
(float32 0-d, the global step), `eta`, `mu` (0-d) and `ax`.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from ..registry import register
from ..spec import Algorithm, PublicOptimizer, Slot, check_hyperparameter, counter, like_param
from ..transforms import Transform, add_l2_decay, chain, maximize


class ASGDHyper(NamedTuple):
    lambd: float
    alpha: float
    t0: float
    maximize: bool


class ASGDState(NamedTuple):
    step: Slot
    eta: Slot
    mu: Slot
    ax: Slot


def asgd_state(hp: ASGDHyper, shape: tuple) -> ASGDState:
    return ASGDState(counter(), counter("lr"), counter(1.0), like_param())


def averaged_sgd():
    """The whole ASGD step after the gradient's weight decay: writes p."""

    def apply(update, state: ASGDState, hp):
        p, g = update.p, update.u
        lr = hp.lr.astype(jnp.float32)
        t = state.step + 1
        eta, mu, ax = state.eta, state.mu, state.ax
        p = p * (1 - hp.lambd * eta).astype(p.dtype)
        p = p - eta.astype(p.dtype) * g
        ax = jnp.where(mu == 1, p, ax + (p - ax) * mu.astype(p.dtype))
        new_eta = lr * jnp.exp(-hp.alpha * jnp.log1p(hp.lambd * lr * t))
        new_mu = 1 / jnp.maximum(jnp.ones_like(t), t - hp.t0)
        return update._replace(p=p), ASGDState(t, new_eta, new_mu, ax)

    return Transform(asgd_state, apply)


ASGD_ALGORITHM = Algorithm("asgd_update", ASGDHyper, chain(maximize(), add_l2_decay(), averaged_sgd()))


def _check(a) -> None:
    check_hyperparameter(a["lr"], label="learning rate")
    check_hyperparameter(a["weight_decay"], label="weight_decay value")


ASGD = PublicOptimizer(
    "ASGD", ASGD_ALGORITHM,
    signature=(("lr", float, 1e-2), ("lambd", float, 1e-4), ("alpha", float, 0.75), ("t0", float, 1e6),
               ("weight_decay", float, 0), ("maximize", bool, False)),
    check=_check,
    defaults=lambda a: dict(lr=a["lr"], lambd=a["lambd"], alpha=a["alpha"], t0=a["t0"],
                            weight_decay=a["weight_decay"], maximize=a["maximize"]),
    hyper=lambda g: ASGDHyper(float(g["lambd"]), float(g["alpha"]), float(g["t0"]), bool(g["maximize"])),
    global_step=True,
    doc="Averaged SGD with torch.optim.ASGD's math; one `cstorch::asgd_update` op per param group.")

register(ASGD_ALGORITHM, ASGD)
