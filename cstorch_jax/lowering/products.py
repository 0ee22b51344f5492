"""Matrix products. float32 products run at full float32 precision on every platform
(XLA's default on GPU would use TF32, which torch does not); 16-bit operands are
multiplied as they are and summed in float32 (dtype_policy.py)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from .dtype_policy import FLOAT32, HALF, accumulates, accumulator
from .registry import register

aten = torch.ops.aten
HIGHEST = jax.lax.Precision.HIGHEST


def matmul(a, b):
    return jnp.matmul(a, b, precision=HIGHEST, preferred_element_type=accumulator(a.dtype))


@register(aten.mm.default)
@accumulates(FLOAT32, operands=HALF)
def mm(a, b):
    return matmul(a, b)


@register(aten.bmm.default)
@accumulates(FLOAT32, operands=HALF)
def bmm(a, b):
    return matmul(a, b)


@register(aten.addmm.default)
@accumulates(FLOAT32, operands=HALF)
def addmm(bias, a, b, *, beta=1, alpha=1):
    prod = matmul(a, b)
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return jnp.broadcast_to(prod, prod.shape)
    return prod + (bias if beta == 1 else bias * beta)


@register(aten.baddbmm.default)
@accumulates(FLOAT32, operands=HALF)
def baddbmm(bias, a, b, *, beta=1, alpha=1):
    return addmm(bias, a, b, beta=beta, alpha=alpha)


@register(aten.dot.default)
@accumulates(FLOAT32, operands=HALF)
def dot(a, b):
    return jnp.dot(a, b, precision=HIGHEST, preferred_element_type=accumulator(a.dtype))


def _scaled_sum(prod, bias, beta, alpha):
    """alpha * prod + beta * bias; beta == 0 ignores bias (nan/inf included), as torch."""
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return jnp.broadcast_to(prod, jnp.broadcast_shapes(prod.shape, bias.shape))
    return prod + (bias if beta == 1 else bias * beta)


@register(aten.addmv.default)
@accumulates(FLOAT32, operands=HALF)
def addmv(bias, mat, vec, *, beta=1, alpha=1):
    """beta * bias + alpha * (mat @ vec)."""
    return _scaled_sum(matmul(mat, vec), bias, beta, alpha)


@register(aten.addbmm.default)
@accumulates(FLOAT32, operands=HALF)
def addbmm(bias, batch1, batch2, *, beta=1, alpha=1):
    """beta * bias + alpha * sum_b batch1[b] @ batch2[b]."""
    prod = jnp.einsum("bij,bjk->ik", batch1, batch2, precision=HIGHEST, preferred_element_type=accumulator(batch1.dtype))
    return _scaled_sum(prod, bias, beta, alpha)


@register(aten._trilinear.default)
@accumulates(FLOAT32, operands=HALF)
def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """sum over `sumdim` of i1' * i2' * i3', where iN' is iN with size-1 dims inserted
    at `expandN` (all three then have the same rank); the summed dims are dropped.
    As in torch, i1 and i2 are contracted first, then the result with i3. A kept dim
    that every operand expands has size 0, as in torch. `unroll_dim` only picks
    torch's loop order."""
    total = i1.ndim + len(expand1)
    letters = "abcdefghijklmnopqrstuvwxyz"[:total]
    sums = {d % total for d in sumdim}

    def spec(expand):
        skip = {d % total for d in expand}
        return "".join(letters[d] for d in range(total) if d not in skip)

    s1, s2, s3 = spec(expand1), spec(expand2), spec(expand3)
    out = "".join(letters[d] for d in range(total) if d not in sums)
    if any(not any(c in s for s in (s1, s2, s3)) for c in out):
        sizes = {c: n for s, x in ((s1, i1), (s2, i2), (s3, i3)) for c, n in zip(s, x.shape)}
        return jnp.zeros(tuple(sizes.get(c, 0) for c in out), i1.dtype)
    s12 = "".join(c for c in letters if (c in s1 or c in s2) and (c in s3 or c in out))
    acc = accumulator(i1.dtype)
    buf = jnp.einsum(f"{s1},{s2}->{s12}", i1, i2, precision=HIGHEST, preferred_element_type=acc)
    return jnp.einsum(f"{s12},{s3}->{out}", buf, i3, precision=HIGHEST, preferred_element_type=acc)
