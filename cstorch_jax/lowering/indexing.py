"""Gather, scatter and advanced indexing with torch's semantics."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
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
    if index.size == 0:  # torch accepts an empty index of any rank
        return jnp.zeros(index.shape, x.dtype)
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
    if index.size == 0:
        return x
    if x.ndim == 0:
        return jnp.broadcast_to(_src_like(src, index, x.dtype), x.shape)
    return x.at[_index_grid(index, dim % x.ndim)].set(_src_like(src, index, x.dtype))


@register(aten.scatter_add.default)
def scatter_add(x, dim, index, src):
    if index.size == 0:
        return x
    if x.ndim == 0:
        return x + jnp.sum(_src_like(src, index, x.dtype))
    return x.at[_index_grid(index, dim % x.ndim)].add(_src_like(src, index, x.dtype))


def _scalar_as_vector(fn):
    """torch scatters into a 0-d tensor as into its 1-element vector (dim 0 or -1); an
    empty index (of any rank) changes nothing."""

    def wrapped(x, dim, index, src, *args, **kwargs):
        if index.size == 0:
            return x
        if x.ndim:
            return fn(x, dim, index, src, *args, **kwargs)
        src = jnp.asarray(src)
        out = fn(x.reshape(1), 0, index.reshape(-1), src.reshape(-1) if src.ndim else src, *args, **kwargs)
        return out.reshape(())

    return wrapped


def _reduce_identity(dtype, reduce):
    """The value that leaves `reduce` unchanged (what include_self=False starts from)."""
    if reduce in ("sum", "mean"):
        return jnp.zeros((), dtype)
    if reduce == "prod":
        return jnp.ones((), dtype)
    if dtype == jnp.bool_:
        return jnp.array(reduce == "amin")
    if jnp.issubdtype(dtype, jnp.inexact):
        return jnp.array(-jnp.inf if reduce == "amax" else jnp.inf, dtype)
    info = jnp.iinfo(dtype)
    return jnp.array(info.min if reduce == "amax" else info.max, dtype)


def _reduce_into(x, where, src, reduce, include_self, op):
    """`x` with `src` reduced into the positions `where` (a jnp index) with `reduce`
    (sum, prod, mean, amax, amin); include_self=False reduces the addressed positions
    without their old value. Integer means round down, as torch."""
    if not include_self:
        x = x.at[where].set(_reduce_identity(x.dtype, reduce))
    if reduce == "sum":
        return x.at[where].add(src)
    if reduce == "prod":
        return x.at[where].multiply(src)
    if reduce == "amax":
        return x.at[where].max(src)
    if reduce == "amin":
        return x.at[where].min(src)
    if reduce == "mean":
        count = jnp.ones(x.shape, jnp.int32)
        if not include_self:
            count = count.at[where].set(0)
        count = count.at[where].add(jnp.ones(src.shape, jnp.int32))
        total = x.at[where].add(src)
        count = jnp.maximum(count, 1).astype(x.dtype)
        if jnp.issubdtype(x.dtype, jnp.inexact):
            return total / count
        return jnp.floor_divide(total, count)
    raise UnsupportedOpError(f"{op} with reduce={reduce!r}: cstorch supports sum, prod, mean, amax and amin")


@register(aten.scatter_reduce.two)
@_scalar_as_vector
def scatter_reduce(x, dim, index, src, reduce, *, include_self=True):
    grid = _index_grid(index, dim % x.ndim)
    return _reduce_into(x, grid, _src_like(src, index, x.dtype), reduce, include_self, "scatter_reduce")


_LEGACY_SCATTER_REDUCE = {"add": "sum", "multiply": "prod"}


@register(aten.scatter.reduce, aten.scatter.value_reduce)
@_scalar_as_vector
def scatter_legacy_reduce(x, dim, index, src, *, reduce):
    """scatter(..., reduce='add' | 'multiply'): scatter_reduce including self."""
    if reduce not in _LEGACY_SCATTER_REDUCE:
        raise UnsupportedOpError(f"scatter with reduce={reduce!r}: torch accepts 'add' or 'multiply'")
    src = jnp.broadcast_to(jnp.asarray(src), index.shape) if jnp.ndim(src) == 0 else src
    grid = _index_grid(index, dim % x.ndim)
    return _reduce_into(x, grid, _src_like(src, index, x.dtype), _LEGACY_SCATTER_REDUCE[reduce], True, "scatter")


@register(aten.index_reduce.default)
def index_reduce(x, dim, index, source, reduce, *, include_self=True):
    """Slice `index[i]` of `x` along `dim` reduced with slice `i` of `source`
    (prod, mean, amax, amin)."""
    if x.ndim == 0:
        return index_reduce(x.reshape(1), 0, index.reshape(-1), source.reshape(-1), reduce,
                            include_self=include_self).reshape(())
    dim = dim % x.ndim
    where = (slice(None),) * dim + (index.reshape(-1),)
    src = jnp.asarray(source).astype(x.dtype)
    if src.ndim == 0:
        src = src.reshape(1)
    return _reduce_into(x, where, src, reduce, include_self, "index_reduce")


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


def _flat_index(index, n):
    """Flat positions of `index` into n elements, negative ones counting from the end."""
    index = index.reshape(-1).astype(jnp.int32)
    return jnp.where(index < 0, index + n, index)


@register(aten.take.default)
def take(x, index):
    """`x.flatten()[index]`, shaped like `index`."""
    if index.size == 0:
        return jnp.zeros(index.shape, x.dtype)
    flat = x.reshape(-1)
    return flat[_flat_index(index, flat.shape[0])].reshape(index.shape)


@register(aten.put.default)
def put(x, index, source, accumulate=False):
    """`x` with `x.flatten()[index] = source` (`+=` when accumulate). With repeated
    indices and accumulate=False, which write wins is unspecified (as in torch)."""
    if index.size == 0:
        return x
    flat = x.reshape(-1)
    pos = _flat_index(index, flat.shape[0])
    vals = jnp.asarray(source).reshape(-1).astype(x.dtype)
    out = flat.at[pos].add(vals) if accumulate else flat.at[pos].set(vals)
    return out.reshape(x.shape)


def _mask_positions(mask):
    """For a boolean array: the row-major rank of every True element among the True
    elements (its position in `x[mask]`)."""
    return jnp.cumsum(mask.reshape(-1).astype(jnp.int32)) - 1


@register(aten.masked_scatter.default)
def masked_scatter(x, mask, source):
    """`x` (broadcast with `mask`) whose k-th True position (row-major) holds
    `source.flatten()[k]`."""
    shape = jnp.broadcast_shapes(x.shape, mask.shape)
    x, mask = jnp.broadcast_to(x, shape), jnp.broadcast_to(mask, shape)
    src = jnp.asarray(source).reshape(-1).astype(x.dtype)
    if src.shape[0] == 0 or x.size == 0:
        return x
    pos = jnp.clip(_mask_positions(mask), 0, src.shape[0] - 1)
    return jnp.where(mask, src[pos].reshape(shape), x)


@register(aten.masked_scatter_backward.default)
def masked_scatter_backward(grad, mask, sizes):
    """Gradient of masked_scatter for `source` (shape `sizes`): `grad[mask]` in order,
    then zeros."""
    shape = jnp.broadcast_shapes(grad.shape, mask.shape)
    grad, mask = jnp.broadcast_to(grad, shape), jnp.broadcast_to(mask, shape)
    n = int(np.prod(sizes))
    pos = jnp.where(mask.reshape(-1), _mask_positions(mask), n)
    out = jnp.zeros((n,), grad.dtype).at[pos].set(grad.reshape(-1), mode="drop")
    return out.reshape(tuple(sizes))


# ---- segment reductions -------------------------------------------------------------------


_SEGMENT_REDUCES = ("sum", "mean", "max", "min", "prod")


def _count_marks_upto(marks, n):
    """For rows of non-decreasing positions `marks` (..., k): how many marks are <= j,
    for every j in [0, n), as a scatter of the marks and a running sum."""
    lead = marks.shape[:-1]
    flat = marks.reshape(-1, marks.shape[-1]).astype(jnp.int32)
    flat = jnp.where((flat < 0) | (flat > n), n + 1, flat)  # beyond every position: dropped
    rows = jnp.arange(flat.shape[0])[:, None]
    hist = jnp.zeros((flat.shape[0], n + 1), jnp.int32).at[rows, flat].add(1, mode="drop")
    return jnp.cumsum(hist, axis=-1)[:, :n].reshape(lead + (n,))


def _segment_layout(data, lengths, offsets, axis, op):
    """Returns (data as (outer, N, inner), lengths as (outer, S), segment id of every
    position as (outer, N)). torch's segments run along the last dim of lengths/offsets,
    whose leading dims match data's dims before `axis`."""
    if (lengths is None) == (offsets is None):
        raise UnsupportedOpError(f"{op}: pass exactly one of lengths and offsets")
    if offsets is not None:
        lengths = offsets[..., 1:] - offsets[..., :-1]
    axis = axis % data.ndim
    if lengths.ndim != axis + 1:
        raise UnsupportedOpError(f"{op}: lengths/offsets must have {axis + 1} dims for axis={axis}")
    outer = int(np.prod(data.shape[:axis]))
    inner = int(np.prod(data.shape[axis + 1:]))
    n, s = data.shape[axis], lengths.shape[-1]
    data3 = data.reshape(outer, n, inner)
    lengths2 = lengths.reshape(outer, s).astype(jnp.int32)
    # segment of position j: how many segments end at or before j
    seg = _count_marks_upto(jnp.cumsum(lengths2, axis=-1), n)
    return data3, lengths2, seg, axis


