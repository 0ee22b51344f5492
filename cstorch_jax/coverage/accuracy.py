"""Judge a 16-bit result by its error against the same op computed in float64.

A fixed tolerance against eager torch cannot judge bfloat16 or float16 results: two
correct implementations round differently (bfloat16 has 8 significant bits), and the one
closer to the exact answer is not always eager's (for a bfloat16 layer norm, cstorch's
weight gradient is 0.047 from the float64 answer, eager's 0.122). So a 16-bit output is
judged by how far it is from the *truth* -- the same op on the same input values held
exactly in float64 (`to_reference`) -- compared with how far eager torch is, at the same
dtype, on the same inputs:

- structure and dtypes equal eager's; integer, bool and non-tensor outputs equal eager's
  exactly;
- NaN and inf agree: each element of cstorch's output is NaN, +inf or -inf exactly where
  eager's is, or where the truth rounded to the output's dtype is (an overflow that eager
  misses and cstorch does not is an error, and the reverse is allowed);
- over the elements where cstorch, eager and the truth are all finite, with
  err(y) = ||y - truth||_2 computed in float64:

      err(cstorch) <= FACTOR * err(eager)

  Eager's error is never smaller than the error of rounding the truth to the dtype, so a
  correctly rounded cstorch result always passes; where eager is exact (err 0: copies,
  max, indexing, integer-valued sums) cstorch must be exact too. FACTOR = 2 leaves room
  for a different but equally valid summation order or one extra rounding, and still
  fails a 16-bit accumulation where eager accumulates in float32 once the reduction is
  long enough to show it (tests/lowering/test_accumulation.py builds such samples).

An output that the float64 run computes in another dtype (it does not depend on any
converted input, such as a float32 `arange` inside the function) has no float64 truth; it
is compared with eager's at torch.testing's tolerance for its dtype (`EAGER_TOLERANCE`).
"""
from __future__ import annotations

import torch
import torch.utils._pytree as pytree

FACTOR = 2.0
REFERENCE_DTYPE = torch.float64
# an output the float64 run computes in its own dtype is compared with eager's (rtol, atol)
EAGER_TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (1.6e-2, 1e-5), torch.float16: (1e-3, 1e-5)}


def to_reference(tree, dtype: torch.dtype):
    """Exact float64 copies of every floating tensor of `tree` (leaves, keeping
    requires_grad); `dtype` itself, where an argument names it (`sum(..., dtype=)`,
    `.to(dtype)`), becomes float64 too."""

    def convert(x):
        if isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
            return x.detach().to(REFERENCE_DTYPE).requires_grad_(x.requires_grad)
        if isinstance(x, torch.Tensor):
            return x.detach().clone()
        if x is dtype:
            return REFERENCE_DTYPE
        return x

    return pytree.tree_map(convert, tree)


def _kind(x: torch.Tensor) -> torch.Tensor:
    """0 finite, 1 NaN, 2 +inf, 3 -inf, per element."""
    return torch.where(torch.isnan(x), 1, torch.where(x == float("inf"), 2, torch.where(x == -float("inf"), 3, 0)))


def error(y: torch.Tensor, truth: torch.Tensor, where: torch.Tensor) -> float:
    """||y - truth||_2 over the elements `where`, in float64."""
    return float(torch.linalg.vector_norm((y.double() - truth.double())[where]))


def judge_tensor(got: torch.Tensor, want: torch.Tensor, truth: torch.Tensor, what: str = "output") -> None:
    """Raise AssertionError unless `got` is as accurate as `want` against `truth` (see
    the module docstring). `got` and `want` have the dtype under test."""
    if got.dtype != want.dtype:
        raise AssertionError(f"{what}: dtype {got.dtype}, eager gives {want.dtype}")
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {tuple(got.shape)}, eager gives {tuple(want.shape)}")
    got, want = got.detach(), want.detach()
    if not want.dtype.is_floating_point:
        if not torch.equal(got, want):
            raise AssertionError(f"{what}: {(got != want).sum()} of {want.numel()} {want.dtype} elements differ "
                                 f"from eager")
        return
    if truth.dtype != REFERENCE_DTYPE:
        # the float64 run did not compute this output in float64 (it does not depend on a
        # converted input, e.g. a float32 arange): eager's own result is the reference
        rtol, atol = EAGER_TOLERANCE[want.dtype]
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{what}: {m}")
        return
    truth = truth.detach().expand(want.shape)
    kind = _kind(got)
    allowed = (kind == _kind(want)) | (kind == _kind(truth.to(want.dtype)))
    if not bool(allowed.all()):
        i = int((~allowed).flatten().nonzero()[0])
        raise AssertionError(f"{what}: element {i} is {got.flatten()[i].item()}, eager gives "
                             f"{want.flatten()[i].item()}, float64 gives {truth.flatten()[i].item()}")
    finite = torch.isfinite(got) & torch.isfinite(want) & torch.isfinite(truth)
    mine, eager = error(got, truth, finite), error(want, truth, finite)
    if mine > FACTOR * eager:
        raise AssertionError(f"{what}: error {mine:.3g} against float64, eager's {eager:.3g} "
                             f"(ratio {mine / eager if eager else float('inf'):.3g} > {FACTOR})")


def judge(got, want, truth) -> None:
    """`judge_tensor` on every leaf; the structure and the non-tensor leaves equal eager's."""
    got_leaves, got_spec = pytree.tree_flatten(got)
    want_leaves, want_spec = pytree.tree_flatten(want)
    truth_leaves, _ = pytree.tree_flatten(truth)
    if got_spec != want_spec:
        raise AssertionError(f"output structure {got_spec} != eager {want_spec}")
    if len(truth_leaves) != len(want_leaves):
        raise AssertionError(f"the float64 run gives {len(truth_leaves)} outputs, eager {len(want_leaves)}")
    for i, (g, w, t) in enumerate(zip(got_leaves, want_leaves, truth_leaves)):
        if isinstance(w, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                raise AssertionError(f"output {i}: got {type(g).__name__}, eager gives a tensor")
            judge_tensor(g, w, t if isinstance(t, torch.Tensor) else torch.tensor(t), f"output {i}")
        elif g != w and not (isinstance(w, float) and w != w and g != g):
            raise AssertionError(f"output {i}: {g!r} != eager {w!r}")
