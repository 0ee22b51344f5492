"""Pooling over the trailing 1-3 spatial dims: max (with torch's flat argmax indices),
average, adaptive, fractional; and the backward of replication padding.

Every pooling window is described per spatial axis by static numpy arrays
`pos [O, K]` (input position of tap k of output o) and `valid [O, K]` (the tap lies
in the input, not in padding or past the end of a shorter window). `_windows` turns
x [..., *in] into K = K_1 * ... * K_n taps, each [..., *O], in row-major order: the
order torch's CPU kernels scan a window in. Reductions over the taps are chains of
elementwise ops, which XLA fuses into one loop. Windows of more than `_UNROLL_TAPS`
taps (global pooling of a large map) are instead stacked on a last axis of length K
(`_stacked_windows`) and reduced with vectorized ops, so the graph stays small.
Max pooling selects (exact); averages and every backward (which sums the gradients of
overlapping windows) compute 16-bit inputs in float32 (dtype_policy.py).
"""
from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from ..errors import UnsupportedOpError
from .dtype_policy import EXACT, FLOAT32, accumulates
from .registry import register

aten = torch.ops.aten


def _expand(v, nd):
    v = [v] if isinstance(v, int) else list(v)
    return v * nd if len(v) == 1 else v


# ---- window geometry -------------------------------------------------------------------


def _pool_out_size(in_size, k, s, p, d, ceil_mode):
    """Output length of a sliding window, torch's rule (in ceil mode the last window must
    start inside the input or the left padding)."""
    num = in_size + 2 * p - (d * (k - 1) + 1)
    out = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (out - 1) * s >= in_size + p:
        out -= 1
    return out


def _sliding_axis(in_size, k, s, p, d, ceil_mode):
    """(pos, valid) of a sliding window: tap j of output o reads o * s - p + j * d."""
    out = _pool_out_size(in_size, k, s, p, d, ceil_mode)
    pos = np.arange(out)[:, None] * s - p + np.arange(k)[None, :] * d
    return pos, (pos >= 0) & (pos < in_size)


