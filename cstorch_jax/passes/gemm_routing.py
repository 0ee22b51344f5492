"""Route large float32 matrix products to the BLAS GEMM (`cstorch::gemm`), CPU only.

XLA:CPU computes a dot either in YNNPACK (fast for plain and input-gradient products)
or in Eigen. Products whose left operand is transposed (the weight gradients Xᵀ·dY
that autograd emits for every Linear layer) and batched products (attention) are not
taken by YNNPACK and run in Eigen at about half of a BLAS's rate on the benchmark
machine (`benchmarks/PROFILE.md`). This pass replaces those nodes, when they are large
enough, with `cstorch::gemm`, whose CPU lowering calls MKL's sgemm through an XLA FFI
custom call:

    mm(a, b)              -> gemm(a', b', None, ta, tb)
    bmm(a, b)             -> gemm(a', b', None, ta, tb)
    addmm(bias, a, b)     -> gemm(a', b', bias, ta, tb)      (bias a vector, alpha = beta = 1)
    permute(mm(a, b), T)  -> gemm(b', a', None, not tb, not ta)     ((AB)ᵀ = BᵀAᵀ)

where x' is the array the operand x is a view of when the chain of layout-only nodes
that produced it (`permute`, `view`, `clone`, `expand` to the same shape) amounts to
reading that array row-major, or with its last two dims swapped (then tx is set): the
BLAS reads it in place and XLA never materialises the transpose. Everything else stays
as captured. The products are the same float32 dot products, only computed by another
library.
"""
from __future__ import annotations

import os

import torch

aten = torch.ops.aten

# Layout-only ops: the value of the output is a rearrangement of the input's elements
# (the view ops and their `*_copy` forms, which the capture gives: `capture._views_as_copies`).
_PERMUTES = {aten.permute.default, aten.permute_copy.default}
_TRANSPOSES = {aten.transpose.int, aten.transpose_copy.int}
_TS = {aten.t.default, aten.t_copy.default}
_VIEWS = {aten.view.default, aten.view_copy.default, aten._unsafe_view.default, aten.reshape.default}
_CLONES = {aten.clone.default, aten.alias.default, aten.alias_copy.default}
_EXPANDS = {aten.expand.default, aten.expand_copy.default}
_LAYOUT = _PERMUTES | _VIEWS | _CLONES | _EXPANDS | _TRANSPOSES | _TS

# Size policy (multiply-adds of the whole product): the BLAS call pays a custom-call
# dispatch and a split over the thread pool, so small products stay in XLA. Products
# YNNPACK takes (neither transposed-left nor batched) go to the BLAS only when larger.
MIN_MACS = int(os.environ.get("CSTORCH_GEMM_MIN_MACS", 1 << 22))
MIN_MACS_PLAIN = int(os.environ.get("CSTORCH_GEMM_MIN_MACS_PLAIN", 1 << 62))
# A 2-D weight gradient Xᵀ·dY is routed only when its contraction (the number of rows of
# X: batch x tokens) is at least this deep. Eigen runs a dot asynchronously, beside the
# rest of the backward pass, while the BLAS call holds the step until it returns:
# measured on the benchmark MLP (batch 128: 128-deep products of 512 x 512 and 784 x 512)
# a step was 0.25 ms slower with them routed, though each alone is faster through the
# BLAS; the GPT's 1024-deep ones gain (benchmarks/PROFILE.md).
MIN_DEPTH = int(os.environ.get("CSTORCH_GEMM_MIN_DEPTH", 512))

_INT32_MAX = 2**31 - 1


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _replay(op, t: torch.Tensor, node: torch.fx.Node) -> torch.Tensor | None:
    """Apply one layout-only node to the meta view `t` as a view; None if it is not one."""
    try:
        if op in _PERMUTES:
            return t.permute(node.args[1])
        if op in _TRANSPOSES:
            return t.transpose(node.args[1], node.args[2])
        if op in _TS:
            return t.t()
        if op in _VIEWS:
            return t.view(node.args[1])
        if op in _EXPANDS:
            size = [t.shape[i - len(node.args[1]) + t.ndim] if s == -1 else s for i, s in enumerate(node.args[1])]
            return t if tuple(size) == tuple(t.shape) else None
        return t  # a clone or alias: the same elements, read through the same view
    except RuntimeError:  # not expressible as a view of the root
        return None


def matrix_source(node: torch.fx.Node):
    """(root, shape, transposed) such that `node`'s value is `root` reshaped to `shape`
    (a row-major batch of matrices), transposed on its last two dims if `transposed`;
    or None when the chain of layout-only nodes above `node` is not such a view."""
    chain = []
    root = node
    while isinstance(root, torch.fx.Node) and root.op == "call_function" and root.target in _LAYOUT:
        chain.append(root)
        root = root.args[0]
    val = _val(root)
    if not isinstance(val, torch.Tensor) or not chain:
        return None
    t = torch.empty(tuple(val.shape), dtype=val.dtype, device="meta")
    for n in reversed(chain):
        t = _replay(n.target, t, n)
        if t is None:
            return None
    if t.ndim < 2 or t.storage_offset() != 0 or t.numel() != val.numel():
        return None
    if t.is_contiguous():
        return root, tuple(t.shape), False
    if t.transpose(-1, -2).is_contiguous():
        return root, tuple(t.transpose(-1, -2).shape), True
    return None


