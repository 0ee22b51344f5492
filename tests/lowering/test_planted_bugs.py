"""Bugs planted on purpose in the 16-bit paths must make a test fail.

The planted bug: a layer norm whose mean and variance are sums accumulated in the input's
16-bit dtype (an HLO reduce in bfloat16/float16) instead of torch's float32 opmath. (Only
dropping the `@accumulates(FLOAT32)` conversion is not such a bug on XLA: jnp's
reductions sum 16-bit values in float32 anyway, and XLA keeps the elementwise chain in
float32 -- `xla_allow_excess_precision` -- so that lowering stays as accurate as eager.)
The planted lowering must fail the accumulation test (tests/lowering/test_accumulation.py)
and the 16-bit judge of a layer norm step through `cstorch_jax.jit`; the real lowering
must pass both.
"""
from __future__ import annotations

import jax.numpy as jnp
import pytest
import torch
import torch.nn.functional as F
from jax import lax

import cstorch_jax
from cstorch_jax.coverage.accuracy import judge, to_reference
from cstorch_jax.lowering import LOWERINGS
from cstorch_jax.lowering.dtype_policy import ACCUMULATION, FLOAT32
from harness import HALF
from test_accumulation import check_accumulation

aten = torch.ops.aten
LAYER_NORM = aten.native_layer_norm.default


def layer_norm_with_16_bit_sums(x, normalized_shape, weight, bias, eps):
    """The planted bug: native_layer_norm with its sums accumulated in x.dtype."""
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    count = 1
    for a in axes:
        count *= x.shape[a]

    def mean(v):
        total = lax.reduce(v, jnp.zeros((), v.dtype), lax.add, axes)
        return jnp.expand_dims(total / jnp.asarray(count, v.dtype), axes)

    mu = mean(x)
    rstd = lax.rsqrt(mean(jnp.square(x - mu)) + jnp.asarray(eps, x.dtype))
    y = (x - mu) * rstd
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y, mu, rstd


@pytest.fixture
def layer_norm_with_16_bit_accumulation(monkeypatch):
    """Plant the bug in the lowering table (undone after the test)."""
    assert ACCUMULATION[LOWERINGS[LAYER_NORM]] == FLOAT32
    monkeypatch.setitem(LOWERINGS, LAYER_NORM, layer_norm_with_16_bit_sums)


@pytest.mark.parametrize("dtype", HALF, ids=lambda d: str(d).removeprefix("torch."))
def test_accumulation_check_catches_a_16_bit_layer_norm(dtype, layer_norm_with_16_bit_accumulation):
    with pytest.raises(AssertionError, match="error"):
        check_accumulation(LAYER_NORM, dtype, FLOAT32)


def _layer_norm_step(x, w, b):
    """A transformer-sized layer norm (GPT-2 small's width) and its gradients."""
    y = F.layer_norm(x, (768,), w, b)
    (y.float() * torch.linspace(-1, 1, 768)).sum().backward()
    return y, x.grad, w.grad, b.grad


def _layer_norm_args(dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(64, 768, generator=g) * 2 + 3).to(dtype).requires_grad_()
    w = (torch.rand(768, generator=g) + 0.5).to(dtype).requires_grad_()
    b = torch.randn(768, generator=g).to(dtype).requires_grad_()
    return x, w, b


def _fresh(args):
    return [a.detach().clone().requires_grad_() for a in args]


@pytest.mark.parametrize("dtype", HALF, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("planted", [False, True], ids=["correct", "planted"])
def test_jit_judge_catches_a_16_bit_layer_norm(dtype, planted, request):
    """The correct lowering passes the judge; the planted one fails it."""
    if planted:
        request.getfixturevalue("layer_norm_with_16_bit_accumulation")
    args = _layer_norm_args(dtype)
    got = cstorch_jax.jit(_layer_norm_step)(*_fresh(args))
    want = _layer_norm_step(*_fresh(args))
    truth = _layer_norm_step(*_fresh(to_reference(args, dtype)))
    if planted:
        with pytest.raises(AssertionError, match="error"):
            judge(got, want, truth)
    else:
        judge(got, want, truth)
