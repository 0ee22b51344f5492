"""`cstorch_jax.jit(fn)`: compile a pure torch function through the engine.

Tensors in, tensors out. Tensor arguments (anywhere in nested tuples/lists/dicts) are
inputs of the executable; every other argument is a compile-time constant. One
executable is built per input signature (tensor shapes/dtypes, argument structure and
constant values) and reused for every call with that signature. The function may
call `backward()` on tensors computed from arguments that require grad and return
their `.grad`. It must not read tensors it does not receive as arguments. Random ops
draw from a key seeded by `seed` that advances on every call.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import torch
import torch.utils._pytree as pytree

from .capture import TensorSpec, capture
from .dtypes import to_jax, to_torch
from .executable import Executable

_TENSOR_SLOT = object()  # marks where a tensor output goes among the non-tensor output leaves


class _Entry:
    def __init__(self, executable: Executable, out_spec, out_static: list):
        self.executable = executable
        self.out_spec = out_spec
        self.out_static = out_static  # non-tensor output leaves, _TENSOR_SLOT for each tensor


class JitFunction:
    """A torch function compiled once per input signature into XLA executables."""

    def __init__(self, fn: Callable, seed: int = 0):
        self.fn = fn
        self._key = None
        self.seed = seed
        self._cache: dict[Any, _Entry] = {}
        functools.update_wrapper(self, fn)

    @staticmethod
    def _signature(args, kwargs):
        leaves, spec = pytree.tree_flatten((args, kwargs))
        key = tuple(
            ("T", TensorSpec.of(x), x.requires_grad) if isinstance(x, torch.Tensor) else ("C", repr(x))
            for x in leaves
        )
        return leaves, spec, (spec, key)

    def _build(self, leaves, in_spec) -> _Entry:
        tensor_pos = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        out_info: dict = {}

        def step(state, batch):
            full = list(leaves)
            for pos, t in zip(tensor_pos, batch):
                full[pos] = t
            args, kwargs = pytree.tree_unflatten(full, in_spec)
            out_leaves, out_spec = pytree.tree_flatten(self.fn(*args, **kwargs))
            out_info["spec"] = out_spec
            out_info["static"] = [_TENSOR_SLOT if isinstance(o, torch.Tensor) else o for o in out_leaves]
            return [o for o in out_leaves if isinstance(o, torch.Tensor)]

        batch = [leaves[i] for i in tensor_pos]
        captured = capture(step, [], batch)
        names = [f"argument {pytree.keystr(p)}" for p, x in pytree.tree_flatten_with_path(
            pytree.tree_unflatten(list(leaves), in_spec))[0] if isinstance(x, torch.Tensor)]
        return _Entry(Executable(captured, names), out_info["spec"], out_info["static"])

    def executable(self, *args, **kwargs) -> Executable:
        """The executable for this signature (built on first use)."""
        leaves, in_spec, key = self._signature(args, kwargs)
        if key not in self._cache:
            self._cache[key] = self._build(leaves, in_spec)
        return self._cache[key].executable

    def __call__(self, *args, **kwargs):
        leaves, in_spec, key = self._signature(args, kwargs)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = self._build(leaves, in_spec)
        batch = [x for x in leaves if isinstance(x, torch.Tensor)]
        arrays = [to_jax(t, f"input {i}") for i, t in enumerate(batch)]
        if self._key is None:
            self._key = jax.random.key_data(jax.random.key(self.seed))
        _, outs, self._key = entry.executable((), (), arrays, self._key)
        specs = entry.executable.captured.output_specs
        it = iter(to_torch(a, s.dtype) for a, s in zip(outs, specs))
        out_leaves = [next(it) if s is _TENSOR_SLOT else s for s in entry.out_static]
        return pytree.tree_unflatten(out_leaves, entry.out_spec)

    def lower(self, *args, **kwargs):
        """A `cstorch_jax.explore.StepReport` of the executable for these arguments
        (compiled if needed, not run)."""
        from .explore import StepReport

        return StepReport(self.executable(*args, **kwargs), getattr(self.fn, "__name__", "function"))

    @property
    def num_executables(self) -> int:
        return len(self._cache)


def jit(fn: Callable | None = None, *, seed: int = 0):
    """Compile a pure torch function with cstorch's engine (see module docstring)."""
    if fn is None:
        return lambda f: JitFunction(f, seed)
    return JitFunction(fn, seed)
