"""The immutable compiled step ("the wafer").

`Executable(captured)` lowers a captured graph with `jax.jit(...).lower(...).compile()`
once. Its XLA program has the signature

    (mutated_state, kept_state, batch, rng_key) -> (new_mutated_state, outputs, next_rng_key)

with `mutated_state` and `rng_key` donated: their buffers are reused for the new
values, so state never exists twice on the device. `kept_state` is the state the step
only reads; state it never touches is not an input. The program never re-traces: a
batch of another shape or dtype is a `StaticGraphError` naming the argument and both
shapes.

With a `DataParallel` placement the program is compiled for its mesh: state, scalars
and the RNG key replicated, batch tensors split on dim 0, every output replicated; with
`FullyShardedDataParallel` each state tensor (and its new value) split as the
placement's rule says.
"""
from __future__ import annotations

import time
from typing import Sequence

import jax
import torch
import torch.utils._pytree as pytree

from . import compile_cache, native
from .capture import CapturedGraph, TensorSpec
from .dtypes import jax_dtype
from .errors import StaticGraphError
from .lowering import to_jax_function, uses_rng
from .passes import for_platform
from .placement import SingleDevice
from .xla_options import compiler_options


def _aval(spec: TensorSpec) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(spec.shape, jax_dtype(spec.dtype))


KEY_AVAL = jax.ShapeDtypeStruct((2,), jax.numpy.uint32)
_HALF = (torch.float16, torch.bfloat16)


def computes_in_16_bit(gm: torch.fx.GraphModule) -> bool:
    """Whether any value of the graph (an input, a node's result) is float16 or bfloat16."""
    return any(isinstance(v, torch.Tensor) and v.dtype in _HALF
               for n in gm.graph.nodes for v in pytree.tree_leaves(n.meta.get("val")))


class Executable:
    """One compiled XLA program for one captured graph."""

    def __init__(self, captured: CapturedGraph, batch_names: Sequence[str] | None = None, placement=None):
        self._describe(captured, batch_names, placement)
        self.uses_rng = uses_rng(captured.module)
        n_state = len(captured.state_specs)
        mutated = captured.mutated
        kept = self.kept  # unused state is not an input at all
        self.graph_module = for_platform(captured.module, self.placement.platform)
        graph_fn = to_jax_function(self.graph_module)
        n_mut = len(mutated)
        with_rng = self.uses_rng

        def program(mutated_state, kept_state, batch, rng_key):
            state = [None] * n_state
            for i, a in zip(mutated, mutated_state):
                state[i] = a
            for i, a in zip(kept, kept_state):
                state[i] = a
            if with_rng:
                step_key, next_key = jax.random.split(rng_key)
            else:
                step_key, next_key = rng_key, rng_key
            outs = graph_fn(step_key, *state, *batch)
            return tuple(outs[:n_mut]), tuple(outs[n_mut:]), next_key

        specs = captured.state_specs
        self._program = program
        self._avals = (
            tuple(_aval(specs[i]) for i in mutated),
            tuple(_aval(specs[i]) for i in kept),
            tuple(_aval(s) for s in captured.batch_specs),
            KEY_AVAL,
        )
        t0 = time.perf_counter()
        self.lowered = jax.jit(program, donate_argnums=(0, 3), **self._shardings()).lower(*self._avals)
        t1 = time.perf_counter()
        options = compiler_options(self.placement.platform, computes_in_16_bit(self.graph_module))
        self.compiled = self.lowered.compile(compiler_options=options)
        self.lower_seconds = t1 - t0
        self.compile_seconds = time.perf_counter() - t1
        self.from_cache = False

    def _describe(self, captured, batch_names, placement) -> None:
        self.captured = captured
        self.batch_names = list(batch_names) if batch_names is not None else [
            f"input {i}" for i in range(len(captured.batch_specs))
        ]
        self.placement = placement or SingleDevice()
        self.kept = captured.read_only

    @classmethod
    def restore(cls, cached: "compile_cache.CachedGraph", program, uses_rng: bool, batch_names,
                placement) -> "Executable":
        """The executable of a cache entry (`compile_cache.load`): the compiled program
        without its captured graph (`captured.module` is None) or lowering."""
        self = cls.__new__(cls)
        self._describe(cached, batch_names, placement)
        self.uses_rng = uses_rng
        self.graph_module = None
        self.lowered = None
        if self.placement.platform == "cpu":
            native.gemm_targets()  # the program may call the BLAS custom call
        t0 = time.perf_counter()
        self.compiled = compile_cache.deserialize(program, self.placement.devices)
        self.lower_seconds = 0.0
        self.compile_seconds = time.perf_counter() - t0
        self.from_cache = True
        return self

    def save_to_cache(self, key: str) -> bool:
        """Store this program in the compile cache under `key` (see compile_cache)."""
        return compile_cache.store(key, self.captured, self.compiled, self.uses_rng, self.batch_names)

    def _shardings(self) -> dict:
        """`in_shardings`/`out_shardings` for the placement (none on one device): each
        state tensor as the placement puts it (its new value placed like the old one),
        batch tensors split, the RNG key and the outputs replicated."""
        rep = self.placement.state_sharding()
        if rep is None:
            return {}
        c = self.captured
        batch = self.placement.batch_shardings([s.shape for s in c.batch_specs], self.batch_names)
        mutated, kept = (tuple(self.placement.state_sharding(c.state_specs[i].shape) for i in indices)
                         for indices in (c.mutated, self.kept))
        return {
            "in_shardings": (mutated, kept, tuple(batch), rep),
            "out_shardings": (mutated, (rep,) * len(c.output_specs), rep),
        }

    def jaxpr(self):
        """The program as a jaxpr (traced again from the lowering, not cached)."""
        return jax.make_jaxpr(self._program)(*self._avals)

    @property
    def graph_hash(self) -> str:
        return self.captured.graph_hash

    def check_batch(self, specs: Sequence[TensorSpec]) -> None:
        """Raise StaticGraphError if a batch does not match the compiled signature."""
        want = self.captured.batch_specs
        if len(specs) != len(want):
            raise StaticGraphError(
                f"the step was compiled for {len(want)} tensor inputs and is now called with "
                f"{len(specs)}; the compiled graph is static, so every call must pass the same inputs."
            )
        for name, got, exp in zip(self.batch_names, specs, want):
            if got != exp:
                raise StaticGraphError(
                    f"{name} was compiled as {exp} and is now {got}. The compiled step is "
                    f"static: every batch must have the same shapes and dtypes (use drop_last=True "
                    f"for a partial last batch, or pad it)."
                )

    def __call__(self, mutated_state, kept_state, batch, rng_key):
        """Dispatch one step; returns at once with (new_mutated_state, outputs, next_key)."""
        return self.compiled(tuple(mutated_state), tuple(kept_state), tuple(batch), rng_key)
