"""Repeated layers traced once: a model's identical blocks share one traced forward and backward.

A deep model's step is mostly the same block called again and again (`nn.ModuleList` of
decoder layers). Tracing every call costs torch's proxy and fake-tensor machinery a few
milliseconds per op, per layer. While a step is captured inside `trace_repeated_blocks(models)`,
each child of a `ModuleList` (or `Sequential`) with at least `MIN_REPEATS` siblings of its structure runs
through `_Blocks.call` instead of its own forward:

- its first call with a given key (the block's structure: every submodule's class, mode
  and plain attributes, the helper objects it holds (a config, an initializer) by their
  class and plain state; the shapes, dtypes and `requires_grad` of its parameters, buffers
  and tensor arguments; the layout of its other arguments; grad mode and autocast) traces
  the block alone, on fake tensors, into a joint forward-backward graph (`aot_export_joint_simple`
  with cstorch's decompositions) that `default_partition` splits into a forward graph
  `(*params, *buffers, *tensor args) -> (*outputs, *saved)` and a backward graph
  `(*saved, *output grads) -> (grads of the params, buffers and tensor args)`: the forward's
  values the backward needs are saved, nothing is recomputed (a dropout mask is drawn once);
- every call, the first included, becomes one `invoke_subgraph` node of the step's graph
  calling that forward graph, inside a `torch.autograd.Function` whose backward is one
  `invoke_subgraph` node calling the backward graph. The step's graph holds each graph
  once (torch's `TracingContext` caches the subgraph by its identifier, a digest of the
  graphs' code, which also enters the step's op signature).

A block called with plain (non-tensor) arguments runs its first call of a key unrolled: the
second call decides. If it passes the same values, it and the later calls go through the
traced graphs; if not (a layer index, as the Model Zoo's decoder layers take), every call of
that key runs unrolled, since only a trace of each value could show that the values do not
change the graph, and per-layer traces cost more than the unrolled layers.

So the step's trace costs one block trace plus a node per call; the lowering lowers each
graph once (`lowering/control_flow.py`). The numbers are those of the unrolled program:
the same decomposed ops on the same values.

A block that cannot be traced apart (it reads tensors that are not its own parameters,
buffers or arguments, mutates its inputs or buffers, returns something other than
floating-point tensors, reads a value on the host, has hooks) runs its own forward as
before, unrolled; the reason is logged at debug level (`logging.getLogger("cstorch")`), once
per block class and reason.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import logging
import operator
from dataclasses import dataclass
from typing import Iterable, Iterator

import torch
import torch.utils._pytree as pytree
from torch._guards import TracingContext, tracing
from torch._higher_order_ops.invoke_subgraph import invoke_subgraph
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import _disable_current_modes

from .capture import _value_digest

log = logging.getLogger("cstorch")

_PLAIN = (type(None), bool, int, float, str, torch.dtype, torch.device)


class Unrolled(Exception):
    """The block cannot be traced apart; its message says why."""


@dataclass
class TracedBlock:
    """A block's forward (and, for training, backward) graph, traced once."""

    identifier: str
    forward: torch.fx.GraphModule  # (*operands) -> (*outputs, *saved)
    backward: torch.fx.GraphModule | None  # (*saved, *output grads) -> (grad of each operand or None)
    n_outputs: int
    out_spec: pytree.TreeSpec


