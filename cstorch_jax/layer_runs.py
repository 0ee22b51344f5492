"""Runs of repeated-layer calls in a captured graph.

A model's repeated layers (`cstorch_jax.repeated_blocks`) reach the captured graph as L
calls of one graph (`invoke_subgraph` nodes) chained through their results: call i+1
takes, at some operand positions, outputs of call i (the residual stream forward; the
gradient of a layer's input backward). `chains(gm)` finds such runs:

- the calls of one graph, in graph order, L >= 2;
- a *carry*: operand positions j whose value in call i+1 is output k_j of call i, the
  same (j, k_j) for every i (at least one such position);
- every other operand either the same node in every call (*shared*: a mask, a table) or
  one node per call (*per layer*: the layer's parameters, its saved activations), every
  one of them defined before the run's first call, so the whole run can be computed there.

`passthrough` and `source` see through a call's output that is one of its operands (a
forward graph returns a weight it saves for the backward graph so). The stacked-state
plan (`stacked_state.py`) and the scan lowering (`lowering/layer_scan.py`) read runs so.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch

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
