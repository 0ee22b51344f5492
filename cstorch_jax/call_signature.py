"""A call's arguments, and a function's result, split into tensors and everything else.

A compiled function takes tensors as inputs and freezes every other leaf of its arguments
(numbers, strings, None, ...) into the program as a compile-time constant; it returns
tensors, and the rest of its result is rebuilt around them on every call. Both
`cstorch_jax.jit` and `@cstorch.trace` cut their calls this way:

    call = CallSignature.of(args, kwargs)      # leaves, structure, where the tensors are
    call.tensors                               # the inputs, in leaf order
    call.rebuild(traced)                       # (args, kwargs) with other tensors in their places
    call.tensor_names                          # "argument [0]", "keyword argument ['mask']", ...
    layout, tensors = OutputLayout.of(result)  # the result's tensors and where they go
    layout.rebuild(values)                     # the result with `values` in their places
"""
from __future__ import annotations

from typing import Any, Iterable

import torch
import torch.utils._pytree as pytree

from .capture import TensorSpec


class _TensorSlot:
    """Marks where a tensor sits among a call's (or a result's) non-tensor leaves."""

    def __repr__(self) -> str:
        return "<tensor>"


TENSOR = _TensorSlot()


def _static(leaves: list) -> list:
    return [TENSOR if isinstance(x, torch.Tensor) else x for x in leaves]


class CallSignature:
    """The leaves of `(args, kwargs)`, their structure (`spec`), and the leaves with
    `TENSOR` in place of each tensor (`static`)."""

    def __init__(self, args: tuple, kwargs: dict, leaves: list, spec):
        self.args, self.kwargs = args, kwargs
        self.leaves, self.spec = leaves, spec
        self.static = _static(leaves)

    @classmethod
    def of(cls, args: tuple, kwargs: dict) -> "CallSignature":
        leaves, spec = pytree.tree_flatten((args, kwargs))
        return cls(args, kwargs, leaves, spec)

    @property
    def tensors(self) -> list:
        return [x for x in self.leaves if isinstance(x, torch.Tensor)]

    def rebuild(self, tensors: Iterable) -> tuple[tuple, dict]:
        """(args, kwargs) of this call with `tensors` in place of its tensors, in order."""
        it = iter(tensors)
        return pytree.tree_unflatten([next(it) if s is TENSOR else s for s in self.static], self.spec)

    def leaf_names(self) -> list[str]:
        """Each leaf's name for messages: "argument [0]", "keyword argument ['mask']"."""
        names = []
        for path, _ in pytree.tree_flatten_with_path((self.args, self.kwargs))[0]:
            where, rest = path[0], path[1:]
            head = "argument" if where.idx == 0 else "keyword argument"
            names.append(f"{head} {pytree.keystr(rest)}" if rest else head)
        return names

    @property
    def tensor_names(self) -> list[str]:
        return [n for n, x in zip(self.leaf_names(), self.leaves) if isinstance(x, torch.Tensor)]

    def key(self) -> tuple:
        """Hashable and equal for calls one executable serves: the structure, each tensor's
        shape, dtype and requires_grad, each other leaf's repr."""
        return (self.spec, tuple(("T", TensorSpec.of(x), x.requires_grad) if isinstance(x, torch.Tensor)
                                 else ("C", repr(x)) for x in self.leaves))


class OutputLayout:
    """A result's structure with `TENSOR` in place of each tensor."""

    def __init__(self, spec, static: list):
        self.spec, self.static = spec, static

    @classmethod
    def of(cls, result: Any) -> tuple["OutputLayout", list]:
        """(the layout, the result's tensors in leaf order)."""
        leaves, spec = pytree.tree_flatten(result)
        return cls(spec, _static(leaves)), [x for x in leaves if isinstance(x, torch.Tensor)]

    def rebuild(self, values: Iterable) -> Any:
        """The result with `values` in place of its tensors, in order."""
        it = iter(values)
        return pytree.tree_unflatten([next(it) if s is TENSOR else s for s in self.static], self.spec)
