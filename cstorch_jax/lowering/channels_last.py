"""Channels-last (NHWC) twins of the 2-D convolution and max-pool ops.

    convolution_nhwc(x, w, ...)          = to_nhwc(aten.convolution(to_nchw(x), w, ...))
    convolution_backward_nhwc(g, x, w, ...) = aten.convolution_backward(to_nchw(g), to_nchw(x), w, ...)
                                            with grad_input to_nhwc; grad_weight, grad_bias as aten's
    max_pool2d_nhwc(x, ...)              = to_nhwc of both outputs of aten.max_pool2d_with_indices
    max_pool2d_backward_nhwc(g, x, ..., i) = to_nhwc(aten.max_pool2d_with_indices_backward(...))

where to_nhwc = permute(0, 2, 3, 1) and to_nchw its inverse. Activations (x, g, outputs,
pool indices) are [N, H, W, C]; weights stay [O, I, kH, kW]; a pool index is still the
flat position h * W + w of the maximum in its input plane. The ops never appear in a
captured graph: the CPU graph pass `passes/channels_last.py` puts them in place of the
aten ops inside convolution chains. Their eager kernels are the definitions above
(they serve fake tensors and checks); their lowerings compute in NHWC directly, which
is XLA:CPU's own convolution layout, so no transposes are needed around them. Same
math as the aten ops: only the order of dimensions in memory differs. A masked-off
output of convolution_backward_nhwc is an empty tensor in eager and None in the
lowering (aten's undefined tensor).
"""
from __future__ import annotations

import torch

from . import conv, pooling
from .dtype_policy import EXACT, FLOAT32, HALF, accumulates
from .registry import register

aten = torch.ops.aten


def _nchw(t: torch.Tensor) -> torch.Tensor:
    return t.permute(0, 3, 1, 2)


def _nhwc(t: torch.Tensor) -> torch.Tensor:
    return t.permute(0, 2, 3, 1).contiguous()


def _define(name: str, fn) -> None:
    """Register `fn` as the custom op cstorch::<name>, eager and fake kernel alike."""
    op = torch.library.custom_op(f"cstorch::{name}", mutates_args=())(fn)
    op.register_fake(fn)


def _convolution_nhwc_eager(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: list[int],
                        padding: list[int], dilation: list[int], transposed: bool, output_padding: list[int],
                        groups: int) -> torch.Tensor:
    return _nhwc(aten.convolution(_nchw(x), weight, bias, stride, padding, dilation, transposed, output_padding,
                                  groups))


_define("convolution_nhwc", _convolution_nhwc_eager)


def _convolution_backward_nhwc_eager(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                                 bias_sizes: list[int] | None, stride: list[int], padding: list[int],
                                 dilation: list[int], transposed: bool, output_padding: list[int], groups: int,
                                 output_mask: list[bool]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gx, gw, gb = aten.convolution_backward(_nchw(grad_out), _nchw(x), weight, bias_sizes, stride, padding, dilation,
                                           transposed, output_padding, groups, output_mask)
    empty = x.new_empty((0,))
    return (_nhwc(gx) if output_mask[0] else empty, gw if output_mask[1] else empty.clone(),
            gb if output_mask[2] else empty.clone())


_define("convolution_backward_nhwc", _convolution_backward_nhwc_eager)


def _max_pool2d_nhwc_eager(x: torch.Tensor, kernel_size: list[int], stride: list[int], padding: list[int],
                       dilation: list[int], ceil_mode: bool) -> tuple[torch.Tensor, torch.Tensor]:
    out, idx = aten.max_pool2d_with_indices(_nchw(x), kernel_size, stride, padding, dilation, ceil_mode)
    return _nhwc(out), _nhwc(idx)


_define("max_pool2d_nhwc", _max_pool2d_nhwc_eager)


def _max_pool2d_backward_nhwc_eager(grad_out: torch.Tensor, x: torch.Tensor, kernel_size: list[int], stride: list[int],
                                padding: list[int], dilation: list[int], ceil_mode: bool,
                                indices: torch.Tensor) -> torch.Tensor:
    return _nhwc(aten.max_pool2d_with_indices_backward(_nchw(grad_out), _nchw(x), kernel_size, stride, padding,
                                                       dilation, ceil_mode, _nchw(indices)))


_define("max_pool2d_backward_nhwc", _max_pool2d_backward_nhwc_eager)


def _avg_pool2d_nhwc_eager(x: torch.Tensor, kernel_size: list[int], stride: list[int], padding: list[int],
                           ceil_mode: bool, count_include_pad: bool, divisor_override: int | None) -> torch.Tensor:
    return _nhwc(aten.avg_pool2d(_nchw(x), kernel_size, stride, padding, ceil_mode, count_include_pad,
                                 divisor_override))


_define("avg_pool2d_nhwc", _avg_pool2d_nhwc_eager)


def _avg_pool2d_backward_nhwc_eager(grad_out: torch.Tensor, x: torch.Tensor, kernel_size: list[int],
                                    stride: list[int], padding: list[int], ceil_mode: bool,
                                    count_include_pad: bool, divisor_override: int | None) -> torch.Tensor:
    return _nhwc(aten.avg_pool2d_backward(_nchw(grad_out), _nchw(x), kernel_size, stride, padding, ceil_mode,
                                          count_include_pad, divisor_override))


_define("avg_pool2d_backward_nhwc", _avg_pool2d_backward_nhwc_eager)


# ---- lowerings ----------------------------------------------------------------------------


def _conv_fn(stride, padding, dilation, transposed, output_padding, groups):
    return conv._conv_fn(2, stride, padding, dilation, transposed, output_padding, groups, channels_last=True)


@register(torch.ops.cstorch.convolution_nhwc.default)
@accumulates(FLOAT32, operands=HALF)
def convolution_nhwc(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    y = _conv_fn(stride, padding, dilation, transposed, output_padding, groups)(x, w)
    return y if bias is None else y + bias  # [C] broadcasts over the last (channel) dim


@register(torch.ops.cstorch.convolution_backward_nhwc.default)
@accumulates(FLOAT32, operands=HALF)
def convolution_backward_nhwc(grad_out, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
                              groups, output_mask):
    """(grad_input, grad_weight, grad_bias): the exact vjp of the NHWC forward."""
    fwd = _conv_fn(stride, padding, dilation, transposed, output_padding, groups)
    return conv.backward(fwd, grad_out, x, w, output_mask, channel_axis=-1)


@register(torch.ops.cstorch.max_pool2d_nhwc.default)
@accumulates(EXACT)
def max_pool2d_nhwc(x, kernel_size, stride, padding, dilation, ceil_mode):
    return pooling._max_pool(x, 2, kernel_size, stride, padding, dilation, ceil_mode, channels_last=True)


@register(torch.ops.cstorch.max_pool2d_backward_nhwc.default)
@accumulates(FLOAT32)
def max_pool2d_backward_nhwc(grad_out, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    return pooling._max_pool_backward(grad_out, x, indices, 2, kernel_size, stride, padding, dilation,
                                      channels_last=True)


@register(torch.ops.cstorch.avg_pool2d_nhwc.default)
@accumulates(FLOAT32)
def avg_pool2d_nhwc(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    return pooling._avg_pool(x, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                             channels_last=True)


# the exact vjp of the (linear) NHWC forward
register(torch.ops.cstorch.avg_pool2d_backward_nhwc.default)(
    accumulates(FLOAT32)(pooling._avg_pool_backward(2, channels_last=True)))
