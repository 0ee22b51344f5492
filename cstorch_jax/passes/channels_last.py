"""Keep activations channels-last (NHWC) through 2-D convolution chains, CPU only.

XLA:CPU computes convolutions in NHWC (Eigen). A captured torch graph is NCHW, so XLA
puts a transpose before and after every convolution, and the fusions between two
convolutions (bias, ReLU, max-pool and their gradients) read one layout and write the
other (`benchmarks/PROFILE.md`). This pass rewrites the captured graph so that every
4-D activation of a region around 2-D convolutions is held as its NHWC permutation,
with a permute only where a region meets the rest of the graph:

    convolution, max_pool2d_with_indices,          -> cstorch::convolution_nhwc, max_pool2d_nhwc,
    avg_pool2d and their backward ops                  avg_pool2d_nhwc and their *_backward_nhwc
    batch norm (forward, no-stats, eval, backward) -> the same aten op on the [N*H*W, C] view
    pointwise ops (relu, where, add, casts, ...)   -> the same op; 4-D operands NHWC, lower-rank
                                                      operands viewed as 4-D and permuted alike
    sum / mean / amax / amin over dims             -> the same op over the permuted dims
    expand, cat, slice                             -> permuted sizes / dim

A region grows from every 2-D convolution (every op of `SEEDS`) through the values it
produces and consumes:
a node joins when one of its activation inputs or outputs is an NHWC value of the
region and its rule accepts it. Inside a region a value is never permuted; a region
input is permuted to NHWC once (x.permute(0, 2, 3, 1)), a region value read outside it
back once (v.permute(0, 3, 1, 2)); a permute of a permute the pass made is the
original node. Every rewritten op computes the same elements as the original (the
NHWC ops of `lowering/channels_last.py` are defined as the aten op between permutes),
and every node's `meta["val"]` holds its new shape, which the interpreter checks.

`CSTORCH_CHANNELS_LAST=0` turns the pass off (read when a step is compiled).
"""
from __future__ import annotations

import operator
import os

import torch

from ..lowering import channels_last as _nhwc_ops  # noqa: F401  (registers the cstorch::*_nhwc ops)
from ..lowering.registry import RANDOM_OPS

aten = torch.ops.aten
cstorch = torch.ops.cstorch

ENV = "CSTORCH_CHANNELS_LAST"
# ops a region starts from; None: every op the pass can rewrite (tests use it to put
# single ops through the NHWC path)
SEEDS = {aten.convolution.default}
TO_NHWC = [0, 2, 3, 1]
TO_NCHW = [0, 3, 1, 2]
_NHWC_POS = {0: 0, 1: 3, 2: 1, 3: 2}  # where NCHW dim d sits in NHWC

# elementwise ops that carry no pointwise tag
_ELEMENTWISE = {
    aten.detach_copy.default, aten.detach.default, aten.alias.default, aten.alias_copy.default,
    aten.lift_fresh_copy.default, aten._to_copy.default, aten.clone.default,
    aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar, aten.masked_fill.Tensor,
    aten.elu_backward.default, aten.softplus_backward.default, aten.hardswish_backward.default,
    aten.hardsigmoid_backward.default, aten.leaky_relu_backward.default, aten.hardtanh_backward.default,
    aten.mish_backward.default,
}
_SLICES = {aten.slice.Tensor, aten.slice_copy.Tensor}
_EXPANDS = {aten.expand.default, aten.expand_copy.default}
_REDUCTIONS = {aten.sum.dim_IntList, aten.mean.dim, aten.amax.default, aten.amin.default}
# batch norm ops: (activation args, number of outputs); output 0 is the normalised activation
_BATCH_NORMS = {
    aten._native_batch_norm_legit_functional.default: ((0,), 5),
    aten._native_batch_norm_legit_no_training.default: ((0,), 3),
    aten._native_batch_norm_legit.no_stats: ((0,), 3),
    aten._batch_norm_with_update_functional.default: ((0,), 6),
    aten._batch_norm_no_update.default: ((0,), 4),
    aten.batch_norm_backward.default: ((0, 1), 3),
}


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _is4d(node) -> bool:
    v = _val(node)
    return isinstance(v, torch.Tensor) and v.ndim == 4


