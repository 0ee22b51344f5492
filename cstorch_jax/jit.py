"""`cstorch_jax.jit(fn)`: compile a pure torch function through the engine.

Tensors in, tensors out. Tensor arguments (anywhere in nested tuples/lists/dicts) are
inputs of the executable; every other argument is a compile-time constant. One
executable is built per input signature (tensor shapes/dtypes, argument structure and
constant values) and reused for every call with that signature. The function may
call `backward()` on tensors computed from arguments that require grad and return
their `.grad`. It must not read tensors it does not receive as arguments. Random ops
draw from a key seeded by `seed` that advances on every call.

Like `@cstorch.trace`, it compiles through the persistent compile cache
(`compile_cache`): the function's body runs once per signature (its op signature checks the
entry), and the program is loaded when an entry for this function, signature and engine
exists. A report (`lower`) of a loaded program finishes the capture without running the
body again (`Executable.complete`).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import jax

from . import compile_cache
from .call_signature import CallSignature, OutputLayout
from .capture import trace_step
from .dtypes import to_jax, to_torch
from .executable import Executable
from .placement import SingleDevice


class _Entry:
    def __init__(self, executable: Executable, out_layout: OutputLayout):
        self.executable = executable
        self.out_layout = out_layout


class JitFunction:
    """A torch function compiled once per input signature into XLA executables."""

    def __init__(self, fn: Callable, seed: int = 0):
        self.fn = fn
        self._key = None
        self.seed = seed
        self._cache: dict[Any, _Entry] = {}
        functools.update_wrapper(self, fn)

    def _build(self, call: CallSignature) -> _Entry:
        out: dict = {}

        def step(state, batch):
            args, kwargs = call.rebuild(batch)
            out["layout"], tensors = OutputLayout.of(self.fn(*args, **kwargs))
            return tensors

        # the body runs here, once, whatever the cache finds: its op signature is the lookup's check
        trace = trace_step(step, [], call.tensors)
        executable = Executable.for_step(trace, call.tensor_names, cache_key=self._cache_key(call))
        return _Entry(executable, out["layout"])

    def _cache_key(self, call: CallSignature) -> str | None:
        """The compile-cache lookup key of the function for this call
        (`compile_cache.function_key`; None: no caching)."""
        return compile_cache.function_key(self.fn, ["cstorch_jax.jit", repr(call.key())], SingleDevice().platform)

    def _entry(self, args, kwargs) -> tuple[CallSignature, _Entry]:
        call = CallSignature.of(args, kwargs)
        key = call.key()
        if key not in self._cache:
            self._cache[key] = self._build(call)
        return call, self._cache[key]

    def executable(self, *args, **kwargs) -> Executable:
        """The executable for this signature (built on first use)."""
        return self._entry(args, kwargs)[1].executable

    def __call__(self, *args, **kwargs):
        call, entry = self._entry(args, kwargs)
        arrays = [to_jax(t, f"input {i}") for i, t in enumerate(call.tensors)]
        if self._key is None:
            self._key = jax.random.key_data(jax.random.key(self.seed))
        _, outs, self._key = entry.executable((), (), arrays, self._key)
        specs = entry.executable.captured.output_specs
        return entry.out_layout.rebuild(to_torch(a, s.dtype) for a, s in zip(outs, specs))

    def lower(self, *args, **kwargs):
        """A `cstorch_jax.explore.StepReport` of the executable for these arguments
        (compiled if needed, not run)."""
        from .explore import StepReport

        return StepReport(self.executable(*args, **kwargs).complete(), getattr(self.fn, "__name__", "function"))

    @property
    def num_executables(self) -> int:
        return len(self._cache)


def jit(fn: Callable | None = None, *, seed: int = 0):
    """Compile a pure torch function with cstorch's engine (see module docstring)."""
    if fn is None:
        return lambda f: JitFunction(f, seed)
    return JitFunction(fn, seed)
