"""Convolution, plain and transposed (and its backward as the exact vjp of the forward).
16-bit operands are multiplied as they are and summed in float32 (dtype_policy.py).
Pooling lives in pooling.py."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from ..errors import UnsupportedOpError
from .dtype_policy import FLOAT32, HALF, accumulates, accumulator
from .products import HIGHEST
from .registry import register

aten = torch.ops.aten


def _dimension_numbers(x, w, channels_last=False):
    """torch's layouts: activations N, C, *spatial (N, *spatial, C when channels_last),
    weights O, I, *spatial."""
    nd = w.ndim - 2
    spatial = "DHW"[-nd:] if 1 <= nd <= 3 else None
    if spatial is None:
        raise UnsupportedOpError(f"aten.convolution with {nd} spatial dimensions")
    act = "N" + spatial + "C" if channels_last else "NC" + spatial
    return jax.lax.conv_dimension_numbers(x.shape, w.shape, (act, "OI" + spatial, act))


def _conv(x, w, stride, padding, dilation, groups, channels_last=False):
    return jax.lax.conv_general_dilated(
        x, w, window_strides=tuple(stride), padding=[(p, p) for p in padding],
        rhs_dilation=tuple(dilation), dimension_numbers=_dimension_numbers(x, w, channels_last),
        feature_group_count=groups, precision=HIGHEST, preferred_element_type=accumulator(x.dtype),
    )


def _conv_transpose(x, w, stride, padding, dilation, output_padding, groups, channels_last=False):
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
        dimension_numbers=_dimension_numbers(x, wt, channels_last), feature_group_count=groups, precision=HIGHEST,
        preferred_element_type=accumulator(x.dtype),
    )


def _expand(v, nd):
    v = [v] if isinstance(v, int) else list(v)
    return v * nd if len(v) == 1 else v


def _conv_fn(nd, stride, padding, dilation, transposed, output_padding, groups, channels_last=False):
    """The forward of aten.convolution on batched input, without bias, as f(x, w)
    (x and the result channels-last if asked; the weight always O, I, *spatial)."""
    stride, padding, dilation = _expand(stride, nd), _expand(padding, nd), _expand(dilation, nd)
    if transposed:
        output_padding = _expand(output_padding, nd)
        return lambda x, w: _conv_transpose(x, w, stride, padding, dilation, output_padding, groups, channels_last)
    return lambda x, w: _conv(x, w, stride, padding, dilation, groups, channels_last)


@register(aten.convolution.default)
@accumulates(FLOAT32, operands=HALF)
def convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    nd = w.ndim - 2
    unbatched = x.ndim == nd + 1
    if unbatched:
        x = x[None]
    y = _conv_fn(nd, stride, padding, dilation, transposed, output_padding, groups)(x, w)
    if bias is not None:
        y = y + bias.reshape((1, -1) + (1,) * nd)
    return y[0] if unbatched else y


def backward(fwd, grad_out, x, w, output_mask, channel_axis):
    """(grad_input, grad_weight, grad_bias) of y = fwd(x, w) + bias, batched, bias
    broadcast along `channel_axis` of y: the exact vjp of the forward (16-bit operands
    multiplied as they are and summed in float32, like the forward), the bias gradient
    the float32 sum of grad_out over every other axis. Masked-off outputs are None."""
    _, vjp = jax.vjp(lambda x, w: fwd(x, w).astype(grad_out.dtype), x, w)
    gx, gw = vjp(grad_out)
    other = tuple(a for a in range(grad_out.ndim) if a != channel_axis % grad_out.ndim)
    gb = jnp.sum(grad_out, axis=other, dtype=accumulator(grad_out.dtype)) if output_mask[2] else None
    return (gx if output_mask[0] else None, gw if output_mask[1] else None, gb)


@register(aten.convolution_backward.default)
@accumulates(FLOAT32, operands=HALF)
def convolution_backward(grad_out, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
                         groups, output_mask):
    """(grad_input, grad_weight, grad_bias): the exact vjp of the forward (plain or transposed)."""
    nd = w.ndim - 2
    unbatched = x.ndim == nd + 1
    if unbatched:
        x, grad_out = x[None], grad_out[None]
    fwd = _conv_fn(nd, stride, padding, dilation, transposed, output_padding, groups)
    gx, gw, gb = backward(fwd, grad_out, x, w, output_mask, channel_axis=1)
    if unbatched and gx is not None:
        gx = gx[0]
    return gx, gw, gb
