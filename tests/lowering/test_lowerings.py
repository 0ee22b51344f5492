"""The ATen -> jax.numpy lowerings, each checked against eager torch.

Every sample is a small torch function run twice: eagerly, and through
`cstorch_jax.jit` (make_fx -> functionalize -> core ATen -> the lowering table -> one
XLA executable). Results must match: float32 to rtol = atol = 1e-5, integers and bools
exactly, same dtypes and shapes. Each jit sample names the ATen ops it is meant to
exercise, and the test checks that they are really in the captured graph.

Gradient samples call `backward()` inside the compiled function on
`sum(output * cotangent)` with a random cotangent per output (so a permuted or
misrouted gradient cannot pass), and return the outputs and the `.grad` of every
argument that requires grad.

Every sample also runs in bfloat16 and float16 (its float32 arguments converted), judged
against the same function on float64 copies of the arguments: cstorch's error may be at
most twice eager torch's at the same dtype (see harness.py and
cstorch_jax/coverage/accuracy.py).

Ops that never reach a captured graph, because the capture's core-ATen decomposition
rewrites them into other ops, are checked by calling their lowering directly on jax
arrays (test_direct_lowerings.py), whose `test_every_lowering_is_sampled` keeps the lists
complete: every op registered by the pointwise, reduction, shape, creation, linalg,
conv, nn and indexing families must be named by some sample.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import cstorch_jax
import samples  # noqa: F401  (fills CASES)
from harness import CASES, HALF, INF, Case, assert_same, check, check_grad

@pytest.mark.parametrize("c", [c.param() for c in CASES])
def test_lowering_matches_torch(c: Case):
    (check_grad if c.grad else check)(c.fn, *c.make_args(), ops=c.ops)


@pytest.mark.parametrize("dtype", HALF, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("c", [c.param() for c in CASES])
def test_lowering_in_16_bit_is_as_accurate_as_eager(c: Case, dtype):
    args = c.make_args()
    if not any(isinstance(a, torch.Tensor) and a.dtype == torch.float32 for a in args):
        pytest.skip("no float32 argument to convert: the float32 test covers this sample")
    (check_grad if c.grad else check)(c.fn, *args, ops=c.ops, dtype=dtype)


def test_max_pool_indices_never_point_into_padding():
    """An all -inf window (padding included) points at its first in-bounds element, so
    the backward scatters into the input plane only."""
    x = torch.full((1, 1, 3, 3), -INF)
    out, idx = cstorch_jax.jit(lambda t: F.max_pool2d_with_indices(t, 3, 2, 1, ceil_mode=True))(x)
    want_out, want_idx = F.max_pool2d_with_indices(x, 3, 2, 1, ceil_mode=True)
    assert_same((out, idx), (want_out, want_idx))
    assert int(idx.min()) >= 0 and int(idx.max()) < 9


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_soft_margin_loss_gradient_at_large_margins_has_no_cancellation(dtype):
    """The gradient -t sigmoid(-t x) is tiny where t x is large: torch's decomposition
    computed it as t (sigmoid(t x) - 1), zero in float32 from t x = 17 on and 17 % off in
    bfloat16 at t x = 14. Eager's kernel is accurate to its dtype's rounding; so must cstorch be."""
    x = torch.tensor([8.0, 14.0, -17.0, 20.0, 30.0]).to(dtype)
    t = torch.tensor([1.0, 1.0, -1.0, 1.0, 1.0]).to(dtype)

    def grad(x, t):
        x = x.clone().requires_grad_()
        F.soft_margin_loss(x, t, reduction="sum").backward()
        return x.grad

    x64 = x.double().requires_grad_()
    (truth,) = torch.autograd.grad(F.soft_margin_loss(x64, t.double(), reduction="sum"), [x64])
    got, eager = cstorch_jax.jit(grad)(x, t), grad(x, t)
    assert got.dtype == dtype
    relative = ((got.double() - truth) / truth).abs().max().item()
    eager_relative = ((eager.double() - truth) / truth).abs().max().item()
    assert relative <= max(2 * eager_relative, torch.finfo(dtype).eps), (relative, eager_relative)
