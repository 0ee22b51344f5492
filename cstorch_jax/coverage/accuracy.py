"""Judge a result by its error against the same op computed in float64.

A fixed tolerance against eager torch cannot judge bfloat16 or float16 results: two
correct implementations round differently (bfloat16 has 8 significant bits), and the one
closer to the exact answer is not always eager's (for a bfloat16 layer norm, cstorch's
weight gradient is 0.047 from the float64 answer, eager's 0.122). So an output is judged
by how far it is from the *truth* -- the same op on the same input values held exactly in
float64 (`to_reference`) -- compared with how far eager torch is, at the same dtype, on
the same inputs:

- structure and dtypes equal eager's; integer, bool and non-tensor outputs equal eager's
  exactly;
- NaN and inf agree: each element of cstorch's output is NaN, +inf or -inf exactly where
  eager's is, or where the truth rounded to the output's dtype is (an overflow that eager
  misses and cstorch does not is an error; the reverse is allowed);
- over the elements where cstorch, eager and the truth are all finite, with
  err(y) = ||y - truth||_2 computed in float64:

      err(cstorch) <= FACTOR * max(err(eager), half_ulp)      (FACTOR = 2)

  where half_ulp = ||ulp(truth) / 2||_2 is the largest error a correctly rounded result
  can have (ulp at each element, in the output's dtype). Where eager is exact
  (err(eager) == 0: copies, selections, integer-valued results) cstorch must be exact
  too. The half-ulp floor keeps a small output (three elements, one of them rounded the
  other way after a chain of 16-bit ops) from failing on one ulp; the factor leaves room
  for a different but equally valid summation order. A 16-bit accumulation where eager
  sums in float32 still fails once the reduction is long enough to show it
  (tests/lowering/test_accumulation.py builds such samples).

An output that the float64 run computes in another dtype (it does not depend on any
converted input, such as a float32 `arange` inside the function) has no float64 truth; it
is compared with eager's at torch.testing's tolerance for its dtype (`EAGER_TOLERANCE`).
So is a float32 output of a 16-bit computation first: it passes within rtol = atol = 1e-5
of eager's, as in the float32 sweep, or else by the rule above.
"""
from __future__ import annotations

import torch
import torch.utils._pytree as pytree

FACTOR = 2.0
REFERENCE_DTYPE = torch.float64
# (rtol, atol) against eager where the float64 truth is missing or not needed
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


def half_ulp(truth: torch.Tensor, dtype: torch.dtype, where: torch.Tensor) -> float:
    """||ulp(truth) / 2||_2 over `where`, ulps of `dtype` (subnormal spacing below its
    smallest normal): the error bound of rounding `truth` correctly to `dtype`."""
    info = torch.finfo(dtype)
    magnitude = truth[where].abs().clamp_min(info.tiny)
    _, exponent = torch.frexp(magnitude)  # magnitude = m * 2**exponent, 0.5 <= m < 1
    return float(torch.linalg.vector_norm(torch.ldexp(torch.full_like(magnitude, info.eps / 4), exponent)))


def judge_tensor(got: torch.Tensor, want: torch.Tensor, truth: torch.Tensor, what: str = "output") -> None:
    """Raise AssertionError unless `got` is as accurate as `want` against `truth` (see
    the module docstring)."""
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
    rtol, atol = EAGER_TOLERANCE[want.dtype]
    if truth.dtype != REFERENCE_DTYPE:
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{what}: {m}")
        return
    if want.dtype == torch.float32 and torch.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
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
    if eager == 0 and mine != 0:
        raise AssertionError(f"{what}: eager is exact, cstorch's error against float64 is {mine:.3g}")
    bound = FACTOR * max(eager, half_ulp(truth, want.dtype, finite))
    if mine > bound:
        raise AssertionError(f"{what}: error {mine:.3g} against float64, eager's {eager:.3g}; at most {bound:.3g} "
                             f"(= {FACTOR} x max(eager's, half an ulp per element))")


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
            judge_tensor(g, w, t if isinstance(t, torch.Tensor) else torch.tensor(t, dtype=REFERENCE_DTYPE),
                         f"output {i}")
        elif g != w and not (isinstance(w, float) and w != w and g != g):
            raise AssertionError(f"output {i}: {g!r} != eager {w!r}")
