"""Random ops. Each draws from its own key, `fold_in(step_key, i)` for the i-th random
node of the graph, so one executable gives fresh randomness every step from the key
input and the same randomness for the same key. Bit-equality with torch's generator
is not possible; distributions are the same."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from ..dtypes import jax_dtype
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
