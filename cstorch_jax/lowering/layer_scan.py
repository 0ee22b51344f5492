"""A run of repeated-layer calls lowered as one `jax.lax.scan` over stacked layer state.

Lowered call by call, a run of repeated layers (`cstorch_jax.layer_runs.chains`) holds the
layer L times in the program. Where the program holds the run's state stacked
(`stacks.current()`: one `[L, ...]` array per kind of parameter) and a per-layer operand
column is such an array's rows, `run_chain` computes the run as one scan: the carry starts
as the first call's carry operands, each per-layer column is the stacked array (the rows of
an earlier run's outputs too: the backward calls take the forward calls' saved
activations), and every output of every call comes out stacked, its rows recorded in the
`Stacks`. A backward run, whose calls go from the last layer to the first, scans its
stacked columns in reverse. A column not stacked already is stacked per step; a run none
of whose columns is stacked is left to the calls.

The scan computes the layer's graph as the calls do (one jitted jax function,
`interpreter.subgraph_function`), within rounding: XLA compiles a loop body on its own,
where it may fuse a product and a sum into one multiply-add (`step_loop.py`). Random
draws: each call draws from the step's key at its own indices, as it does inlined
(`interpreter.INLINE_DRAWS`); the scan passes each layer's first index as a per-layer value.
"""
from __future__ import annotations

from typing import Callable, Optional

import jax
import jax.numpy as jnp
import torch

from ..layer_runs import Chain, operands, passthrough
from ..stacks import Stacks


def run_chain(chain: Chain, fn: Callable, load: Callable, key, first_draws: dict,
              stacks: Stacks) -> Optional[dict[torch.fx.Node, list]]:
    """Every call of `chain` computed as one scan: {call: its outputs}, or None when no
    per-layer column is stacked (module docstring). `fn(key, first_draw, *operands)` is
    the called graph's jax function, `load(node)` a node's value, `first_draws[call]` the
    first random index of each call."""
    calls = chain.calls
    columns = {j: [load(v) for v in chain.column(j)] for j in chain.per_layer}
    forward = any(stacks.stacked(values) is not None for values in columns.values())
    backward = any(stacks.stacked(values[::-1]) is not None for values in columns.values())
    if not (forward or backward):
        return None
    flip = backward and not forward  # the calls go from the last layer to the first
    layers = calls[::-1] if flip else calls
    xs = {j: stacks.stack(values[::-1] if flip else values) for j, values in columns.items()}
    shared = {j: load(v) for j, v in chain.shared.items()}
    init = tuple(load(operands(calls[0])[j]) for j in chain.carry)
    draws = jnp.asarray([first_draws[c] for c in layers], jnp.uint32)
    n_ops = len(operands(calls[0]))

    def body(carry, layer):
        values, draw = layer
        ops = [None] * n_ops
        for j, v in zip(chain.carry, carry):
            ops[j] = v
        for j, v in {**shared, **values}.items():
            ops[j] = v
        outs = tuple(fn(key, draw, *ops))
        return tuple(outs[k] for k in chain.carry.values()), outs

    _, ys = jax.lax.scan(body, init, (xs, draws), reverse=flip)
    # an output that is a per-layer or shared operand: that operand's own value
    through = {k: j for k, j in passthrough(chain.subgraph).items() if j not in chain.carry}
    rows = [None if k in through or y is None else stacks.rows(y) for k, y in enumerate(ys)]
    outs = {}
    for i, call in enumerate(layers):
        ops = operands(call)
        outs[call] = [load(ops[through[k]]) if k in through else None if r is None else r[i]
                      for k, r in enumerate(rows)]
    return outs
