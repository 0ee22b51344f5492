"""Reductions: sum, mean, max/min (with indices), argmax, prod, var, any/all, and the scans
cumsum, cumprod, logcumsumexp, cummax, cummin.

torch reads `dim=[]` (or None) as "every dimension"; so do these lowerings. Each
states its accumulation dtype (dtype_policy.py): sums, products, means, variances, norms
and scans of 16-bit floats accumulate in float32; max/min/arg*/cummax/cummin/any/all
select or test elements and are exact.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from ..dtypes import jax_dtype
from .dtype_policy import EXACT, FLOAT32, accumulates, accumulator
from .registry import register

aten = torch.ops.aten


def _axes(x, dim):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None
    if isinstance(dim, int):
        return (dim % max(x.ndim, 1),) if x.ndim else None
    return tuple(d % x.ndim for d in dim) if x.ndim else None


def _acc(x, dtype):
    """x as a sum of it accumulates: cast to the requested `dtype` (torch rounds the
    elements to it first), then to that dtype's accumulator; bools count as int32."""
    if dtype is not None:
        x = x.astype(jax_dtype(dtype))
    if x.dtype == jnp.bool_:
        return x.astype(jnp.int32)
    return x.astype(accumulator(x.dtype))


@register(aten.sum.dim_IntList)
@accumulates(FLOAT32)
def sum_dim(x, dim=None, keepdim=False, dtype=None):
    return jnp.sum(_acc(x, dtype), axis=_axes(x, dim), keepdims=keepdim)


@register(aten.sum.default)
@accumulates(FLOAT32)
def sum_all(x, dtype=None):
    return jnp.sum(_acc(x, dtype))


@register(aten.mean.dim)
@accumulates(FLOAT32)
def mean_dim(x, dim=None, keepdim=False, dtype=None):
    return jnp.mean(_acc(x, dtype), axis=_axes(x, dim), keepdims=keepdim)


@register(aten.mean.default)
@accumulates(FLOAT32)
def mean_all(x, dtype=None):
    return jnp.mean(_acc(x, dtype))


@register(aten.prod.default)
@accumulates(FLOAT32)
def prod_all(x, dtype=None):
    return jnp.prod(_acc(x, dtype))


@register(aten.prod.dim_int)
@accumulates(FLOAT32)
def prod_dim(x, dim, keepdim=False, dtype=None):
    return jnp.prod(_acc(x, dtype), axis=_axes(x, dim), keepdims=keepdim)


@register(aten.amax.default)
@accumulates(EXACT)
def amax(x, dim=(), keepdim=False):
    return jnp.max(x, axis=_axes(x, dim), keepdims=keepdim)


@register(aten.amin.default)
@accumulates(EXACT)
def amin(x, dim=(), keepdim=False):
    return jnp.min(x, axis=_axes(x, dim), keepdims=keepdim)


@register(aten.max.default)
@accumulates(EXACT)
def max_all(x):
    return jnp.max(x)


@register(aten.min.default)
@accumulates(EXACT)
def min_all(x):
    return jnp.min(x)


def _on_vector_if_scalar(fn):
    """torch accepts dim 0 / -1 on a 0-d tensor (and keeps it 0-d); jnp does not:
    compute on the 1-element vector and drop the axis again."""

    def wrapped(x, dim, *args, **kwargs):
        if x.ndim == 0:
            out = fn(x.reshape(1), 0, *args, **kwargs)
            return tuple(o.reshape(()) for o in out) if isinstance(out, tuple) else out.reshape(())
        return fn(x, dim, *args, **kwargs)

    return wrapped


@register(aten.max.dim)
@accumulates(EXACT)
@_on_vector_if_scalar
def max_dim(x, dim, keepdim=False):
    return jnp.max(x, axis=dim, keepdims=keepdim), jnp.argmax(x, axis=dim, keepdims=keepdim)


@register(aten.min.dim)
@accumulates(EXACT)
@_on_vector_if_scalar
def min_dim(x, dim, keepdim=False):
    return jnp.min(x, axis=dim, keepdims=keepdim), jnp.argmin(x, axis=dim, keepdims=keepdim)


@_on_vector_if_scalar
def _argmax_dim(x, dim, keepdim=False):
    return jnp.argmax(x, axis=dim, keepdims=keepdim)


@_on_vector_if_scalar
def _argmin_dim(x, dim, keepdim=False):
    return jnp.argmin(x, axis=dim, keepdims=keepdim)


@register(aten.argmax.default)
@accumulates(EXACT)
def argmax(x, dim=None, keepdim=False):
    if dim is None:
        return jnp.argmax(x.reshape(-1)).reshape((1,) * x.ndim if keepdim else ())
    return _argmax_dim(x, dim, keepdim)


@register(aten.argmin.default)
@accumulates(EXACT)
def argmin(x, dim=None, keepdim=False):
    if dim is None:
        return jnp.argmin(x.reshape(-1)).reshape((1,) * x.ndim if keepdim else ())
    return _argmin_dim(x, dim, keepdim)


