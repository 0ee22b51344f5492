"""Shape and data-movement ops. After functionalization every view is a copy
(`view_copy`, `slice_copy`, ...) and every write through a view a `*_scatter`, so all
of them are pure array functions here."""
from __future__ import annotations

import jax.numpy as jnp
import torch

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
