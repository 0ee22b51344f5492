"""Gather, scatter and advanced indexing with torch's semantics."""
from __future__ import annotations

import jax.numpy as jnp
import torch

from ..errors import UnsupportedOpError
from .registry import register

aten = torch.ops.aten


def _index_grid(index, dim):
    """Full coordinates of every element of `index`, with `index` itself along `dim`."""
    grid = list(jnp.indices(index.shape, sparse=True))
    grid[dim] = index
    return tuple(grid)


@register(aten.gather.default)
def gather(x, dim, index, sparse_grad=False):
    if x.ndim == 0:
        return x.reshape(index.shape)
    dim = dim % x.ndim
    return x[_index_grid(index, dim)]


def _src_like(src, index, dtype):
    """The part of `src` that `index` addresses (src may be larger), in the destination's
    dtype, as torch converts it (jnp scatters refuse unsafe casts such as int -> bool)."""
    src = jnp.asarray(src)
    if src.ndim:
        src = src[tuple(slice(0, n) for n in index.shape)]
    return src.astype(dtype)


@register(aten.scatter.src, aten.scatter.value)
def scatter(x, dim, index, src):
    if x.ndim == 0:
        return jnp.broadcast_to(_src_like(src, index, x.dtype), x.shape) if index.size else x
    return x.at[_index_grid(index, dim % x.ndim)].set(_src_like(src, index, x.dtype))


@register(aten.scatter_add.default)
def scatter_add(x, dim, index, src):
    if x.ndim == 0:
        return x + jnp.sum(_src_like(src, index, x.dtype)) if index.size else x
    return x.at[_index_grid(index, dim % x.ndim)].add(_src_like(src, index, x.dtype))


@register(aten.scatter_reduce.two)
def scatter_reduce(x, dim, index, src, reduce, *, include_self=True):
    grid = _index_grid(index, dim % x.ndim)
    src = _src_like(src, index, x.dtype)
    if reduce == "sum":
        base = x if include_self else x.at[grid].set(0)
        return base.at[grid].add(src)
    if reduce == "prod":
        base = x if include_self else x.at[grid].set(1)
        return base.at[grid].multiply(src)
    if reduce in ("amax", "amin"):
        if jnp.issubdtype(x.dtype, jnp.inexact):
            fill = -jnp.inf if reduce == "amax" else jnp.inf
        else:
            fill = jnp.iinfo(x.dtype).min if reduce == "amax" else jnp.iinfo(x.dtype).max
        base = x if include_self else x.at[grid].set(fill)
        return base.at[grid].max(src) if reduce == "amax" else base.at[grid].min(src)
    if reduce == "mean":
        ones = jnp.ones_like(src, dtype=x.dtype)
        count = jnp.ones_like(x) if include_self else jnp.zeros_like(x)
        count = count.at[grid].add(ones)
        base = x if include_self else x.at[grid].set(0)
        total = base.at[grid].add(src)
        out = total / jnp.maximum(count, 1)
        return jnp.floor_divide(total, jnp.maximum(count, 1)) if not jnp.issubdtype(x.dtype, jnp.inexact) else out
    raise NotImplementedError(f"scatter_reduce with reduce={reduce!r}")


def _indices(indices):
    return tuple(slice(None) if i is None else i for i in indices)


@register(aten.index.Tensor)
def index(x, indices):
    return x[_indices(indices)]


@register(aten.index_put.default)
def index_put(x, indices, values, accumulate=False):
    if any(i is not None and i.dtype == jnp.bool_ for i in indices):
        return _index_put_mask(x, indices, values, accumulate)
    idx = _indices(indices)
    return x.at[idx].add(values) if accumulate else x.at[idx].set(values)


def _index_put_mask(x, indices, values, accumulate):
    """`x[..., mask, ...] = values` (or `+=`) with one boolean mask, the form `x[mask] = v`
    takes. jnp cannot index with a traced mask (its number of True elements is not
    static), so this is a select: `values` indexes the selected elements in row-major
    order (the k-th True element takes `values[k]` along the mask's dim), or is
    broadcast to all of them when that dim of `values` has size 1."""
    tensors = [i for i in indices if i is not None]
    if len(tensors) != 1:
        raise UnsupportedOpError(
            "index_put with a boolean mask together with other index tensors needs a data-dependent "
            "shape; use torch.where (or a single mask) instead")
    p = next(n for n, i in enumerate(indices) if i is not None)
    mask = tensors[0]
    k = mask.ndim
    lead, rest = x.shape[:p], x.shape[p + k:]
    rank = len(lead) + 1 + len(rest)  # rank of x[mask]: the mask's dims become one dim of length nnz
    values = jnp.asarray(values, x.dtype)
    values = values.reshape((1,) * (rank - values.ndim) + values.shape)
    if values.shape[p] == 1:
        v = values.reshape(values.shape[:p] + (1,) * k + values.shape[p + 1:])
    else:
        pos = jnp.clip(jnp.cumsum(mask.reshape(-1).astype(jnp.int32)) - 1, 0, values.shape[p] - 1)
        v = jnp.take(values, pos.reshape(mask.shape), axis=p)
    m = mask.reshape((1,) * p + mask.shape + (1,) * len(rest))
    if accumulate:
        return x + jnp.where(m, v, jnp.zeros((), x.dtype))
    return jnp.where(m, v, x)


@register(aten.index_select.default)
def index_select(x, dim, index):
    """A 0-d index selects like a 1-element one (the dim stays, with size 1); a 0-d x
    stays 0-d."""
    if x.ndim == 0:
        return x
    return jnp.take(x, index.reshape(-1), axis=dim % x.ndim)
