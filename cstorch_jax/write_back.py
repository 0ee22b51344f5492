"""Writing a new value back into a state tensor of a captured step without an op.

An optimizer ends its update by writing each new parameter and state value back into its
tensor. With `copy_`, a captured step dispatches, functionalizes, decomposes and traces one
copy per tensor. `assign(dst, src)` instead hands `dst` the value of `src` through torch's
functionalization (`_functionalize_replace` + `commit_update`, what an in-place op does once
its out-of-place result exists): the graph returns `src`'s value as `dst`'s new state, and
the step's op signature records the assignment, so the compile cache still tells apart two
steps that write the same values into different tensors.

This holds while `capture` runs a step's body (`assignable(...)` names its signature and
state tensors) outside a `torch.cond` branch (`assignable(None)`: a branch may not change
the step's state); everywhere else `assign` is `copy_`.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

import torch
from torch._subclasses.functional_tensor import FunctionalTensor


@dataclass
class _Step:
    """The step whose body runs: its op signature and its state tensors, by id."""
    signature: Any  # capture.OpSignature (not imported: capture imports this module)
    state: dict[int, torch.Tensor]


_STEPS: list[Optional[_Step]] = []  # innermost last; None while a torch.cond branch is traced


def assign(dst: torch.Tensor, src: torch.Tensor) -> None:
    """`dst.copy_(src)`, for writing a new value back into a tensor (an optimizer's new
    parameters and state). While a step is captured, when `dst` is one of its state
    tensors and `src` has `dst`'s shape, dtype, strides and device, the new value is
    recorded without an op (module docstring). Anywhere else (eager torch, a torch.cond
    branch, another tensor, a cast or broadcast), `dst.copy_(src)`."""
    step = _STEPS[-1] if _STEPS else None
    if (step is not None and step.state.get(id(dst)) is dst and isinstance(src, FunctionalTensor) and src is not dst
            and src.shape == dst.shape and src.dtype == dst.dtype and src.stride() == dst.stride()
            and src.device == dst.device):
        torch._sync(src)
        torch._functionalize_replace(dst.elem, torch._from_functional_tensor(src.elem))
        torch._functionalize_commit_update(dst.elem)
        step.signature.record("assign", (dst, src), {}, None)
        return
    dst.copy_(src)


@contextlib.contextmanager
def assignable(signature: Optional[Any], state: Sequence[torch.Tensor] = ()) -> Iterator[None]:
    """In the block, `assign` into the tensors of `state` records into `signature` (the
    step's `capture.OpSignature`); with `signature` None (a torch.cond branch), `assign` is
    `copy_` in the block."""
    _STEPS.append(None if signature is None else _Step(signature, {id(t): t for t in state}))
    try:
        yield
    finally:
        _STEPS.pop()


__all__ = ["assign", "assignable"]
