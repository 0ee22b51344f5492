"""A run of repeated-layer calls lowered as one `jax.lax.scan` over stacked layer state.

A model's repeated layers (`cstorch_jax.repeated_blocks`) reach the lowering as L calls
of one graph (`invoke_subgraph` nodes) chained through their results: call i+1 takes,
at some operand positions, outputs of call i (the residual stream forward; the gradient
of a layer's input backward). `chains(gm)` finds such runs:

- the calls of one graph, in graph order, L >= 2;
- a *carry*: operand positions j whose value in call i+1 is output k_j of call i, the
  same (j, k_j) for every i (at least one such position);
- every other operand either the same node in every call (*shared*: a mask, a table) or
  one node per call (*per layer*: the layer's parameters, its saved activations), every
  one of them defined before the run's first call, so the whole run can be computed there.

Lowered call by call, the program holds the layer L times. Where the program holds the
run's state stacked (`stacks.current()`: one `[L, ...]` array per kind of parameter) and
a per-layer operand column is such an array's rows, `run_chain` computes the run as one
scan: the carry starts as the first call's carry operands, each per-layer column is the
stacked array (the rows of an earlier run's outputs too: the backward calls take the
forward calls' saved activations), and every output of every call comes out stacked,
its rows recorded in the `Stacks`. A backward run, whose calls go from the last layer
to the first, scans its stacked columns in reverse. A column not stacked already is
stacked per step; a run none of whose columns is stacked is left to the calls.

The scan computes the layer's graph as the calls do (one jitted jax function,
`interpreter.subgraph_function`), within rounding: XLA compiles a loop body on its own,
where it may fuse a product and a sum into one multiply-add (`step_loop.py`). Random draws: each call
draws from the step's key at its own indices, as it does inlined
(`interpreter.INLINE_DRAWS`); the scan passes each layer's first index as a per-layer value.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import torch

from ..stacks import Stacks

INVOKE = torch.ops.higher_order.invoke_subgraph


@dataclass
class Chain:
    """A run of calls of one graph, `calls` in graph order (each takes the carry from the
    one before)."""

    calls: list[torch.fx.Node]
    subgraph: torch.fx.GraphModule
    carry: dict[int, int]        # operand position j -> output index k of the call before
    shared: dict[int, Any]       # operand position -> the node (or constant) every call takes
    per_layer: list[int]         # operand positions taking one node per call

    def column(self, j: int) -> list:
        """The nodes the calls take at operand position j, in graph order."""
        return [operands(c)[j] for c in self.calls]


def operands(call: torch.fx.Node) -> tuple:
    """The operands an invoke_subgraph call passes to its graph."""
    return tuple(call.args[2:])


def passthrough(subgraph: torch.fx.GraphModule) -> dict[int, int]:
    """{k: j} for each output k of `subgraph` that is its input j itself (a forward graph
    returns a weight it saves for the backward graph so)."""
    inputs = {n: j for j, n in enumerate(n for n in subgraph.graph.nodes if n.op == "placeholder")}
    out = next(n for n in subgraph.graph.nodes if n.op == "output").args[0]
    return {k: inputs[v] for k, v in enumerate(out if isinstance(out, (list, tuple)) else [out]) if v in inputs}


def source(node: Any, gm: torch.fx.GraphModule) -> Any:
    """The node whose value `node` is: through the outputs of invoke_subgraph calls that
    return one of their operands (`passthrough`)."""
    while (out := _output_of(node)) is not None:
        call, k = out
        j = passthrough(operator.attrgetter(call.args[0].target)(gm)).get(k)
        if j is None:
            break
        node = operands(call)[j]
    return node


def _output_of(node: Any) -> tuple[torch.fx.Node, int] | None:
    """(call, k) when `node` is output k of an invoke_subgraph call."""
    if isinstance(node, torch.fx.Node) and node.target is operator.getitem:
        call, k = node.args
        if isinstance(call, torch.fx.Node) and call.target is INVOKE:
            return call, k
    return None


def _chain(calls: list[torch.fx.Node], subgraph, order: dict) -> Chain | None:
    """`calls` as a run (module docstring), or None."""
    n_ops = len(operands(calls[0]))
    carry = {}
    for j in range(n_ops):
        ks = {(out[1] if (out := _output_of(operands(call)[j])) is not None and out[0] is before else None)
              for before, call in zip(calls, calls[1:])}
        if len(ks) == 1 and None not in ks:
            carry[j] = ks.pop()
    if not carry:
        return None
    shared, per_layer = {}, []
    for j in range(n_ops):
        column = [operands(c)[j] for c in calls]
        needed = column[:1] if j in carry else column
        if any(isinstance(v, torch.fx.Node) and order[v] >= order[calls[0]] for v in needed):
            return None  # an operand computed after the run starts
        if j in carry:
            continue
        if all(v is column[0] for v in column):
            shared[j] = column[0]
        elif all(isinstance(v, torch.fx.Node) for v in column):
            per_layer.append(j)
        else:
            return None
    return Chain(calls, subgraph, carry, shared, per_layer)


def chains(gm: torch.fx.GraphModule) -> list[Chain]:
    """The runs of `gm`'s invoke_subgraph calls that can lower as one scan (module docstring)."""
    nodes = list(gm.graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    by_graph: dict[int, tuple[Any, list[torch.fx.Node]]] = {}
    for n in nodes:
        if n.op == "call_function" and n.target is INVOKE:
            sub = operator.attrgetter(n.args[0].target)(gm)
            by_graph.setdefault(id(sub), (sub, []))[1].append(n)
    return [chain for sub, calls in by_graph.values()
            if len(calls) >= 2 and (chain := _chain(calls, sub, order)) is not None]


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
