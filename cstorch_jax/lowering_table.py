"""The ATen -> jax.numpy table.

Every family of lowerings (`cstorch_jax/lowering/<family>.py`) registers into it when
`cstorch_jax.lowering` is imported, which happens when a step is first compiled; read it
as `cstorch_jax.lowering.registry.LOWERINGS`, complete. It lives outside that package so
that the optimizer update ops (`cstorch_jax.optim.update_op`) register their lowerings at
import without loading every family (start-up time).

`LOWERINGS[op]` is a function with the op's torch signature that takes jax arrays in
place of tensors (and Python values for everything else) and returns jax arrays.
Ops that draw random numbers are also in `RANDOM_OPS`; their lowering receives a
`key=` argument derived from the step's RNG key. Besides ATen's op overloads the table
holds torch's higher-order ops that cstorch lowers (`torch.ops.higher_order.cond`), whose
operands include graphs.
"""
from __future__ import annotations

from typing import Callable

from torch._ops import HigherOrderOperator, OpOverload

LOWERINGS: dict[OpOverload | HigherOrderOperator, Callable] = {}
RANDOM_OPS: set[OpOverload] = set()


def register(*ops: OpOverload | HigherOrderOperator, random: bool = False):
    """Decorator: `fn` is the lowering of every op in `ops` (ATen overloads, or
    higher-order ops)."""

    def deco(fn: Callable) -> Callable:
        for op in ops:
            if not isinstance(op, (OpOverload, HigherOrderOperator)):
                raise TypeError(f"register() takes op overloads such as aten.add.Tensor, got {op!r}")
            if op in LOWERINGS:
                raise ValueError(f"{op} is lowered twice")
            LOWERINGS[op] = fn
            if random:
                RANDOM_OPS.add(op)
        return fn

    return deco