def _segment_out_shape(data, axis, s):
    return data.shape[:axis] + (s,) + data.shape[axis + 1:]


@register(aten.segment_reduce.default)
def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    """Reduce consecutive runs of `lengths[..., i]` elements along `axis`. Each segment
    starts from `initial` (default: the reduction's identity; max/min from -inf/+inf);
    NaN propagates through max and min. An empty segment's mean is NaN without
    `initial`, else `initial`; a non-empty mean is (initial + sum) / length."""
    if reduce not in _SEGMENT_REDUCES:
        raise UnsupportedOpError(f"segment_reduce: reduce={reduce!r} is not one of {_SEGMENT_REDUCES}")
    if indices is not None:
        raise UnsupportedOpError("segment_reduce with indices: torch supports only lengths or offsets")
    data3, lengths2, seg, axis = _segment_layout(data, lengths, offsets, axis, "segment_reduce")
    outer, _, inner = data3.shape
    s = lengths2.shape[-1]
    dt = data.dtype
    if initial is not None:
        init = jnp.asarray(initial, dt)
    elif reduce == "max":
        init = jnp.array(-jnp.inf, dt)
    elif reduce == "min":
        init = jnp.array(jnp.inf, dt)
    elif reduce == "prod":
        init = jnp.ones((), dt)
    else:
        init = jnp.zeros((), dt)
    out = jnp.full((outer, s, inner), init, dt)
    where = (jnp.arange(outer)[:, None], seg)
    if reduce in ("sum", "mean"):
        out = out.at[where].add(data3, mode="drop")
    elif reduce == "prod":
        out = out.at[where].multiply(data3, mode="drop")
    elif reduce == "max":
        out = out.at[where].max(data3, mode="drop")
    else:
        out = out.at[where].min(data3, mode="drop")
    if reduce == "mean":
        length = lengths2[:, :, None]
        out = jnp.where(length > 0, out / jnp.maximum(length, 1).astype(dt), out)
        if initial is None:
            out = jnp.where(length == 0, jnp.array(jnp.nan, dt), out)
    return out.reshape(_segment_out_shape(data, axis, s))


