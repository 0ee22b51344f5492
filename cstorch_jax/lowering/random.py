"""Random ops. Each draws from its own key, `fold_in(step_key, i)` for the i-th random
node of the graph, so one executable gives fresh randomness every step from the key
input and the same randomness for the same key. Bit-equality with torch's generator
is not possible; distributions are the same."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from ..dtypes import jax_dtype
from ..errors import UnsupportedOpError
from .registry import register

aten = torch.ops.aten


@register(aten.bernoulli.p, random=True)
def bernoulli_p(x, p=0.5, *, generator=None, key):
    return jax.random.bernoulli(key, p, x.shape).astype(x.dtype)


@register(aten.bernoulli.default, random=True)
def bernoulli(x, *, generator=None, key):
    return (jax.random.uniform(key, x.shape, jnp.float32) < x).astype(x.dtype)


def _float_dtype(dtype):
    return jax_dtype(dtype if dtype is not None else torch.get_default_dtype())


@register(aten.rand.default, random=True)
def rand(size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None, key):
    return jax.random.uniform(key, tuple(size), _float_dtype(dtype))


@register(aten.randn.default, random=True)
def randn(size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None, key):
    return jax.random.normal(key, tuple(size), _float_dtype(dtype))


@register(aten.rand_like.default, random=True)
def rand_like(x, *, dtype=None, key, **_):
    return jax.random.uniform(key, x.shape, jax_dtype(dtype) if dtype is not None else x.dtype)


@register(aten.randn_like.default, random=True)
def randn_like(x, *, dtype=None, key, **_):
    return jax.random.normal(key, x.shape, jax_dtype(dtype) if dtype is not None else x.dtype)


@register(aten.uniform.default, random=True)
def uniform(x, low=0.0, high=1.0, *, generator=None, key):
    return jax.random.uniform(key, x.shape, x.dtype, low, high)


@register(aten.normal.Tensor_float, random=True)
def normal(mean, std=1.0, *, generator=None, key):
    return mean + std * jax.random.normal(key, mean.shape, mean.dtype)


@register(aten.native_dropout.default, random=True)
def native_dropout(x, p, train, *, key):
    """(x * mask / (1 - p), mask) with mask ~ Bernoulli(1 - p) when training, else (x, ones)."""
    if train is False:
        return x, jnp.ones(x.shape, jnp.bool_)
    if p >= 1:
        return jnp.zeros_like(x), jnp.zeros(x.shape, jnp.bool_)
    mask = jax.random.bernoulli(key, 1 - p, x.shape)
    return jnp.where(mask, x / (1 - p), jnp.zeros((), x.dtype)).astype(x.dtype), mask


def _uniform_open(key, shape, dtype):
    """u ~ U(0, 1) strictly inside the interval, drawn in float32 (at least)."""
    tiny = jnp.finfo(jnp.float32).tiny
    return jax.random.uniform(key, shape, jnp.float32, minval=tiny, maxval=1.0)


def _draw(x, dtype=None):
    """The dtype a distribution is drawn in: float32 for 16-bit floats (cast at the end)."""
    dtype = x.dtype if dtype is None else dtype
    return jnp.float32 if dtype in (jnp.float16, jnp.bfloat16) else dtype


@register(aten.cauchy.default, random=True)
def cauchy(x, median=0.0, sigma=1.0, *, generator=None, key):
    """median + sigma * tan(pi * (u - 1/2)), u ~ U(0, 1): the Cauchy distribution."""
    c = jax.random.cauchy(key, x.shape, _draw(x))
    return (median + sigma * c).astype(x.dtype)


@register(aten.exponential.default, random=True)
def exponential(x, lambd=1.0, *, generator=None, key):
    """-log(u) / lambd: the exponential distribution of rate lambd."""
    return (jax.random.exponential(key, x.shape, _draw(x)) / lambd).astype(x.dtype)


@register(aten.geometric.default, random=True)
def geometric(x, p, *, generator=None, key):
    """The number of Bernoulli(p) trials up to and including the first success (support
    1, 2, ...): 1 + floor(log(u) / log(1 - p)), u ~ U(0, 1], in x's dtype."""
    u = _uniform_open(key, x.shape, jnp.float32)
    k = 1 + jnp.floor(jnp.log(u) / jnp.log1p(-jnp.asarray(p, jnp.float32)))
    return k.astype(x.dtype)


@register(aten.log_normal.default, random=True)
def log_normal(x, mean=1.0, std=2.0, *, generator=None, key):
    """exp(mean + std * z), z ~ N(0, 1)."""
    z = jax.random.normal(key, x.shape, _draw(x))
    return jnp.exp(mean + std * z).astype(x.dtype)


