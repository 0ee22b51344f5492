"""The graphs a captured graph calls: a higher-order op such as `torch.cond` takes its
branches as fx GraphModules, which the graph holds as attributes (`get_attr` nodes).

The capture cleans them as it cleans the step's graph, the lowering lowers each as a jax
function, and both look for ops in them: `subgraphs` lists them, `all_graphs` walks a graph
and every graph it calls, at any depth.
"""
from __future__ import annotations

import operator
from typing import Iterator

import torch


def subgraphs(gm: torch.fx.GraphModule) -> list[torch.fx.GraphModule]:
    """The GraphModules `gm`'s nodes read as attributes, in graph order, each once."""
    found: dict[int, torch.fx.GraphModule] = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = operator.attrgetter(node.target)(gm)
            if isinstance(value, torch.fx.GraphModule):
                found.setdefault(id(value), value)
    return list(found.values())


def all_graphs(gm: torch.fx.GraphModule) -> Iterator[torch.fx.GraphModule]:
    """`gm`, then every graph it calls, depth first."""
    yield gm
    for sub in subgraphs(gm):
        yield from all_graphs(sub)
