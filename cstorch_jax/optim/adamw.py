"""Adam / AdamW as one custom op, with the bias correction carried as running beta
powers (as Cerebras' optimizers do, instead of recomputing beta**step).

For each parameter p with gradient g, first/second moments m, v and powers b1p, b2p:

    g'   = g + l2 * p                                  (Adam's L2 regularisation)
    b1p' = b1p * beta1,  b2p' = b2p * beta2
    m'   = beta1 * m + (1 - beta1) * g'
    v'   = beta2 * v + (1 - beta2) * g'^2
    s    = sqrt(1 - b2p') / (1 - b1p')   if correct_bias  else  1
    p'   = p - lr * (s * m' / (sqrt(v') + eps) + weight_decay * p)     (decoupled decay)

`cstorch::adamw_update(params, grads, exp_avgs, exp_avg_sqs, beta1_powers,
beta2_powers, lr, weight_decay, ...)` returns [*p', *m', *v', *b1p', *b2p'].
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import torch
from torch import Tensor

from ..lowering import register
from .eager import run_eagerly


def adamw_rule(params, grads, ms, vs, b1ps, b2ps, lr, weight_decay, *, beta1, beta2, eps, l2, correct_bias):
    P, M, V, B1, B2 = [], [], [], [], []
    for p, g, m, v, b1p, b2p in zip(params, grads, ms, vs, b1ps, b2ps):
        lr_ = lr.astype(p.dtype)
        wd = weight_decay.astype(p.dtype)
        if l2 != 0:
            g = g + l2 * p
        b1p = b1p * beta1
        b2p = b2p * beta2
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * (g * g)
        upd = m / (jnp.sqrt(v) + eps)
        if correct_bias:
            upd = upd * (jnp.sqrt(1 - b2p) / (1 - b1p)).astype(p.dtype)
        P.append(p - lr_ * (upd + wd * p))
        M.append(m)
        V.append(v)
        B1.append(b1p)
        B2.append(b2p)
    return [*P, *M, *V, *B1, *B2]


_adamw_jit = jax.jit(adamw_rule, static_argnames=("beta1", "beta2", "eps", "l2", "correct_bias"))


@torch.library.custom_op("cstorch::adamw_update", mutates_args=())
def adamw_update(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor], exp_avg_sqs: list[Tensor],
                 beta1_powers: list[Tensor], beta2_powers: list[Tensor], lr: Tensor, weight_decay: Tensor,
                 beta1: float, beta2: float, eps: float, l2: float, correct_bias: bool) -> list[Tensor]:
    likes = [*params, *exp_avgs, *exp_avg_sqs, *beta1_powers, *beta2_powers]
    return run_eagerly(_adamw_jit, [params, grads, exp_avgs, exp_avg_sqs, beta1_powers, beta2_powers],
                       [lr, weight_decay], likes, beta1=beta1, beta2=beta2, eps=eps, l2=l2, correct_bias=correct_bias)


@adamw_update.register_fake
def _(params, grads, exp_avgs, exp_avg_sqs, beta1_powers, beta2_powers, lr, weight_decay, beta1, beta2, eps, l2,
      correct_bias):
    return [torch.empty_like(t) for t in (*params, *exp_avgs, *exp_avg_sqs, *beta1_powers, *beta2_powers)]


@register(torch.ops.cstorch.adamw_update.default)
def _lower_adamw(params, grads, ms, vs, b1ps, b2ps, lr, weight_decay, beta1, beta2, eps, l2, correct_bias):
    return adamw_rule(params, grads, ms, vs, b1ps, b2ps, jnp.asarray(lr), jnp.asarray(weight_decay), beta1=beta1,
                      beta2=beta2, eps=eps, l2=l2, correct_bias=correct_bias)
