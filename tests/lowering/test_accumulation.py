"""Each lowering's declared accumulation dtype (cstorch_jax/lowering/dtype_policy.py),
checked against eager torch in bfloat16 and float16.

Every lowering declared `@accumulates(...)` gets a sample here whose result sums,
multiplies or normalizes thousands of 16-bit values (positive values, so that no
cancellation hides the accumulator), called directly on jax arrays, with eager torch's
same op at the same dtype and the op computed in float64 as the truth:

- FLOAT32 (sums in float32, one rounding at the end): cstorch's error against float64
  is within a factor 2 of eager's, both ways. A 16-bit accumulator is 10-1000 times less
  accurate on these samples, so a lowering that accumulated in 16 bits while torch uses
  float32 (or the reverse) fails; two float32 accumulators that sum in another order
  round to the same 16-bit result almost everywhere (ratio 1). Where torch's CPU kernel
  itself accumulates in 16 bits, cstorch keeps float32 and is the more accurate:
  `EAGER_LESS_ACCURATE` names those ops, with the reason, and the test checks that
  eager is indeed less accurate there.
- EXACT (selects or compares elements): equal to eager's result, bit for bit.

Losses have no lowering of their own: they reach the lowering as the reductions and
log-softmax above; `test_loss_accumulates_like_eager` checks a few end to end through
`cstorch_jax.jit`.
"""
from __future__ import annotations

import jax
import pytest
import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree

import cstorch_jax
from cstorch_jax.coverage.accuracy import error, judge, to_reference
from cstorch_jax.dtypes import to_jax, to_torch
from cstorch_jax.lowering import LOWERINGS, channels_last, conv, distances, nn, pooling, products, reduction
from cstorch_jax.lowering.dtype_policy import ACCUMULATION, EXACT, FLOAT32
from harness import HALF

aten = torch.ops.aten
cstorch = torch.ops.cstorch  # the channels-last twins (lowering/channels_last.py)
FACTOR = 2.0
_DTYPE_IDS = lambda d: str(d).removeprefix("torch.")  # noqa: E731


def U(*shape):
    """Positive values in [0.5, 1.5): sums grow without cancelling."""
    return torch.rand(*shape) + 0.5


def N(*shape):
    return torch.randn(*shape)


def NEAR1(*shape):
    """Factors in [0.99, 1.01]: long products stay in range."""
    return 1 + (torch.rand(*shape) - 0.5) * 0.02


def _max_pool_backward(nd):
    x = torch.zeros(2, 3, *(12,) * nd)  # all ties: each window picks its first element
    k, s = [6] * nd, [1] * nd
    fwd = aten.max_pool2d_with_indices.default if nd == 2 else aten.max_pool3d_with_indices.default
    out, idx = fwd(x, k, s)
    return U(*out.shape), x, k, s, [0] * nd, [1] * nd, False, idx


def _adaptive_max_backward(nd):
    x = torch.zeros(2, 3, *(10,) * nd)
    fwd = aten.adaptive_max_pool2d.default if nd == 2 else aten.adaptive_max_pool3d.default
    out, idx = fwd(x, [3] * nd)
    return U(*out.shape), x, idx


def _fractional_backward(nd):
    x = torch.zeros(1, 2, *(16,) * nd)
    fwd = aten.fractional_max_pool2d.default if nd == 2 else aten.fractional_max_pool3d.default
    out, idx = fwd(x, [6] * nd, [7] * nd, torch.rand(1, 2, nd))
    return U(*out.shape), x, [6] * nd, [7] * nd, idx


def _batch_norm_backward_args():
    x, w = N(256, 16, 8), U(16)
    mean, rstd = x.mean((0, 2)), (x.var((0, 2), unbiased=False) + 1e-5).rsqrt()
    return U(256, 16, 8), x, w, None, None, mean, rstd, True, 1e-5, [True, True, True], torch.empty(0, dtype=torch.uint8)


def _max_pool_nhwc_backward():
    x = torch.zeros(2, 12, 12, 3)  # all ties, as _max_pool_backward; channels last
    args = [6, 6], [1, 1], [0, 0], [1, 1], False
    out, idx = cstorch.max_pool2d_nhwc(x, *args)
    return U(*out.shape), x, *args, idx


def _cdist_backward_args():
    x1, x2 = U(8, 2048) + 4, U(6, 2048)
    return U(8, 6), x1, x2, 3.0, torch.cdist(x1, x2, 3.0)


def _pdist_backward_args():
    x = U(8, 2048) * 4
    return U(28), x, 3.0, torch.pdist(x, 3.0)


