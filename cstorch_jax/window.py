"""Many steps per launch: K calls of a compiled step run as one XLA executable.

`StepsExecutable(executable, k)` compiles the step's program as the body of a loop over K
batches (`step_loop.py`):

    (mutated_state, kept_state, batches, rng_key, K) -> (new_mutated_state, outputs, next_rng_key)

`batches` holds the K calls' batch arrays (a tuple per call, stacked inside the program);
the mutated state and the RNG key are the loop's carry, donated as in one step; `outputs`
holds each output of the step stacked over the K calls (first axis K). Every call computes
exactly what one launch of the step computes, bit for bit: the same loop body (a launch of
one step runs it too, with a trip count of one that XLA does not see), the same state in
and out, the same RNG key split per step.

The program is compiled with the step's own compiler options, once per K. Launching K steps
at once costs one launch instead of K, which is what small steps spend most of their time on.
"""
from __future__ import annotations

import time

import jax

from . import step_loop
from .executable import Executable, _aval, computes_in_16_bit
from .platform_policy import policy_for


class StepsExecutable:
    """K steps of `executable`'s program as one compiled XLA program (module docstring)."""

    def __init__(self, executable: Executable, k: int):
        if k < 1:
            raise ValueError(f"a launch runs at least one step, got k={k}")
        if not executable.loops:
            raise NotImplementedError(f"the steps of this program launch one at a time: {executable.loop_penalty}")
        base = executable.complete()  # a program loaded from the compile cache gets its lowering here
        self.k = k
        self._stacking = base.stacking
        mutated_avals, kept_avals, batch_avals, key_aval = base._avals
        steps = step_loop.looped(base._program, [_aval(s) for s in base.captured.output_specs])
        self._count = step_loop.count(k)
        t0 = time.perf_counter()
        lowered = jax.jit(steps, donate_argnums=(0, 3)).lower(
            mutated_avals, kept_avals, (batch_avals,) * k, key_aval, step_loop.COUNT_AVAL)
        options = policy_for(base.placement.platform).compiler_options(computes_in_16_bit(base.graph_module))
        self.compiled = lowered.compile(compiler_options=options)
        self.compile_seconds = time.perf_counter() - t0

    def __call__(self, mutated_state, kept_state, batches, rng_key):
        """Launch the K steps; returns at once with (new mutated state, stacked outputs, next key)
        (the state's entries as for `Executable.__call__`)."""
        rest = (tuple(kept_state), tuple(tuple(b) for b in batches), rng_key, self._count)
        if self._stacking is None:
            return self.compiled(tuple(mutated_state), *rest)
        return self._stacking.call(self.compiled, mutated_state, *rest)
