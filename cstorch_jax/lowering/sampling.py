"""Resampling at computed positions: grid_sample (bilinear, nearest, bicubic; zeros, border and
reflection padding) and antialiased bilinear/bicubic resizing, with their backwards."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from ..errors import UnsupportedOpError
from .pooling import _take_axis
from .registry import register

aten = torch.ops.aten



def _unnormalize(coord, size, align_corners, nd):
    """Grid coordinate in [-1, 1] -> input pixel coordinate: -1 and 1 are the centres
    of the corner pixels (align_corners) or their outer edges. Written as torch's 2-d
    (vectorized) and 3-d (scalar) CPU kernels write it."""
    if nd == 2:
        if align_corners:
            return (coord + 1) * ((size - 1) / 2)
        return (coord + 1) * (size / 2) - 0.5
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _clip_coordinates(c, size):
    """Clamp to [0, size - 1] (NaN -> 0). Its gradient is 0 at and beyond both borders,
    as torch's: borders count as out of bounds."""
    c = jnp.where(c > 0, c, jnp.zeros((), c.dtype))
    return jnp.where(c < size - 1, c, jnp.full((), size - 1, c.dtype))


def _reflect_coordinates(c, size, align_corners):
    """Reflect c about the borders (pixel centres 0 and size - 1 when aligning corners,
    else the outer edges -0.5 and size - 0.5) until it lands between them. Gradient
    +1 or -1 by the parity of the reflections."""
    low, twice_span = (0.0, 2.0 * (size - 1)) if align_corners else (-0.5, 2.0 * size)
    if twice_span <= 0:
        return jnp.zeros_like(c)
    d = c - low
    a = jnp.where(d < 0, -d, d)
    flips = jnp.trunc(a / twice_span)
    extra = a - flips * twice_span
    reflected = twice_span - extra
    return jnp.where(extra > reflected, reflected, extra) + low


def _pad_coordinates(c, size, padding_mode, align_corners):
    if padding_mode == 0:  # zeros
        return c
    if padding_mode == 2:  # reflection
        c = _reflect_coordinates(c, size, align_corners)
    return _clip_coordinates(c, size)  # border (and reflection's final clamp)


def _gather_points(x, positions):
    """x [N, C, *S]; positions: per spatial dim a float array [N, *P] of integral
    coordinates (any value). Returns x at those points, 0 where out of bounds: [N, C, *P]."""
    sizes = x.shape[2:]
    N, C = x.shape[:2]
    inside = jnp.ones(positions[0].shape, bool)
    flat = jnp.zeros(positions[0].shape, jnp.int32)
    for pos, size, stride in zip(positions, sizes, [math.prod(sizes[i + 1:]) for i in range(len(sizes))]):
        ok = (pos >= 0) & (pos <= size - 1)
        inside = inside & ok
        flat = flat + jnp.where(ok, pos, 0).astype(jnp.int32) * stride
    xf = x.reshape(N, C, -1)
    vals = jax.vmap(lambda a, i: jnp.take(a, i.reshape(-1), axis=1, mode="clip"))(xf, flat)
    vals = vals.reshape((N, C) + flat.shape[1:])
    return jnp.where(inside[:, None], vals, jnp.zeros((), x.dtype))


def _cubic_coefficients(t):
    """Cubic convolution weights (A = -0.75) of the taps at -1, 0, 1, 2 for offset t in [0, 1)."""
    A = -0.75
    far = lambda z: ((A * z - 5 * A) * z + 8 * A) * z - 4 * A  # noqa: E731  (1 <= |z| < 2)
    near = lambda z: ((A + 2) * z - (A + 3)) * z * z + 1  # noqa: E731  (|z| <= 1)
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _grid_sample(x, grid, interpolation_mode, padding_mode, align_corners):
    """torch.nn.functional.grid_sample on x [N, C, *S] (2 or 3 spatial dims) at grid
    [N, *P, nd], whose last axis holds (x, y[, z]) = (W, H[, D]) coordinates in [-1, 1].
    Modes: bilinear (0), nearest (1, ties to even), bicubic (2, 2-d only); padding:
    zeros (0), border (1), reflection (2)."""
    nd = x.ndim - 2
    sizes = x.shape[2:]
    coords = [_unnormalize(grid[..., nd - 1 - i], sizes[i], align_corners, nd) for i in range(nd)]
    if interpolation_mode == 2:
        if nd != 2:
            raise UnsupportedOpError("aten.grid_sampler_3d with bicubic interpolation (torch has none either)")
        base = [jnp.floor(c) for c in coords]
        t = [c - b for c, b in zip(coords, base)]
        cy, cx = _cubic_coefficients(t[0]), _cubic_coefficients(t[1])
        rows = []
        for j in range(4):
            y = _pad_coordinates(base[0] - 1 + j, sizes[0], padding_mode, align_corners)
            taps = [
                _gather_points(x, [jnp.trunc(y), jnp.trunc(_pad_coordinates(base[1] - 1 + i, sizes[1], padding_mode,
                                                                              align_corners))])
                for i in range(4)
            ]
            rows.append(sum(cx[i][:, None] * taps[i] for i in range(4)))
        return sum(cy[j][:, None] * rows[j] for j in range(4))
    coords = [_pad_coordinates(c, s, padding_mode, align_corners) for c, s in zip(coords, sizes)]
    if interpolation_mode == 1:
        return _gather_points(x, [jnp.round(c) for c in coords])
    if interpolation_mode != 0:
        raise UnsupportedOpError(f"aten.grid_sampler with interpolation_mode={interpolation_mode}")
    base = [jnp.floor(c) for c in coords]
    frac = [c - b for c, b in zip(coords, base)]
    out = None
    for corner in np.ndindex(*(2,) * nd):  # row-major over (D,) H, W: torch's summation order
        w = None
        for i, ci in enumerate(corner):
            wi = frac[i] if ci else 1 - frac[i]
            w = wi if w is None else w * wi
        term = _gather_points(x, [b + ci for b, ci in zip(base, corner)]) * w[:, None]
        out = term if out is None else out + term
    return out


