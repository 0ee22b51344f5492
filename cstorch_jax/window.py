"""Many steps per launch: K calls of a compiled step run as one XLA executable.

`StepsExecutable(executable, k)` compiles `lax.scan` of the step's program over K batches:

    (mutated_state, kept_state, batches, rng_key) -> (new_mutated_state, outputs, next_rng_key)

`batches` holds the K calls' batch arrays (a tuple per call, stacked inside the program);
the mutated state and the RNG key are the scan's carry, donated as in one step; `outputs`
holds each output of the step stacked over the K calls (first axis K). Every call computes
exactly what one launch of the step computes: the same program body, the same state in and
out, the same RNG key split per step.

The program is compiled with the step's own compiler options, once per K. Launching K steps
at once costs one launch instead of K, which is what small steps spend most of their time on.
"""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from .executable import Executable, computes_in_16_bit
from .platform_policy import policy_for


def loop_penalty(executable: Executable) -> str | None:
    """Why K steps of this program as one `lax.scan` would run slower than K launches of
    the step (None: nothing known makes them slower).

    XLA:CPU compiles a convolution inside a loop body without the convolution runtime it
    calls from a program of its own: measured with jax 0.10.2 on the 2-core CPU machine, a
    3x3 convolution, 32 -> 64 channels, 26x26 images, batch 64, took 0.56 s for five
    iterations of a scan against 0.06 s for five launches (forward only), 7.0 s against
    1.0 s with its gradient."""
    base = executable.complete()
    if base.placement.platform != "cpu":
        return None
    convolutions = sorted({str(n.target) for n in base.graph_module.graph.nodes
                           if n.op == "call_function" and "convolution" in str(n.target)})
    if convolutions:
        return (f"the step computes convolutions ({', '.join(convolutions)}), which XLA:CPU runs several times "
                "slower inside a loop than in a launch of their own")
    return None


class StepsExecutable:
    """K steps of `executable`'s program as one compiled XLA program (module docstring)."""

    def __init__(self, executable: Executable, k: int):
        if k < 1:
            raise ValueError(f"a launch runs at least one step, got k={k}")
        if executable.placement.state_sharding() is not None:
            raise NotImplementedError("several steps per launch run on one device; a mesh launches each step")
        base = executable.complete()  # a program loaded from the compile cache gets its lowering here
        self.k = k
        step = base._program
        n_batch = len(base.captured.batch_specs)
        mutated_avals, kept_avals, batch_avals, key_aval = base._avals

        def steps(mutated_state, kept_state, batches, rng_key):
            xs = tuple(jnp.stack([b[j] for b in batches]) for j in range(n_batch))

            def body(carry, batch):
                new_state, outs, key = step(carry[0], kept_state, batch, carry[1])
                return (new_state, key), outs

            (state, key), outs = jax.lax.scan(body, (mutated_state, rng_key), xs, length=k)
            return state, outs, key

        t0 = time.perf_counter()
        lowered = jax.jit(steps, donate_argnums=(0, 3)).lower(
            mutated_avals, kept_avals, (batch_avals,) * k, key_aval)
        options = policy_for(base.placement.platform).compiler_options(computes_in_16_bit(base.graph_module))
        self.compiled = lowered.compile(compiler_options=options)
        self.compile_seconds = time.perf_counter() - t0

    def __call__(self, mutated_state, kept_state, batches, rng_key):
        """Launch the K steps; returns at once with (new mutated state, stacked outputs, next key)."""
        return self.compiled(tuple(mutated_state), tuple(kept_state), tuple(tuple(b) for b in batches), rng_key)