@register(aten.normal_functional.default, random=True)
def normal_functional(x, mean=0.0, std=1.0, *, generator=None, key):
    """mean + std * z, z ~ N(0, 1), shaped and typed like x (the functional `normal_`)."""
    z = jax.random.normal(key, x.shape, _draw(x))
    return (mean + std * z).astype(x.dtype)


@register(aten.normal.Tensor_Tensor, random=True)
def normal_tensor_tensor(mean, std, *, generator=None, key):
    """mean + std * z elementwise, over the broadcast shape of mean and std."""
    shape = jnp.broadcast_shapes(mean.shape, std.shape)
    dtype = jnp.result_type(mean, std)
    return (mean + std * jax.random.normal(key, shape, _draw(None, dtype))).astype(dtype)


@register(aten.normal.float_Tensor, random=True)
def normal_float_tensor(mean, std, *, generator=None, key):
    return (mean + std * jax.random.normal(key, std.shape, _draw(std))).astype(std.dtype)


@register(aten.normal.float_float, random=True)
def normal_float_float(mean, std, size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None,
                       key):
    out = _float_dtype(dtype)
    return (mean + std * jax.random.normal(key, tuple(size), _draw(None, out))).astype(out)


_INT32_RANGE = (-(2**31), 2**31 - 1)


def _randint(key, low, high, shape, dtype, op):
    """Integers uniform in [low, high), in `dtype` (int64 is computed as int32)."""
    if not (_INT32_RANGE[0] <= low and high - 1 <= _INT32_RANGE[1]):
        raise UnsupportedOpError(
            f"{op} with bounds [{low}, {high}): the XLA engine computes int64 as int32; keep the bounds "
            f"within [-2**31, 2**31)")
    if high <= low:
        raise UnsupportedOpError(f"{op} needs low < high, got low={low}, high={high}")
    ints = jax.random.randint(key, tuple(shape), low, high, jnp.int32)
    return ints.astype(dtype)


@register(aten.randint.default, random=True)
def randint(high, size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None, key):
    out = jax_dtype(dtype if dtype is not None else torch.int64)
    return _randint(key, 0, high, size, out, "aten.randint")


@register(aten.randint.low, random=True)
def randint_low(low, high, size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None, key):
    out = jax_dtype(dtype if dtype is not None else torch.int64)
    return _randint(key, low, high, size, out, "aten.randint")


@register(aten.randint_like.default, random=True)
def randint_like(x, high, *, dtype=None, key, **_):
    out = jax_dtype(dtype) if dtype is not None else x.dtype
    return _randint(key, 0, high, x.shape, out, "aten.randint_like")


@register(aten.randint_like.low_dtype, random=True)
def randint_like_low(x, low, high, *, dtype=None, key, **_):
    out = jax_dtype(dtype) if dtype is not None else x.dtype
    return _randint(key, low, high, x.shape, out, "aten.randint_like")


@register(aten.multinomial.default, random=True)
def multinomial(probs, num_samples, replacement=False, *, generator=None, key):
    """`num_samples` category indices per row of non-negative weights `probs` ([n] or
    [rows, n]), drawn with probability proportional to the weights. With replacement:
    independent categorical draws. Without: the Gumbel top-k trick (the k largest of
    log(w) + Gumbel noise are an ordered draw without replacement)."""
    logits = jnp.log(probs.astype(jnp.float32))
    if replacement:
        draws = jax.random.categorical(key, logits, axis=-1, shape=(num_samples,) + probs.shape[:-1])
        return jnp.moveaxis(draws, 0, -1).astype(jnp.int32)
    if num_samples > probs.shape[-1]:
        raise UnsupportedOpError(
            f"aten.multinomial without replacement draws at most {probs.shape[-1]} samples, asked for {num_samples}")
    g = jax.random.gumbel(key, probs.shape, jnp.float32)
    _, idx = jax.lax.top_k(logits + g, num_samples)
    return idx.astype(jnp.int32)


@register(aten.rrelu_with_noise_functional.default, random=True)
def rrelu_with_noise_functional(x, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None, *, key):
    """Randomized leaky ReLU; returns (out, new noise). Training: each x <= 0 is scaled by
    its own r ~ U(lower, upper), and noise holds r there and 1 elsewhere. Otherwise a
    leaky ReLU of slope (lower + upper) / 2, and noise is returned unchanged."""
    if not training:
        slope = (lower + upper) / 2
        return jnp.where(x > 0, x, x * slope).astype(x.dtype), noise
    r = jax.random.uniform(key, x.shape, _draw(x), lower, upper).astype(x.dtype)
    neg = x <= 0
    return jnp.where(neg, x * r, x), jnp.where(neg, r, jnp.ones((), x.dtype)).astype(noise.dtype)