@register(aten.grid_sampler_2d.default, aten.grid_sampler_3d.default)
def grid_sampler(x, grid, interpolation_mode, padding_mode, align_corners):
    return _grid_sample(x, grid, interpolation_mode, padding_mode, align_corners)


@register(aten.grid_sampler_2d_backward.default, aten.grid_sampler_3d_backward.default)
def grid_sampler_backward(grad_out, x, grid, interpolation_mode, padding_mode, align_corners, output_mask):
    """(grad_input, grad_grid): the exact vjp of the forward. Its gradient conventions
    are torch's: 0 for the grid in nearest mode and at clamped borders."""
    _, vjp = jax.vjp(lambda a, g: _grid_sample(a, g, interpolation_mode, padding_mode, align_corners), x, grid)
    gx, gg = vjp(grad_out)
    return (gx if output_mask[0] else None, gg if output_mask[1] else None)


# ---- antialiased resampling (bilinear, bicubic) --------------------------------------------------


def _aa_linear(t):
    """Triangle filter, |t| < 1."""
    return 1 - t if t < 1 else 0.0


def _aa_cubic(t):
    """Keys' cubic convolution filter with a = -0.5 (PIL's, which torch follows when
    antialiasing), |t| < 2."""
    a = -0.5
    if t < 1:
        return ((a + 2) * t - (a + 3)) * t * t + 1
    if t < 2:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return 0.0


def _aa_axis(in_size, out_size, align_corners, scale, interp_size, filt):
    """Taps and weights of antialiased resampling along one axis, computed with torch's
    float32/float64 mix: the filter (support interp_size / 2) is stretched by the
    downscale factor when shrinking, centred at scale * (o + 0.5) and normalised to
    sum 1. Returns (pos [O, K], valid [O, K], weights float32 [O, K])."""
    f32 = np.float32
    if align_corners:
        s = f32(in_size - 1) / f32(out_size - 1) if out_size > 1 else f32(0)
    elif scale is not None and scale > 0:
        s = f32(1.0 / scale)
    else:
        s = f32(in_size) / f32(out_size)
    support = f32(interp_size * 0.5 * float(s)) if s >= 1.0 else f32(interp_size * 0.5)
    invscale = f32(1.0 / float(s)) if s >= 1.0 else f32(1.0)
    taps = int(math.ceil(support)) * 2 + 1
    pos = np.zeros((out_size, taps), np.int64)
    valid = np.zeros((out_size, taps), bool)
    weights = np.zeros((out_size, taps), np.float32)
    for o in range(out_size):
        center = f32(float(s) * (o + 0.5))
        xmin = max(int(float(center - support) + 0.5), 0)
        xsize = min(max(min(int(float(center + support) + 0.5), in_size) - xmin, 0), taps)
        w = np.zeros(taps, np.float32)
        total = f32(0)
        for j in range(xsize):
            t = f32((float(f32(j + xmin) - center) + 0.5) * float(invscale))
            w[j] = f32(filt(abs(t)))
            total = f32(total + w[j])
        if total != 0:
            w[:xsize] = w[:xsize] / total
        pos[o] = xmin + np.arange(taps)
        valid[o, :xsize] = True
        weights[o] = w
    return pos, valid, weights


def _upsample_aa(x, output_size, align_corners, scales_h, scales_w, interp_size, filt):
    """Separable antialiased resize of the last two dims, W first, then H; an axis
    whose size does not change is left alone."""
    for axis, out, scale in ((x.ndim - 1, output_size[1], scales_w), (x.ndim - 2, output_size[0], scales_h)):
        n = x.shape[axis]
        if out == n:
            continue
        pos, valid, w = _aa_axis(n, out, align_corners, scale, interp_size, filt)
        taps = _take_axis(x, axis, pos)  # [..., O, K, ...]
        shape = (out, pos.shape[1]) + (1,) * (x.ndim - axis - 1)
        prod = taps * jnp.asarray(w.reshape(shape), x.dtype)
        prod = jnp.where(jnp.asarray(valid.reshape(shape)), prod, jnp.zeros((), x.dtype))
        x = jnp.sum(prod, axis=axis + 1)
    return x


def _register_aa(forward_op, backward_op, interp_size, filt):
    def forward(x, output_size, align_corners, scales_h=None, scales_w=None):
        return _upsample_aa(x, output_size, align_corners, scales_h, scales_w, interp_size, filt)

    def backward(grad_out, output_size, input_size, align_corners, scales_h=None, scales_w=None):
        """The exact vjp of the (linear) forward."""
        x = jnp.zeros(tuple(input_size), grad_out.dtype)
        _, vjp = jax.vjp(lambda x_: forward(x_, output_size, align_corners, scales_h, scales_w), x)
        return vjp(grad_out)[0]

    register(forward_op)(forward)
    register(backward_op)(backward)


_register_aa(aten._upsample_bilinear2d_aa.default, aten._upsample_bilinear2d_aa_backward.default, 2, _aa_linear)
_register_aa(aten._upsample_bicubic2d_aa.default, aten._upsample_bicubic2d_aa_backward.default, 4, _aa_cubic)
