"""Turn a pure core-ATen fx graph into a jax function.

The function walks the graph once per jax trace: each node runs its lowering inside
`jax.named_scope(<node name>)`, so jaxprs and HLO map back to the fx graph. Every
result is checked against torch's own shape for that node (a lowering bug is a loud
error at trace time) and cast to torch's result dtype, which makes torch's type
promotion hold even where jnp would promote differently.
"""
from __future__ import annotations

import operator
import weakref
from typing import Any, Callable

import jax
import torch
from torch.fx.node import map_arg

from .. import layer_runs, stacks
from ..dtypes import jax_dtype, to_jax
from ..errors import CaptureError, UnsupportedOpError
from ..module_paths import module_path
from ..subgraphs import all_graphs
from . import layer_scan
from .registry import LOWERINGS, RANDOM_OPS


def missing_lowerings(gm: torch.fx.GraphModule) -> dict[str, list[str]]:
    """{name of an ATen op of `gm` (or of a graph it calls) that has no lowering: module
    paths it comes from}; an op of a called graph that carries no path of its own (a
    repeated layer's graph, traced apart) comes from the module of its first call."""
    missing: dict[str, list[str]] = {}
    seen: set[int] = set()

    def walk(graph: torch.fx.GraphModule, caller: str | None) -> None:
        seen.add(id(graph))
        for n in graph.graph.nodes:
            if n.op != "call_function" or n.target is operator.getitem:
                continue
            path = module_path(n) or caller
            if n.target not in LOWERINGS:
                paths = missing.setdefault(str(n.target), [])
                where = path or "the step function itself (outside any nn.Module)"
                if where not in paths:
                    paths.append(where)
            for a in n.all_input_nodes:
                sub = operator.attrgetter(a.target)(graph) if a.op == "get_attr" else None
                if isinstance(sub, torch.fx.GraphModule) and id(sub) not in seen:
                    walk(sub, path)

    walk(gm, None)
    return dict(sorted(missing.items()))


def _describe_missing(missing: dict[str, list[str]]) -> str:
    lines = []
    for op, paths in missing.items():
        where = "; ".join(paths[:3]) + (f"; and {len(paths) - 3} more" if len(paths) > 3 else "")
        lines.append(f"  {op}, from {where}")
    return "\n".join(lines)


def uses_rng(gm: torch.fx.GraphModule) -> bool:
    """Whether `gm` or a graph it calls has a random op."""
    return any(n.op == "call_function" and n.target in RANDOM_OPS for g in all_graphs(gm) for n in g.graph.nodes)


def _draws(node: torch.fx.Node, gm: torch.fx.GraphModule) -> bool:
    """Whether the node takes a key: a random op, or a higher-order op whose graphs draw."""
    if node.target in RANDOM_OPS:
        return True
    called = [operator.attrgetter(a.target)(gm) for a in node.all_input_nodes if a.op == "get_attr"]
    return any(isinstance(g, torch.fx.GraphModule) and uses_rng(g) for g in called)


#: higher-order ops whose graph draws as if it were inlined: the call's random ops take the
#: indices the same ops take in the unrolled graph (`first_draw`), so a repeated layer's
#: dropout masks are those of the unrolled step
INLINE_DRAWS = {torch.ops.higher_order.invoke_subgraph}


def draw_count(gm: torch.fx.GraphModule) -> int:
    """How many random indices the nodes of `gm` take (an inlined call: those of its graph)."""
    count = 0
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target in INLINE_DRAWS:
            count += draw_count(operator.attrgetter(node.args[0].target)(gm))
        elif _draws(node, gm):
            count += 1
    return count


def _conform(value, meta, node) -> Any:
    """Check a lowering's result against torch's fake value for the node; cast dtype."""
    if isinstance(meta, torch.Tensor):
        if tuple(value.shape) != tuple(meta.shape):
            raise CaptureError(
                f"internal error: the lowering of {node.target} ({node.name}) produced shape "
                f"{tuple(value.shape)}, torch computes {tuple(meta.shape)}"
            )
        want = jax_dtype(meta.dtype)
        return value if value.dtype == want else value.astype(want)
    if isinstance(meta, (tuple, list)):
        return type(value)(_conform(v, m, node) if m is not None else v for v, m in zip(value, meta))
    return value


