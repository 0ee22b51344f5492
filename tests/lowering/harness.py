"""Harness of the lowering tests: run a torch function eagerly and through
`cstorch_jax.jit`, compare, and check that the intended ATen ops are in the captured graph.

In float32, results match eager's to rtol = atol = 1e-5 (NaN == NaN, everything else
exactly, same dtypes). With `dtype=torch.bfloat16` or `torch.float16`, every float32
argument is converted to that dtype first and the results are judged against the same
function run on float64 copies of the arguments (`cstorch_jax.coverage.accuracy.judge`:
cstorch's error at most twice eager's, same dtypes, integers exact, NaN/inf agreeing)."""
from __future__ import annotations

import pytest
import torch
import torch.utils._pytree as pytree

import cstorch_jax
from cstorch_jax.coverage.accuracy import judge, to_reference

RTOL = ATOL = 1e-5
HALF = (torch.bfloat16, torch.float16)
NAN, INF = float("nan"), float("inf")


# ---- helpers --------------------------------------------------------------------------


def _clone(tree):
    return pytree.tree_map(
        lambda a: a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a, tree
    )


def assert_same(got, want):
    """Same structure; floats within RTOL/ATOL (NaN == NaN); everything else exact; same dtypes."""
    got_leaves, got_spec = pytree.tree_flatten(got)
    want_leaves, want_spec = pytree.tree_flatten(want)
    assert got_spec == want_spec, f"output structure {got_spec} != {want_spec}"
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        if isinstance(w, torch.Tensor):
            tol = dict(rtol=RTOL, atol=ATOL) if w.dtype.is_floating_point else dict(rtol=0, atol=0)
            torch.testing.assert_close(g.detach(), w.detach(), equal_nan=True, msg=lambda m: f"output leaf {i}: {m}",
                                       **tol)
        else:
            assert g == w, f"output leaf {i}: {g!r} != {w!r}"


def in_dtype(tree, dtype):
    """The float32 tensors of `tree` as `dtype` leaves (requires_grad kept)."""
    if dtype == torch.float32:
        return tree
    return pytree.tree_map(
        lambda a: a.detach().to(dtype).requires_grad_(a.requires_grad)
        if isinstance(a, torch.Tensor) and a.dtype == torch.float32 else a, tree)


def check(fn, *args, ops=(), dtype=torch.float32):
    """`fn(*args)` through cstorch_jax.jit equals eager torch (as accurate as eager, in
    16-bit `dtype`), and its graph holds `ops`."""
    args = in_dtype(args, dtype)
    jitted = cstorch_jax.jit(fn)
    got = jitted(*_clone(args))
    want = fn(*_clone(args))
    if dtype in HALF:
        judge(got, want, fn(*to_reference(args, dtype)))
    else:
        assert_same(got, want)
    if ops:
        hist = jitted.executable(*args).captured.ops()
        missing = [str(op) for op in ops if str(op) not in hist]
        assert not missing, f"{missing} not in the captured graph, which has {sorted(hist)}"


def check_grad(fn, *args, ops=(), dtype=torch.float32):
    """Like `check`, for (outputs, grads): backward() of sum(out * cotangent) over every
    output that requires grad, returning the .grad of every argument that requires grad."""
    args = in_dtype(args, dtype)
    outs = [o for o in pytree.tree_leaves(fn(*_clone(args))) if isinstance(o, torch.Tensor) and o.requires_grad]
    assert outs, "no output depends on an argument that requires grad"
    cotangents = [torch.randn(o.shape).to(o.dtype) for o in outs]
    n = len(args)

    def step(*a):
        inputs, cots = a[:n], a[n:]
        out = fn(*inputs)
        leaves = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor) and o.requires_grad]
        sum((o * c).sum() for o, c in zip(leaves, cots)).backward()
        return out, [x.grad for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]

    check(step, *args, *cotangents, ops=ops, dtype=dtype)


def R(*shape):
    """A float32 leaf that requires grad."""
    return torch.randn(*shape, requires_grad=True)


def T(*values, dtype=None):
    return torch.tensor(values, dtype=dtype)


class Case:
    """One jit sample: fn, a factory of its arguments, the ops it must produce."""

    def __init__(self, name, fn, make_args, ops, grad=False):
        self.name, self.fn, self.make_args, self.ops, self.grad = name, fn, make_args, tuple(ops), grad

    def param(self):
        return pytest.param(self, id=self.name)


CASES: list[Case] = []


def sample(name, fn, make_args, ops, grad=False):
    CASES.append(Case(name, fn, make_args, ops, grad))
