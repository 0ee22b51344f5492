"""Neural-network ops that stay whole in core ATen: softmax, layer/group/batch norm (and
batch norm's backward), embedding, the randomized leaky ReLU's backward; the soft-margin
loss's backward, which torch's decomposition computes with a cancellation.

Softmax and the normalizations compute 16-bit inputs in float32 (`@accumulates(FLOAT32)`,
dtype_policy.py): statistics, normalized values and the affine transform are float32, and
the result is rounded once to torch's dtype, as torch's CPU kernels do."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from ..dtypes import jax_dtype
from ..errors import UnsupportedOpError
from .dtype_policy import FLOAT32, accumulates, in_opmath
from .registry import register

aten = torch.ops.aten


def _along(fn, x, dim):
    """`fn(x, axis=dim)`; a 0-d x (torch allows dim 0 / -1) is treated as a 1-vector."""
    if x.ndim == 0:
        return fn(x.reshape(1), axis=0).reshape(())
    return fn(x, axis=dim)


@register(aten._softmax.default)
@accumulates(FLOAT32)
def softmax(x, dim, half_to_float=False):
    """`half_to_float` only sets the result dtype, which the interpreter applies."""
    return _along(jax.nn.softmax, x, dim)


@register(aten._log_softmax.default)
@accumulates(FLOAT32)
def log_softmax(x, dim, half_to_float=False):
    return _along(jax.nn.log_softmax, x, dim)


@register(aten._softmax_backward_data.default)
@accumulates(FLOAT32)
def softmax_backward(grad, out, dim, input_dtype):
    g = out * (grad - jnp.sum(grad * out, axis=dim, keepdims=True))
    return g.astype(jax_dtype(input_dtype))


@register(aten._log_softmax_backward_data.default)
@accumulates(FLOAT32)
def log_softmax_backward(grad, out, dim, input_dtype):
    g = grad - jnp.exp(out) * jnp.sum(grad, axis=dim, keepdims=True)
    return g.astype(jax_dtype(input_dtype))


@register(aten.native_layer_norm.default)
@accumulates(FLOAT32)
def native_layer_norm(x, normalized_shape, weight, bias, eps):
    """y = (x - mean) * rstd * weight + bias over the trailing `normalized_shape` dims;
    also returns mean and rstd = 1/sqrt(var + eps) (biased var), kept as size-1 dims."""
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    rstd = jax.lax.rsqrt(var + eps)
    y = (x - mean) * rstd
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y, mean, rstd


@register(aten._native_batch_norm_legit_functional.default)
@accumulates(FLOAT32)
def native_batch_norm_functional(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """Batch norm over every dim but 1. Training normalises with the batch's biased
    variance and returns the new running stats, updated with the unbiased variance:
    r <- (1 - momentum) * r + momentum * stat. Returns (y, save_mean, save_rstd,
    new_running_mean, new_running_var)."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training:
        mean = jnp.mean(x, axis=axes)
        var = jnp.mean(jnp.square(x - mean.reshape(shape)), axis=axes)
        n = x.size // x.shape[1]
        new_rm = (1 - momentum) * running_mean + momentum * mean
        new_rv = (1 - momentum) * running_var + momentum * var * (n / max(n - 1, 1))
        rstd = jax.lax.rsqrt(var + eps)
        save_mean, save_rstd = mean, rstd
    else:
        mean, rstd = running_mean, jax.lax.rsqrt(running_var + eps)
        new_rm, new_rv = running_mean, running_var
        save_mean = save_rstd = jnp.zeros((0,), x.dtype)
    y = (x - mean.reshape(shape)) * rstd.reshape(shape)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y, save_mean, save_rstd, new_rm, new_rv


@register(aten._native_batch_norm_legit_no_training.default)
@accumulates(FLOAT32)
def native_batch_norm_no_training(x, weight, bias, running_mean, running_var, momentum, eps):
    """Eval-mode batch norm (what F.batch_norm(training=False) becomes): normalise with
    the running stats, which are left alone. Returns (y, empty, empty) as torch."""
    y, save_mean, save_rstd, _, _ = native_batch_norm_functional(
        x, weight, bias, running_mean, running_var, False, momentum, eps)
    return y, save_mean, save_rstd


@register(aten._native_batch_norm_legit.no_stats)
@accumulates(FLOAT32)
def native_batch_norm_no_stats(x, weight, bias, training, momentum, eps):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = jnp.mean(x, axis=axes)
    var = jnp.mean(jnp.square(x - mean.reshape(shape)), axis=axes)
    rstd = jax.lax.rsqrt(var + eps)
    y = (x - mean.reshape(shape)) * rstd.reshape(shape)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y, mean, rstd


@register(aten.embedding.default)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return jnp.take(weight, indices, axis=0)


