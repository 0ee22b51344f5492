"""Adafactor (Shazeer & Stern, "Adafactor: Adaptive Learning Rates with Sublinear
Memory Cost", 2018) in the formulation of HuggingFace transformers, which the real
system follows.

For a parameter p with gradient g, a per-parameter step count t (float32, starts at
0), eps = (eps1, eps2) and d = decay_rate:

    t'    = t + 1
    rho   = min(1e-6 * t' if warmup_init else 1e-2, 1 / sqrt(t'))   if relative_step
            lr                                                      otherwise
    alpha = max(eps2, RMS(p)) * rho  if scale_parameter  else  rho  (RMS(x) = sqrt(mean(x^2)))
    b2    = 1 - t'^d
    s     = g^2 + eps1
  p with two or more dimensions (factored second moment over the last two axes):
    R'    = b2 * R + (1 - b2) * mean(s, axis=-1)                    (exp_avg_sq_row)
    C'    = b2 * C + (1 - b2) * mean(s, axis=-2)                    (exp_avg_sq_col)
    u     = g / sqrt(R' / mean(R', axis=-1) (outer) C')
  p with fewer:
    V'    = b2 * V + (1 - b2) * s                                   (exp_avg_sq)
    u     = g / sqrt(V')
  then
    u     = alpha * u / max(1, RMS(u) / clip_threshold)
    m'    = beta1 * m + (1 - beta1) * u;  u = m'                    (only when beta1 is set)
    p'    = p - weight_decay * alpha * p - u

State: `step`, `exp_avg` (only with beta1), and `exp_avg_sq_row` / `exp_avg_sq_col`
(parameters of two or more dimensions) or `exp_avg_sq`.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .update_op import define_update


def _rms(x):
    return jnp.sqrt(jnp.mean(x * x))


def adafactor_rule(p, g, state, hp, *, eps, clip_threshold, decay_rate, beta1, scale_parameter, relative_step,
                   warmup_init):
    dt = p.dtype
    eps1, eps2 = eps
    t = state["step"] + 1
    new = {"step": t}
    if relative_step:
        rho = jnp.minimum(1e-6 * t if warmup_init else 1e-2, jax.lax.rsqrt(t)).astype(dt)
    else:
        rho = hp["lr"].astype(dt)
    alpha = jnp.maximum(_rms(p), eps2) * rho if scale_parameter else rho
    b2 = (1 - t ** decay_rate).astype(dt)
    s = g * g + eps1
    if "exp_avg_sq_row" in state:
        row = b2 * state["exp_avg_sq_row"] + (1 - b2) * jnp.mean(s, axis=-1)
        col = b2 * state["exp_avg_sq_col"] + (1 - b2) * jnp.mean(s, axis=-2)
        new.update(exp_avg_sq_row=row, exp_avg_sq_col=col)
        row_factor = jax.lax.rsqrt(row / jnp.mean(row, axis=-1, keepdims=True))
        u = row_factor[..., :, None] * jax.lax.rsqrt(col)[..., None, :] * g
    else:
        v = b2 * state["exp_avg_sq"] + (1 - b2) * s
        new["exp_avg_sq"] = v
        u = jax.lax.rsqrt(v) * g
    u = alpha * (u / jnp.maximum(_rms(u) / clip_threshold, 1.0))
    if beta1 is not None:
        u = beta1 * state["exp_avg"] + (1 - beta1) * u
        new["exp_avg"] = u
    wd = hp["weight_decay"].astype(dt)
    return p - wd * alpha * p - u, new


adafactor_update = define_update("adafactor_update", adafactor_rule)