def _adaptive_axis(in_size, out_size):
    """(pos, valid) of adaptive pooling: output o covers [floor(o * in / out),
    ceil((o + 1) * in / out))."""
    o = np.arange(out_size)
    start = (o * in_size) // out_size
    end = -((-(o + 1) * in_size) // out_size)
    k = int((end - start).max()) if out_size else 1
    pos = start[:, None] + np.arange(k)[None, :]
    return pos, pos < end[:, None]


def _is_strided(pos):
    """(first, stride over o, step over k) if pos[o, j] = first + o * s + j * d, else None."""
    o, k = pos.shape
    if not (o and k):
        return None
    s = int(pos[1, 0] - pos[0, 0]) if o > 1 else 1
    d = int(pos[0, 1] - pos[0, 0]) if k > 1 else 1
    first = int(pos[0, 0])
    regular = np.array_equal(pos, first + np.arange(o)[:, None] * s + np.arange(k)[None, :] * d)
    return (first, s, d) if regular and s > 0 and d > 0 else None


def _take_axis(x, axis, pos):
    """x with `axis` replaced by two axes [O, K]: x[..., pos[o, k], ...] (positions
    outside the axis read an arbitrary element; callers mask them)."""
    o, k = pos.shape
    idx = np.clip(pos, 0, max(x.shape[axis] - 1, 0)).reshape(-1)
    taken = jnp.take(x, jnp.asarray(idx, jnp.int32), axis=axis, mode="clip")
    return taken.reshape(x.shape[:axis] + (o, k) + x.shape[axis + 1:])


def _windows(x, axes, channels_last=False):
    """(taps, valid, flat): per tap of the window grid (row-major over the spatial axes),
    its values [..., *O], its static validity mask [*O] and its static flat input index
    [*O] (row-major over the spatial dims). Regular windows are strided slices of the
    (zero-)padded input; irregular ones are gathered. With `channels_last` the spatial
    axes are followed by one channel axis: taps [N, *O, C], masks and indices [*O, 1]."""
    n = len(axes)
    tail = int(channels_last)
    lead = x.ndim - n - tail
    in_sizes = x.shape[lead:lead + n]
    strides = [math.prod(in_sizes[i + 1:]) for i in range(n)]
    regular = [_is_strided(pos) for pos, _ in axes]
    if all(r is not None for r in regular):
        lo = [max(0, -int(pos.min())) for pos, _ in axes]
        hi = [max(0, int(pos.max()) - (size - 1)) for (pos, _), size in zip(axes, in_sizes)]
        xp = jnp.pad(x, [(0, 0)] * lead + list(zip(lo, hi)) + [(0, 0)] * tail)

        def tap(js):
            start = [first + lo[i] + js[i] * d for i, (first, _, d) in enumerate(regular)]
            limit = [start[i] + (pos.shape[0] - 1) * r[1] + 1 for i, ((pos, _), r) in enumerate(zip(axes, regular))]
            return jax.lax.slice(xp, [0] * lead + start + [0] * tail,
                                 list(x.shape[:lead]) + limit + list(x.shape[lead + n:]),
                                 [1] * lead + [r[1] for r in regular] + [1] * tail)
    else:
        e = x
        for i, (pos, _) in enumerate(axes):
            e = _take_axis(e, lead + 2 * i, pos)  # [..., O_1, K_1, ..., O_i, K_i, in_{i+1}, ...]

        def tap(js):
            return e[(slice(None),) * lead + tuple(part for j in js for part in (slice(None), j))]

    taps, valid, flat = [], [], []
    for js in itertools.product(*(range(pos.shape[1]) for pos, _ in axes)):
        ok = np.ones((), bool)
        ix = np.zeros((), np.int64)
        for i, j in enumerate(js):
            shape = [1] * n
            shape[i] = axes[i][0].shape[0]
            ok = ok & axes[i][1][:, j].reshape(shape)
            ix = ix + axes[i][0][:, j].reshape(shape) * strides[i]
        out_sizes = tuple(pos.shape[0] for pos, _ in axes)
        taps.append(tap(js))
        valid.append(np.broadcast_to(ok, out_sizes).reshape(out_sizes + (1,) * tail))
        flat.append(np.broadcast_to(ix, out_sizes).reshape(out_sizes + (1,) * tail))
    return taps, valid, flat


_UNROLL_TAPS = 64


def _stack_axis(x, axis, pos):
    """Like _take_axis, without a gather where the windows are regular: a reshape for
    back-to-back windows, else K strided slices of the padded axis."""
    o, k = pos.shape
    n = x.shape[axis]
    strided = _is_strided(pos)
    if strided is None:
        return _take_axis(x, axis, pos)
    first, s, d = strided
    if (first, s, d) == (0, k, 1) and o * k == n:
        return x.reshape(x.shape[:axis] + (o, k) + x.shape[axis + 1:])
    lo, hi = max(0, -int(pos.min())), max(0, int(pos.max()) - (n - 1))
    xp = jnp.pad(x, [(0, 0)] * axis + [(lo, hi)] + [(0, 0)] * (x.ndim - axis - 1))
    taps = [jax.lax.slice_in_dim(xp, first + lo + j * d, first + lo + j * d + (o - 1) * s + 1, s, axis)
            for j in range(k)]
    return jnp.stack(taps, axis=axis + 1)


def _stacked_windows(x, axes):
    """(values [..., *O, K], valid [*O, K], flat [*O, K]): _windows' taps stacked on a
    last axis, in the same order."""
    n = len(axes)
    lead = x.ndim - n
    in_sizes = x.shape[lead:]
    for i, (pos, _) in enumerate(axes):
        x = _stack_axis(x, lead + 2 * i, pos)
    perm = list(range(lead)) + [lead + 2 * i for i in range(n)] + [lead + 2 * i + 1 for i in range(n)]
    out_sizes = tuple(pos.shape[0] for pos, _ in axes)
    kernel = tuple(pos.shape[1] for pos, _ in axes)
    vals = jnp.transpose(x, perm).reshape(x.shape[:lead] + out_sizes + (math.prod(kernel),))
    valid = np.ones((), bool)
    flat = np.zeros((), np.int64)
    for i, (pos, ok) in enumerate(axes):
        shape = [1] * (2 * n)  # axis i's O at position i, its K at position n + i
        shape[i], shape[n + i] = pos.shape
        valid = valid & ok.reshape(shape)
        flat = flat + pos.reshape(shape) * math.prod(in_sizes[i + 1:])
    stacked = out_sizes + (math.prod(kernel),)
    return vals, np.broadcast_to(valid, out_sizes + kernel).reshape(stacked), np.broadcast_to(
        flat, out_sizes + kernel).reshape(stacked)


def _unrolled(axes):
    return math.prod(pos.shape[1] for pos, _ in axes) <= _UNROLL_TAPS


# ---- max -------------------------------------------------------------------------------


def _select_max(taps, valid, flat):
    """(max, flat index) per window, torch's CPU scan exactly: a window starts at (lowest
    value, index of its first valid tap) and takes a valid tap when `val > max or
    isnan(val)`. So the first maximum wins, the LAST NaN wins, and padding is never
    selected (an all -inf window points at its first valid tap). `valid` entries may
    be static numpy masks or None (all valid); `flat` entries static or traced."""
    dtype = taps[0].dtype
    floating = jnp.issubdtype(dtype, jnp.floating)
    best = jnp.full(taps[0].shape, -jnp.inf if floating else jnp.iinfo(dtype).min, dtype)
    first = None
    for ok, ix in zip(reversed(valid), reversed(flat)):
        first = ix if first is None else (ix if ok is None else np.where(ok, ix, first))
    idx = jnp.broadcast_to(jnp.asarray(first, jnp.int32), best.shape)
    for v, ok, ix in zip(taps, valid, flat):
        take = (v > best) | jnp.isnan(v) if floating else v > best
        if ok is not None and not ok.all():
            take = take & jnp.asarray(ok)
        best = jnp.where(take, v, best)
        idx = jnp.where(take, jnp.asarray(ix, jnp.int32), idx)
    return best, idx


def _select_max_stacked(vals, valid, flat):
    """_select_max on stacked taps [..., K] (valid: static [..., K] or None; flat: static
    or traced [..., K]), vectorized: the last NaN if the window holds one, else the first
    valid tap equal to the window's maximum."""
    floating = jnp.issubdtype(vals.dtype, jnp.floating)
    low = jnp.array(-jnp.inf if floating else jnp.iinfo(vals.dtype).min, vals.dtype)
    valid = jnp.ones(vals.shape[-1:], bool) if valid is None else jnp.asarray(valid)
    nan = (jnp.isnan(vals) & valid) if floating else jnp.zeros(vals.shape, bool)
    masked = jnp.where(valid & ~nan, vals, low)
    top = jnp.max(masked, axis=-1, keepdims=True)
    k = jnp.argmax((masked == top) & valid, axis=-1)
    last_nan = vals.shape[-1] - 1 - jnp.argmax(nan[..., ::-1], axis=-1)
    k = jnp.where(jnp.any(nan, axis=-1), last_nan, k)[..., None]
    flat = jnp.broadcast_to(jnp.asarray(flat, jnp.int32), vals.shape)
    return jnp.take_along_axis(vals, k, axis=-1)[..., 0], jnp.take_along_axis(flat, k, axis=-1)[..., 0]


def _window_max(x, axes, channels_last=False):
    """(max, flat index) of every window of x's trailing dims (of the dims before the
    last with `channels_last`)."""
    if _unrolled(axes):
        return _select_max(*_windows(x, axes, channels_last))
    if channels_last:
        return tuple(jnp.moveaxis(r, 1, -1) for r in _window_max(jnp.moveaxis(x, -1, 1), axes))
    return _select_max_stacked(*_stacked_windows(x, axes))


def _window_sum(x, axes, channels_last=False):
    """Sum of every window's valid taps (in scan order when unrolled)."""
    if not _unrolled(axes):
        if channels_last:
            return jnp.moveaxis(_window_sum(jnp.moveaxis(x, -1, 1), axes), 1, -1)
        vals, valid, _ = _stacked_windows(x, axes)
        return jnp.sum(jnp.where(jnp.asarray(valid), vals, jnp.zeros((), vals.dtype)), axis=-1)
    total = None
    for v, ok in zip(*_windows(x, axes, channels_last)[:2]):
        if not ok.all():
            v = jnp.where(jnp.asarray(ok), v, jnp.zeros((), v.dtype))
        total = v if total is None else total + v
    return total


def _pool_params(nd, kernel_size, stride, padding, dilation):
    """(kernel, stride, padding, dilation) per spatial dim; an empty stride is the kernel."""
    k = _expand(kernel_size, nd)
    s = _expand(stride, nd) if stride else k
    return k, s, _expand(padding, nd), _expand(dilation, nd)


def _max_pool(x, nd, kernel_size, stride, padding, dilation, ceil_mode, channels_last=False):
    k, s, p, d = _pool_params(nd, kernel_size, stride, padding, dilation)
    in_sizes = x.shape[-nd - 1:-1] if channels_last else x.shape[-nd:]
    axes = [_sliding_axis(in_sizes[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(nd)]
    return _window_max(x, axes, channels_last)


@register(aten.max_pool2d_with_indices.default)
@accumulates(EXACT)
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """(max over each window, flat index of the max within its H * W input plane)."""
    return _max_pool(x, 2, kernel_size, stride, padding, dilation, ceil_mode)


@register(aten.max_pool3d_with_indices.default)
@accumulates(EXACT)
def max_pool3d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """(max over each window, flat index of the max within its D * H * W input volume)."""
    return _max_pool(x, 3, kernel_size, stride, padding, dilation, ceil_mode)


def _repeat_axis(a, axis, k):
    """Every element of `axis` repeated k times in place (a broadcast and a reshape,
    where jnp.repeat emits a gather)."""
    e = jnp.expand_dims(a, axis + 1)
    e = jnp.broadcast_to(e, e.shape[: axis + 1] + (k,) + e.shape[axis + 2:])
    return e.reshape(a.shape[:axis] + (a.shape[axis] * k,) + a.shape[axis + 1:])


def _max_pool_backward(grad_out, x, indices, nd, kernel_size, stride, padding, dilation, channels_last=False):
    """grad_input of a max pool: every grad_out element added at its window's argmax
    (ceil mode shows only in grad_out's size, which sets the window grid).
    Windows that tile their axis (stride == kernel, dilation 1: torch's default stride)
    need no scatter: each input element lies in at most one window, so its gradient is
    its window's grad_out where that window's index points at it, else 0 - one
    elementwise pass over the input grid, exact. Other windows scatter-add.
    With `channels_last` the spatial dims are followed by one channel dim."""
    k, s, p, d = _pool_params(nd, kernel_size, stride, padding, dilation)
    if any(si != ki or (di != 1 and ki != 1) for si, ki, di in zip(s, k, d)):
        if channels_last:
            g, xs, ix = (jnp.moveaxis(a, -1, 1) for a in (grad_out, x, indices))
            return jnp.moveaxis(_scatter_to_indices(g, xs, ix, nd), 1, -1)
        return _scatter_to_indices(grad_out, x, indices, nd)
    tail = int(channels_last)
    lead = x.ndim - nd - tail
    in_sizes = x.shape[lead:lead + nd]
    outs = grad_out.shape[lead:lead + nd]
    # window grid: coordinate u along an axis is input position u - p, window u // k
    g, idx = grad_out, indices.astype(jnp.int32)
    for i, (ki, oi) in enumerate(zip(k, outs)):
        g, idx = _repeat_axis(g, lead + i, ki), _repeat_axis(idx, lead + i, ki)
    pos = [np.arange(ki * oi) - pi for ki, oi, pi in zip(k, outs, p)]
    flat = np.zeros((), np.int64)
    for i, ps in enumerate(pos):
        shape = [1] * nd
        shape[i] = ps.shape[0]
        flat = flat + ps.reshape(shape) * math.prod(in_sizes[i + 1:])
    flat = flat.reshape(flat.shape + (1,) * tail)
    grid = jnp.where(idx == jnp.asarray(flat, jnp.int32), g, jnp.zeros((), g.dtype))
    # grid coordinate u holds input position u - p: pad/crop onto [0, in)
    config = [(0, 0, 0)] * lead + [(-pi, n - (ki * oi - pi), 0) for pi, n, ki, oi in zip(p, in_sizes, k, outs)]
    return jax.lax.pad(grid, jnp.zeros((), g.dtype), config + [(0, 0, 0)] * tail)


def _scatter_to_indices(grad_out, x, indices, nd):
    """grad_input: every grad_out element added at its flat spatial index of x."""
    lead = x.shape[:-nd]
    plane = math.prod(x.shape[-nd:])
    n = math.prod(lead)
    m = math.prod(grad_out.shape[-nd:])
    g = grad_out.reshape(n, m)
    idx = indices.reshape(n, m).astype(jnp.int32)
    rows = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32)[:, None], idx.shape)
    gx = jnp.zeros((n, plane), grad_out.dtype).at[rows, idx].add(g)
    return gx.reshape(x.shape)


@register(aten.max_pool2d_with_indices_backward.default)
@accumulates(FLOAT32)
def max_pool2d_with_indices_backward(grad_out, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    return _max_pool_backward(grad_out, x, indices, 2, kernel_size, stride, padding, dilation)


@register(aten.max_pool3d_with_indices_backward.default)
@accumulates(FLOAT32)
def max_pool3d_with_indices_backward(grad_out, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    return _max_pool_backward(grad_out, x, indices, 3, kernel_size, stride, padding, dilation)


# ---- average ---------------------------------------------------------------------------


def _avg_pool(x, nd, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
              channels_last=False):
    """Window sums divided by divisor_override, else by the window's size clipped to
    input + padding (count_include_pad) or to the input alone."""
    k, s, p, _ = _pool_params(nd, kernel_size, stride, padding, 1)
    in_sizes = x.shape[-nd - 1:-1] if channels_last else x.shape[-nd:]
    axes = [_sliding_axis(in_sizes[i], k[i], s[i], p[i], 1, ceil_mode) for i in range(nd)]
    total = _window_sum(x, axes, channels_last)
    if divisor_override:
        return total / divisor_override
    divisor = np.ones((), np.int64)
    for i, (pos, _) in enumerate(axes):
        start = pos[:, 0]
        end = np.minimum(start + k[i], in_sizes[i] + p[i])
        if count_include_pad:
            size = end - start
        else:
            size = np.minimum(end, in_sizes[i]) - np.maximum(start, 0)
        divisor = divisor[..., None] * size
    return total / jnp.asarray(divisor[..., None] if channels_last else divisor, total.dtype)


@register(aten.avg_pool2d.default)
@accumulates(FLOAT32)
def avg_pool2d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    return _avg_pool(x, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@register(aten.avg_pool3d.default)
@accumulates(FLOAT32)
def avg_pool3d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    return _avg_pool(x, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def _avg_pool_backward(nd, channels_last=False):
    def backward(grad_out, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
        """The exact vjp of the (linear) forward."""
        _, vjp = jax.vjp(lambda x_: _avg_pool(x_, nd, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                              divisor_override, channels_last), x)
        return vjp(grad_out)[0]

    return backward


register(aten.avg_pool2d_backward.default)(accumulates(FLOAT32)(_avg_pool_backward(2)))
register(aten.avg_pool3d_backward.default)(accumulates(FLOAT32)(_avg_pool_backward(3)))


# ---- adaptive ----------------------------------------------------------------------------


def _adaptive_axes(x, output_size, nd):
    out = [x.shape[-nd + i] if o is None else o for i, o in enumerate(_expand(output_size, nd))]
    return [_adaptive_axis(x.shape[-nd + i], out[i]) for i in range(nd)]


def _adaptive_avg_pool(x, output_size, nd):
    """Mean of each adaptive window [floor(o * in / out), ceil((o + 1) * in / out))."""
    axes = _adaptive_axes(x, output_size, nd)
    count = np.ones((), np.int64)
    for _, ok in axes:
        count = count[..., None] * ok.sum(axis=1)
    total = _window_sum(x, axes)
    return total / jnp.asarray(count, total.dtype)


@register(aten._adaptive_avg_pool2d.default)
@accumulates(FLOAT32)
def adaptive_avg_pool2d(x, output_size):
    return _adaptive_avg_pool(x, output_size, 2)


@register(aten._adaptive_avg_pool3d.default)
@accumulates(FLOAT32)
def adaptive_avg_pool3d(x, output_size):
    return _adaptive_avg_pool(x, output_size, 3)


def _adaptive_avg_pool_backward(nd):
    def backward(grad_out, x):
        """The exact vjp of the forward, whose output size is grad_out's."""
        out_size = grad_out.shape[-nd:]
        _, vjp = jax.vjp(lambda x_: _adaptive_avg_pool(x_, out_size, nd), x)
        return vjp(grad_out)[0]

    return backward


register(aten._adaptive_avg_pool2d_backward.default)(accumulates(FLOAT32)(_adaptive_avg_pool_backward(2)))
register(aten._adaptive_avg_pool3d_backward.default)(accumulates(FLOAT32)(_adaptive_avg_pool_backward(3)))


@register(aten.adaptive_max_pool2d.default)
@accumulates(EXACT)
def adaptive_max_pool2d(x, output_size):
    """(max of each adaptive window, its flat index in the H * W plane), torch's scan rule."""
    return _window_max(x, _adaptive_axes(x, output_size, 2))


@register(aten.adaptive_max_pool3d.default)
@accumulates(EXACT)
def adaptive_max_pool3d(x, output_size):
    return _window_max(x, _adaptive_axes(x, output_size, 3))


@register(aten.adaptive_max_pool2d_backward.default)
@accumulates(FLOAT32)
def adaptive_max_pool2d_backward(grad_out, x, indices):
    return _scatter_to_indices(grad_out, x, indices, 2)


@register(aten.adaptive_max_pool3d_backward.default)
@accumulates(FLOAT32)
def adaptive_max_pool3d_backward(grad_out, x, indices):
    return _scatter_to_indices(grad_out, x, indices, 3)


# ---- fractional --------------------------------------------------------------------------


def _fractional_starts(u, in_size, out_size, k):
    """torch's window starts from a sample u in [0, 1) (computed in u's dtype):
    start_i = int((i + u) * alpha) - int(u * alpha) with alpha = (in - k) / (out - 1),
    and the last window ends at the input's end. u [...] -> starts int32 [..., out]."""
    last = jnp.full(u.shape + (1,), in_size - k, jnp.int32)
    if out_size == 1:
        return last
    alpha = jnp.asarray(in_size - k, u.dtype) / jnp.asarray(out_size - 1, u.dtype)
    i = jnp.arange(out_size - 1, dtype=u.dtype)
    first = ((i + u[..., None]) * alpha).astype(jnp.int32) - (u * alpha).astype(jnp.int32)[..., None]
    return jnp.concatenate([first, last], axis=-1)


def _fractional_max_pool(x, kernel_size, output_size, samples, nd):
    """(max, flat index) over windows of size kernel_size placed at pseudo-random starts:
    samples [N, C, nd] hold one u per plane and spatial axis (2-d: u[0] for W, u[1] for H;
    3-d: T, H, W in order)."""
    unbatched = x.ndim == nd + 1
    if unbatched:
        x = x[None]
    k = _expand(kernel_size, nd)
    out = _expand(output_size, nd)
    in_sizes = x.shape[-nd:]
    N, C = x.shape[:2]
    order = [1, 0] if nd == 2 else [0, 1, 2]  # which sample drives spatial axis i
    flat = jnp.zeros((N, C) + (1,) * (2 * nd), jnp.int32)
    for i in range(nd):
        starts = _fractional_starts(samples[..., order[i]].astype(x.dtype), in_sizes[i], out[i], k[i])
        pos = starts[..., :, None] + jnp.arange(k[i], dtype=jnp.int32)  # [N, C, O_i, K_i]
        shape = [N, C] + [1] * (2 * nd)
        shape[2 + i], shape[2 + nd + i] = out[i], k[i]
        flat = flat + pos.reshape(shape) * math.prod(in_sizes[i + 1:])
    taps = math.prod(k)
    flat = jnp.broadcast_to(flat, (N, C) + tuple(out) + tuple(k)).reshape((N, C) + tuple(out) + (taps,))
    vals = jnp.take_along_axis(x.reshape(N, C, math.prod(in_sizes)), flat.reshape(N, C, math.prod(out) * taps),
                               axis=-1).reshape(flat.shape)
    best, idx = _select_max_stacked(vals, None, flat)
    return (best[0], idx[0]) if unbatched else (best, idx)


@register(aten.fractional_max_pool2d.default)
@accumulates(EXACT)
def fractional_max_pool2d(x, kernel_size, output_size, random_samples):
    return _fractional_max_pool(x, kernel_size, output_size, random_samples, 2)


@register(aten.fractional_max_pool3d.default)
@accumulates(EXACT)
def fractional_max_pool3d(x, kernel_size, output_size, random_samples):
    return _fractional_max_pool(x, kernel_size, output_size, random_samples, 3)


@register(aten.fractional_max_pool2d_backward.default)
@accumulates(FLOAT32)
def fractional_max_pool2d_backward(grad_out, x, kernel_size, output_size, indices):
    return _scatter_to_indices(grad_out, x, indices, 2)


@register(aten.fractional_max_pool3d_backward.default)
@accumulates(FLOAT32)
def fractional_max_pool3d_backward(grad_out, x, kernel_size, output_size, indices):
    return _scatter_to_indices(grad_out, x, indices, 3)


# ---- replication padding -------------------------------------------------------------------


def _replication_pad(x, padding):
    """Edge padding of the trailing len(padding) // 2 dims, padding given last dim first
    as (before, after) pairs; negative amounts crop. out[i] = x[clip(i - before, 0, n - 1)]."""
    nd = len(padding) // 2
    for i in range(nd):
        axis = x.ndim - 1 - i
        before, after = padding[2 * i], padding[2 * i + 1]
        n = x.shape[axis]
        idx = np.clip(np.arange(n + before + after) - before, 0, n - 1)
        x = jnp.take(x, jnp.asarray(idx, jnp.int32), axis=axis, mode="clip")
    return x


def _replication_pad_backward(nd):
    def backward(grad_out, x, padding):
        """The exact vjp of edge padding: each input element collects the gradient of
        every output position that copies it."""
        if len(padding) != 2 * nd:
            raise UnsupportedOpError(f"replication_pad{nd}d_backward with padding {padding}")
        _, vjp = jax.vjp(lambda x_: _replication_pad(x_, padding), x)
        return vjp(grad_out)[0]

    return backward


register(aten.replication_pad1d_backward.default)(accumulates(FLOAT32)(_replication_pad_backward(1)))
register(aten.replication_pad2d_backward.default)(accumulates(FLOAT32)(_replication_pad_backward(2)))
register(aten.replication_pad3d_backward.default)(accumulates(FLOAT32)(_replication_pad_backward(3)))