@register(aten.native_group_norm.default)
@accumulates(FLOAT32)
def native_group_norm(x, weight, bias, N, C, HxW, group, eps):
    """Group norm of x [N, C, *]: the C channels split into `group` groups, each (sample,
    group) normalised over its C / group * HxW elements with the biased variance, then
    a per-channel affine. Returns (y, mean [N, group], rstd [N, group])."""
    xf = x.reshape(N, group, C // group * HxW)
    mean = jnp.mean(xf, axis=-1)
    var = jnp.mean(jnp.square(xf - mean[..., None]), axis=-1)
    rstd = jax.lax.rsqrt(var + eps)
    y = ((xf - mean[..., None]) * rstd[..., None]).reshape((N, C, HxW))
    if weight is not None:
        y = y * weight[:, None]
    if bias is not None:
        y = y + bias[:, None]
    return y.reshape(x.shape), mean, rstd


@register(aten._batch_norm_with_update_functional.default)
@accumulates(FLOAT32)
def batch_norm_with_update_functional(x, weight, bias, running_mean, running_var, momentum, eps):
    """Training-mode batch norm with running-stat update (what `F.batch_norm(training=True)`
    becomes): (y, save_mean, save_rstd, reserve, new_running_mean, new_running_var);
    `reserve` is the empty uint8 tensor of the non-cuDNN backends."""
    y, save_mean, save_rstd, new_rm, new_rv = native_batch_norm_functional(
        x, weight, bias, running_mean, running_var, True, momentum, eps)
    return y, save_mean, save_rstd, jnp.zeros((0,), jnp.uint8), new_rm, new_rv


@register(aten._batch_norm_no_update.default)
@accumulates(FLOAT32)
def batch_norm_no_update(x, weight, bias, running_mean, running_var, momentum, eps):
    """Eval-mode batch norm with the running stats, which are left alone:
    (y, empty save_mean, empty save_rstd, empty reserve)."""
    if running_mean is None or running_var is None:
        raise UnsupportedOpError(
            "aten._batch_norm_no_update without running stats: pass running_mean and running_var, "
            "or use training=True")
    y, save_mean, save_rstd = native_batch_norm_no_training(x, weight, bias, running_mean, running_var, momentum, eps)
    return y, save_mean, save_rstd, jnp.zeros((0,), jnp.uint8)


@register(aten.batch_norm_backward.default)
@accumulates(FLOAT32)
def batch_norm_backward(grad_out, x, weight, running_mean, running_var, save_mean, save_invstd, train, eps,
                        output_mask, reserve):
    """(grad_input, grad_weight, grad_bias) of batch norm over every dim but 1, with
    xhat = (x - mean) * invstd and mean/invstd the saved batch stats (train) or the
    running stats (eval):
      grad_input  = w * invstd * (g - mean(g) - xhat * mean(g * xhat))   (train)
                  = w * invstd * g                                      (eval)
      grad_weight = sum(g * xhat),  grad_bias = sum(g)  (sums/means over dims != 1)."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    g = grad_out
    if train:
        mean, invstd = save_mean, save_invstd
    else:
        mean, invstd = running_mean, jax.lax.rsqrt(running_var + eps)
    xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
    g_sum = jnp.sum(g, axis=axes)
    gx_dot = jnp.sum(g * xhat, axis=axes)
    scale = invstd if weight is None else invstd * weight
    gi = None
    if output_mask[0]:
        if train:
            n = x.size // x.shape[1]
            gi = (g - (g_sum / n).reshape(shape) - xhat * (gx_dot / n).reshape(shape)) * scale.reshape(shape)
        else:
            gi = g * scale.reshape(shape)
    gw = gx_dot if output_mask[1] else None
    gb = g_sum if output_mask[2] else None
    return gi, gw, gb


@register(aten.rrelu_with_noise_backward.default)
def rrelu_with_noise_backward(grad_out, x, noise, lower, upper, training, self_is_result):
    """Training: grad * noise (the slope each element was drawn); otherwise the leaky-ReLU
    gradient of slope (lower + upper) / 2."""
    if training and upper - lower > 1e-6:
        return grad_out * noise
    slope = (lower + upper) / 2
    return jnp.where(x > 0, grad_out, grad_out * slope)


@register(aten.soft_margin_loss_backward.default)
@in_opmath
def soft_margin_loss_backward(grad_out, x, target, reduction):
    """d/dx log(1 + exp(-t x)) = -t sigmoid(-t x), times grad_out (divided by x's numel
    for the mean). torch's decomposition writes t (sigmoid(t x) - 1), which cancels: for
    t x = 14 the result (8e-7) was 17 % off in bfloat16 and float32 alike; eager's kernel
    has no cancellation."""
    grad = -target * grad_out * jax.nn.sigmoid(-target * x)
    return grad / x.size if reduction == 1 else grad  # torch's Reduction.MEAN
