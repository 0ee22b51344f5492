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

State per parameter: `exp_avg` (only with beta1), `exp_avg_sq_row` (shape[:-1]) and
`exp_avg_sq_col` (shape[:-2] + shape[-1:]) for parameters of two or more dimensions,
else `exp_avg_sq`, and `step`. With `relative_step=True` the step size comes from the
step count (pass `lr=None`); `warmup_init`, `clip_threshold` and `beta1` work (HF
semantics; the real system rejects them).
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import torch

from ..registry import register
from ..spec import REQUIRED, Algorithm, PublicOptimizer, Slot, check_hyperparameter, counter, like_param, shaped
from ..transforms import Transform, chain, ema


def _rms(x):
    return jnp.sqrt(jnp.mean(x * x))


class AdafactorHyper(NamedTuple):
    eps: tuple[float, float]
    clip_threshold: float
    decay_rate: float
    beta1: Optional[float]
    scale_parameter: bool
    relative_step: bool
    warmup_init: bool


class AdafactorState(NamedTuple):
    exp_avg: Optional[Slot]
    exp_avg_sq_row: Optional[Slot]
    exp_avg_sq_col: Optional[Slot]
    exp_avg_sq: Optional[Slot]
    step: Slot


def adafactor_state(hp: AdafactorHyper, shape: tuple) -> AdafactorState:
    factored = len(shape) >= 2
    return AdafactorState(
        exp_avg=like_param() if hp.beta1 is not None else None,
        exp_avg_sq_row=shaped(shape[:-1]) if factored else None,
        exp_avg_sq_col=shaped(shape[:-2] + shape[-1:]) if factored else None,
        exp_avg_sq=None if factored else like_param(),
        step=counter())


def adafactor_step():
    """The whole Adafactor step: writes p (see the module docstring)."""

    def apply(update, state: AdafactorState, hp):
        p, g = update.p, update.u
        dt = p.dtype
        eps1, eps2 = hp.eps
        t = state.step + 1
        new = state._replace(step=t)
        if hp.relative_step:
            rho = jnp.minimum(1e-6 * t if hp.warmup_init else 1e-2, jax.lax.rsqrt(t)).astype(dt)
        else:
            rho = update.lr
        alpha = jnp.maximum(_rms(p), eps2) * rho if hp.scale_parameter else rho
        b2 = (1 - t ** hp.decay_rate).astype(dt)
        s = g * g + eps1
        if state.exp_avg_sq_row is not None:
            row = ema(state.exp_avg_sq_row, jnp.mean(s, axis=-1), b2)
            col = ema(state.exp_avg_sq_col, jnp.mean(s, axis=-2), b2)
            new = new._replace(exp_avg_sq_row=row, exp_avg_sq_col=col)
            row_factor = jax.lax.rsqrt(row / jnp.mean(row, axis=-1, keepdims=True))
            u = row_factor[..., :, None] * jax.lax.rsqrt(col)[..., None, :] * g
        else:
            v = ema(state.exp_avg_sq, s, b2)
            new = new._replace(exp_avg_sq=v)
            u = jax.lax.rsqrt(v) * g
        u = alpha * (u / jnp.maximum(_rms(u) / hp.clip_threshold, 1.0))
        if hp.beta1 is not None:
            u = ema(state.exp_avg, u, hp.beta1)
            new = new._replace(exp_avg=u)
        wd = hp.weight_decay.astype(dt)
        return update._replace(p=p - wd * alpha * p - u), new

    return Transform(adafactor_state, apply)


ADAFACTOR_ALGORITHM = Algorithm("adafactor_update", AdafactorHyper, chain(adafactor_step()))


def _check(a) -> None:
    lr, eps, clip_threshold, decay_rate = a["lr"], a["eps"], a["clip_threshold"], a["decay_rate"]
    if a["relative_step"] and lr is not None:
        raise ValueError("Invalid learning rate: cannot combine a manual `lr` with `relative_step=True` "
                         f"(pass lr=None), got {lr}")
    if not a["relative_step"]:
        check_hyperparameter(lr, label="learning rate")
    if a["warmup_init"] and not a["relative_step"]:
        raise ValueError(f"Invalid warmup_init: {a['warmup_init']} (it needs relative_step=True)")
    if (not isinstance(eps, (tuple, list)) or len(eps) != 2
            or not all(isinstance(e, (int, float)) and not isinstance(e, bool) and e >= 0 for e in eps)):
        raise ValueError(f"Invalid epsilon value: {eps} (expected a pair of non-negative floats)")
    check_hyperparameter(clip_threshold, label="clip_threshold")
    if not isinstance(clip_threshold, torch.Tensor) and clip_threshold == 0:
        raise ValueError(f"Invalid clip_threshold: {clip_threshold}")
    if decay_rate is None or decay_rate > 0:
        raise ValueError(f"Invalid decay_rate: {decay_rate} (expected <= 0)")
    if a["beta1"] is not None:
        check_hyperparameter(a["beta1"], high=1.0, label="beta1")
    check_hyperparameter(a["weight_decay"], label="weight_decay value")


def _check_group(g) -> None:
    if not g["relative_step"] and g["lr"] is None:
        raise ValueError("Invalid learning rate: None (set one, or use relative_step=True)")


ADAFACTOR = PublicOptimizer(
    "Adafactor", ADAFACTOR_ALGORITHM,
    signature=(("lr", float, REQUIRED), ("eps", Tuple[float, float], (1e-30, 1e-3)), ("clip_threshold", float, 1.0),
               ("decay_rate", float, -0.8), ("beta1", Optional[float], None), ("weight_decay", float, 0.0),
               ("scale_parameter", bool, True), ("relative_step", bool, False), ("warmup_init", bool, False)),
    check=_check,
    defaults=lambda a: dict(lr=a["lr"], eps=tuple(a["eps"]), clip_threshold=a["clip_threshold"],
                            decay_rate=a["decay_rate"], beta1=a["beta1"], weight_decay=a["weight_decay"],
                            scale_parameter=a["scale_parameter"], relative_step=a["relative_step"],
                            warmup_init=a["warmup_init"]),
    hyper=lambda g: AdafactorHyper(
        tuple(float(e) for e in g["eps"]), float(g["clip_threshold"]), float(g["decay_rate"]),
        None if g["beta1"] is None else float(g["beta1"]), bool(g["scale_parameter"]), bool(g["relative_step"]),
        bool(g["warmup_init"])),
    global_step=True,
    check_group=_check_group,
    doc="Adafactor. With `relative_step=True` the step size comes from the step count (pass `lr=None`); "
        "`warmup_init` needs `relative_step`; `scale_parameter` scales it by the parameter's RMS; `clip_threshold` "
        "caps the update's RMS; `beta1` adds a first moment; `weight_decay` is decoupled and scaled by the same "
        "step size. One `cstorch::adafactor_update` op per param group.\n\n"
        "Differences from the real system:\n"
        "    `relative_step`, `warmup_init`, `clip_threshold` and `beta1` work, with Hugging Face's semantics (the "
        "real system rejects them).")

register(ADAFACTOR_ALGORITHM, ADAFACTOR)
