"""Lowerings of ops that never reach a captured graph (the capture's core-ATen
decomposition rewrites them) are called directly on jax arrays and compared with the
op itself; and every lowering is tested: by a hand-written sample, or by an OpInfo test
listed in opinfo_reached.py (which test_opinfo checks really runs it)."""
from __future__ import annotations

import pytest
import torch
import torch.utils._pytree as pytree

from cstorch_jax.dtypes import to_jax, to_torch
from cstorch_jax.lowering import LOWERINGS, RANDOM_OPS
from harness import CASES, NAN, T, assert_same
from opinfo_reached import REACHED
from samples import INTS  # also fills CASES

aten = torch.ops.aten



class Direct:
    def __init__(self, name, op, args, kwargs=None, values=True):
        self.name, self.op, self.args, self.kwargs, self.values = name, op, args, kwargs or {}, values



def _bag(mode, per_sample_weights=None):
    weight, indices, offsets = torch.randn(7, 3), T(0, 2, 2, 5, 1, 6, 3), T(0, 3, 3, 5)
    return weight, indices, offsets, aten._embedding_bag.default(weight, indices, offsets, False, mode, False,
                                                                 per_sample_weights)


def _bag_backward_args(mode):
    _, indices, _, (out, offset2bag, bag_size, max_indices) = _bag(mode)
    return (torch.randn(out.shape), indices, offset2bag, bag_size, max_indices, 7, False, mode, None, -1)


def _bag_weights_backward_args():
    weight, indices, offsets, (out, offset2bag, _, _) = _bag(0, torch.rand(7))
    return (torch.randn(out.shape), weight, indices, offsets, offset2bag, 0, -1)


