"""Graph passes between capture and lowering: exact rewrites of a captured graph that
pick faster kernels for one platform (same math, other libraries or layouts).

`for_platform(gm, platform)` returns the graph the executable lowers: a copy of the
captured graph with the platform's passes applied (the captured graph itself is left
as it is, so reports and diffs show what the user's code produced).
"""
from __future__ import annotations

import torch

from ..platform_policy import policy_for
from .channels_last import to_channels_last
from .gemm_routing import route_gemms


def for_platform(gm: torch.fx.GraphModule, platform: str) -> torch.fx.GraphModule:
    policy = policy_for(platform)
    if not (policy.channels_last or policy.blas_gemm):
        return gm
    out = _copy(gm)
    if policy.channels_last:
        to_channels_last(out)
    if policy.blas_gemm:
        route_gemms(out)
    return out


def _copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A new GraphModule over a copy of `gm`'s graph (node metadata shared, not copied)."""
    graph = torch.fx.Graph()
    result = graph.graph_copy(gm.graph, {})
    graph.output(result)
    return torch.fx.GraphModule(gm, graph)


__all__ = ["for_platform", "route_gemms", "to_channels_last"]
