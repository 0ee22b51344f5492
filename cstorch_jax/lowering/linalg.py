"""Matrix products. float32 products run at full float32 precision on every platform
(XLA's default on GPU would use TF32, which torch does not)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from .registry import register

aten = torch.ops.aten
HIGHEST = jax.lax.Precision.HIGHEST


def matmul(a, b):
    return jnp.matmul(a, b, precision=HIGHEST)


@register(aten.mm.default)
def mm(a, b):
    return matmul(a, b)


@register(aten.bmm.default)
def bmm(a, b):
    return matmul(a, b)


@register(aten.addmm.default)
def addmm(bias, a, b, *, beta=1, alpha=1):
    prod = matmul(a, b)
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return jnp.broadcast_to(prod, prod.shape)
    return prod + (bias if beta == 1 else bias * beta)


@register(aten.baddbmm.default)
def baddbmm(bias, a, b, *, beta=1, alpha=1):
    return addmm(bias, a, b, beta=beta, alpha=alpha)


@register(aten.dot.default)
def dot(a, b):
    return jnp.dot(a, b, precision=HIGHEST)
