"""Muon (Keller Jordan, "Muon: An optimizer for hidden layers in neural networks",
2024) as the real system defines it: momentum, then a quintic Newton-Schulz
orthogonalisation of the update, with the learning rate scaled to match AdamW's
update RMS (Moonshot AI, "Muon is Scalable for LLM Training", 2025).

For a parameter p of two or more dimensions with gradient g and momentum buffer b
(starts at zero; absent, and b' = g, when momentum == 0):

    b'  = momentum * b + (1 - momentum) * g
    u   = g + momentum * b'   if nesterov   else   b'
    U   = u reshaped to (p.shape[0], -1) when p has 4 dimensions; with 3 or more
          otherwise, the leading dimensions are a batch of matrices
    O   = NS_k(U), reshaped back to p.shape                    (k = ns_steps)
    lr~ = lr * 0.2 * sqrt(max(p.shape[0], p.shape[1]))
    p'  = p * (1 - lr~ * weight_decay) - lr~ * O

NS_k: X = U (transposed when it has more rows than columns), X = X / (||X||_F + 1e-7),
then k times  A = X X^T,  B = b A + c A A,  X = a X + B X,  with (a, b, c) =
(3.4445, -4.7750, 2.0315), and X transposed back.

Differences from the real system: the iteration runs in the parameter's precision
(float32) where the real system casts to bfloat16; the momentum buffer is written back
to the state each step (the real step computes the new buffer but leaves the stored one
at zero); every backend runs ns_steps iterations (the real CSX path runs one).
Parameters with fewer than two dimensions are rejected (the real system fails on them
in the Newton-Schulz step). State: `momentum_buffer` (only when momentum != 0).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import jax.numpy as jnp
import torch
from jax.lax import Precision

from ..registry import register
from ..spec import Algorithm, PublicOptimizer, Slot, check_hyperparameter, like_param
from ..transforms import Transform, chain, decay_weights, ema, scale_by_learning_rate

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NS_EPS = 1e-7


def _mm(x, y):
    return jnp.matmul(x, y, precision=Precision.HIGHEST)


def newton_schulz(u, steps: int):
    """Approximately orthogonalise the trailing two axes of `u` (a batch of matrices)."""
    a, b, c = NS_COEFFICIENTS
    tall = u.shape[-2] > u.shape[-1]
    x = jnp.swapaxes(u, -1, -2) if tall else u
    x = x / (jnp.sqrt(jnp.sum(x * x, axis=(-2, -1), keepdims=True)) + NS_EPS)
    for _ in range(steps):
        gram = _mm(x, jnp.swapaxes(x, -1, -2))
        x = a * x + _mm(b * gram + c * _mm(gram, gram), x)
    return jnp.swapaxes(x, -1, -2) if tall else x


def muon_lr_ratio(shape) -> float:
    """The factor on lr that matches the update RMS of AdamW (0.2 sqrt(max(A, B)))."""
    return 0.2 * math.sqrt(max(shape[0], shape[1]))


class MuonHyper(NamedTuple):
    momentum: float
    nesterov: bool
    ns_steps: int


class MuonState(NamedTuple):
    momentum_buffer: Optional[Slot]


def muon_state(hp: MuonHyper, shape: tuple) -> MuonState:
    return MuonState(like_param() if hp.momentum != 0 else None)


def orthogonalize_momentum():
    """u = NS_k(momentum direction), with step size lr~ (see the module docstring)."""

    def apply(update, state: MuonState, hp):
        p, g = update.p, update.u
        if p.ndim < 2:
            raise ValueError(f"Muon updates parameters of two or more dimensions, got one of shape {p.shape}")
        if state.momentum_buffer is not None:
            buf = ema(state.momentum_buffer, g, hp.momentum)
            state = MuonState(buf)
        else:
            buf = g
        u = g + hp.momentum * buf if hp.nesterov else buf
        if p.ndim == 4:
            u = u.reshape(p.shape[0], -1)
        o = newton_schulz(u, int(hp.ns_steps)).reshape(p.shape)
        return update._replace(u=o, lr=update.lr * muon_lr_ratio(p.shape)), state

    return Transform(muon_state, apply)


def _check_param(p: torch.Tensor) -> None:
    if p.ndim < 2 and p.requires_grad:
        raise ValueError(
            f"Muon only updates parameters with two or more dimensions, but got one of shape "
            f"{tuple(p.shape)}. Optimize biases, norm gains and other 1-D parameters with a separate "
            f"optimizer such as cstorch.optim.AdamW (one Muon over the matrices, one AdamW over the "
            f"rest).")


MUON_ALGORITHM = Algorithm("muon_update", MuonHyper,
                           chain(orthogonalize_momentum(), decay_weights(), scale_by_learning_rate()),
                           check_param=_check_param)


def _check(a) -> None:
    check_hyperparameter(a["lr"], label="learning rate")
    check_hyperparameter(a["weight_decay"], high=1.0, label="weight decay parameter")
    check_hyperparameter(a["momentum"], high=1.0, label="momentum parameter")
    ns_steps = a["ns_steps"]
    if isinstance(ns_steps, bool) or not isinstance(ns_steps, int) or ns_steps < 0:
        raise ValueError(f"Invalid number of steps: {ns_steps}")


MUON = PublicOptimizer(
    "Muon", MUON_ALGORITHM,
    signature=(("lr", float, 0.02), ("weight_decay", float, 0.01), ("momentum", float, 0.95), ("nesterov", bool, True),
               ("ns_steps", int, 5)),
    check=_check,
    defaults=lambda a: dict(lr=a["lr"], weight_decay=a["weight_decay"], momentum=a["momentum"],
                            nesterov=a["nesterov"], ns_steps=a["ns_steps"]),
    hyper=lambda g: MuonHyper(float(g["momentum"]), bool(g["nesterov"]), int(g["ns_steps"])),
    doc="Muon for matrices (and stacks of them / conv kernels). Biases, norm gains and other 1-D parameters are "
        "rejected: give them their own optimizer, e.g. AdamW. One `cstorch::muon_update` op per param group.\n\n"
        "Differences from the real system:\n"
        "    A 1-D parameter is a clear error; Newton-Schulz runs in float32; the momentum buffer is kept in the "
        "state (the real code never stores it).")

register(MUON_ALGORITHM, MUON)
