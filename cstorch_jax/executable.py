"""The immutable compiled step ("the wafer").

`Executable(captured)` lowers a captured graph with `jax.jit(...).lower(...).compile()`
once. Its XLA program has the signature

    (mutated_state, kept_state, batch, rng_key) -> (new_mutated_state, outputs, next_rng_key)

with `mutated_state` and `rng_key` donated: their buffers are reused for the new
values, so state never exists twice on the device. A step of a run (`windows=True`: the
CSX steps of `cstorch.trace`) runs, on one device, as the body of a loop of one trip, a
count passed at run time (`step_loop.py`), so that it computes bit for bit what K steps in
one launch (`window.StepsExecutable`) compute; any other program (`cstorch_jax.jit`, the
OpInfo checks) is compiled alone, which compiles faster. `kept_state` is the state the step
only reads; state it never touches is not an input. The program never re-traces: a
batch of another shape or dtype is a `StaticGraphError` naming the argument and both
shapes.

On one device, a run of at least `stack_from` repeated layers may hold its state stacked
(`stacked_state.py`, the plan in `stacking`): the program then takes and returns the
mutated state packed, each stack as one array, and `__call__` packs the state's entries
and unpacks the new ones (`stacked_state.Row`s of the stacked arrays).

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

from . import compile_cache, native, stacked_state, step_loop
from .capture import CapturedGraph, StepTrace, TensorSpec, finish_capture, user_decompositions
from .dtypes import jax_dtype
from .errors import StaticGraphError
from .placement import SingleDevice
from .platform_policy import policy_for


def _aval(spec: TensorSpec) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(spec.shape, jax_dtype(spec.dtype))


KEY_AVAL = jax.ShapeDtypeStruct((2,), jax.numpy.uint32)


def _as_tuples(tree):
    """`tree` with its lists made tuples (to compare pytrees of tuples)."""
    if isinstance(tree, (list, tuple)):
        return tuple(_as_tuples(x) for x in tree)
    if isinstance(tree, dict):
        return {k: _as_tuples(v) for k, v in tree.items()}
    return tree
_HALF = (torch.float16, torch.bfloat16)


def computes_in_16_bit(gm: torch.fx.GraphModule) -> bool:
    """Whether any value of the graph (an input, a node's result) is float16 or bfloat16."""
    return any(isinstance(v, torch.Tensor) and v.dtype in _HALF
               for n in gm.graph.nodes for v in pytree.tree_leaves(n.meta.get("val")))


class Executable:
    """One compiled XLA program for one captured graph."""

    def __init__(self, captured: CapturedGraph, batch_names: Sequence[str] | None = None, placement=None,
                 compiled=None, windows: bool = False, stack_from: int = 0,
                 stacking: stacked_state.StackPlan | None = None):
        """Lower `captured` and compile it (or take `compiled`, a program already compiled
        from this graph for this placement: the compile cache's); `windows`: a step of a
        run, whose calls may launch several at a time (module docstring); `stack_from`: the
        shortest run of repeated layers whose state the program holds stacked
        (`stacked_state.py`; 0: none), or `stacking`, the plan a compiled program has."""
        from .lowering import to_jax_function, uses_rng  # the tables load with the first step compiled
        from .passes import for_platform  # it loads the lowerings of the channels-last ops

        self._describe(captured, batch_names, placement, windows)
        self.uses_rng = uses_rng(captured.module)
        n_state = len(captured.state_specs)
        mutated = captured.mutated
        kept = self.kept  # unused state is not an input at all
        self.graph_module = for_platform(captured.module, self.placement.platform)
        if stacking is None and self.placement.state_sharding() is None:
            stacking = stacked_state.plan(self.graph_module, n_state, mutated, stack_from)
        self.stacking = stacking
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
        mutated_avals = tuple(_aval(specs[i]) for i in mutated)
        if stacking is not None:
            program = stacking.program(program)
            mutated_avals = stacking.avals(mutated_avals)
        self._program = program
        self._avals = (
            mutated_avals,
            tuple(_aval(specs[i]) for i in kept),
            tuple(_aval(s) for s in captured.batch_specs),
            KEY_AVAL,
        )
        if self._count:  # one device: the step as the body of a loop (step_loop.py)
            loop = step_loop.looped(program, [_aval(s) for s in captured.output_specs])

            def launched(mutated_state, kept_state, batch, rng_key, n):
                state, outs, key = loop(mutated_state, kept_state, (batch,), rng_key, n)
                return state, tuple(o[0] for o in outs), key

            avals = self._avals + (step_loop.COUNT_AVAL,)
        else:
            launched, avals = program, self._avals
        t0 = time.perf_counter()
        self.lowered = jax.jit(launched, donate_argnums=(0, 3), **self._shardings()).lower(*avals)
        t1 = time.perf_counter()
        if compiled is None:
            options = policy_for(self.placement.platform).compiler_options(computes_in_16_bit(self.graph_module))
            compiled = self.lowered.compile(compiler_options=options)
        self.compiled = compiled
        self.lower_seconds = t1 - t0
        self.compile_seconds = time.perf_counter() - t1
        self.from_cache = False
        self._trace = None  # of a program loaded from the cache (see complete)
        self._complete = None

    def _describe(self, captured, batch_names, placement, windows: bool) -> None:
        self.captured = captured
        self._windows = windows
        self.batch_names = list(batch_names) if batch_names is not None else [
            f"input {i}" for i in range(len(captured.batch_specs))
        ]
        self.placement = placement or SingleDevice()
        self.kept = captured.read_only
        #: why every call of this step launches alone (None: it is the body of a loop,
        #: `step_loop.py`, and calls launch in windows of several)
        self.loop_penalty = ("not a step of a run: each call launches alone" if not windows
                             else "on a mesh each step launches alone" if self.placement.state_sharding() is not None
                             else step_loop.loop_penalty(captured.module, self.placement.platform)
                             if captured.module is not None else None)
        #: the trip-count argument of a launch: one trip, where the step is a loop's body
        self._count = (step_loop.count(1),) if self.loop_penalty is None else ()

    @property
    def loops(self) -> bool:
        """Whether the step is compiled as the body of a loop (`step_loop.py`), so that
        several calls can launch together (`window.StepsExecutable`)."""
        return bool(self._count) and self.loop_penalty is None

    @classmethod
    def for_step(cls, trace: StepTrace, batch_names: Sequence[str] | None = None, placement=None,
                 cache_key: str | None = None, windows: bool = False, stack_from: int = 0) -> "Executable":
        """The executable of a traced step (`capture.trace_step`, whose run was the only run
        of the step's body): with a `cache_key`, the compile cache's program for it
        (`lookup`); otherwise the capture is finished (`finish_capture`) and compiled, and
        stored under `cache_key`. `windows`: as for the constructor."""
        placement = placement or SingleDevice()
        captured = None
        if cache_key is not None:
            executable, captured = cls.lookup(trace, cache_key, batch_names, placement, windows)
            if executable is not None:
                return executable
        if captured is None:
            captured = finish_capture(trace)
        executable = cls(captured, batch_names, placement, windows=windows, stack_from=stack_from)
        if cache_key is not None:
            executable.save_to_cache(cache_key)
        return executable

    @classmethod
    def lookup(cls, trace: StepTrace, cache_key: str, batch_names: Sequence[str] | None = None,
               placement=None, windows: bool = False) -> tuple["Executable | None", CapturedGraph | None]:
        """(the compile cache's executable for `trace` under `cache_key`, or None; the
        captured graph when the lookup had to finish the capture, or None). The entry must
        be recorded with the trace's op signature and, while user decompositions are
        registered (they act after the signature is recorded), hold the same captured
        graph. An entry that does not describe the trace's inputs and outputs is removed
        with a warning (as `compile_cache.load` removes one it cannot read)."""
        placement = placement or SingleDevice()
        if policy_for(placement.platform).blas_gemm:
            native.gemm_targets()  # a cached program may call the BLAS custom call
        cached = compile_cache.load(cache_key, trace.signature, placement.devices)
        captured = None
        if cached is not None and user_decompositions():
            captured = finish_capture(trace)
            if captured.graph_hash != cached.graph.graph_hash:
                return None, captured  # compiled again, and stored over the entry
        if cached is None:
            return None, captured
        try:
            return cls.restore(cached, trace, batch_names, placement, captured, windows), captured
        except compile_cache.EntryError as e:
            compile_cache.drop(cached.path, str(e))
            return None, captured

    @classmethod
    def restore(cls, cached: "compile_cache.CachedProgram", trace: StepTrace, batch_names, placement,
                captured: CapturedGraph | None = None, windows: bool = False) -> "Executable":
        """The executable of a cache entry (`compile_cache.load`) for `trace`: the loaded
        program, with `captured` when the graph was made (else the entry's description,
        `captured.module` None, until `complete`). EntryError when the entry does not
        describe this step's inputs and outputs or the program does not take them."""
        graph = cached.graph
        if (graph.state_specs, graph.batch_specs, graph.output_specs) != (
                trace.state_specs, trace.batch_specs, trace.output_specs):
            raise compile_cache.EntryError("the entry describes other inputs or outputs than the step's")
        graph.constants = trace.constants
        self = cls.__new__(cls)
        self._describe(captured if captured is not None else graph, batch_names, placement, windows)
        self.uses_rng = cached.uses_rng
        self.stacking = (stacked_state.StackPlan(cached.stacking, len(self.captured.mutated))
                         if cached.stacking else None)
        self.graph_module = None
        self.lowered = None
        self.compiled = cached.compiled
        if len(self.compiled.args_info[0]) == 4:  # stored compiled alone (step_loop.loop_penalty)
            self.loop_penalty, self._count = self.loop_penalty or "compiled alone (the compile cache's program)", ()
        elif not self._count:  # stored as a loop's body: called with its trip count, launching alone here
            self._count = (step_loop.count(1),)
        self._check_interface()
        self.lower_seconds = 0.0
        self.compile_seconds = 0.0
        self.from_cache = True
        self._trace = trace
        self._complete = None
        return self

    def _check_interface(self) -> None:
        """EntryError unless the compiled program takes (mutated, kept, batch, key) with the
        captured specs, donating the mutated state and the key, and returns (new mutated
        state, outputs, key)."""
        c = self.captured
        canonical = jax.dtypes.canonicalize_dtype
        spec = lambda s: (tuple(s.shape), canonical(jax_dtype(s.dtype)))  # noqa: E731
        key = ((2,), canonical(jax.numpy.uint32))
        mutated = [spec(c.state_specs[i]) for i in c.mutated]
        if self.stacking is not None:
            shapes = self.stacking.avals([jax.ShapeDtypeStruct(*m) for m in mutated])
            mutated = [(tuple(a.shape), canonical(a.dtype)) for a in shapes]
        want_in = ((tuple((m, True) for m in mutated),
                    tuple((spec(c.state_specs[i]), False) for i in self.kept),
                    tuple((spec(s), False) for s in c.batch_specs), (key, True))
                   + ((((), canonical(jax.numpy.int32)), False),) * len(self._count), {})
        want_out = (tuple(mutated), tuple(spec(s) for s in c.output_specs), key)
        got_in = jax.tree_util.tree_map(lambda a: ((tuple(a.shape), canonical(a.dtype)), a.donated),
                                        self.compiled.args_info)
        got_out = jax.tree_util.tree_map(lambda a: (tuple(a.shape), canonical(a.dtype)), self.compiled.out_info)
        if _as_tuples(got_in) != want_in or _as_tuples(got_out) != want_out:
            raise compile_cache.EntryError("the cached program does not take and return the step's tensors")

    def complete(self) -> "Executable":
        """This executable with its captured graph and lowering (what reports read):
        itself when it was compiled here; for one loaded from the cache, its step's capture
        finished (`finish_capture`: the body does not run again) and lowered around the
        loaded program, which is not compiled again."""
        if self._trace is None:
            return self
        if self._complete is None:
            captured = self.captured if isinstance(self.captured, CapturedGraph) else finish_capture(self._trace)
            done = Executable(captured, self.batch_names, self.placement, compiled=self.compiled, windows=self._windows,
                              stacking=self.stacking)
            done.from_cache, done.compile_seconds = True, self.compile_seconds
            self._complete = done
        return self._complete

    def save_to_cache(self, key: str) -> bool:
        """Store this program in the compile cache under `key` (see compile_cache)."""
        return compile_cache.store(key, self.captured, self.compiled, self.uses_rng, self.batch_names,
                                   self.stacking.stacks if self.stacking is not None else ())

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
        """Dispatch one step; returns at once with (new_mutated_state, outputs, next_key).
        With stacked state (`stacking`), the mutated state's entries may be
        `stacked_state.Row`s, and the new ones are."""
        rest = (tuple(kept_state), tuple(batch), rng_key, *self._count)
        if self.stacking is None:
            return self.compiled(tuple(mutated_state), *rest)
        return self.stacking.call(self.compiled, mutated_state, *rest)
