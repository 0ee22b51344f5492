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
in the Newton-Schulz step).
"""
from __future__ import annotations

import math

import jax.numpy as jnp
from jax.lax import Precision

from .update_op import define_update

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


def muon_rule(p, g, state, hp, *, momentum, nesterov, ns_steps):
    if p.ndim < 2:
        raise ValueError(f"Muon updates parameters of two or more dimensions, got one of shape {p.shape}")
    if "momentum_buffer" in state:
        buf = momentum * state["momentum_buffer"] + (1 - momentum) * g
        state = {"momentum_buffer": buf}
    else:
        buf = g
    u = g + momentum * buf if nesterov else buf
    if p.ndim == 4:
        u = u.reshape(p.shape[0], -1)
    o = newton_schulz(u, int(ns_steps)).reshape(p.shape)
    lr = hp["lr"].astype(p.dtype) * muon_lr_ratio(p.shape)
    wd = hp["weight_decay"].astype(p.dtype)
    return p * (1 - lr * wd) - lr * o, state


muon_update = define_update("muon_update", muon_rule)