def _meta(shape, like: torch.Tensor) -> torch.Tensor:
    return torch.empty(tuple(shape), dtype=like.dtype, device="meta")


def _permuted(v: torch.Tensor, perm) -> torch.Tensor:
    return _meta([v.shape[p] for p in perm], v)


def _pointwise(target) -> bool:
    if target in _ELEMENTWISE:
        return True
    tags = getattr(target, "tags", ())
    return torch.Tag.pointwise in tags and torch.Tag.nondeterministic_seeded not in tags \
        and target not in RANDOM_OPS


class _Rule:
    """What a node becomes in a region. `inputs`: arg positions (or (position, index)
    for list args) holding activations that must be NHWC; `outputs`: None for a single
    output, else the indices of the NHWC outputs of a tuple; `single_nhwc`: whether a
    single output is NHWC."""

    def __init__(self, inputs, outputs=None, single_nhwc=True):
        self.inputs = inputs
        self.outputs = outputs
        self.single_nhwc = single_nhwc


def _reduction_dims(node):
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    return None if dims is None or list(dims) == [] else [d % 4 for d in dims]


def _keepdim(node) -> bool:
    return bool(node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False))


def rule_for(node: torch.fx.Node) -> _Rule | None:
    """The node's rule, or None when it cannot be held NHWC (the region ends there)."""
    if node.op != "call_function" or any(isinstance(v, torch.fx.Node) for v in node.kwargs.values()):
        return None
    t, args = node.target, node.args
    if t is aten.convolution.default:
        return _Rule([0]) if _is4d(args[0]) and _is4d(args[1]) and _is4d(node) else None
    if t is aten.convolution_backward.default:
        return _Rule([0, 1], outputs={0}) if _is4d(args[0]) and _is4d(args[1]) and _is4d(args[2]) else None
    if t is aten.max_pool2d_with_indices.default:
        return _Rule([0], outputs={0, 1}) if _is4d(args[0]) else None
    if t is aten.max_pool2d_with_indices_backward.default:
        return _Rule([0, 1, 7]) if _is4d(args[0]) and _is4d(args[1]) else None
    if t is aten.avg_pool2d.default:
        return _Rule([0]) if _is4d(args[0]) else None
    if t is aten.avg_pool2d_backward.default:
        return _Rule([0, 1]) if _is4d(args[0]) and _is4d(args[1]) else None
    if t in _BATCH_NORMS:
        return _Rule(list(_BATCH_NORMS[t][0]), outputs={0}) if _is4d(args[0]) else None
    if t in _REDUCTIONS:
        if not _is4d(args[0]):
            return None
        dims = _reduction_dims(node)
        if _keepdim(node) and dims is not None:
            return _Rule([0])
        kept = [d for d in TO_NHWC if dims is not None and d not in dims]
        return _Rule([0], single_nhwc=False) if kept == sorted(kept) else None  # same order of the rest
    if t in _EXPANDS:
        return _Rule([0]) if _is4d(args[0]) and len(args[1]) == 4 else None
    if t in _SLICES:
        return _Rule([0]) if _is4d(args[0]) else None
    if t is aten.cat.default:
        ts = args[0]
        return _Rule([(0, i) for i in range(len(ts))]) if _is4d(node) and all(_is4d(a) for a in ts) else None
    if _pointwise(t) and _is4d(node):
        tensors = [a for a in args if isinstance(_val(a), torch.Tensor)]
        if any(isinstance(a, (list, tuple)) for a in args) or any(_val(a).ndim > 4 for a in tensors):
            return None
        return _Rule([i for i, a in enumerate(args) if _is4d(a)])
    return None


def _positional(node) -> list:
    """The node's positional args with the schema's defaults filled in (the NHWC ops
    take every argument)."""
    schema = node.target._schema.arguments
    args = list(node.args)
    for a in schema[len(args):]:
        if a.kwarg_only:
            break
        args.append(node.kwargs[a.name] if a.name in node.kwargs else a.default_value)
    return args