def to_jax_function(gm: torch.fx.GraphModule) -> Callable:
    """`f(rng_key, *inputs, first_draw=0) -> list of outputs` (a graph that returns one
    tensor, as a `torch.cond` branch may: that array), pure and traceable by jax.jit.

    `rng_key` is a raw uint32[2] key; the i-th random node of the graph draws from
    `fold_in(rng_key, first_draw + i)`, where a call of an `INLINE_DRAWS` op counts as
    its graph's nodes (`draw_count`) and any other higher-order op as one node.
    """
    missing = missing_lowerings(gm)
    if missing:
        raise UnsupportedOpError(
            f"the captured step uses ATen ops that cstorch cannot lower to XLA yet:\n{_describe_missing(missing)}\n"
            f"Rewrite the model code that produces them, or run the script on the CPU backend.",
            missing_ops=tuple(missing),
        )
    nodes = list(gm.graph.nodes)
    consts = {
        n.target: operator.attrgetter(n.target)(gm) for n in nodes if n.op == "get_attr"
    }
    drawing = {n for n in nodes if n.op == "call_function" and _draws(n, gm)}

    inlined = {n: draw_count(operator.attrgetter(n.args[0].target)(gm))
               for n in nodes if n.op == "call_function" and n.target in INLINE_DRAWS}
    runs = {call: chain for chain in layer_runs.chains(gm) for call in chain.calls}
    draws_before, count = {}, 0  # each inlined call's first random index, from the graph's first
    for n in nodes:
        if n in inlined:
            draws_before[n], count = count, count + inlined[n]
        elif n in drawing:
            count += 1

    def run(rng_key, *inputs, first_draw=0):
        env: dict[torch.fx.Node, Any] = {}
        args_iter = iter(inputs)
        random_index = first_draw
        load = lambda a: map_arg(a, lambda n: env[n])  # noqa: E731
        held = stacks.current()
        scanned: dict[torch.fx.Node, list] = {}  # a call computed by its run's scan: its outputs
        for node in nodes:
            if held is not None and node in runs and node not in scanned:
                chain = runs[node]  # a repeated layer's first call: its run as one scan (layer_scan.py)
                with jax.named_scope(node.name):
                    done = layer_scan.run_chain(chain, subgraph_function(chain.subgraph), load, rng_key,
                                                {c: first_draw + draws_before[c] for c in chain.calls}, held)
                if done is not None:
                    scanned.update(done)
            if node in scanned:
                env[node] = scanned[node]
                random_index += inlined[node]
                continue
            if node.op == "placeholder":
                env[node] = next(args_iter)
            elif node.op == "get_attr":
                c = consts[node.target]
                env[node] = to_jax(c, node.target) if isinstance(c, torch.Tensor) else c
            elif node.op == "call_function":
                if node.target is operator.getitem:
                    seq, idx = load(node.args)
                    env[node] = seq[idx]
                    continue
                fn = LOWERINGS[node.target]
                args, kwargs = load(node.args), load(node.kwargs)
                if node in inlined:
                    kwargs = {**kwargs, "key": rng_key, "first_draw": random_index}
                    random_index += inlined[node]
                elif node in drawing:
                    kwargs = {**kwargs, "key": jax.random.fold_in(rng_key, random_index)}
                    random_index += 1
                with jax.named_scope(node.name):
                    out = fn(*args, **kwargs)
                env[node] = _conform(out, node.meta.get("val"), node)
            elif node.op == "output":  # a step's graph returns a list; a branch's may return one tensor
                out = load(node.args[0])
                return list(out) if isinstance(out, (list, tuple)) else out
            else:
                raise CaptureError(f"unexpected fx node kind {node.op!r} ({node.name})")
        raise CaptureError("graph has no output node")

    return run


_FUNCTIONS: "weakref.WeakKeyDictionary[torch.fx.GraphModule, Callable]" = weakref.WeakKeyDictionary()


def subgraph_function(subgraph: torch.fx.GraphModule) -> Callable:
    """`fn(key, first_draw, *operands)`: `subgraph` (a repeated layer's graph) lowered once,
    as one jitted jax function, so jax traces it once however many layers call it."""
    fn = _FUNCTIONS.get(subgraph)
    if fn is None:
        run = to_jax_function(subgraph)
        fn = _FUNCTIONS[subgraph] = jax.jit(lambda key, first_draw, *ops: run(key, *ops, first_draw=first_draw))
    return fn
