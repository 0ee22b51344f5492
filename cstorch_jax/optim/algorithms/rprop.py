"""Rprop (resilient backpropagation), as torch.optim.Rprop computes it.

For a parameter p with gradient g, the previous (masked) gradient q (starting at
zero) and the per-element step sizes s (starting at lr):

    t' = t + 1                                        (kept only for torch's layout)
    f  = etaplus  where g * q > 0,  etaminus  where g * q < 0,  1  elsewhere
    s' = clip(s * f, step_size_min, step_size_max)
    g  = 0  where g * q < 0                           (no move after a sign change)
    p' = p - sign(g) * s'
    q' = g

The learning rate only sets the initial step sizes: `step_size` starts at the lr given
at construction (torch.optim takes the lr of its first step, the same unless a
scheduler changed it in between). State per parameter, as torch.optim keeps it:
`step`, `prev`, `step_size`. Like torch.optim (unlike the real system, which checks
only lr), etas outside 0 < etaminus < 1 < etaplus raise ValueError. The default lr is
the real system's 1e-3 (torch.optim's is 1e-2); the real signature has no `maximize`.
"""
from __future__ import annotations

from typing import NamedTuple, Tuple

import jax.numpy as jnp

from ..registry import register
from ..spec import Algorithm, PublicOptimizer, Slot, check_hyperparameter, counter, like_param
from ..transforms import Transform, chain, scale_by_learning_rate


class RpropHyper(NamedTuple):
    etaminus: float
    etaplus: float
    step_size_min: float
    step_size_max: float


class RpropState(NamedTuple):
    step: Slot
    prev: Slot
    step_size: Slot


def rprop_state(hp: RpropHyper, shape: tuple) -> RpropState:
    return RpropState(counter(), like_param(), like_param("lr"))


def scale_by_resilient_step():
    """u = sign(g) * s' (no learning rate: the step sizes are the state)."""

    def apply(update, state: RpropState, hp):
        g = update.u
        direction = g * state.prev
        factor = jnp.where(direction > 0, hp.etaplus, jnp.where(direction < 0, hp.etaminus, 1.0)).astype(g.dtype)
        step_size = jnp.clip(state.step_size * factor, hp.step_size_min, hp.step_size_max)
        g = jnp.where(direction < 0, jnp.zeros_like(g), g)
        return update._replace(u=jnp.sign(g) * step_size, lr=None), RpropState(state.step + 1, g, step_size)

    return Transform(rprop_state, apply)


RPROP_ALGORITHM = Algorithm("rprop_update", RpropHyper, chain(scale_by_resilient_step(), scale_by_learning_rate()))


def _check(a) -> None:
    check_hyperparameter(a["lr"], label="learning rate")
    etaminus, etaplus = a["etas"]
    if not 0.0 < etaminus < 1.0 < etaplus:
        raise ValueError(f"Invalid eta values: {etaminus}, {etaplus}")


RPROP = PublicOptimizer(
    "Rprop", RPROP_ALGORITHM,
    signature=(("lr", float, 1e-3), ("etas", Tuple[float, float], (0.5, 1.2)),
               ("step_sizes", Tuple[float, float], (1e-6, 50.0))),
    check=_check,
    defaults=lambda a: dict(lr=a["lr"], etas=tuple(a["etas"]), step_sizes=tuple(a["step_sizes"])),
    hyper=lambda g: RpropHyper(float(g["etas"][0]), float(g["etas"][1]), float(g["step_sizes"][0]),
                               float(g["step_sizes"][1])),
    doc="Rprop with torch.optim.Rprop's math; one `cstorch::rprop_update` op per param group.")

register(RPROP_ALGORITHM, RPROP)
