"""Tensor factories and dtype conversion. Device, layout, pin_memory and memory_format
arguments carry no meaning in XLA and are ignored; uninitialised (`empty*`) tensors
are zeros."""
from __future__ import annotations

import jax.numpy as jnp
import torch

from ..dtypes import jax_dtype
from .registry import register

aten = torch.ops.aten


def _dtype_of_value(value, dtype):
    if dtype is not None:
        return jax_dtype(dtype)
    if isinstance(value, bool):
        return jnp.bool_
    if isinstance(value, int):
        return jnp.int32
    return jax_dtype(torch.get_default_dtype())


@register(aten.full.default)
def full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.full(tuple(size), fill_value, dtype=_dtype_of_value(fill_value, dtype))


@register(aten.full_like.default)
def full_like(x, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return jnp.full(x.shape, fill_value, dtype=jax_dtype(dtype) if dtype is not None else x.dtype)


@register(aten.zeros_like.default)
def zeros_like(x, *, dtype=None, **_):
    return full_like(x, 0, dtype=dtype)


@register(aten.ones_like.default)
def ones_like(x, *, dtype=None, **_):
    return full_like(x, 1, dtype=dtype)


@register(aten.empty.memory_format)
def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return jnp.zeros(tuple(size), dtype=_dtype_of_value(0.0, dtype))


@register(aten.empty_permuted.default)
def empty_permuted(size, physical_layout, *, dtype=None, **_):
    return empty(size, dtype=dtype)


@register(aten.empty_strided.default)
def empty_strided(size, stride, *, dtype=None, **_):
    return empty(size, dtype=dtype)


@register(aten.new_empty_strided.default)
def new_empty_strided(x, size, stride, *, dtype=None, **_):
    """Autograd uses it to lay out a leaf's .grad when the incoming gradient is a view."""
    return jnp.zeros(tuple(size), dtype=jax_dtype(dtype) if dtype is not None else x.dtype)


@register(aten.empty_like.default)
def empty_like(x, *, dtype=None, **_):
    return full_like(x, 0, dtype=dtype)


@register(aten.scalar_tensor.default)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.asarray(s, dtype=jax_dtype(dtype if dtype is not None else torch.get_default_dtype()))


@register(aten.arange.start_step)
def arange(start, end=None, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    if dtype is None:
        dtype = torch.int64 if all(isinstance(v, int) for v in (start, end, step)) else torch.get_default_dtype()
    return jnp.arange(start, end, step, dtype=jax_dtype(dtype))


@register(aten.arange.default)
def arange_end(end, *, dtype=None, **kwargs):
    return arange(0, end, 1, dtype=dtype)


@register(aten.arange.start)
def arange_start(start, end, *, dtype=None, **kwargs):
    return arange(start, end, 1, dtype=dtype)


@register(aten._to_copy.default)
def to_copy(x, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    return x if dtype is None else x.astype(jax_dtype(dtype))


@register(torch.ops.prims.convert_element_type.default)
def convert_element_type(x, dtype):
    """What torch's decompositions cast with (renorm's, for 16-bit inputs)."""
    return x.astype(jax_dtype(dtype))