_TWINS = {
    aten.convolution.default: cstorch.convolution_nhwc.default,
    aten.convolution_backward.default: cstorch.convolution_backward_nhwc.default,
    aten.max_pool2d_with_indices.default: cstorch.max_pool2d_nhwc.default,
    aten.max_pool2d_with_indices_backward.default: cstorch.max_pool2d_backward_nhwc.default,
    aten.avg_pool2d.default: cstorch.avg_pool2d_nhwc.default,
    aten.avg_pool2d_backward.default: cstorch.avg_pool2d_backward_nhwc.default,
}


def _arg(node, pos):
    if isinstance(pos, tuple):
        return node.args[pos[0]][pos[1]]
    return node.args[pos] if pos < len(node.args) else None


class _ChannelsLast:
    def __init__(self, gm: torch.fx.GraphModule):
        self.gm = gm
        self.graph = gm.graph
        self.rules: dict[torch.fx.Node, _Rule] = {}
        self.nhwc: set[torch.fx.Node] = set()  # value nodes held NHWC after the rewrite
        self.to_nhwc: dict[torch.fx.Node, torch.fx.Node] = {}
        self.to_nchw: dict[torch.fx.Node, torch.fx.Node] = {}
        self.made: set[torch.fx.Node] = set()  # permutes and views this pass inserted

    # ---- which nodes -------------------------------------------------------------------
    def _outputs(self, node, rule):
        """The value nodes of `node` that are NHWC in the region."""
        if rule.outputs is None:
            return [node] if rule.single_nhwc else []
        return [u for u in node.users if u.target is operator.getitem and u.args[1] in rule.outputs]

    def _producer(self, value):
        """(node that computes `value`, its rule) if `value` is an NHWC output of it."""
        if not isinstance(value, torch.fx.Node):
            return None
        node = value.args[0] if value.target is operator.getitem else value
        rule = self.rules.get(node) or rule_for(node)
        return (node, rule) if rule is not None and value in self._outputs(node, rule) else None

    def _seeds_nhwc(self, node) -> bool:
        """A seed must hold an NHWC value of its own (not a reduction to plain values)."""
        rule = rule_for(node)
        return rule.outputs is not None or rule.single_nhwc

    def grow(self) -> None:
        work = [n for n in self.graph.nodes
                if (SEEDS is None or n.target in SEEDS) and rule_for(n) is not None and self._seeds_nhwc(n)]
        while work:
            node = work.pop()
            if node in self.rules:
                continue
            rule = self.rules[node] = rule_for(node)
            for pos in rule.inputs:
                found = self._producer(_arg(node, pos))
                if found is not None and found[0] not in self.rules:
                    work.append(found[0])
            for value in self._outputs(node, rule):
                self.nhwc.add(value)
                for user in value.users:
                    if user in self.rules:
                        continue
                    r = rule_for(user)
                    if r is not None and any(_arg(user, p) is value for p in r.inputs):
                        work.append(user)

    # ---- inserted permutes -------------------------------------------------------------
    def _insert(self, after, target, args, val):
        if after.op == "placeholder":  # after the last placeholder
            after = [n for n in self.graph.nodes if n.op == "placeholder"][-1]
        with self.graph.inserting_after(after):
            n = self.graph.call_function(target, args)
        n.meta["val"] = val
        self.made.add(n)
        return n

    def as_nhwc(self, a):
        if a in self.nhwc:
            return a
        if a in self.made and a.target is aten.permute.default and list(a.args[1]) == TO_NCHW:
            return a.args[0]
        if a not in self.to_nhwc:
            self.to_nhwc[a] = self._insert(a, aten.permute.default, (a, TO_NHWC), _permuted(_val(a), TO_NHWC))
        return self.to_nhwc[a]

    def as_nchw(self, a):
        if a in self.made and a.target is aten.permute.default and list(a.args[1]) == TO_NHWC:
            return a.args[0]
        if a not in self.to_nchw:
            self.to_nchw[a] = self._insert(a, aten.permute.default, (a, TO_NCHW), _permuted(_val(a), TO_NCHW))
        return self.to_nchw[a]

    def broadcast_nhwc(self, a):
        """A lower-rank operand of a pointwise op, as the NHWC operand it broadcasts as."""
        v = _val(a)
        if v.ndim == 0:
            return a
        view = self._insert(a, aten.view.default, (a, [1] * (4 - v.ndim) + list(v.shape)),
                            _meta([1] * (4 - v.ndim) + list(v.shape), v))
        return self.as_nhwc(view)

    # ---- rewrite -----------------------------------------------------------------------
    def rewrite(self, node, rule) -> None:
        t = node.target
        layout = {p for p in rule.inputs if not isinstance(p, tuple)}
        args = _positional(node) if t in _TWINS else list(node.args)
        pointwise = _pointwise(t) and t not in _REDUCTIONS
        for i, a in enumerate(args):
            if i in layout:
                args[i] = self.as_nhwc(a)
            elif t is aten.cat.default and i == 0:
                args[0] = [self.as_nhwc(x) for x in a]
            elif pointwise and isinstance(_val(a), torch.Tensor):
                args[i] = self.broadcast_nhwc(a)
            elif isinstance(a, torch.fx.Node) and a in self.nhwc:  # read where the op wants NCHW (a weight)
                args[i] = self.as_nchw(a)
        old = _val(node)
        if t in _TWINS:
            node.target = _TWINS[t]
            node.kwargs = {}
        elif t in _REDUCTIONS:
            dims = _reduction_dims(node)
            if dims is not None:
                args[1] = [_NHWC_POS[d] for d in dims]
        elif t in _EXPANDS:
            args[1] = [args[1][p] for p in TO_NHWC]
        elif t is aten.cat.default:
            args = [args[0], _NHWC_POS[(args[1] if len(args) > 1 else 0) % 4]]
        elif t in _SLICES:
            args = [args[0], _NHWC_POS[(args[1] if len(args) > 1 else 0) % 4]] + args[2:]
        elif t in _BATCH_NORMS:
            self._batch_norm(node, args)
            return
        node.args = tuple(args)
        if rule.outputs is None:
            node.meta["val"] = _permuted(old, TO_NHWC) if rule.single_nhwc else old
        else:
            node.meta["val"] = tuple(_permuted(v, TO_NHWC) if i in rule.outputs and v is not None else v
                                     for i, v in enumerate(old))
            for u in self._outputs(node, rule):
                u.meta["val"] = _permuted(_val(u), TO_NHWC)

    def _batch_norm(self, node, args) -> None:
        """Batch norm of NHWC x = batch norm of its [N*H*W, C] view (statistics over dim 0)."""
        y = next((u for u in node.users if u.target is operator.getitem and u.args[1] == 0), None)
        n, h, w, c = _val(args[0]).shape
        for i in _BATCH_NORMS[node.target][0]:
            args[i] = self._insert(args[i], aten.view.default, (args[i], [n * h * w, c]),
                                   _meta([n * h * w, c], _val(args[i])))
        node.args = tuple(args)
        vals = list(_val(node))
        vals[0] = None if vals[0] is None else _meta([n * h * w, c], vals[0])
        node.meta["val"] = tuple(vals)
        if y is not None:
            y.meta["val"] = vals[0]
            view = self._insert(y, aten.view.default, (y, [n, h, w, c]), _meta([n, h, w, c], vals[0]))
            y.replace_all_uses_with(view, delete_user_cb=lambda u: u is not view)
            self.nhwc.discard(y)
            self.nhwc.add(view)

    def run(self) -> int:
        self.grow()
        if not self.rules:
            return 0
        for node in list(self.graph.nodes):
            if node in self.rules:
                self.rewrite(node, self.rules[node])
        # region values read outside the region: permuted back once
        for value in list(self.nhwc):
            for user in list(value.users):
                if user in self.rules or user in self.made:
                    continue
                user.replace_input_with(value, self.as_nchw(value))
        self.graph.lint()
        self.gm.recompile()
        return sum(1 for n in self.rules if n.target in (cstorch.convolution_nhwc.default,))


def to_channels_last(gm: torch.fx.GraphModule) -> int:
    """Rewrite `gm` in place (see the module docstring); returns the number of
    convolutions now computed NHWC."""
    return _ChannelsLast(gm).run() if enabled() else 0