def _conv_backward_args():
    x, w = U(4, 256, 16), U(32, 256, 3) / 256
    return U(4, 32, 14), x, w, [32], [1], [0], [1], False, [0], 1, [True, True, True]


# op -> (argument factory, kwargs); arguments in float32, converted to the dtype under test
SAMPLES = {
    aten.sum.dim_IntList: (lambda: (U(32, 4096), [1]), {}),
    aten.sum.default: (lambda: (U(4096),), {}),
    aten.mean.dim: (lambda: (U(32, 4096), [1]), {}),
    aten.mean.default: (lambda: (U(4096) + 100,), {}),
    aten.prod.dim_int: (lambda: (NEAR1(32, 1024), 1), {}),
    aten.prod.default: (lambda: (NEAR1(1024),), {}),
    aten.var.correction: (lambda: (U(32, 4096) + 8, [1]), {}),
    aten.var_mean.correction: (lambda: (U(32, 4096) + 8, [1]), {}),
    aten.linalg_vector_norm.default: (lambda: (U(32, 4096), 2, [1]), {}),
    aten.cumsum.default: (lambda: (U(8, 2048), 1), {}),
    aten.cumprod.default: (lambda: (NEAR1(8, 1024), 1), {}),
    aten.logcumsumexp.default: (lambda: (N(8, 2048), 1), {}),
    aten._softmax.default: (lambda: (N(32, 4096), 1, False), {}),
    aten._log_softmax.default: (lambda: (N(32, 4096), 1, False), {}),
    aten._softmax_backward_data.default: (
        lambda: (U(32, 4096), torch.softmax(N(32, 4096), 1), 1, torch.float32), {}),
    aten._log_softmax_backward_data.default: (
        lambda: (U(32, 4096), torch.log_softmax(N(32, 4096), 1), 1, torch.float32), {}),
    aten.native_layer_norm.default: (lambda: (N(32, 4096) + 4, [4096], U(4096), N(4096), 1e-5), {}),
    aten.native_group_norm.default: (lambda: (N(4, 16, 1024) + 4, U(16), N(16), 4, 16, 1024, 4, 1e-5), {}),
    aten._native_batch_norm_legit_functional.default: (
        lambda: (N(512, 16, 8) + 4, U(16), N(16), N(16), U(16), True, 0.1, 1e-5), {}),
    aten._native_batch_norm_legit_no_training.default: (
        lambda: (N(512, 16, 8) + 4, U(16), N(16), N(16) + 4, U(16), 0.1, 1e-5), {}),
    aten._native_batch_norm_legit.no_stats: (lambda: (N(512, 16, 8) + 4, U(16), N(16), True, 0.1, 1e-5), {}),
    aten._batch_norm_with_update_functional.default: (
        lambda: (N(512, 16, 8) + 4, U(16), N(16), N(16), U(16), 0.1, 1e-5), {}),
    aten._batch_norm_no_update.default: (lambda: (N(512, 16, 8) + 4, U(16), N(16), N(16) + 4, U(16), 0.1, 1e-5), {}),
    aten.batch_norm_backward.default: (_batch_norm_backward_args, {}),
    aten.mm.default: (lambda: (U(32, 2048), U(2048, 32)), {}),
    aten.bmm.default: (lambda: (U(4, 16, 2048), U(4, 2048, 16)), {}),
    aten.addmm.default: (lambda: (U(32), U(32, 2048), U(2048, 32)), {}),
    aten.baddbmm.default: (lambda: (U(4, 16, 16), U(4, 16, 2048), U(4, 2048, 16)), {}),
    aten.dot.default: (lambda: (U(4096), U(4096)), {}),
    aten.addmv.default: (lambda: (U(32), U(32, 4096), U(4096)), {}),
    aten.addbmm.default: (lambda: (U(16, 16), U(64, 16, 64), U(64, 64, 16)), {}),
    aten._trilinear.default: (lambda: (U(16, 64), U(8, 64, 64), U(16, 64), [1, 3], [0], [1, 2], [2, 3]), {}),
    aten.convolution.default: (lambda: (U(4, 256, 16), U(32, 256, 3), U(32), [1], [0], [1], False, [0], 1), {}),
    aten.convolution_backward.default: (_conv_backward_args, {}),
    cstorch.convolution_nhwc.default: (
        lambda: (U(2, 8, 8, 256), U(32, 256, 3, 3) / 256, U(32), [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {}),
    cstorch.convolution_backward_nhwc.default: (
        lambda: (U(2, 6, 6, 32), U(2, 8, 8, 256), U(32, 256, 3, 3) / 256, [32], [1, 1], [0, 0], [1, 1], False,
                 [0, 0], 1, [True, True, True]), {}),
    aten.avg_pool2d.default: (lambda: (U(2, 3, 64, 64), [32, 32]), {}),
    cstorch.avg_pool2d_nhwc.default: (lambda: (U(2, 64, 64, 3), [32, 32], [32, 32], [0, 0], False, True, None), {}),
    aten.avg_pool3d.default: (lambda: (U(2, 3, 16, 16, 16), [16, 16, 16]), {}),
    aten.avg_pool2d_backward.default: (
        lambda: (U(2, 3, 57, 57), U(2, 3, 64, 64), [8, 8], [1, 1], [0, 0], False, True, None), {}),
    cstorch.avg_pool2d_backward_nhwc.default: (
        lambda: (U(2, 57, 57, 3), U(2, 64, 64, 3), [8, 8], [1, 1], [0, 0], False, True, None), {}),
    aten.avg_pool3d_backward.default: (
        lambda: (U(1, 2, 9, 9, 9), U(1, 2, 12, 12, 12), [4, 4, 4], [1, 1, 1], [0, 0, 0], False, True, None), {}),
    aten._adaptive_avg_pool2d.default: (lambda: (U(2, 3, 64, 64), [2, 2]), {}),
    aten._adaptive_avg_pool3d.default: (lambda: (U(2, 3, 16, 16, 16), [1, 1, 1]), {}),
    aten._adaptive_avg_pool2d_backward.default: (lambda: (U(2, 3, 2, 2), U(2, 3, 64, 64)), {}),
    aten._adaptive_avg_pool3d_backward.default: (lambda: (U(2, 3, 2, 2, 2), U(2, 3, 16, 16, 16)), {}),
    aten.max_pool2d_with_indices_backward.default: (lambda: _max_pool_backward(2), {}),
    aten.max_pool3d_with_indices_backward.default: (lambda: _max_pool_backward(3), {}),
    cstorch.max_pool2d_backward_nhwc.default: (_max_pool_nhwc_backward, {}),
    aten.adaptive_max_pool2d_backward.default: (lambda: _adaptive_max_backward(2), {}),
    aten.adaptive_max_pool3d_backward.default: (lambda: _adaptive_max_backward(3), {}),
    aten.fractional_max_pool2d_backward.default: (lambda: _fractional_backward(2), {}),
    aten.fractional_max_pool3d_backward.default: (lambda: _fractional_backward(3), {}),
    aten.replication_pad1d_backward.default: (lambda: (U(2, 3, 516), U(2, 3, 4), [256, 256]), {}),
    aten.replication_pad2d_backward.default: (lambda: (U(1, 2, 68, 68), U(1, 2, 4, 4), [32, 32, 32, 32]), {}),
    aten.replication_pad3d_backward.default: (
        lambda: (U(1, 1, 20, 20, 20), U(1, 1, 4, 4, 4), [8, 8, 8, 8, 8, 8]), {}),
    # distances: sums of powers of 4096 differences (x's rows ~4 apart from y's: a float16 sum of
    # fourth powers overflows)
    aten.dist.default: (lambda: (U(32, 4096) + 4, U(32, 4096), 4), {}),
    aten._cdist_forward.default: (lambda: (U(8, 2048) + 4, U(6, 2048), 3.0, None), {}),
    aten._cdist_backward.default: (_cdist_backward_args, {}),
    aten._pdist_forward.default: (lambda: (U(8, 2048) * 4, 3.0), {}),
    aten._pdist_backward.default: (_pdist_backward_args, {}),
    # EXACT: selections
    aten.amax.default: (lambda: (N(32, 4096), [1]), {}),
    aten.amin.default: (lambda: (N(32, 4096), [1]), {}),
    aten.max.default: (lambda: (N(4096),), {}),
    aten.min.default: (lambda: (N(4096),), {}),
    aten.max.dim: (lambda: (N(32, 4096), 1), {}),
    aten.min.dim: (lambda: (N(32, 4096), 1), {}),
    aten.argmax.default: (lambda: (N(32, 4096), 1), {}),
    aten.argmin.default: (lambda: (N(32, 4096), 1), {}),
    aten.cummax.default: (lambda: (N(8, 2048), 1), {}),
    aten.cummin.default: (lambda: (N(8, 2048), 1), {}),
    aten.any.default: (lambda: (N(4096) > 3,), {}),
    aten.any.dim: (lambda: (N(32, 4096) > 3, 1), {}),
    aten.any.dims: (lambda: (N(32, 4096) > 3, [1]), {}),
    aten.all.default: (lambda: (N(4096) > -3,), {}),
    aten.all.dim: (lambda: (N(32, 4096) > -3, 1), {}),
    aten.all.dims: (lambda: (N(32, 4096) > -3, [1]), {}),
    aten.max_pool2d_with_indices.default: (lambda: (N(2, 3, 64, 64), [8, 8], [4, 4]), {}),
    aten.max_pool3d_with_indices.default: (lambda: (N(2, 3, 16, 16, 16), [4, 4, 4], [2, 2, 2]), {}),
    cstorch.max_pool2d_nhwc.default: (lambda: (N(2, 64, 64, 3), [8, 8], [4, 4], [0, 0], [1, 1], False), {}),
    aten.adaptive_max_pool2d.default: (lambda: (N(2, 3, 64, 64), [3, 3]), {}),
    aten.adaptive_max_pool3d.default: (lambda: (N(2, 3, 16, 16, 16), [3, 3, 3]), {}),
    aten.fractional_max_pool2d.default: (lambda: (N(1, 2, 12, 12), [6, 6], [7, 7], torch.rand(1, 2, 2)), {}),
    aten.fractional_max_pool3d.default: (
        lambda: (N(1, 2, 16, 16, 16), [6, 6, 6], [7, 7, 7], torch.rand(1, 2, 3)), {}),
}


# declared FLOAT32 where torch's CPU kernel is less accurate than one float32 accumulation
# rounded once: cstorch is the more accurate of the two there (within the 2x of `judge`),
# and the test checks that eager really is less accurate, so that the list stays true
_BN_STATS = ("torch's CPU batch norm with 16-bit weights rounds the batch mean and 1/std to 16 bits before "
             "normalizing (with float32 weights, as under autocast, it keeps them float32, as cstorch always does)")
_SUMS_IN_16_BIT = "torch's CPU kernel adds into a 16-bit accumulator"
EAGER_LESS_ACCURATE = {
    aten.prod.default: _SUMS_IN_16_BIT + " (products)",
    aten.prod.dim_int: _SUMS_IN_16_BIT + " (products)",
    aten.addbmm.default: "torch adds one 16-bit matrix product per batch element into a 16-bit result",
    aten._native_batch_norm_legit_functional.default: _BN_STATS,
    aten._native_batch_norm_legit.no_stats: _BN_STATS,
    aten._batch_norm_with_update_functional.default: _BN_STATS,
    aten.avg_pool2d_backward.default: _SUMS_IN_16_BIT + " (each window's share of the gradient)",
    cstorch.avg_pool2d_backward_nhwc.default: _SUMS_IN_16_BIT + " (its eager kernel is aten.avg_pool2d_backward)",
    aten._adaptive_avg_pool3d.default: _SUMS_IN_16_BIT + " (the window sum)",
    aten.replication_pad1d_backward.default: _SUMS_IN_16_BIT + " (the gradients of the copies of an edge element)",
    aten.replication_pad2d_backward.default: _SUMS_IN_16_BIT + " (the gradients of the copies of an edge element)",
    aten.replication_pad3d_backward.default: _SUMS_IN_16_BIT + " (the gradients of the copies of an edge element)",
}


def _to(tree, dtype):
    """The float32 tensors of `tree` as `dtype`; a float32 dtype argument too (the
    softmax backward's `input_dtype`)."""
    return pytree.tree_map(lambda a: a.to(dtype) if isinstance(a, torch.Tensor) and a.dtype == torch.float32
                           else dtype if a is torch.float32 else a, tree)


def _lowered(op, args, kwargs, want):
    """The lowering of `op` on jax copies of the tensor arguments, compiled as one jax.jit
    program (the other arguments are constants), cast to eager's dtypes as the
    interpreter does."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    tensor_pos = [i for i, a in enumerate(leaves) if isinstance(a, torch.Tensor)]

    def run(*arrays):
        full = list(leaves)
        for i, a in zip(tensor_pos, arrays):
            full[i] = a
        a, kw = pytree.tree_unflatten(full, spec)
        return LOWERINGS[op](*a, **kw)

    out = jax.jit(run)(*(to_jax(leaves[i]) for i in tensor_pos))
    want_leaves, want_spec = pytree.tree_flatten(want)
    out_leaves = pytree.tree_leaves(out, is_leaf=lambda x: x is None)
    return pytree.tree_unflatten([None if w is None else to_torch(o, w.dtype) for o, w in zip(out_leaves, want_leaves)],
                                 want_spec)


@pytest.mark.parametrize("dtype", HALF, ids=_DTYPE_IDS)
@pytest.mark.parametrize("op", list(SAMPLES), ids=str)
def test_lowering_accumulates_like_eager(op, dtype):
    check_accumulation(op, dtype, ACCUMULATION[LOWERINGS[op]])


def check_accumulation(op, dtype, policy):
    """`LOWERINGS[op]` on `op`'s sample in `dtype` is as accurate as eager torch, and no
    more accurate than a float32 accumulator allows, given its declared `policy`."""
    torch.manual_seed(0)
    make_args, kwargs = SAMPLES[op]
    args = _to(make_args(), dtype)
    try:
        want = op(*args, **kwargs)
    except NotImplementedError as e:
        pytest.skip(f"eager torch has no {dtype} kernel on CPU: {e}")
    got = _lowered(op, args, kwargs, want)
    if policy == EXACT:
        for g, w in zip(pytree.tree_leaves(got), pytree.tree_leaves(want)):
            assert g.dtype == w.dtype and torch.equal(g, w), f"{op} is declared exact"
        return
    truth = op(*to_reference(args, dtype), **kwargs)
    judge(got, want, truth)  # dtypes, NaN/inf, and cstorch's error <= 2 x eager's
    less_accurate = []  # outputs where eager's error is more than FACTOR x cstorch's
    for i, (g, w, t) in enumerate(zip(pytree.tree_leaves(got), pytree.tree_leaves(want), pytree.tree_leaves(truth))):
        if isinstance(w, torch.Tensor) and w.dtype.is_floating_point and w.numel():
            finite = torch.isfinite(g) & torch.isfinite(w) & torch.isfinite(t)
            mine, eager = error(g, t, finite), error(w, t, finite)
            if eager > FACTOR * mine:
                less_accurate.append((i, eager, mine))
    if op in EAGER_LESS_ACCURATE:  # the listed rounding shows in at least one output (batch norm: the result)
        assert less_accurate, f"{op}: eager is as accurate now: drop it from EAGER_LESS_ACCURATE"
    else:
        assert not less_accurate, (
            f"{op}: (output, eager's error, cstorch's) {less_accurate}: eager's error is more than {FACTOR} x "
            f"cstorch's: eager accumulates in another dtype than the declared float32")


def test_every_reduction_declares_its_accumulation():
    """Every lowering of the reduction, normalization/softmax, matmul, convolution,
    pooling (their channels-last twins too) and distance families declares its
    accumulation, and each declaration has a sample above."""
    families = {m.__name__ for m in (reduction, nn, products, conv, pooling, channels_last, distances)}
    not_reductions = {aten.embedding.default, aten.rrelu_with_noise_backward.default,
                      aten.soft_margin_loss_backward.default}  # elementwise (in opmath); no sum
    undeclared = sorted(str(op) for op, fn in LOWERINGS.items()
                        if fn.__module__ in families and fn not in ACCUMULATION and op not in not_reductions)
    assert undeclared == []
    declared = {op for op, fn in LOWERINGS.items() if fn in ACCUMULATION}
    assert sorted(map(str, declared - set(SAMPLES))) == []
    assert set(ACCUMULATION.values()) <= {FLOAT32, EXACT}


LOSSES = {
    "mse_loss": (F.mse_loss, lambda: (U(32, 4096), U(32, 4096))),
    "cross_entropy": (F.cross_entropy, lambda: (N(4096, 64), torch.randint(0, 64, (4096,)))),
    "bce_with_logits": (F.binary_cross_entropy_with_logits, lambda: (N(32, 4096), torch.rand(32, 4096))),
    "smooth_l1_loss": (lambda x, y: F.smooth_l1_loss(x, y, reduction="sum"), lambda: (U(32, 4096), N(32, 4096))),
}


@pytest.mark.parametrize("dtype", HALF, ids=_DTYPE_IDS)
@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_accumulates_like_eager(name, dtype):
    """A loss over 131072 elements, and its input gradient, through cstorch_jax.jit."""
    torch.manual_seed(0)
    fn, make_args = LOSSES[name]
    x, y = _to(make_args(), dtype)

    def step(x, y):
        loss = fn(x, y)
        loss.backward()
        return loss, x.grad

    leaf = lambda t: t.detach().clone().requires_grad_(True)  # noqa: E731
    got = cstorch_jax.jit(step)(leaf(x), y)
    judge(got, step(leaf(x), y), step(*to_reference((leaf(x), y), dtype)))