def _plain(value, depth: int = 0) -> object:
    """A value's part in a block's key: itself when it is plain data; a helper object that
    holds plain data (a config, an initializer: its `__dict__`, looked into at most
    `_OBJECT_DEPTH` deep) by its class and that data, so that layers holding equal helpers
    of their own key alike (what a helper does is its class's code on its state); anything
    else by its identity (two blocks holding different tensors, functions or other objects
    are not assumed to trace alike)."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (tuple, list)):
        return type(value).__name__, tuple(_plain(v, depth) for v in value)
    if (depth < _OBJECT_DEPTH and isinstance(getattr(value, "__dict__", None), dict) and not inspect.isroutine(value)
            and not isinstance(value, (torch.Tensor, torch.nn.Module, type, functools.partial))):
        state = tuple(sorted((k, _plain(v, depth + 1)) for k, v in vars(value).items()))
        return "object", type(value).__module__, type(value).__qualname__, state
    return type(value).__qualname__, id(value)


#: how deep `_plain` looks into the helper objects a block holds (objects in objects)
_OBJECT_DEPTH = 4


_MODULE_INTERNALS = frozenset({
    "_parameters", "_buffers", "_modules", "_non_persistent_buffers_set", "training",
    "_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs", "_backward_hooks", "_backward_pre_hooks", "_state_dict_hooks",
    "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks",
    "_is_full_backward_hook", "forward",
})


def _spec(t: torch.Tensor) -> tuple:
    return tuple(t.shape), tuple(t.stride()), t.dtype, t.requires_grad


def _structure(block: torch.nn.Module) -> tuple:
    """Every submodule's name, class, mode and plain attributes, and its tensors' specs."""
    parts = []
    for name, m in block.named_modules():
        if any((m._forward_hooks, m._forward_pre_hooks, m._backward_hooks, m._backward_pre_hooks)):
            raise Unrolled(f"{name or 'the block'} has hooks")
        attrs = tuple(sorted((k, _plain(v)) for k, v in vars(m).items() if k not in _MODULE_INTERNALS))
        parts.append((name, type(m).__qualname__, m.training, attrs))
    tensors = tuple((n, _spec(t)) for n, t in (*block.named_parameters(), *block.named_buffers()))
    return tuple(parts), tensors


def _operands(block: torch.nn.Module, args: tuple, kwargs: dict):
    """(names of the block's tensors, its tensors, the tensor arguments, the arguments
    with each tensor replaced by its index among them)."""
    names, tensors = [], []
    for n, t in (*block.named_parameters(), *block.named_buffers()):
        names.append(n)
        tensors.append(t)
    flat, spec = pytree.tree_flatten((args, kwargs))
    inputs = [a for a in flat if isinstance(a, torch.Tensor)]
    if any(not isinstance(a, (torch.Tensor, *_PLAIN)) for a in flat):
        raise Unrolled("an argument is neither a tensor nor plain data")
    slots, i = [], 0
    for a in flat:
        if isinstance(a, torch.Tensor):
            slots.append(("tensor", i))
            i += 1
        else:
            slots.append(("value", a))
    return names, tensors, inputs, (tuple(slots), spec)


def _split_values(slots: tuple) -> tuple[tuple, tuple]:
    """(the argument slots with their plain values left out, those values): calls of one
    structure that differ only in these values (a layer index) trace alike only if the
    values do not matter, which only a trace of each value shows."""
    return (tuple(s if s[0] == "tensor" else ("value",) for s in slots),
            tuple(s[1] for s in slots if s[0] == "value"))


def _fake_like(mode: FakeTensorMode, t: torch.Tensor) -> torch.Tensor:
    with mode:
        out = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="cpu")
    return out.requires_grad_(t.requires_grad) if t.is_floating_point() or t.is_complex() else out


def _drop_dead(gm: torch.fx.GraphModule) -> None:
    """Remove ops whose results nobody uses (random ones too: the partitioner leaves the
    backward a copy of the forward's dropout, which must not draw again)."""
    changed = True
    while changed:
        changed = False
        for node in reversed(list(gm.graph.nodes)):
            if node.op == "call_function" and not node.users:
                gm.graph.erase_node(node)
                changed = True
    gm.recompile()


def _untag(gm: torch.fx.GraphModule) -> None:
    """Drop the module tags the block's nodes picked up from the capture's current node
    metadata (stale there: the op before the call); the calls carry the layer's tags,
    which name the layer for the graph's ops (`lowering.interpreter.missing_lowerings`)."""
    for node in gm.graph.nodes:
        node.meta.pop("nn_module_stack", None)
        node.meta.pop("custom", None)


def _digest(*graphs: torch.fx.GraphModule | None) -> str:
    """A digest of the graphs' code and of the values of the tensors they hold (constants
    the block created, read through `get_attr` nodes)."""
    h = hashlib.sha256()
    for g in graphs:
        if g is None:
            continue
        h.update(g.code.encode())
        for node in g.graph.nodes:
            value = operator.attrgetter(node.target)(g) if node.op == "get_attr" else None
            if isinstance(value, torch.Tensor):
                h.update(f"{node.target}={_value_digest(value)}".encode())
    return h.hexdigest()[:16]


def _trace(block: torch.nn.Module, names, tensors, inputs, layout, training: bool, decompositions) -> TracedBlock:
    """Trace `block` alone on fake tensors (module docstring)."""
    from torch._functorch.aot_autograd import aot_export_joint_simple
    from torch._functorch.partitioners import default_partition

    slots, spec = layout
    n_tensors = len(tensors)
    out_spec: list = []

    def run(*flat):
        values = dict(zip(names, flat[:n_tensors]))
        leaves = [flat[n_tensors + v] if kind == "tensor" else v for kind, v in slots]
        args, kwargs = pytree.tree_unflatten(leaves, spec)
        out = torch.func.functional_call(block, values, args, kwargs, strict=True)
        outs, tree = pytree.tree_flatten(out)
        if not outs or any(not isinstance(o, torch.Tensor) or not o.is_floating_point() for o in outs):
            raise Unrolled("it returns something other than floating-point tensors")
        out_spec.append(tree)
        # an output that is an argument passed through (or a view of one) would alias it,
        # which a traced block may not: it leaves as a copy (the same values)
        return tuple(o.clone() for o in outs)

    with _disable_current_modes():
        mode = FakeTensorMode()
        fakes = [_fake_like(mode, t) for t in (*tensors, *inputs)]
        try:
            joint = aot_export_joint_simple(run, tuple(fakes), trace_joint=training, decompositions=decompositions)
        except Unrolled:
            raise
        except Exception as e:  # noqa: BLE001  (any failure: the block runs unrolled)
            raise Unrolled(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
    _untag(joint)
    n_outputs = out_spec[-1].num_leaves
    if not training:
        return TracedBlock("cstorch_block_" + _digest(joint), joint, None, n_outputs, out_spec[-1])
    tangents = [n for n in joint.graph.nodes if n.op == "placeholder" and n.name.startswith("tangents")]
    if len(tangents) != n_outputs:
        raise Unrolled("not every output of the block is differentiable")
    with _disable_current_modes():
        fw, bw = default_partition(joint, fakes, num_fwd_outputs=n_outputs)
    _drop_dead(fw)
    _drop_dead(bw)
    return TracedBlock("cstorch_block_" + _digest(fw, bw), fw, bw, n_outputs, out_spec[-1])


class _BlockFunction(torch.autograd.Function):
    """The block's forward graph as one node; its backward graph as one node."""

    @staticmethod
    def forward(ctx, block: TracedBlock, *operands):
        results = invoke_subgraph(block.forward, block.identifier + "_forward", *operands)
        outputs, saved = results[:block.n_outputs], results[block.n_outputs:]
        ctx.block = block
        ctx.save_for_backward(*saved)
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grads):
        block = ctx.block
        results = invoke_subgraph(block.backward, block.identifier + "_backward", *ctx.saved_tensors, *grads)
        return (None, *results)


class _Blocks:
    """The blocks traced so far in one capture, by key; the reasons logged."""

    def __init__(self, decompositions: dict):
        self.decompositions = decompositions
        self.traced: dict[tuple, TracedBlock] = {}
        self.values: dict[tuple, tuple] = {}  # a key without its plain argument values -> the first call's values
        self.logged: set[tuple[str, str]] = set()
        self.tracing: set[int] = set()  # ids of the blocks being traced alone (they run their own forward)

    def call(self, block: torch.nn.Module, original, args: tuple, kwargs: dict):
        if id(block) in self.tracing:
            return original(*args, **kwargs)
        try:
            names, tensors, inputs, layout = _operands(block, args, kwargs)
            operands = (*tensors, *inputs)
            training = torch.is_grad_enabled() and any(t.requires_grad for t in operands)
            slots, values = _split_values(layout[0])
            key = (type(block), _structure(block), tuple(_spec(t) for t in inputs), slots, repr(layout[1]),
                   training, torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))
            if key not in self.values:  # a first call: with plain arguments, the second one decides
                self.values[key] = values
                if values:
                    return original(*args, **kwargs)
            if self.values[key] != values:
                raise Unrolled("its calls pass different values of a plain (non-tensor) argument, such as a layer "
                               "index, and only a trace of each value could show that they trace alike")
            traced = self.traced.get(key)
            if traced is None:
                self.tracing.add(id(block))
                try:
                    traced = _trace(block, names, tensors, inputs, layout, training, self.decompositions)
                finally:
                    self.tracing.discard(id(block))
                self.traced[key] = traced
        except Unrolled as why:
            self._log(block, str(why))
            return original(*args, **kwargs)
        if traced.backward is None:
            outputs = invoke_subgraph(traced.forward, traced.identifier + "_forward", *operands)[:traced.n_outputs]
        else:
            outputs = _BlockFunction.apply(traced, *operands)
        return pytree.tree_unflatten(list(outputs), traced.out_spec)

    def _log(self, block: torch.nn.Module, why: str) -> None:
        if (type(block).__qualname__, why) not in self.logged:
            self.logged.add((type(block).__qualname__, why))
            log.debug("%s runs unrolled in the captured step (its layers are traced one by one): %s",
                      type(block).__qualname__, why)