DIRECT = [
    Direct("arange_end", aten.arange.default, lambda: (5,)),
    Direct("arange_end_float", aten.arange.default, lambda: (5,), {"dtype": torch.float32}),
    Direct("arange_start", aten.arange.start, lambda: (-3, 4)),
    Direct("zeros_like", aten.zeros_like.default, lambda: (torch.randn(2, 3),)),
    Direct("ones_like_int", aten.ones_like.default, lambda: (torch.randn(2, 3),), {"dtype": torch.int64}),
    Direct("empty_like", aten.empty_like.default, lambda: (torch.randn(2, 3),), values=False),
    Direct("empty_strided", aten.empty_strided.default, lambda: ([2, 3], [1, 2]), values=False),
    Direct("new_empty_strided", aten.new_empty_strided.default, lambda: (torch.randn(2), [2, 3], [3, 1]),
           values=False),
    Direct("baddbmm", aten.baddbmm.default, lambda: (torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(2, 5, 4)),
           {"beta": 0.5, "alpha": 2.0}),
    Direct("dot", aten.dot.default, lambda: (torch.randn(5), torch.randn(5))),
    Direct("softmax_backward", aten._softmax_backward_data.default,
           lambda: (torch.randn(3, 4), torch.softmax(torch.randn(3, 4), 1), 1, torch.float32)),
    Direct("log_softmax_backward", aten._log_softmax_backward_data.default,
           lambda: (torch.randn(3, 4), torch.log_softmax(torch.randn(3, 4), 0), 0, torch.float32)),
    Direct("clamp_min", aten.clamp_min.default, lambda: (torch.randn(6), 0.1)),
    Direct("clamp_min_tensor", aten.clamp_min.Tensor, lambda: (torch.randn(6), torch.randn(6))),
    Direct("clamp_max", aten.clamp_max.default, lambda: (T(1, -5, 3, 8), 2)),
    Direct("clamp_max_tensor", aten.clamp_max.Tensor, lambda: (torch.randn(6), torch.randn(6))),
    Direct("floor_divide_float", aten.floor_divide.default,
           lambda: (T(1.0, -1.0, 7.5, -7.5, 5.0, 0.3), T(0.1, 0.1, 2.0, 2.0, 0.0, -0.1))),
    Direct("floor_divide_int", aten.floor_divide.default, lambda: (INTS(), T(2, -2, 3, -3, 4, 5, -5, 2, -2, 3, -4, 4))),
    Direct("div_scalar_mode_floor", aten.div.Scalar_mode, lambda: (INTS(), -4), {"rounding_mode": "floor"}),
    Direct("div_scalar_mode_trunc", aten.div.Scalar_mode, lambda: (INTS(), -4), {"rounding_mode": "trunc"}),
    Direct("div_scalar_mode_float", aten.div.Scalar_mode, lambda: (T(1.0, -1.0, 2.5), 0.1), {"rounding_mode": "floor"}),
    Direct("rsub", aten.rsub.Tensor, lambda: (torch.randn(4), torch.randn(4)), {"alpha": 2}),
    Direct("rsub_scalar", aten.rsub.Scalar, lambda: (INTS(), 3)),
    Direct("silu", aten.silu.default, lambda: (torch.randn(6),)),
    Direct("all", aten.all.default, lambda: (T(1.0, 0.0, NAN),)),
    Direct("all_dim", aten.all.dim, lambda: (torch.rand(3, 4) > 0.2, 1)),
    Direct("all_dims", aten.all.dims, lambda: (torch.rand(3, 4) > 0.2, [0]), {"keepdim": True}),
    Direct("sum_default", aten.sum.default, lambda: (torch.randn(3, 4),)),
    Direct("sum_default_bool", aten.sum.default, lambda: (torch.rand(3, 4) > 0.5,)),
    Direct("unsafe_view", aten._unsafe_view.default, lambda: (torch.arange(12), [3, -1])),
    Direct("reshape", aten.reshape.default, lambda: (torch.arange(12), [-1, 6])),
    Direct("alias", aten.alias.default, lambda: (torch.randn(3),)),
    Direct("alias_copy", aten.alias_copy.default, lambda: (torch.randn(3),)),
    Direct("detach", aten.detach.default, lambda: (torch.randn(3),)),
    Direct("expand_copy", aten.expand_copy.default, lambda: (torch.randn(3, 1), [2, -1, 4])),
    Direct("roll_flat", aten.roll.default, lambda: (torch.arange(12).reshape(3, 4), [5])),
    Direct("roll_dims", aten.roll.default, lambda: (torch.arange(12).reshape(3, 4), [1, -3], [0, 1])),
    Direct("select", aten.select.int, lambda: (torch.arange(12).reshape(3, 4), 1, -1)),
    Direct("slice", aten.slice.Tensor, lambda: (torch.arange(10), 0, -3, 100, 2)),
    Direct("select_scatter", aten.select_scatter.default, lambda: (torch.zeros(3, 4), torch.ones(3), 1, -1)),
    Direct("split", aten.split.Tensor, lambda: (torch.arange(12).reshape(3, 4), 3, 1)),
    Direct("split_with_sizes", aten.split_with_sizes.default, lambda: (torch.arange(12).reshape(4, 3), [1, 3], 0)),
    Direct("split_with_sizes_copy", aten.split_with_sizes_copy.default,
           lambda: (torch.arange(12).reshape(3, 4), [1, 2], -2)),
    Direct("unbind", aten.unbind.int, lambda: (torch.arange(12).reshape(3, 4), -1)),
    Direct("squeeze", aten.squeeze.default, lambda: (torch.randn(1, 3, 1, 2),)),
    Direct("squeeze_dim", aten.squeeze.dim, lambda: (torch.randn(1, 3, 1, 2), -2)),
    Direct("squeeze_dim_not_one", aten.squeeze.dim, lambda: (torch.randn(1, 3, 1, 2), 1)),
    Direct("squeeze_copy", aten.squeeze_copy.default, lambda: (torch.randn(1, 3, 1, 2),)),
    Direct("squeeze_copy_dim", aten.squeeze_copy.dim, lambda: (torch.randn(1, 3, 1, 2), 0)),
    Direct("squeeze_copy_dims", aten.squeeze_copy.dims, lambda: (torch.randn(1, 3, 1, 2), [0, 1, -2])),
    Direct("t", aten.t.default, lambda: (torch.randn(3, 4),)),
    Direct("t_copy_1d", aten.t_copy.default, lambda: (torch.randn(3),)),
    Direct("transpose", aten.transpose.int, lambda: (torch.randn(3, 4, 2), 0, -1)),
    Direct("transpose_copy", aten.transpose_copy.int, lambda: (torch.randn(3, 4, 2), -2, 2)),
    Direct("unsqueeze_copy", aten.unsqueeze_copy.default, lambda: (torch.randn(3, 4), -3)),
]


