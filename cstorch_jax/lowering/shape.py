"""Shape and data-movement ops. After functionalization every view is a copy
(`view_copy`, `slice_copy`, ...) and every write through a view a `*_scatter`, so all
of them are pure array functions here."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch

from ..errors import UnsupportedOpError
from .registry import register

aten = torch.ops.aten


def _identity(x, *args, **kwargs):
    return x


register(
    aten.clone.default,
    aten.alias.default,
    aten.alias_copy.default,
    aten.detach.default,
    aten.detach_copy.default,
    aten.lift_fresh_copy.default,
)(_identity)


@register(aten.view.default, aten.view_copy.default, aten._unsafe_view.default, aten.reshape.default)
def view(x, size):
    return jnp.reshape(x, tuple(size))


@register(aten.permute.default, aten.permute_copy.default)
def permute(x, dims):
    return jnp.transpose(x, tuple(d % x.ndim for d in dims)) if x.ndim else x


@register(aten.t.default, aten.t_copy.default)
def t(x):
    return x.T


@register(aten.transpose.int, aten.transpose_copy.int)
def transpose(x, dim0, dim1):
    return jnp.swapaxes(x, dim0, dim1) if x.ndim else x


@register(aten.expand.default, aten.expand_copy.default)
def expand(x, size, implicit=False):
    size = list(size)
    lead = len(size) - x.ndim
    shape = [x.shape[i - lead] if s == -1 else s for i, s in enumerate(size)]
    return jnp.broadcast_to(x, tuple(shape))


@register(aten.squeeze.dims, aten.squeeze_copy.dims)
def squeeze_dims(x, dims):
    if x.ndim == 0:
        return x
    axes = tuple(d % x.ndim for d in dims if x.shape[d % x.ndim] == 1)
    return jnp.squeeze(x, axis=axes) if axes else x


@register(aten.squeeze.dim, aten.squeeze_copy.dim)
def squeeze_dim(x, dim):
    return squeeze_dims(x, [dim])


@register(aten.squeeze.default, aten.squeeze_copy.default)
def squeeze(x):
    return jnp.squeeze(x)


@register(aten.unsqueeze.default, aten.unsqueeze_copy.default)
def unsqueeze(x, dim):
    return jnp.expand_dims(x, dim % (x.ndim + 1))


@register(aten.cat.default)
def cat(tensors, dim=0):
    parts = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]  # torch skips legacy empty 1-d inputs
    if not parts:
        return tensors[0]
    return jnp.concatenate(parts, axis=dim % parts[0].ndim)


@register(aten.split.Tensor, aten.split_copy.Tensor)
def split(x, split_size, dim=0):
    n = x.shape[dim]
    sizes = [min(split_size, n - i) for i in range(0, n, split_size)] or [0]
    return split_with_sizes(x, sizes, dim)


@register(aten.split_with_sizes.default, aten.split_with_sizes_copy.default)
def split_with_sizes(x, split_sizes, dim=0):
    out, start = [], 0
    for s in split_sizes:
        out.append(_slice(x, dim, start, start + s, 1))
        start += s
    return out


def _slice(x, dim, start, end, step):
    dim = dim % x.ndim
    start, end, step = slice(start, end, step).indices(x.shape[dim])
    idx = [slice(None)] * x.ndim
    idx[dim] = slice(start, end, step)
    return x[tuple(idx)]


@register(aten.slice.Tensor, aten.slice_copy.Tensor)
def slice_(x, dim=0, start=None, end=None, step=1):
    return _slice(x, dim, start, end, step)


@register(aten.select.int, aten.select_copy.int)
def select(x, dim, index):
    return jnp.take(x, index, axis=dim % x.ndim)


@register(aten.unbind.int, aten.unbind_copy.int)
def unbind(x, dim=0):
    dim = dim % x.ndim
    return [select(x, dim, i) for i in range(x.shape[dim])]


@register(aten.slice_scatter.default)
def slice_scatter(x, src, dim=0, start=None, end=None, step=1):
    dim = dim % x.ndim
    start, end, step = slice(start, end, step).indices(x.shape[dim])
    idx = [slice(None)] * x.ndim
    idx[dim] = slice(start, end, step)
    return x.at[tuple(idx)].set(src)


@register(aten.select_scatter.default)
def select_scatter(x, src, dim, index):
    idx = [slice(None)] * x.ndim
    idx[dim % x.ndim] = index
    return x.at[tuple(idx)].set(src)


@register(aten.flip.default)
def flip(x, dims):
    return jnp.flip(x, axis=tuple(d % x.ndim for d in dims)) if x.ndim else x  # torch allows dim 0 of a 0-d tensor


@register(aten.roll.default)
def roll(x, shifts, dims=()):
    if not dims:
        return jnp.roll(x.reshape(-1), tuple(shifts)).reshape(x.shape)
    return jnp.roll(x, tuple(shifts), axis=tuple(dims))


@register(aten.repeat.default)
def repeat(x, repeats):
    lead = len(repeats) - x.ndim
    x = x.reshape((1,) * lead + x.shape)
    return jnp.tile(x, tuple(repeats))


@register(aten.constant_pad_nd.default)
def constant_pad_nd(x, pad, value=0):
    # pad lists (before, after) pairs starting from the LAST dimension; negative pads crop.
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    crop = [slice(-lo if lo < 0 else None, hi if hi < 0 else None) for lo, hi in widths]
    x = x[tuple(crop)]
    widths = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    return jnp.pad(x, widths, constant_values=jnp.asarray(value, x.dtype))


@register(aten.copy.default)
def copy(x, src, non_blocking=False):
    return jnp.broadcast_to(src, x.shape).astype(x.dtype)


@register(aten.narrow_copy.default)
def narrow_copy(x, dim, start, length):
    """`x` restricted to `[start, start + length)` along `dim` (a negative start counts
    from the end)."""
    dim = dim % x.ndim
    start = start % x.shape[dim] if start < 0 else start
    return _slice(x, dim, start, start + length, 1)


def _diagonal_coords(shape, offset, dim1, dim2):
    """Static (rows, cols) coordinates of the `offset` diagonal of the (dim1, dim2) plane."""
    n = max(0, min(shape[dim1] + min(offset, 0), shape[dim2] - max(offset, 0)))
    k = np.arange(n)
    return k - min(offset, 0), k + max(offset, 0)


@register(aten.diagonal.default, aten.diagonal_copy.default)
def diagonal(x, offset=0, dim1=0, dim2=1):
    """The `offset` diagonal of the (dim1, dim2) planes, as a new last dim (empty when
    the offset is outside the plane)."""
    dim1, dim2 = dim1 % x.ndim, dim2 % x.ndim
    rows, cols = _diagonal_coords(x.shape, offset, dim1, dim2)
    return jnp.moveaxis(x, (dim1, dim2), (-2, -1))[..., rows, cols]


@register(aten.diagonal_scatter.default)
def diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    """`x` with its `offset` diagonal of the (dim1, dim2) planes replaced by `src`."""
    dim1, dim2 = dim1 % x.ndim, dim2 % x.ndim
    rows, cols = _diagonal_coords(x.shape, offset, dim1, dim2)
    moved = jnp.moveaxis(x, (dim1, dim2), (-2, -1))
    moved = moved.at[..., rows, cols].set(src.astype(x.dtype))
    return jnp.moveaxis(moved, (-2, -1), (dim1, dim2))


def _strided_positions(x, size, stride, storage_offset, op):
    """Row-major positions in `x` of the elements of `as_strided(x, size, stride,
    storage_offset)`. A functionalized graph hands as_strided a freshly computed
    (contiguous) tensor, so its storage is `x` itself; a view reaching outside it
    cannot be expressed and is refused."""
    offset = 0 if storage_offset is None else storage_offset
    pos = np.full(tuple(size), offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        pos = pos + (np.arange(n) * s).reshape(shape)
    if pos.size and (pos.min() < 0 or pos.max() >= x.size):
        raise UnsupportedOpError(
            f"{op} with size={list(size)}, stride={list(stride)}, storage_offset={storage_offset} reads "
            f"outside the {x.size} elements of its input; cstorch has no storage beyond a tensor's own "
            f"elements. Use view/reshape/slicing ops instead of as_strided.")
    return pos


@register(aten.as_strided.default, aten.as_strided_copy.default)
def as_strided(x, size, stride, storage_offset=None):
    """Element `i` of the result is `x.flatten()[storage_offset + sum(i_d * stride_d)]`."""
    pos = _strided_positions(x, size, stride, storage_offset, "as_strided")
    return x.reshape(-1)[pos] if pos.size else jnp.zeros(pos.shape, x.dtype)


@register(aten.as_strided_scatter.default)
def as_strided_scatter(x, src, size, stride, storage_offset=None):
    """`x` with the elements of its as_strided view overwritten by `src` (where view
    elements overlap, the last one in row-major order wins, as torch's copy)."""
    pos = _strided_positions(x, size, stride, storage_offset, "as_strided_scatter").reshape(-1)
    if not pos.size:
        return x
    vals = jnp.broadcast_to(src, tuple(size)).reshape(-1).astype(x.dtype)
    _, last = np.unique(pos[::-1], return_index=True)  # keep only the last write of each position
    keep = np.sort(pos.size - 1 - last)
    return x.reshape(-1).at[pos[keep]].set(vals[keep]).reshape(x.shape)


@register(aten.unfold.default, aten.unfold_copy.default)
def unfold(x, dimension, size, step):
    """All windows of `size` elements, `step` apart, along `dimension`: that dim becomes
    the window count and the window is a new last dim."""
    if x.ndim == 0:
        return x.reshape(1)[:size]
    dim = dimension % x.ndim
    count = (x.shape[dim] - size) // step + 1
    idx = np.arange(count)[:, None] * step + np.arange(size)[None, :]
    out = jnp.take(x, idx.reshape(-1), axis=dim) if idx.size else jnp.zeros(
        x.shape[:dim] + (count * size,) + x.shape[dim + 1:], x.dtype)
    out = out.reshape(x.shape[:dim] + (count, size) + x.shape[dim + 1:])
    return jnp.moveaxis(out, dim + 1, -1)