def _f32_matrices(*nodes) -> bool:
    vals = [_val(n) for n in nodes]
    return all(isinstance(v, torch.Tensor) and v.dtype == torch.float32 and v.ndim in (2, 3) for v in vals)


def _macs(a, b) -> int:
    va, vb = _val(a), _val(b)
    batch = va.shape[0] if va.ndim == 3 else 1
    return batch * va.shape[-2] * va.shape[-1] * vb.shape[-1]


class _Router:
    def __init__(self, gm: torch.fx.GraphModule):
        self.gm = gm
        self.graph = gm.graph
        self.routed = 0

    def operand(self, x, before):
        """(node to pass, transposed) for operand x, inserting a view of its source."""
        src = matrix_source(x)
        if src is None:
            return x, False
        root, shape, transposed = src
        if tuple(_val(root).shape) == shape:
            return root, transposed
        with self.graph.inserting_before(before):
            v = self.graph.call_function(aten.view.default, (root, list(shape)))
        v.meta["val"] = torch.empty(shape, dtype=_val(root).dtype, device="meta")
        return v, transposed

    @staticmethod
    def wants(a, b, transposed_left: bool) -> bool:
        """Route the product a @ b (the captured operands), its left side read transposed
        or not? By dtype and size (module docstring)."""
        if not _f32_matrices(a, b) or max(max(_val(a).shape), max(_val(b).shape)) > _INT32_MAX:
            return False
        batched = _val(a).ndim == 3
        if transposed_left and not batched and _val(a).shape[-1] < MIN_DEPTH:
            return False
        return _macs(a, b) >= (MIN_MACS if transposed_left or batched else MIN_MACS_PLAIN)

    def replace(self, old: torch.fx.Node, a, b, bias, swap: bool, mm_node: torch.fx.Node) -> None:
        if swap:  # old = permute(mm(a, b)): compute op(b)ᵀ·op(a)ᵀ
            a, b = b, a
        na, ta = self.operand(a, old)
        nb, tb = self.operand(b, old)
        if swap:
            ta, tb = not ta, not tb
        with self.graph.inserting_before(old):
            g = self.graph.call_function(torch.ops.cstorch.gemm.default, (na, nb, bias, ta, tb))
        g.meta.update({k: v for k, v in mm_node.meta.items() if k != "val"})
        g.meta["val"] = _val(old)
        old.replace_all_uses_with(g)
        self.routed += 1

    def run(self) -> int:
        for node in list(self.graph.nodes):
            if node.op != "call_function":
                continue
            if node.target in (aten.mm.default, aten.bmm.default):
                a, b = node.args[:2]
                users = list(node.users)
                if len(users) == 1 and users[0].target in _PERMUTES and list(users[0].args[1]) == \
                        list(range(_val(node).ndim - 2)) + [_val(node).ndim - 1, _val(node).ndim - 2]:
                    # the product is only read transposed: compute the transposed product
                    src_b = matrix_source(b)
                    if self.wants(a, b, transposed_left=src_b is None or not src_b[2]):
                        self.replace(users[0], a, b, None, True, node)
                        continue
                src_a = matrix_source(a)
                if self.wants(a, b, transposed_left=src_a is not None and src_a[2]):
                    self.replace(node, a, b, None, False, node)
            elif node.target is aten.addmm.default:
                bias, a, b = node.args[:3]
                plain = node.kwargs.get("beta", 1) == 1 and node.kwargs.get("alpha", 1) == 1
                vb = _val(bias)
                if plain and isinstance(vb, torch.Tensor) and vb.dtype == torch.float32 and vb.ndim == 1 \
                        and vb.shape[0] == _val(node).shape[-1]:
                    src_a = matrix_source(a)
                    if self.wants(a, b, transposed_left=src_a is not None and src_a[2]):
                        self.replace(node, a, b, bias, False, node)
        _erase_dead(self.graph)
        self.gm.recompile()
        return self.routed


def _erase_dead(graph: torch.fx.Graph) -> None:
    """Erase the nodes the rewrite left without users (products and layout-only nodes
    only: no random or other node disappears, so nothing else shifts)."""
    removable = _LAYOUT | {aten.mm.default, aten.bmm.default, aten.addmm.default}
    changed = True
    while changed:
        changed = False
        for node in reversed(graph.nodes):
            if node.op == "call_function" and node.target in removable and not node.users:
                graph.erase_node(node)
                changed = True


def route_gemms(gm: torch.fx.GraphModule) -> int:
    """Rewrite `gm` in place (see the module docstring); returns the number of products routed."""
    return _Router(gm).run()