@register(aten.var.correction)
@accumulates(FLOAT32)
def var(x, dim=None, *, correction=None, keepdim=False):
    """sum((x - mean)**2) / max(0, N - correction), as torch: a correction >= N gives inf
    (or NaN for a constant x), where jnp.var would divide by a negative count."""
    axes = _axes(x, dim)
    n = 1
    for a in (range(x.ndim) if axes is None else axes):
        n *= x.shape[a]
    ddof = 1 if correction is None else correction
    centered = x - jnp.mean(x, axis=axes, keepdims=True)
    return jnp.sum(jnp.square(centered), axis=axes, keepdims=keepdim) / max(0, n - ddof)


@register(aten.var_mean.correction)
@accumulates(FLOAT32)
def var_mean(x, dim=None, *, correction=None, keepdim=False):
    return var(x, dim, correction=correction, keepdim=keepdim), jnp.mean(x, axis=_axes(x, dim), keepdims=keepdim)


@register(aten.linalg_vector_norm.default)
@accumulates(FLOAT32)
def linalg_vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """sum(|x|**ord)**(1/ord) over `dim` (every dim when None or []); ord inf / -inf is
    max / min of |x|, ord 0 counts the non-zeros."""
    a = jnp.abs(_acc(x, dtype))
    axes = _axes(x, dim)
    if ord == float("inf"):
        return jnp.max(a, axis=axes, keepdims=keepdim)
    if ord == float("-inf"):
        return jnp.min(a, axis=axes, keepdims=keepdim)
    if ord == 0:
        return jnp.sum((a != 0).astype(a.dtype), axis=axes, keepdims=keepdim)
    if ord == 1:
        return jnp.sum(a, axis=axes, keepdims=keepdim)
    if ord == 2:
        return jnp.sqrt(jnp.sum(a * a, axis=axes, keepdims=keepdim))
    return jnp.sum(a ** ord, axis=axes, keepdims=keepdim) ** (1.0 / ord)


@register(aten.any.default)
@accumulates(EXACT)
def any_all(x):
    return jnp.any(x)


@register(aten.any.dim, aten.any.dims)
@accumulates(EXACT)
def any_dim(x, dim=None, keepdim=False):
    return jnp.any(x, axis=_axes(x, dim), keepdims=keepdim)


@register(aten.all.default)
@accumulates(EXACT)
def all_all(x):
    return jnp.all(x)


@register(aten.all.dim, aten.all.dims)
@accumulates(EXACT)
def all_dim(x, dim=None, keepdim=False):
    return jnp.all(x, axis=_axes(x, dim), keepdims=keepdim)


@register(aten.cumsum.default)
@accumulates(FLOAT32)
@_on_vector_if_scalar
def cumsum(x, dim, dtype=None):
    return jnp.cumsum(_acc(x, dtype), axis=dim)


@register(aten.cumprod.default)
@accumulates(FLOAT32)
@_on_vector_if_scalar
def cumprod(x, dim, dtype=None):
    """Also what autograd's backward of prod() computes with."""
    return jnp.cumprod(_acc(x, dtype), axis=dim)


def _scan(fn, operands, dim):
    """lax.associative_scan of `fn` along `dim`; empty dims need no scan."""
    axis = dim % operands[0].ndim
    if operands[0].shape[axis] == 0:
        return operands
    return jax.lax.associative_scan(fn, operands, axis=axis)


@register(aten.logcumsumexp.default)
@accumulates(FLOAT32)
@_on_vector_if_scalar
def logcumsumexp(x, dim):
    """log(cumsum(exp(x))), scanned as pairs (m, s) meaning m + log(s): m is a running max
    (an input value, exact) and s in [1, n] a sum of exp(x - m), so the result carries no
    accumulated rounding (torch accumulates in double). -inf stays -inf, +inf wins, NaN
    propagates."""
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.float32)

    def combine(a, b):
        (m1, s1), (m2, s2) = a, b
        m = jnp.maximum(m1, m2)
        w1 = jnp.where(m1 == m, 1, jnp.exp(m1 - m))
        w2 = jnp.where(m2 == m, 1, jnp.exp(m2 - m))
        return m, s1 * w1 + s2 * w2

    m, s = _scan(combine, (x, jnp.ones_like(x)), dim)
    return m + jnp.log(s)


def _cum_extreme(x, dim, later_wins):
    """Running extreme value and its index along `dim`, as torch: a later element replaces
    the current one when later_wins(new, current) (>= for cummax, <= for cummin, so ties
    take the later index), or when it is NaN; after a NaN only a NaN replaces it (the index
    is the last NaN's)."""
    axis = dim % x.ndim
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    idx = jnp.broadcast_to(jnp.arange(x.shape[axis], dtype=jnp.int32).reshape(shape), x.shape)
    is_float = jnp.issubdtype(x.dtype, jnp.inexact)

    def combine(a, b):
        (va, ia), (vb, ib) = a, b
        if is_float:
            take_b = jnp.isnan(vb) | (~jnp.isnan(va) & later_wins(vb, va))
        else:
            take_b = later_wins(vb, va)
        return jnp.where(take_b, vb, va), jnp.where(take_b, ib, ia)

    return _scan(combine, (x, idx), axis)


@register(aten.cummax.default)
@accumulates(EXACT)
@_on_vector_if_scalar
def cummax(x, dim):
    return _cum_extreme(x, dim, jnp.greater_equal)


@register(aten.cummin.default)
@accumulates(EXACT)
@_on_vector_if_scalar
def cummin(x, dim):
    return _cum_extreme(x, dim, jnp.less_equal)
