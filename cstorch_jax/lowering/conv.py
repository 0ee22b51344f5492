"""Convolution, plain and transposed (and its backward as the exact vjp of the forward), max and
average pooling."""
from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import torch

from ..errors import UnsupportedOpError
from .linalg import HIGHEST
from .registry import register

aten = torch.ops.aten


def _dimension_numbers(x, w):
    nd = w.ndim - 2
    spatial = "DHW"[-nd:] if 1 <= nd <= 3 else None
    if spatial is None:
        raise UnsupportedOpError(f"aten.convolution with {nd} spatial dimensions")
    return jax.lax.conv_dimension_numbers(x.shape, w.shape, ("NC" + spatial, "OI" + spatial, "NC" + spatial))


def _conv(x, w, stride, padding, dilation, groups):
    return jax.lax.conv_general_dilated(
        x, w, window_strides=tuple(stride), padding=[(p, p) for p in padding],
        rhs_dilation=tuple(dilation), dimension_numbers=_dimension_numbers(x, w), feature_group_count=groups,
        precision=HIGHEST,
    )


def _conv_transpose(x, w, stride, padding, dilation, output_padding, groups):
    """torch's transposed convolution (the input-gradient of a convolution), weight laid
    out [C_in, C_out / groups, *kernel]. Computed as a convolution of the input dilated
    by `stride` (zeros between elements) with the spatially flipped kernel, whose
    in/out channels are swapped within each group, padded by dilation * (k - 1) - padding
    on each side plus output_padding at the end. Output length per dimension:
    (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1."""
    nd = w.ndim - 2
    k = w.shape[2:]
    c_in, c_out_g = w.shape[:2]
    wt = w.reshape((groups, c_in // groups, c_out_g) + k)
    wt = jnp.swapaxes(wt, 1, 2).reshape((groups * c_out_g, c_in // groups) + k)
    wt = jnp.flip(wt, axis=tuple(range(2, 2 + nd)))
    pads = [(d * (kk - 1) - p, d * (kk - 1) - p + op) for kk, p, d, op in zip(k, padding, dilation, output_padding)]
    return jax.lax.conv_general_dilated(
        x, wt, window_strides=(1,) * nd, padding=pads, lhs_dilation=tuple(stride), rhs_dilation=tuple(dilation),
        dimension_numbers=_dimension_numbers(x, wt), feature_group_count=groups, precision=HIGHEST,
    )


def _expand(v, nd):
    v = [v] if isinstance(v, int) else list(v)
    return v * nd if len(v) == 1 else v


def _conv_fn(nd, stride, padding, dilation, transposed, output_padding, groups):
    """The forward of aten.convolution on batched input, without bias, as f(x, w)."""
    stride, padding, dilation = _expand(stride, nd), _expand(padding, nd), _expand(dilation, nd)
    if transposed:
        output_padding = _expand(output_padding, nd)
        return lambda x, w: _conv_transpose(x, w, stride, padding, dilation, output_padding, groups)
    return lambda x, w: _conv(x, w, stride, padding, dilation, groups)


@register(aten.convolution.default)
def convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    nd = w.ndim - 2
    unbatched = x.ndim == nd + 1
    if unbatched:
        x = x[None]
    y = _conv_fn(nd, stride, padding, dilation, transposed, output_padding, groups)(x, w)
    if bias is not None:
        y = y + bias.reshape((1, -1) + (1,) * nd)
    return y[0] if unbatched else y


@register(aten.convolution_backward.default)
def convolution_backward(grad_out, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
                         groups, output_mask):
    """(grad_input, grad_weight, grad_bias): the exact vjp of the forward (plain or transposed)."""
    nd = w.ndim - 2
    unbatched = x.ndim == nd + 1
    if unbatched:
        x, grad_out = x[None], grad_out[None]
    fwd = _conv_fn(nd, stride, padding, dilation, transposed, output_padding, groups)
    _, vjp = jax.vjp(fwd, x, w)
    gx, gw = vjp(grad_out)
    gb = jnp.sum(grad_out, axis=(0,) + tuple(range(2, grad_out.ndim))) if output_mask[2] else None
    if unbatched:
        gx = gx[0]
    return (gx if output_mask[0] else None, gw if output_mask[1] else None, gb)


def _pool_geometry(in_size, k, s, p, d, ceil_mode):
    """Output length of a pooling window, torch's rule (ceil mode may not start in the right padding)."""
    eff = d * (k - 1) + 1
    num = in_size + 2 * p - eff
    out = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (out - 1) * s >= in_size + p:
        out -= 1
    return out


def _pool_windows(x, kernel_size, stride, padding, dilation, ceil_mode, pad_value):
    """Windows of the last 2 dims: (values [K, ..., OH, OW], flat input indices [K, OH, OW] as a
    static numpy array; entries of padding positions are meaningless)."""
    k = _expand(kernel_size, 2)
    s = _expand(stride, 2) if stride else k
    p = _expand(padding, 2)
    d = _expand(dilation, 2)
    H, W = x.shape[-2:]
    OH = _pool_geometry(H, k[0], s[0], p[0], d[0], ceil_mode)
    OW = _pool_geometry(W, k[1], s[1], p[1], d[1], ceil_mode)
    hi_h = max(0, (OH - 1) * s[0] + d[0] * (k[0] - 1) + 1 - H - p[0])
    hi_w = max(0, (OW - 1) * s[1] + d[1] * (k[1] - 1) + 1 - W - p[1])
    xp = jnp.pad(x, [(0, 0)] * (x.ndim - 2) + [(p[0], hi_h), (p[1], hi_w)], constant_values=pad_value)
    vals, idxs = [], []
    rows = np.arange(OH) * s[0] - p[0]
    cols = np.arange(OW) * s[1] - p[1]
    for i, j in itertools.product(range(k[0]), range(k[1])):
        r0, c0 = i * d[0], j * d[1]
        vals.append(xp[..., r0: r0 + s[0] * (OH - 1) + 1: s[0], c0: c0 + s[1] * (OW - 1) + 1: s[1]])
        idxs.append((rows[:, None] + r0) * W + (cols[None, :] + c0))
    return jnp.stack(vals), np.stack(idxs), (k, s, p)


@register(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """torch's CPU loop, exactly: each window starts at (lowest value, index of its first
    in-bounds element) and scans its in-bounds elements in row-major order, taking an
    element when `val > max or isnan(val)`. So the first maximum wins, the LAST NaN wins,
    padding is never selected (an all -inf window points at its first real element)."""
    floating = jnp.issubdtype(x.dtype, jnp.floating)
    low = jnp.array(-jnp.inf if floating else jnp.iinfo(x.dtype).min, x.dtype)
    vals, idxs, (k, s, p) = _pool_windows(x, kernel_size, stride, padding, dilation, ceil_mode, low)
    d = _expand(dilation, 2)
    H, W = x.shape[-2:]
    OH, OW = vals.shape[-2:]
    rows = np.arange(OH)[:, None] * s[0] - p[0]
    cols = np.arange(OW)[None, :] * s[1] - p[1]
    valid = [
        ((rows + i * d[0] >= 0) & (rows + i * d[0] < H)) & ((cols + j * d[1] >= 0) & (cols + j * d[1] < W))
        for i, j in itertools.product(range(k[0]), range(k[1]))
    ]
    first = np.full((OH, OW), -1, np.int64)
    for v, ix in zip(reversed(valid), reversed(idxs)):
        first = np.where(v, ix, first)
    best = jnp.full(x.shape[:-2] + (OH, OW), low)
    best_idx = jnp.broadcast_to(jnp.asarray(first, jnp.int32), best.shape)
    for v, ix, ok in zip(vals, idxs, valid):
        bigger = ((v > best) | jnp.isnan(v)) if floating else v > best
        take = jnp.asarray(ok) & bigger
        best = jnp.where(take, v, best)
        best_idx = jnp.where(take, jnp.asarray(ix, jnp.int32), best_idx)
    return best, best_idx


@register(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(grad_out, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    lead = x.shape[:-2]
    plane = x.shape[-2] * x.shape[-1]
    n = 1
    for s in lead:
        n *= s
    g = grad_out.reshape(n, -1)
    idx = indices.reshape(n, -1)
    rows = jnp.broadcast_to(jnp.arange(n)[:, None], idx.shape)
    gx = jnp.zeros((n, plane), grad_out.dtype).at[rows, idx].add(g)
    return gx.reshape(x.shape)


def _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    vals, idxs, (k, s, p) = _pool_windows(x, kernel_size, stride, padding, 1, ceil_mode, jnp.zeros((), x.dtype))
    total = jnp.sum(vals, axis=0)
    if divisor_override:
        return total / divisor_override
    H, W = x.shape[-2:]
    OH, OW = total.shape[-2:]
    # window extent clipped to input + padding (count_include_pad) or to the input alone
    r = jnp.arange(OH) * s[0] - p[0]
    c = jnp.arange(OW) * s[1] - p[1]
    if count_include_pad:
        h = jnp.minimum(r + k[0], H + p[0]) - r
        w = jnp.minimum(c + k[1], W + p[1]) - c
    else:
        h = jnp.minimum(r + k[0], H) - jnp.maximum(r, 0)
        w = jnp.minimum(c + k[1], W) - jnp.maximum(c, 0)
    return total / (h[:, None] * w[None, :]).astype(total.dtype)


@register(aten.avg_pool2d.default)
def avg_pool2d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    return _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@register(aten.avg_pool2d_backward.default)
def avg_pool2d_backward(grad_out, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    _, vjp = jax.vjp(lambda x_: _avg_pool(x_, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                           divisor_override), x)
    return vjp(grad_out)[0]
