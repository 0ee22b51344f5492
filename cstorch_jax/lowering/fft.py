"""Discrete Fourier transforms (ATen's three FFT primitives) and the complex views that
their decompositions and gradients use.

torch's `normalization` argument is an enum: 0 leaves the transform unnormalized, 1
scales by 1/sqrt(n), 2 by 1/n, where n is the number of points of the signal (the product
of the transformed sizes; for c2r the sizes of the real output). The unnormalized inverse
transforms are jnp's with norm="forward". XLA transforms at most three axes at a time;
more axes are done in groups (the multi-dimensional DFT is separable).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from .registry import register

aten = torch.ops.aten

_XLA_MAX_FFT_AXES = 3


def _axes(x, dim) -> list[int]:
    return [d % x.ndim for d in dim]


def _normalize(y, normalization: int, n: int):
    if normalization == 1:
        return y * np.float32(1 / math.sqrt(n))
    if normalization == 2:
        return y * np.float32(1 / n)
    return y


def _c2c(x, axes, forward: bool):
    """Unnormalized complex transform over `axes`, at most three axes per XLA FFT."""
    for i in range(0, len(axes), _XLA_MAX_FFT_AXES):
        group = axes[i:i + _XLA_MAX_FFT_AXES]
        x = jnp.fft.fftn(x, axes=group) if forward else jnp.fft.ifftn(x, axes=group, norm="forward")
    return x


def _complex(x):
    return x if jnp.issubdtype(x.dtype, jnp.complexfloating) else x.astype(jnp.complex64)


@register(aten._fft_r2c.default)
def fft_r2c(x, dim, normalization, onesided):
    """Forward DFT of a real tensor over `dim`; with `onesided` only the first n//2 + 1
    frequencies of the last transformed dim (the rest is their conjugate mirror)."""
    axes = _axes(x, dim)
    n = math.prod(x.shape[a] for a in axes)
    if onesided:
        y = _c2c(jnp.fft.rfft(x, axis=axes[-1]), axes[:-1], forward=True)
    else:
        y = _c2c(_complex(x), axes, forward=True)
    return _normalize(y, normalization, n)


@register(aten._fft_c2r.default)
def fft_c2r(x, dim, normalization, last_dim_size):
    """Inverse DFT to a real tensor: the input holds the first last_dim_size//2 + 1
    frequencies of the last dim of a Hermitian-symmetric spectrum; unnormalized inverse
    over the other dims, then the real inverse over the last one."""
    axes = _axes(x, dim)
    y = _c2c(x, axes[:-1], forward=False)
    y = jnp.fft.irfft(y, n=last_dim_size, axis=axes[-1], norm="forward")
    n = math.prod(y.shape[a] for a in axes)
    return _normalize(y, normalization, n)


@register(aten._fft_c2c.default)
def fft_c2c(x, dim, normalization, forward):
    axes = _axes(x, dim)
    n = math.prod(x.shape[a] for a in axes)
    return _normalize(_c2c(x, axes, forward), normalization, n)


# ---- complex views (functionalized to copies) -----------------------------------------


@register(aten._conj_copy.default)
def conj_copy(x):
    return jnp.conj(x)


@register(aten.view_as_real_copy.default)
def view_as_real_copy(x):
    """complex [..., n] -> real [..., n, 2] holding (real, imaginary)."""
    return jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1)


@register(aten.view_as_complex_copy.default)
def view_as_complex_copy(x):
    """real [..., 2] -> complex [...]."""
    return jax.lax.complex(x[..., 0], x[..., 1])
