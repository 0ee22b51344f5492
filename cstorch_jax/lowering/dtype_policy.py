"""The lowering's one dtype policy: what 16-bit floats and integers compute in.

torch computes a float16 or bfloat16 op in float32 -- its "opmath" dtype
(`at::opmath_type`, `torch._prims_common.get_computation_dtype`) -- and rounds the result
to 16 bits once; its decompositions say so per op with `type_casts`. The lowering follows
the same rule, stated here once and nowhere else:

- `opmath(x)`: the value a float-valued computation works on: float16, bfloat16,
  integers and bools become float32 (integer inputs of float math promote to the default
  float, as in torch); float32 and complex64 stay as they are. `@in_opmath` on an
  elementwise lowering converts its 16-bit floating array arguments so (binary
  arithmetic: a Python scalar operand is then not rounded to 16 bits before it is used).
- `@accumulates(FLOAT32)` on a lowering whose result sums or normalizes many elements
  (reductions, scans, softmax, normalization, pooling averages; losses reach the lowering
  as these reductions): its 16-bit floating array arguments are converted to float32
  before it runs, so every intermediate is float32, and the interpreter rounds the result
  once to torch's result dtype.
- `@accumulates(FLOAT32, operands=HALF)` on a contraction (matmul, convolution): the
  operands stay 16-bit (that is the multiply the hardware runs) and the products are
  summed in float32 (`preferred_element_type=accumulator(a.dtype)`), rounded once at the end.
- `@accumulates(EXACT)` on a reduction that selects or counts elements (max, argmax,
  cummax, any): no rounding happens, so it computes in the input dtype.

`ACCUMULATION` maps every lowering so declared to its policy;
tests/lowering/test_accumulation.py checks each one against eager torch on inputs where
a 16-bit accumulator would be visibly less accurate than a float32 one.
"""
from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp

FLOAT32 = "float32"  # 16-bit floats accumulate (and compute) in float32
EXACT = "exact"  # selects, compares or counts elements: computed in the input dtype
HALF = "half"  # contraction operands stay 16-bit; only the accumulator is float32

_HALF_DTYPES = (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))

ACCUMULATION: dict[Callable, str] = {}  # lowering function -> FLOAT32 | EXACT


def is_half(dtype) -> bool:
    """float16 or bfloat16."""
    return jnp.dtype(dtype) in _HALF_DTYPES


def accumulator(dtype):
    """The dtype sums of `dtype` values accumulate in: float32 for 16-bit floats."""
    return jnp.float32 if is_half(dtype) else dtype


def opmath(x):
    """`x` as a float-valued computation reads it: float16, bfloat16, integers and bools
    as float32; float32 and complex64 unchanged."""
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.inexact) and not is_half(x.dtype):
        return x
    return x.astype(jnp.float32)


def _widen_half(x):
    if isinstance(x, jax.Array) and is_half(x.dtype):
        return x.astype(jnp.float32)
    if isinstance(x, (list, tuple)):
        return type(x)(_widen_half(v) for v in x)
    return x


def in_opmath(fn: Callable) -> Callable:
    """An elementwise lowering that computes 16-bit floating array arguments in float32."""

    @functools.wraps(fn)
    def lowered(*args, **kwargs):
        return fn(*_widen_half(args), **{k: _widen_half(v) for k, v in kwargs.items()})

    return lowered


def accumulates(policy: str, operands: str = FLOAT32) -> Callable[[Callable], Callable]:
    """Declare (in `ACCUMULATION`) and apply a lowering's accumulation dtype.

    `accumulates(FLOAT32)`: 16-bit floating array arguments (also inside list arguments)
    are converted to float32 before the lowering runs. `accumulates(FLOAT32,
    operands=HALF)`: the arguments are left alone and the lowering itself sums in
    `accumulator(dtype)` (a contraction's `preferred_element_type`). `accumulates(EXACT)`:
    nothing to convert; the declaration says that no rounding happens."""
    if policy not in (FLOAT32, EXACT) or operands not in (FLOAT32, HALF):
        raise ValueError(f"unknown accumulation policy {policy!r} / operands {operands!r}")

    def deco(fn: Callable) -> Callable:
        lowered = in_opmath(fn) if policy == FLOAT32 and operands == FLOAT32 else fn
        ACCUMULATION[lowered] = policy
        return lowered

    return deco