# scalar overloads and view copies that no OpInfo sample reaches
_POLYNOMIALS = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
                "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
                "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")
for _name in _POLYNOMIALS:
    _op = getattr(aten, f"special_{_name}")
    DIRECT += [
        Direct(f"{_name}_x_scalar", _op.x_scalar, lambda: (0.3, T(0.0, 1.0, 2.0, 5.0))),
        Direct(f"{_name}_n_scalar", _op.n_scalar, lambda: (T(-0.5, 0.2, 0.9, 0.0), 4)),
    ]
DIRECT += [
    Direct("zeta_self_scalar", aten.special_zeta.self_scalar, lambda: (2.5, T(1.0, 2.0, 3.5))),
    Direct("zeta_other_scalar", aten.special_zeta.other_scalar, lambda: (T(1.5, 2.0, 4.0), 2.0)),
    Direct("searchsorted_scalar", aten.searchsorted.Scalar, lambda: (T(1.0, 2.0, 2.0, 5.0), 2.0), {"right": True}),
    Direct("bucketize_scalar", aten.bucketize.Scalar, lambda: (2.0, T(1.0, 2.0, 2.0, 5.0))),
    Direct("scatter_value_reduce", aten.scatter.value_reduce,
           lambda: (torch.randn(3, 4), 1, T(0, 2, 1, 3, 0, 0).view(3, 2), 1.5), {"reduce": "multiply"}),
    Direct("diagonal_copy", aten.diagonal_copy.default, lambda: (torch.randn(3, 4, 5), 1, 2, 0)),
    Direct("unfold_copy", aten.unfold_copy.default, lambda: (torch.randn(3, 7), 1, 3, 2)),
    Direct("as_strided", aten.as_strided.default, lambda: (torch.randn(12), [3, 2], [2, 3], 1)),
    # view ops: the capture makes every view its *_copy op (the graph passes insert views)
    Direct("view", aten.view.default, lambda: (torch.randn(3, 4), [2, -1])),
    Direct("permute", aten.permute.default, lambda: (torch.randn(2, 3, 4), [2, 0, 1])),
    Direct("unsqueeze", aten.unsqueeze.default, lambda: (torch.randn(3, 4), -1)),
    Direct("squeeze_dims", aten.squeeze.dims, lambda: (torch.randn(3, 1, 4, 1), [1, -1])),
    Direct("expand", aten.expand.default, lambda: (torch.randn(3, 1), [2, 3, 4])),
    Direct("clone", aten.clone.default, lambda: (torch.randn(3, 4),)),
    Direct("detach_copy", aten.detach_copy.default, lambda: (torch.randn(3, 4),)),
    Direct("split_copy", aten.split_copy.Tensor, lambda: (torch.randn(5, 4), 2)),
    Direct("unbind_copy", aten.unbind_copy.int, lambda: (torch.randn(3, 4), 1)),
    Direct("diagonal", aten.diagonal.default, lambda: (torch.randn(3, 4, 5), 1, 0, 2)),
    Direct("unfold", aten.unfold.default, lambda: (torch.randn(3, 10), 1, 4, 3)),
    Direct("matrix_exp", aten.linalg_matrix_exp.default, lambda: (torch.randn(2, 3, 3) * 0.3,)),
    Direct("batch_norm_no_update", aten._batch_norm_no_update.default,
           lambda: (torch.randn(4, 3, 5), torch.randn(3), torch.randn(3), torch.randn(3), torch.rand(3) + 0.5, 0.1, 1e-5)),
    Direct("replication_pad3d_backward", aten.replication_pad3d_backward.default,
           lambda: (torch.randn(1, 2, 5, 4, 5), torch.randn(1, 2, 3, 3, 2), [1, 2, 0, 1, 1, 1])),
    Direct("rrelu_with_noise_backward", aten.rrelu_with_noise_backward.default,
           lambda: (torch.randn(6), torch.randn(6), torch.rand(6), 0.1, 0.3, True, False)),
    Direct("fractional_max_pool3d", aten.fractional_max_pool3d.default,
           lambda: (torch.randn(1, 2, 6, 6, 6), [2, 2, 2], [3, 3, 3], torch.rand(1, 2, 3))),
    Direct("fractional_max_pool3d_backward", aten.fractional_max_pool3d_backward.default,
           lambda: (torch.randn(1, 2, 3, 3, 3), torch.randn(1, 2, 6, 6, 6), [2, 2, 2], [3, 3, 3],
                    aten.fractional_max_pool3d.default(torch.randn(1, 2, 6, 6, 6), [2, 2, 2], [3, 3, 3],
                                                       torch.rand(1, 2, 3))[1])),
    Direct("embedding_bag_dense_backward_max", aten._embedding_bag_dense_backward.default,
           lambda: _bag_backward_args(mode=2)),
    Direct("embedding_bag_per_sample_weights_backward", aten._embedding_bag_per_sample_weights_backward.default,
           lambda: _bag_weights_backward_args()),
    Direct("upsample_bicubic2d_aa", aten._upsample_bicubic2d_aa.default, lambda: (torch.randn(1, 2, 8, 6), [3, 4], False)),
    Direct("upsample_bicubic2d_aa_backward", aten._upsample_bicubic2d_aa_backward.default,
           lambda: (torch.randn(1, 2, 3, 4), [3, 4], [1, 2, 8, 6], False)),
]

