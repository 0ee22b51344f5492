"""Adam and AdamW (optionally AMSGrad), as torch.optim computes them.

For a parameter p with gradient g (negated when maximizing), moments m, v, step count
t (kept as float32):

    g  = g + l2 * p                                   (Adam's weight decay: L2)
    p  = p * (1 - lr * decoupled_wd)                  (AdamW's weight decay)
    t' = t + 1
    m' = m + (1 - beta1) * (g - m)
    v' = beta2 * v + (1 - beta2) * g^2
    v̂  = max(v_max, v')  if amsgrad  else  v'        (v_max' = v̂)
    c1 = 1 - beta1^t',  c2 = 1 - beta2^t'            (both 1 when correct_bias is False)
    p' = p - (lr / c1) * m' / (sqrt(v̂) / sqrt(c2) + eps)

The real system adds eps before the bias correction (sqrt(v) + eps, HF style); here it
is added after it, as in torch.optim, so checkpoints and runs agree with torch.optim.
State per parameter, as torch.optim.Adam keeps it: `step` (float32 0-d), `exp_avg`,
`exp_avg_sq` and, with amsgrad, `max_exp_avg_sq`. A state dict of the real system's
layout (`beta1_power`/`beta2_power` instead of `step`) is converted on load.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import jax.numpy as jnp

from ..registry import register
from ..spec import Algorithm, PublicOptimizer, Slot, check_adam_hyperparameters, counter, like_param, \
    steps_from_beta_powers
from ..transforms import Transform, add_l2_decay, adam_moments, chain, decay_weights, maximize, one_minus_power, \
    scale_by_learning_rate, when


class AdamHyper(NamedTuple):
    beta1: float
    beta2: float
    eps: float
    decoupled: bool
    amsgrad: bool
    correct_bias: bool
    maximize: bool


class AdamState(NamedTuple):
    step: Slot
    exp_avg: Slot
    exp_avg_sq: Slot
    max_exp_avg_sq: Optional[Slot]


def adam_state(hp: AdamHyper, shape: tuple) -> AdamState:
    return AdamState(counter(), like_param(), like_param(), like_param() if hp.amsgrad else None)


def scale_by_adam():
    """u = m' / (sqrt(v̂) / sqrt(c2) + eps) with step size lr / c1 (see the module docstring)."""

    def apply(update, state: AdamState, hp):
        g = update.u
        t = state.step + 1
        m, v = adam_moments(state, g, hp)
        new = state._replace(step=t, exp_avg=m, exp_avg_sq=v)
        if hp.amsgrad:
            v = jnp.maximum(state.max_exp_avg_sq, v)
            new = new._replace(max_exp_avg_sq=v)
        if hp.correct_bias:
            c1 = one_minus_power(hp.beta1, t)
            c2 = one_minus_power(hp.beta2, t)
            step_size = update.lr / c1.astype(update.p.dtype)
            denom = jnp.sqrt(v) / jnp.sqrt(c2).astype(update.p.dtype) + hp.eps
        else:
            step_size = update.lr
            denom = jnp.sqrt(v) + hp.eps
        return update._replace(u=m / denom, lr=step_size), new

    return Transform(adam_state, apply)


ADAM_ALGORITHM = Algorithm(
    "adam_update", AdamHyper,
    chain(maximize(), when(lambda hp: hp.decoupled, decay_weights()), when(lambda hp: not hp.decoupled, add_l2_decay()),
          scale_by_adam(), scale_by_learning_rate()))


def _hyper(decoupled: bool):
    def hyper(g) -> AdamHyper:
        beta1, beta2 = g["betas"]
        return AdamHyper(float(beta1), float(beta2), float(g["eps"]), decoupled, bool(g["amsgrad"]),
                         bool(g["correct_bias"]), bool(g["maximize"]))

    return hyper


def _defaults(correct_bias):
    return lambda a: dict(lr=a["lr"], betas=tuple(a["betas"]), eps=a["eps"], weight_decay=a["weight_decay"],
                          amsgrad=a["amsgrad"], correct_bias=correct_bias(a), maximize=a["maximize"])


ADAM = PublicOptimizer(
    "Adam", ADAM_ALGORITHM,
    signature=(("lr", float, 1e-3), ("betas", Tuple[float, float], (0.9, 0.999)), ("eps", float, 1e-6),
               ("weight_decay", float, 0.0), ("amsgrad", bool, False), ("maximize", bool, False)),
    check=check_adam_hyperparameters, defaults=_defaults(lambda a: True), hyper=_hyper(False),
    convert_state_dict=steps_from_beta_powers,
    doc="Adam; `weight_decay` is L2 regularisation added to the gradient. One `cstorch::adam_update` op per "
        "param group.\n\n"
        "Differences from the real system:\n"
        "    The math follows torch.optim: `eps` is added after the bias correction (the real system adds it "
        "before, as Hugging Face does). A state dict of the real system's `beta1_power` layout is converted "
        "on load.")

ADAMW = PublicOptimizer(
    "AdamW", ADAM_ALGORITHM,
    signature=(("lr", float, 1e-3), ("betas", Tuple[float, float], (0.9, 0.999)), ("eps", float, 1e-6),
               ("weight_decay", float, 0.0), ("correct_bias", bool, True), ("amsgrad", bool, False),
               ("maximize", bool, False)),
    check=check_adam_hyperparameters, defaults=_defaults(lambda a: a["correct_bias"]), hyper=_hyper(True),
    convert_state_dict=steps_from_beta_powers,
    doc="AdamW; `weight_decay` is decoupled (p *= 1 - lr*wd). `correct_bias=False` drops the bias correction "
        "(BERT's variant). One `cstorch::adam_update` op per param group.\n\n"
        "Differences from the real system:\n"
        "    The math follows torch.optim: `eps` is added after the bias correction (the real system adds it "
        "before, as Hugging Face does). A state dict of the real system's `beta1_power` layout is converted "
        "on load.")

register(ADAM_ALGORITHM, ADAM, ADAMW)