#: the fewest layers of one structure worth tracing apart: the block's own trace costs about
#: what tracing two or three layers one by one does
MIN_REPEATS = 4


def repeated_children(models: Iterable[torch.nn.Module]) -> list[torch.nn.Module]:
    """The children of every ModuleList or Sequential in `models` of which at least
    `MIN_REPEATS` siblings share their structure (`_structure`); torch.nn's own layers (a
    Linear, a ReLU) are left to the plain trace, which is cheap for them."""
    found: dict[int, torch.nn.Module] = {}
    for model in models:
        for m in model.modules():
            if not isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)):
                continue
            groups: dict[tuple, list[torch.nn.Module]] = {}
            for kid in m.children():
                if type(kid).__module__.startswith("torch.nn."):
                    continue
                try:
                    groups.setdefault((type(kid), _structure(kid)), []).append(kid)
                except Unrolled:
                    continue
            for kids in groups.values():
                if len(kids) >= MIN_REPEATS:
                    found.update((id(k), k) for k in kids)
    return list(found.values())


@contextlib.contextmanager
def trace_repeated_blocks(models: Iterable[torch.nn.Module], decompositions: dict) -> Iterator[None]:
    """While a step is traced (inside `make_fx`), the repeated children of `models` run
    through traced blocks (module docstring)."""
    blocks = _Blocks(decompositions)
    patched = []
    for child in repeated_children(models):
        if "forward" in vars(child):
            continue  # an instance-level forward (a wrapper): left alone
        original = child.forward

        def forward(*args, _child=child, _original=original, **kwargs):
            return blocks.call(_child, _original, args, kwargs)

        child.forward = forward
        patched.append(child)
    context = TracingContext.try_get()
    try:
        with contextlib.nullcontext() if context is not None else tracing(TracingContext(None)):
            yield
    finally:
        for child in patched:
            del child.forward
