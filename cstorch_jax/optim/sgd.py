"""SGD with momentum, dampening, Nesterov, weight decay and maximize: one custom op.

For each parameter p with gradient g (negated when maximizing):

    d  = g + weight_decay * p
    b' = momentum * b + (1 - dampening) * d          (b starts at zero)
    u  = d + momentum * b'  if nesterov  else  b'     (u = d when momentum == 0)
    p' = p - lr * u

`cstorch::sgd_update(params, grads, bufs, lr, weight_decay, ...)` returns
[*new params, *new momentum buffers]; lr and weight_decay are 0-d tensors.
"""
from __future__ import annotations


import jax
import jax.numpy as jnp
import torch
from torch import Tensor

from ..lowering import register
from .eager import run_eagerly


def sgd_rule(params, grads, bufs, lr, weight_decay, *, momentum, dampening, nesterov, maximize):
    new_params, new_bufs = [], []
    for i, (p, g) in enumerate(zip(params, grads)):
        d = -g if maximize else g
        d = d + weight_decay.astype(p.dtype) * p
        if momentum != 0:
            b = momentum * bufs[i] + (1 - dampening) * d
            new_bufs.append(b)
            d = d + momentum * b if nesterov else b
        new_params.append(p - lr.astype(p.dtype) * d)
    return [*new_params, *new_bufs]


_sgd_jit = jax.jit(sgd_rule, static_argnames=("momentum", "dampening", "nesterov", "maximize"))


@torch.library.custom_op("cstorch::sgd_update", mutates_args=())
def sgd_update(params: list[Tensor], grads: list[Tensor], bufs: list[Tensor], lr: Tensor, weight_decay: Tensor,
               momentum: float, dampening: float, nesterov: bool, maximize: bool) -> list[Tensor]:
    return run_eagerly(_sgd_jit, [params, grads, bufs], [lr, weight_decay], [*params, *bufs],
                       momentum=momentum, dampening=dampening, nesterov=nesterov, maximize=maximize)


@sgd_update.register_fake
def _(params, grads, bufs, lr, weight_decay, momentum, dampening, nesterov, maximize):
    return [torch.empty_like(t) for t in (*params, *bufs)]


@register(torch.ops.cstorch.sgd_update.default)
def _lower_sgd(params, grads, bufs, lr, weight_decay, momentum, dampening, nesterov, maximize):
    return sgd_rule(params, grads, bufs, jnp.asarray(lr), jnp.asarray(weight_decay), momentum=momentum,
                    dampening=dampening, nesterov=nesterov, maximize=maximize)