@register(aten._segment_reduce_backward.default)
def segment_reduce_backward(grad, output, data, reduce, *, lengths=None, offsets=None, axis=0, initial=None):
    """Gradient of segment_reduce for `data`, as torch's kernel: sum and mean spread the
    segment's gradient (divided by the length for mean); max/min give it to the elements
    equal to the result (or NaN), shared equally among ties; prod gives
    grad * output / x, or grad * (product of the other elements) where x is 0 or NaN."""
    data3, lengths2, seg, axis = _segment_layout(data, lengths, offsets, axis, "_segment_reduce_backward")
    outer, n, inner = data3.shape
    s = lengths2.shape[-1]
    dt = data.dtype
    if s == 0 or data3.size == 0:
        return jnp.zeros(data.shape, dt)
    g = grad.reshape(outer, s, inner).astype(dt)
    o = output.reshape(outer, s, inner).astype(dt)
    rows = jnp.arange(outer)[:, None]
    valid = (seg < s)[:, :, None]
    segc = jnp.minimum(seg, s - 1)
    g_at = g[rows, segc]  # (outer, n, inner): each element's segment gradient
    o_at = o[rows, segc]
    length_at = lengths2[rows, segc][:, :, None]
    if reduce == "sum":
        out = g_at
    elif reduce == "mean":
        out = g_at / jnp.maximum(length_at, 1).astype(dt)
    elif reduce in ("max", "min"):
        hit = jnp.isnan(data3) | (data3 == o_at)
        count = jnp.zeros((outer, s, inner), jnp.int32).at[rows, seg].add(hit.astype(jnp.int32), mode="drop")
        count_at = count[rows, segc]
        out = jnp.where(hit, g_at / jnp.maximum(count_at, 1).astype(dt), jnp.zeros((), dt))
    elif reduce == "prod":
        special = jnp.isnan(data3) | (data3 == 0)
        init = jnp.ones((), dt) if initial is None else jnp.asarray(initial, dt)
        plain = jnp.where(special, jnp.ones((), dt), data3)
        prod_plain = jnp.full((outer, s, inner), init, dt).at[rows, seg].multiply(plain, mode="drop")
        n_special = jnp.zeros((outer, s, inner), jnp.int32).at[rows, seg].add(special.astype(jnp.int32), mode="drop")
        n_nan = jnp.zeros((outer, s, inner), jnp.int32).at[rows, seg].add(
            jnp.isnan(data3).astype(jnp.int32), mode="drop")
        others_special = n_special[rows, segc] - special.astype(jnp.int32)
        others_nan = n_nan[rows, segc] - jnp.isnan(data3).astype(jnp.int32)
        factor = jnp.where(others_special == 0, jnp.ones((), dt),
                           jnp.where(others_nan > 0, jnp.array(jnp.nan, dt), jnp.zeros((), dt)))
        exclusive = prod_plain[rows, segc] * factor
        out = jnp.where(special, g_at * exclusive, g_at * o_at / jnp.where(special, jnp.ones((), dt), data3))
    else:
        raise UnsupportedOpError(f"_segment_reduce_backward: reduce={reduce!r} is not one of {_SEGMENT_REDUCES}")
    out = jnp.where(valid, out, jnp.zeros((), dt))
    return out.reshape(data.shape)


# ---- nonzero ------------------------------------------------------------------------------


@register(aten.nonzero.default)
def nonzero(x):
    """Only the static case reaches a lowering: an empty tensor has no non-zeros (a
    (0, ndim) result); any other nonzero has a data-dependent shape."""
    if x.size == 0:
        return jnp.zeros((0, x.ndim), jnp.int32)
    raise UnsupportedOpError(
        "nonzero has a data-dependent output shape; use torch.nonzero_static(x, size=...) or a mask "
        "(torch.where) instead")


@register(aten.nonzero_static.default)
def nonzero_static(x, *, size, fill_value=-1):
    """The coordinates of the first `size` non-zeros of `x` in row-major order, one row
    each, padded with rows of `fill_value`."""
    if x.ndim == 0:
        return jnp.zeros((size, 0), jnp.int32)
    if x.size == 0:
        return jnp.full((size, x.ndim), fill_value, jnp.int32)
    coords = jnp.nonzero(x, size=size, fill_value=fill_value)
    return jnp.stack(coords, axis=1).astype(jnp.int32)
