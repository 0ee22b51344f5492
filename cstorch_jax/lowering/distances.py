"""Pairwise and vector distances: cdist, pdist, dist, and their backwards. 16-bit inputs
compute in float32 (dtype_policy.py): differences, powers and sums as torch's distance
kernels do in their opmath type; a float16 sum of fourth powers overflows long before the
distance does."""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import torch

from .dtype_policy import FLOAT32, accumulates
from .products import matmul
from .linear_algebra import _mT
from .registry import register

aten = torch.ops.aten


def _sign(x):
    """torch's sign in the distance kernels: (0 < x) - (x < 0), 0 for nan."""
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


def _pnorm(diff, p, axis=-1):
    """torch's distance kernels: p = 0 counts nonzeros, inf is the max |diff|."""
    a = jnp.abs(diff)
    if p == 0:
        return jnp.sum(jnp.minimum(jnp.ceil(a), 1), axis=axis)
    if p == 1:
        return jnp.sum(a, axis=axis)
    if p == 2:
        return jnp.sqrt(jnp.sum(a * a, axis=axis))
    if math.isinf(p):
        return jnp.max(a, axis=axis)
    return jnp.sum(a**p, axis=axis) ** (1 / p)


def _pnorm_grad(diff, grad, dist, p):
    """grad * d dist / d diff with torch's subgradients (0 where dist == 0; for
    p = inf, every coordinate that attains the max); grad and dist broadcast on diff."""
    if p == 0:
        return jnp.zeros_like(diff)
    sign = _sign(diff)
    if p == 1:
        return grad * sign
    if math.isinf(p):
        return grad * sign * (1 - jnp.minimum(1, jnp.ceil(jnp.abs(jnp.abs(diff) - dist))))
    a = jnp.abs(diff)
    if p < 2:
        out = jnp.where(dist == 0, 0, sign * a ** (p - 1) * grad / dist ** (p - 1))
        return jnp.where((diff == 0) & (p < 1), 0, out)
    if p == 2:
        return jnp.where(dist == 0, 0, grad * diff / dist)
    return jnp.where(dist == 0, 0, diff * a ** (p - 2) * grad / dist ** (p - 1))


def _cdist_batch(x1, x2):
    batch = jnp.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    return jnp.broadcast_to(x1, batch + x1.shape[-2:]), jnp.broadcast_to(x2, batch + x2.shape[-2:])


def _euclidean_dist(x1, x2):
    """torch's matrix-product form: sqrt(max(|x1|^2 + |x2|^2 - 2 x1.x2, 0))."""
    n1 = jnp.sum(x1 * x1, axis=-1, keepdims=True)
    n2 = jnp.sum(x2 * x2, axis=-1, keepdims=True)
    a = jnp.concatenate([x1 * -2, n1, jnp.ones_like(n1)], axis=-1)
    b = jnp.concatenate([x2, jnp.ones_like(n2), n2], axis=-1)
    return jnp.sqrt(jnp.maximum(matmul(a, _mT(b)), 0))


@register(aten._cdist_forward.default)
@accumulates(FLOAT32)
def cdist_forward(x1, x2, p, compute_mode):
    """out[..., i, j] = ||x1[..., i, :] - x2[..., j, :]||_p. For p = 2 torch uses the
    matrix-product form when compute_mode is 1, or is None/0 and a side has more than
    25 rows; so does this lowering."""
    x1, x2 = _cdist_batch(x1, x2)
    r1, r2, c = x1.shape[-2], x2.shape[-2], x1.shape[-1]
    shape = x1.shape[:-1] + (r2,)
    if r1 == 0 or r2 == 0 or c == 0:
        return jnp.zeros(shape, x1.dtype)
    mode = compute_mode or 0
    if p == 2 and (mode == 1 or (mode == 0 and (r1 > 25 or r2 > 25))):
        return _euclidean_dist(x1, x2)
    return _pnorm(x1[..., :, None, :] - x2[..., None, :, :], p)


@register(aten._cdist_backward.default)
@accumulates(FLOAT32)
def cdist_backward(grad, x1, x2, p, dist):
    """d/dx1 of sum(grad * cdist(x1, x2)), torch's kernel: sum_j of the p-norm
    subgradient of x1_i - x2_j. Batch dims come back broadcast (x1's own shape when
    the result is empty, as in torch)."""
    if x1.size == 0 or x2.size == 0 or grad.size == 0:
        return jnp.zeros_like(x1)
    x1, x2 = _cdist_batch(x1, x2)
    if p == 0:
        return jnp.zeros_like(x1)
    diff = x1[..., :, None, :] - x2[..., None, :, :]
    return jnp.sum(_pnorm_grad(diff, grad[..., None], dist[..., None], p), axis=-2)


def _pairs(n):
    i, j = np.triu_indices(n, 1)
    return jnp.asarray(i, jnp.int32), jnp.asarray(j, jnp.int32)


@register(aten._pdist_forward.default)
@accumulates(FLOAT32)
def pdist_forward(x, p=2.0):
    """||x_i - x_j||_p for every row pair i < j, in row-major order."""
    n, c = x.shape
    if n < 2:
        return jnp.zeros((0,), x.dtype)
    if c == 0:
        return jnp.zeros((n * (n - 1) // 2,), x.dtype)
    i, j = _pairs(n)
    return _pnorm(x[i] - x[j], p)


@register(aten._pdist_backward.default)
@accumulates(FLOAT32)
def pdist_backward(grad, x, p, dist):
    """d/dx of sum(grad * pdist(x)): each pair (i, j) adds its subgradient g to row i
    and -g to row j."""
    n = x.shape[0]
    if n < 2 or x.size == 0 or p == 0:
        return jnp.zeros_like(x)
    i, j = _pairs(n)
    g = _pnorm_grad(x[i] - x[j], grad[:, None], dist[:, None], p)
    return jnp.zeros_like(x).at[i].add(g).at[j].add(-g)


@register(aten.dist.default)
@accumulates(FLOAT32)
def dist(x, other, p=2):
    """||x - other||_p over every element (broadcast): p = 0 counts nonzeros, +-inf is
    the max (min) of |x - other|."""
    diff = (x - other).reshape(-1)
    if p == -math.inf:
        return jnp.min(jnp.abs(diff))
    if diff.size == 0:
        return jnp.zeros((), diff.dtype)
    if p == 0:
        return jnp.sum((diff != 0).astype(diff.dtype))
    return _pnorm(diff, p, axis=0)