def _to_jax_tree(tree):
    return pytree.tree_map(lambda a: to_jax(a) if isinstance(a, torch.Tensor) else a, tree)


@pytest.mark.parametrize("d", [pytest.param(d, id=d.name) for d in DIRECT])
def test_direct_lowering(d: Direct):
    """The lowering, called on jax arrays, against the op itself; the result is cast to
    torch's dtype as the interpreter does."""
    args = d.args()
    want = d.op(*args, **d.kwargs)
    out = LOWERINGS[d.op](*_to_jax_tree(args), **_to_jax_tree(d.kwargs))
    want_leaves, want_spec = pytree.tree_flatten(want)
    out_leaves = pytree.tree_leaves(out)
    assert len(out_leaves) == len(want_leaves)
    got = pytree.tree_unflatten([to_torch(o, w.dtype) for o, w in zip(out_leaves, want_leaves)], want_spec)
    if d.values:
        assert_same(got, want)
    else:
        for g, w in zip(pytree.tree_leaves(got), want_leaves):
            assert (g.shape, g.dtype) == (w.shape, w.dtype)


def test_every_lowering_is_tested():
    """Each ATen lowering (random ops aside: test_dropout checks their statistics) is named
    by a jit sample, a direct sample above, or an OpInfo test in opinfo_reached.py. (The
    optimizer ops are cstorch's own; the model parity tests run them.)"""
    tested = {str(op) for c in CASES for op in c.ops} | {str(d.op) for d in DIRECT} | set(REACHED)
    registered = {str(op) for op in LOWERINGS if op not in RANDOM_OPS and op.namespace == "aten"}
    assert sorted(registered - tested) == []
