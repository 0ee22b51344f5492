"""A step's program as the body of a loop whose trip count is known only at run time.

XLA compiles the body of a loop differently from a program of its own: it fuses other
operations together, and on the CPU LLVM contracts a product and a sum into one fused
multiply-add wherever both land in one fused kernel. A 1-layer GPT decoder trained as a
`lax.scan` of 4 steps ended 24 parameters 1 ulp away from 4 launches of the step (SGD;
AdamW: ~1,000 of ~5,000). The body of a loop, though, compiles the same however many
steps the loop runs, as long as XLA cannot see that count: it cannot unroll the loop or
replace a one-trip loop by its body, and the batches it slices hold two rows or more (a
slice of a dimension of one becomes a reshape, which changes the body: a one-step launch
stacks its batch twice). So every single-device launch of a CSX step runs
this loop (`Executable`: one step; `StepsExecutable`: K), and a window's steps equal
one-at-a-time steps bit for bit.

A loop body also runs slower on XLA:CPU than a program of its own, so where that costs
more than a launch saves (`loop_penalty`), the step is compiled alone and every call
launches alone, whatever `steps_per_launch` says: again the same numbers for every count.

    looped(mutated_state, kept_state, batches, rng_key, n)
        -> (new_mutated_state, outputs stacked over the k batches, next_rng_key)

`batches` holds k batches (a tuple of arrays per batch); the loop runs the first `n`
(n = k: XLA must not know it). `step(mutated_state, kept_state, batch, rng_key) ->
(new_mutated_state, outputs, next_rng_key)` is the step's program.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

aten = torch.ops.aten

#: the trip-count argument's abstract value
COUNT_AVAL = jax.ShapeDtypeStruct((), np.int32)


def count(n: int) -> np.ndarray:
    """The trip-count argument of a launch of n steps."""
    return np.int32(n)


def looped(step, out_avals):
    """`step` as the body of a loop of a run-time count (module docstring); `out_avals`
    are the abstract values of one step's outputs."""

    def steps(mutated_state, kept_state, batches, rng_key, n):
        k = len(batches)
        # at least two rows in and out: XLA turns a slice of a dimension of one into a
        # reshape, and the body would compile otherwise than with several
        rows = batches if k > 1 else batches * 2
        xs = tuple(jnp.stack([b[j] for b in rows]) for j in range(len(batches[0])))
        outs = tuple(jnp.zeros((len(rows),) + tuple(a.shape), a.dtype) for a in out_avals)

        def body(i, carry):
            state, key, outs = carry
            batch = tuple(jax.lax.dynamic_index_in_dim(x, i, keepdims=False) for x in xs)
            state, out, key = step(state, kept_state, batch, key)
            outs = tuple(jax.lax.dynamic_update_index_in_dim(s, o, i, 0) for s, o in zip(outs, out))
            return state, key, outs

        state, key, outs = jax.lax.fori_loop(0, n, body, (tuple(mutated_state), rng_key, outs))
        return state, tuple(o[:k] for o in outs), key

    return steps


#: products (multiply-adds x 2) per step above which a step launches alone on the CPU
LOOP_MAX_FLOPS = 2e9
_PRODUCTS = {aten.mm.default: 0, aten.bmm.default: 0, aten.addmm.default: 1, aten.baddbmm.default: 1}


def product_flops(gm: torch.fx.GraphModule) -> float:
    """2 x the multiply-adds of the graph's matrix products (mm, bmm, addmm, baddbmm):
    2 x (elements of the result) x (the contracted length)."""
    flops = 0.0
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in _PRODUCTS:
            left = n.args[_PRODUCTS[n.target]].meta["val"]
            flops += 2.0 * n.meta["val"].numel() * left.shape[-1]
    return flops


def loop_penalty(gm: torch.fx.GraphModule, platform: str) -> str | None:
    """Why the step of graph `gm` should launch alone on `platform`, never as a loop's
    body (None: it runs as one, in windows of steps). On XLA:CPU, measured with jax 0.10.2
    on the 2-core CPU machine:

    - a convolution inside a loop body runs without the convolution runtime a program of
      its own calls: a 3x3 convolution, 32 -> 64 channels, 26x26 images, batch 64, took
      0.56 s for five iterations of a scan against 0.06 s for five launches (forward only),
      7.0 s against 1.0 s with its gradient;
    - any step runs 0-15 % slower as a loop's body (device time per step, one step per
      launch: MNIST 784-256-10 0.75 -> 0.83 ms, MLP 784-512-512-10 4.70 -> 5.29 ms, a
      2-layer d64 decoder 9.0 -> 8.9 ms, the 4-layer d256 GPT of the benchmarks ~215 ->
      ~243 ms), while a window saves ~0.1-0.3 ms of the host's work per step: above
      LOOP_MAX_FLOPS of products per step (~20 ms here) a window cannot gain."""
    if platform != "cpu":
        return None
    convolutions = sorted({str(n.target) for n in gm.graph.nodes
                           if n.op == "call_function" and "convolution" in str(n.target)})
    if convolutions:
        return (f"the step computes convolutions ({', '.join(convolutions)}), which XLA:CPU runs several times "
                "slower inside a loop than in a launch of its own")
    flops = product_flops(gm)
    if flops > LOOP_MAX_FLOPS:
        return (f"the step computes {flops / 1e9:.1f} GFLOP of matrix products, more than the {LOOP_MAX_FLOPS / 1e9:g} "
                "up to which launching steps together gains more than XLA:CPU's loop body costs")
    return None
