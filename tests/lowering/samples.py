"""The jit samples of the lowering tests, one section per op family (see harness.py)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from harness import INF, NAN, R, T, sample

aten = torch.ops.aten

# ---- pointwise ------------------------------------------------------------------------

MIXED = lambda: T([-2.5, -1.5, -0.5, -0.0], [0.0, 0.5, 1.5, 2.5], [-3.7, 3.7, NAN, INF], [-INF, 1e-3, -0.3, 0.3])  # noqa: E731
UNIT = lambda: torch.rand(3, 4) * 1.8 - 0.9  # noqa: E731  (inside (-1, 1))
INTS = lambda: T(-7, -6, -5, -3, -1, 0, 1, 2, 3, 5, 6, 7)  # noqa: E731

sample("exp_log", lambda x: (x.exp(), x.exp2(), x.expm1(), (x.abs() + 0.1).log(), (x.abs() + 0.1).log2(),
                             (x.abs() + 0.1).log10(), x.abs().log1p(), x.abs().sqrt(), (x.abs() + 0.1).rsqrt(),
                             x.reciprocal()),
       lambda: (torch.randn(3, 4),),
       [aten.exp.default, aten.exp2.default, aten.expm1.default, aten.log.default, aten.log2.default,
        aten.log10.default, aten.log1p.default, aten.sqrt.default, aten.rsqrt.default, aten.reciprocal.default])
sample("trig", lambda x: (x.sin(), x.cos(), x.tan(), x.asin(), x.acos(), x.atan(), x.sinh(), x.cosh(), x.tanh(),
                          x.asinh(), (x + 2).acosh(), x.atanh(), torch.atan2(x, x.flip(0))),
       lambda: (UNIT(),),
       [aten.sin.default, aten.cos.default, aten.tan.default, aten.asin.default, aten.acos.default,
        aten.atan.default, aten.sinh.default, aten.cosh.default, aten.tanh.default, aten.asinh.default,
        aten.acosh.default, aten.atanh.default, aten.atan2.default])
sample("activations", lambda x: (x.sigmoid(), x.erf(), x.erfinv(), F.gelu(x), F.gelu(x, approximate="tanh"),
                                 F.silu(x), F.leaky_relu(x, 0.2), F.hardtanh(x, -0.5, 0.3), F.relu(x)),
       lambda: (UNIT(),),
       [aten.sigmoid.default, aten.erf.default, aten.erfinv.default, aten.gelu.default, aten.leaky_relu.default,
        aten.hardtanh.default, aten.relu.default])
sample("float_math_of_ints", lambda a: (a.exp(), a.abs().sqrt(), a.sigmoid(), a.erf(), a.reciprocal(), a.tanh(),
                                        F.gelu(a.float()), F.relu(a)),
       lambda: (T(-2, -1, 0, 1, 2),),
       [aten.exp.default, aten.sqrt.default, aten.sigmoid.default, aten.erf.default, aten.reciprocal.default,
        aten.relu.default])
# sign(NaN) is 0 in torch; round is half-to-even
sample("rounding_sign", lambda x: (x.abs(), -x, x.sign(), x.floor(), x.ceil(), x.trunc(), x.round(), x.isnan(),
                                   x.isinf(), x.logical_not()),
       lambda: (MIXED(),),
       [aten.abs.default, aten.neg.default, aten.sign.default, aten.floor.default, aten.ceil.default,
        aten.trunc.default, aten.round.default, aten.isnan.default, aten.isinf.default, aten.logical_not.default])
sample("int_unary", lambda a: (a.abs(), -a, a.sign(), ~a, ~(a > 0), (a > 0).sign(), F.relu(a), a.round()),
       lambda: (INTS(),),
       [aten.abs.default, aten.neg.default, aten.sign.default, aten.bitwise_not.default, aten.relu.default])
sample("round_decimals", lambda x: (torch.round(x, decimals=2), torch.round(x * 100, decimals=-1)),
       lambda: (T(0.125, 0.135, -2.675, 1.005, 0.5, 33.0, -45.0, 55.5),),
       [aten.round.decimals])
sample("arith_float", lambda x, y: (x + y, x + 2.5, torch.add(x, y, alpha=2), x - y, torch.sub(x, y, alpha=0.5),
                                    1 - x, x * y, x * 3, x / y, x / 3, 2 / y),
       lambda: (torch.randn(3, 4), torch.randn(4) + 3),
       [aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor])
sample("arith_scalar_overloads", lambda x, b: (aten.add.Scalar(x, 2), aten.add.Scalar(x, 2, alpha=3),
                                               aten.sub.Scalar(x, 1.5), aten.sub.Scalar(x, 1, alpha=2),
                                               aten.mul.Scalar(x, 3), aten.div.Scalar(x, 4),
                                               aten.mul.Scalar(b, True), aten.add.Scalar(b, 3)),
       lambda: (torch.randn(3, 4), T(True, False)),
       [aten.add.Scalar, aten.sub.Scalar, aten.mul.Scalar, aten.div.Scalar])
sample("arith_int_bool", lambda a, b, p, q: (a + b, torch.add(a, b, alpha=3), a - b, torch.sub(a, b, alpha=2),
                                             a * b, a / b, a + 1, a * 2, p + q, p * q, p + a),
       lambda: (INTS(), INTS().flip(0) * 3 + 1, torch.rand(12) > 0.5, torch.rand(12) > 0.5),
       [aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor])
# floor division of floats is torch's exact rule: 1 // 0.1 == 9, x / 0 is the IEEE quotient
sample("div_floor_float", lambda a, b: (torch.div(a, b, rounding_mode="floor"), a // 0.1, a // -0.1,
                                        torch.floor_divide(a, b)),
       lambda: (T(1.0, -1.0, 7.5, -7.5, 0.0, -0.0, 5.0, -5.0, 0.0, 3.3, 0.3, -0.7),
                T(0.1, 0.1, 2.0, 2.0, 3.0, 3.0, 0.0, 0.0, -2.0, -1.1, -0.1, 0.7)),
       [aten.div.Tensor_mode])
sample("div_trunc_float", lambda a, b: (torch.div(a, b, rounding_mode="trunc"), torch.div(a, -0.3, rounding_mode="trunc"),
                                        torch.div(a, b, rounding_mode=None)),
       lambda: (torch.randn(12) * 5, torch.randn(12)),
       [aten.div.Tensor_mode])
sample("div_int_modes", lambda a, b: (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                                      torch.div(a, -3, rounding_mode="floor"), torch.div(a, -3, rounding_mode="trunc"),
                                      a // 4, a // -4, torch.div(a, 2.5, rounding_mode="floor")),
       lambda: (INTS(), T(2, -2, 3, -3, 4, 5, -5, 2, -2, 3, -4, 4)),
       [aten.div.Tensor_mode])
sample("remainder_fmod", lambda x, y, a, b: (torch.remainder(x, y), torch.remainder(x, -3), torch.remainder(x, 2.5),
                                             torch.fmod(x, y), torch.fmod(x, -3), a % b, a % -3, torch.fmod(a, b),
                                             torch.fmod(a, -3), 7 % b, 5.5 % y),
       lambda: (torch.randn(12) * 5, torch.randn(12) * 2, INTS(), T(2, -2, 3, -3, 4, 5, -5, 2, -2, 3, -4, 4)),
       [aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor, aten.fmod.Tensor,
        aten.fmod.Scalar])
sample("pow", lambda x, y, a: (x.abs() ** 1.5, x ** 2, x ** 3, (x + 5) ** -1, x.abs() ** 0.5, 2 ** x,
                               x.abs() ** y, a ** 2, a ** 3, 2 ** a, a ** a.abs(), a ** 0.5),
       lambda: (torch.randn(3, 4), torch.randn(3, 4), T(-3, -1, 0, 2, 4)),
       [aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar])
sample("maximum_minimum", lambda x, y, a, b: (torch.maximum(x, y), torch.minimum(x, y), torch.maximum(a, b),
                                              torch.minimum(a, b)),
       lambda: (T(NAN, 0.0, 2.0, -1.0, INF), T(1.0, NAN, 1.0, -1.0, 3.0), T(1, -2, 3, 0, 5), T(0, 4, 3, -1, 9)),
       [aten.maximum.default, aten.minimum.default])
sample("clamp", lambda x, lo, hi, a: (x.clamp(-0.5, 0.5), x.clamp(min=0.2), x.clamp(max=-0.2), torch.clamp(x, lo, hi),
                                      x.clamp(min=lo), x.clamp(0.5, -0.5), a.clamp(-2, 3), a.clamp(min=0.5)),
       lambda: (torch.cat([torch.randn(3, 4), T([NAN, 1.0, -1.0, 0.0])]), -torch.rand(4), torch.rand(4, 1)[:1],
                INTS()),
       [aten.clamp.default, aten.clamp.Tensor])
sample("where", lambda c, x, y, a: (torch.where(c, x, y), torch.where(c, x, 0.0), torch.where(c, 1.0, y),
                                    torch.where(c, a, -a), x.masked_fill(c, -INF)),
       lambda: (torch.rand(3, 4) > 0.5, torch.randn(3, 4), torch.randn(4), torch.arange(12).reshape(3, 4)),
       [aten.where.self])
sample("compare", lambda x, y, a: (x < y, x <= y, x > y, x >= y, x == y, x != y, x < 0.5, x <= 0, x > 1, x >= -1,
                                   x == 1.0, x != 1.0, a < x, a == 2, a >= y),
       lambda: (T(1.0, 2.0, NAN, 3.0, -1.0, 0.0), T(1.0, 3.0, 1.0, NAN, -2.0, -0.0), T(1, 2, 3, 4, -1, 0)),
       [aten.lt.Tensor, aten.le.Tensor, aten.gt.Tensor, aten.ge.Tensor, aten.eq.Tensor, aten.ne.Tensor,
        aten.lt.Scalar, aten.le.Scalar, aten.gt.Scalar, aten.ge.Scalar, aten.eq.Scalar, aten.ne.Scalar])
sample("logical_bitwise", lambda a, b, p, q: (torch.logical_and(a, b), torch.logical_or(a, b), torch.logical_xor(a, b),
                                              torch.logical_and(p, q), a & b, a | b, a ^ b, a & 6, a | -8, a ^ 5,
                                              p & q, p | q, p ^ q, p & True, p | False, p ^ True, ~a),
       lambda: (T(-3, 0, 2, 7, -1, 5), T(5, 1, 3, -1, 0, 5), torch.rand(6) > 0.5, torch.rand(6) > 0.5),
       [aten.logical_and.default, aten.logical_or.default, aten.logical_xor.default, aten.bitwise_and.Tensor,
        aten.bitwise_or.Tensor, aten.bitwise_xor.Tensor, aten.bitwise_and.Scalar, aten.bitwise_or.Scalar,
        aten.bitwise_xor.Scalar, aten.bitwise_not.default])
sample("pointwise_grads", lambda x, y: (torch.sigmoid(x) * torch.tanh(y), x.abs().sqrt(), torch.maximum(x, y),
                                        x.clamp(-0.5, 0.5), F.leaky_relu(y, 0.1), F.hardtanh(x), (x * y).exp(),
                                        torch.where(x > 0, x, y * 2), x.abs() ** 1.5),
       lambda: (R(3, 5), R(3, 5)),
       [aten.sigmoid.default, aten.tanh.default, aten.maximum.default, aten.clamp.default, aten.where.self],
       grad=True)
sample("gelu_grads", lambda x: (F.gelu(x), F.gelu(x * 2, approximate="tanh")),
       lambda: (R(4, 6),), [aten.gelu.default], grad=True)

# ---- reductions -----------------------------------------------------------------------

sample("sum_mean", lambda x: (x.sum(), x.sum(1), x.sum((0, 2), keepdim=True), x.sum(-1, dtype=torch.int32), x.mean(),
                              x.mean(0), x.mean((0, -1), keepdim=True), x.sum([])),
       lambda: (torch.randn(3, 4, 5) * 4,),
       [aten.sum.dim_IntList, aten.mean.default, aten.mean.dim])
sample("sum_prod_of_ints_bools", lambda a, p: (a.sum(), a.sum(0), a.prod(), a.prod(1), p.sum(), p.sum(1), p.prod(),
                                               a.cumsum(1), p.cumsum(0), a.cumprod(1)),
       lambda: (torch.randint(-3, 4, (3, 4)), torch.rand(3, 4) > 0.3),
       [aten.sum.dim_IntList, aten.prod.default, aten.prod.dim_int, aten.cumsum.default, aten.cumprod.default])
sample("prod_cumulative_grads", lambda x: (x.prod(), x.prod(1), x.cumsum(0), x.cumsum(-1), torch.cumprod(x, 1)),
       lambda: (R(3, 4),),
       [aten.prod.default, aten.prod.dim_int, aten.cumsum.default, aten.cumprod.default], grad=True)
sample("max_min", lambda x: (x.max(), x.min(), x.max(1), x.min(0, keepdim=True), x.amax((0, 2)), x.amin(-1),
                             x.argmax(), x.argmax(1, keepdim=True), x.argmin(0), x.argmin(keepdim=True)),
       lambda: (torch.randint(-3, 3, (3, 4, 2)).float(),),  # many ties: the first extremum wins
       [aten.max.default, aten.min.default, aten.max.dim, aten.min.dim, aten.amax.default, aten.amin.default,
        aten.argmax.default, aten.argmin.default])
sample("max_min_nan", lambda x: (x.max(), x.min(), x.max(1), x.min(1), x.amax(0), x.argmax(1)),
       lambda: (T([1.0, 3.0, NAN, 3.0, NAN], [2.0, 2.0, 1.0, 0.0, 2.0]),),
       [aten.max.default, aten.max.dim, aten.min.dim, aten.amax.default, aten.argmax.default])
sample("max_min_grads", lambda x: (x.max(1).values, x.amax((0, 2)), x.min(-1).values),
       lambda: (R(3, 4, 2),), [aten.max.dim, aten.amax.default, aten.min.dim], grad=True)
sample("var_std", lambda x: (x.var(), x.var(1), x.var((0, 2), correction=0, keepdim=True), x.std(1),
                             torch.var(x, -1, correction=2), torch.var_mean(x, 1), torch.std_mean(x, (0, 1))),
       lambda: (R(3, 4, 5),), [aten.var.correction, aten.var_mean.correction], grad=True)
sample("var_correction_at_least_n", lambda x: (x.var(1, correction=3), x.var(0, correction=2), x[:, :1].var(1),
                                               x.var(correction=7)),
       lambda: (T([1.0, 2.0, 4.0], [1.0, 1.0, 1.0]),), [aten.var.correction])
sample("any_all", lambda x, p: (p.any(), p.any(1), torch.any(p, dim=(0, 1)), p.all(), p.all(0), x.any(1), x.all(),
                                torch.all(x, dim=(0,), keepdim=True)),
       lambda: (torch.randint(0, 2, (3, 4)).float(), torch.rand(3, 4) > 0.3),
       [aten.any.default, aten.any.dim, aten.any.dims])
# torch accepts dim 0 / -1 on 0-d tensors
sample("zero_dim", lambda s: (s.max(0), s.min(-1), s.argmax(0), s.argmin(-1, keepdim=True), s.cumsum(0),
                              s.cumprod(-1), F.softmax(s, 0), F.log_softmax(s, -1), s.flip(0), s.sum(0)),
       lambda: (torch.tensor(2.5),),
       [aten.max.dim, aten.min.dim, aten.argmax.default, aten.argmin.default, aten.cumsum.default,
        aten.cumprod.default, aten._softmax.default, aten._log_softmax.default, aten.flip.default])
sample("vector_norm", lambda x: (torch.linalg.vector_norm(x), torch.linalg.vector_norm(x, 1, dim=1),
                                 torch.linalg.vector_norm(x, INF, dim=(0, 2), keepdim=True),
                                 torch.linalg.vector_norm(x, -INF, dim=-1), torch.linalg.vector_norm(x, 3, dim=0),
                                 F.normalize(x, dim=1)),
       lambda: (R(3, 4, 2),), [aten.linalg_vector_norm.default], grad=True)
sample("vector_norm_ord0", lambda x: torch.linalg.vector_norm(x, 0, dim=1),
       lambda: (torch.randint(-1, 2, (3, 5)).float(),), [aten.linalg_vector_norm.default])

# ---- shape ----------------------------------------------------------------------------

sample("views", lambda x: (x.view(4, 6), x.reshape(-1), x.permute(2, 0, 1), x.transpose(0, -1), x[0].t(), x.mT,
                           x.unsqueeze(-1), x.unsqueeze(0).unsqueeze(2).squeeze(), x[:, :1].squeeze((0, 1, -1)),
                           x[:1].squeeze(0), x[:1].squeeze(1), x.flatten(1), x[:, :1].expand(5, 2, 3, 4),
                           x.unsqueeze(1).expand(-1, 2, -1, -1), x.contiguous(), x.detach()),
       lambda: (R(2, 3, 4),),
       [aten.view_copy.default, aten.permute_copy.default, aten.unsqueeze_copy.default, aten.squeeze_copy.dims,
        aten.expand_copy.default, aten.alias_copy.default], grad=True)
sample("view_copies", lambda x: (x.mT.reshape(4, 6) * 2, x.permute(1, 2, 0).reshape(-1)),
       lambda: (R(2, 3, 4),), [aten.view_copy.default, aten.permute_copy.default], grad=True)
sample("cat_split", lambda x, y: (torch.cat([x, y.t()], 0), torch.cat([x, torch.tensor([])]), torch.stack([x, x], 1),
                                  x.split(2, 1), x.split([1, 3], 1), x.chunk(2, 0), x.unbind(1), y.tensor_split(3, 0)),
       lambda: (R(3, 4), R(4, 2)),
       [aten.cat.default, aten.split_with_sizes_copy.default], grad=True)
sample("slice_select", lambda x: (x[-10:100], x[1:-1], x[::2], x[5:2], x[:, -3:], x[:, 1:100:3], x[-1], x[:, -2],
                                  x.narrow(1, 1, 2), x[-3:-1, ::3], x[2:-100], x[..., 1]),
       lambda: (R(5, 4),), [aten.slice_copy.Tensor, aten.select_copy.int], grad=True)
sample("slice_select_int", lambda a: (a[-10:100:2], a[1:-1], a[-1], a[4:]),
       lambda: (torch.arange(20).reshape(5, 4),), [aten.slice_copy.Tensor, aten.select_copy.int])


def _setitem(x, v, w):
    x = x.clone()
    x[:, -1] = v
    x[1:-1:2] = 0.5
    x[-100:2, 3:] = w
    x.select(1, 0).copy_(v * 2)
    x[4].fill_(-1.0)
    return x


sample("setitem", _setitem, lambda: (R(5, 4), R(5), R(2, 1)),
       [aten.slice_scatter.default, aten.copy.default, aten.slice_copy.Tensor], grad=True)
sample("flip_roll_repeat", lambda x: (x.flip(0, -1), x.flip(1), x.roll(1), x.roll((1, -1), (0, 1)), x.repeat(2, 1, 3),
                                      x.tile(2)),
       lambda: (R(3, 4),), [aten.flip.default, aten.repeat.default], grad=True)
sample("constant_pad", lambda x: (F.pad(x, (1, 2)), F.pad(x, (-1, 2, 1, -2)), F.pad(x, (0, 0, -2, 0), value=1.5),
                                  F.pad(x, (1, -3, 0, 0, 2, 1), value=-1.0), F.pad(x, (-1, -1, -1, -1))),
       lambda: (R(2, 5, 6),), [aten.constant_pad_nd.default], grad=True)
sample("constant_pad_int", lambda a: (F.pad(a, (2, -1), value=7), F.pad(a, (-2, 0, 1, 1))),
       lambda: (torch.arange(20).reshape(4, 5),), [aten.constant_pad_nd.default])
sample("copy", lambda x, a, p: (x.clone().copy_(a), x.clone().copy_(p), a.clone().copy_(x[0] * 3)),
       lambda: (torch.randn(3, 4), T(1, -2, 3, 4), torch.rand(4) > 0.5), [aten.copy.default])

# ---- creation -------------------------------------------------------------------------

sample("factories", lambda x: (torch.full((2, 3), 7), torch.full((2,), 3.5), torch.full((2,), True), torch.zeros(2, 3),
                               torch.ones(3, dtype=torch.int64), torch.full_like(x, 2.5), torch.zeros_like(x),
                               torch.ones_like(x, dtype=torch.int32), x.new_zeros(2), x.new_full((2,), 4),
                               torch.scalar_tensor(2), torch.tensor(3.0) + x, torch.empty(2, 3).fill_(1.0),
                               torch.empty_like(x).fill_(2.0), torch.empty(4, dtype=torch.int64).fill_(3)),
       lambda: (torch.randn(2, 3),),
       [aten.full.default, aten.full_like.default, aten.scalar_tensor.default, aten.lift_fresh_copy.default,
        aten.empty.memory_format, aten.empty_permuted.default])
sample("arange", lambda x: (torch.arange(5), torch.arange(2, 7), torch.arange(-3, 9, 3), torch.arange(5, 0, -2),
                            torch.arange(0, 1, 0.25), torch.arange(0.1, 1.3, 0.3), torch.arange(4, dtype=torch.float32),
                            torch.linspace(0, 1, 5), x + torch.arange(4)),
       lambda: (torch.zeros(4),), [aten.arange.start_step])
sample("to_copy", lambda x, a, p: (x.int(), x.long(), x.bool(), a.float(), p.float(), p.long(), a.bool(),
                                   x.to(torch.float16), a.to(torch.int32)),
       lambda: (torch.randn(12) * 3, INTS(), torch.rand(12) > 0.5), [aten._to_copy.default])

# ---- linear algebra -------------------------------------------------------------------

sample("matmul", lambda x, y, b, v: (x @ y, torch.mm(x, y), torch.addmm(b, x, y), torch.addmm(b, x, y, beta=0.5, alpha=2.0),
                                     torch.addmm(torch.full_like(b, NAN), x, y, beta=0), x @ v,
                                     torch.bmm(x.expand(2, 3, 5), y.expand(2, 5, 4)),
                                     torch.matmul(x.expand(2, 3, 5), y), torch.baddbmm(b, x.expand(2, 3, 5),
                                                                                      y.expand(2, 5, 4))),
       lambda: (torch.randn(3, 5), torch.randn(5, 4), torch.randn(4), torch.randn(5)),
       [aten.mm.default, aten.addmm.default, aten.bmm.default])
sample("matmul_int", lambda a, b: (a @ b, torch.bmm(a[None], b[None])),
       lambda: (torch.randint(-5, 5, (3, 4)), torch.randint(-5, 5, (4, 2))), [aten.mm.default, aten.bmm.default])
sample("linear_grads", lambda x, w, b, u: (F.linear(x, w, b), F.linear(x, w), x @ u, torch.bmm(x.expand(2, 3, 5),
                                                                                               u.expand(2, 5, 2))),
       lambda: (R(3, 5), R(4, 5), R(4), R(5, 2)),
       [aten.addmm.default, aten.mm.default, aten.bmm.default], grad=True)

# ---- convolution ----------------------------------------------------------------------

CONV = [aten.convolution.default, aten.convolution_backward.default]
sample("conv2d_stride_pad_dil_groups_bias", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
       lambda: (R(2, 4, 9, 9), R(6, 2, 3, 3), R(6)), CONV, grad=True)
sample("conv2d_asym_nobias", lambda x, w: F.conv2d(x, w, None, stride=(1, 2), padding=(2, 1), dilation=(1, 2)),
       lambda: (R(2, 3, 7, 8), R(4, 3, 3, 2)), CONV, grad=True)
sample("conv2d_depthwise_bias", lambda x, w, b: F.conv2d(x, w, b, groups=4),
       lambda: (R(1, 4, 5, 5), R(8, 1, 3, 3), R(8)), CONV, grad=True)
sample("conv2d_unbatched_same", lambda x, w: F.conv2d(x, w, padding="same"),
       lambda: (R(3, 6, 6), R(2, 3, 3, 3)), CONV, grad=True)
sample("conv1d_conv3d", lambda x, w, v, u: (F.conv1d(x, w, None, stride=2, padding=1), F.conv3d(v, u, stride=(1, 2, 1))),
       lambda: (R(2, 3, 9), R(4, 3, 3), R(1, 2, 4, 5, 3), R(3, 2, 2, 3, 2)), CONV, grad=True)
sample("conv_transpose2d_basic", lambda x, w: F.conv_transpose2d(x, w, stride=2),
       lambda: (R(2, 2, 3, 3), R(2, 3, 3, 3)), CONV, grad=True)
sample("conv_transpose2d_all_options", lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 3), padding=(1, 2),
                                                                          output_padding=(1, 2), groups=2,
                                                                          dilation=(2, 1)),
       lambda: (R(2, 4, 5, 4), R(4, 3, 3, 4), R(6)), CONV, grad=True)
sample("conv_transpose2d_large_padding", lambda x, w: F.conv_transpose2d(x, w, padding=3, groups=2),
       lambda: (R(1, 4, 8, 8), R(4, 1, 3, 3)), CONV, grad=True)
sample("conv_transpose1d_3d", lambda x, w, b, v, u: (F.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2,
                                                                         dilation=2),
                                                      F.conv_transpose3d(v, u, stride=2, groups=2)),
       lambda: (R(2, 4, 5), R(4, 3, 3), R(3), R(1, 4, 3, 3, 2), R(4, 1, 2, 2, 2)), CONV, grad=True)
sample("conv_transpose2d_unbatched", lambda x, w, b: F.conv_transpose2d(x, w, b, 2, 1, 1),
       lambda: (R(3, 4, 4), R(3, 5, 3, 3), R(5)), CONV, grad=True)

# ---- pooling --------------------------------------------------------------------------

MAXPOOL = [aten.max_pool2d_with_indices.default, aten.max_pool2d_with_indices_backward.default]
AVGPOOL = [aten.avg_pool2d.default, aten.avg_pool2d_backward.default]
sample("max_pool_k3_s2_p1_ceil", lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), lambda: (R(2, 3, 8, 7),),
       MAXPOOL, grad=True)
sample("max_pool_k2_s1_p1_dil2", lambda x: F.max_pool2d(x, 2, 1, 1, dilation=2), lambda: (R(2, 3, 8, 7),),
       MAXPOOL, grad=True)
sample("max_pool_rect_unbatched", lambda x: F.max_pool2d(x, (3, 2), (2, 1), (1, 1), ceil_mode=True),
       lambda: (R(3, 6, 5),), MAXPOOL, grad=True)
sample("max_pool_default_stride_ties", lambda x: torch.nn.MaxPool2d(2)(x),
       lambda: (torch.randint(0, 3, (2, 2, 6, 6)).float().requires_grad_(),), MAXPOOL, grad=True)
# windows that tile their axis (stride == kernel) take the scatter-free backward, padding and ceil included
sample("max_pool_tiled_pad_ceil_ties", lambda x: F.max_pool2d(x, (2, 3), padding=(1, 0), ceil_mode=True),
       lambda: (torch.randint(0, 3, (2, 3, 7, 9)).float().requires_grad_(),), MAXPOOL, grad=True)
sample("max_pool3d_tiled_pad_ceil_ties", lambda x: F.max_pool3d(x, 3, padding=1, ceil_mode=True),
       lambda: (torch.randint(0, 3, (1, 2, 5, 5, 6)).float().requires_grad_(),),
       [aten.max_pool3d_with_indices.default, aten.max_pool3d_with_indices_backward.default], grad=True)


def _maxpool_special_input():
    """-inf next to padding and whole -inf windows, several NaNs per window."""
    x = torch.randn(1, 2, 5, 5)
    x[0, 0, 0, :] = -INF
    x[0, 0, :, 0] = -INF
    x[0, 0, 3:, 3:] = -INF
    x[0, 1, 0, 0] = NAN
    x[0, 1, 1, 1] = NAN
    x[0, 1, 2, 3] = NAN
    x[0, 1, 3, 2] = NAN
    return x


sample("max_pool_indices_inf_nan", lambda x: (F.max_pool2d_with_indices(x, 2, 2, 1),
                                              F.max_pool2d_with_indices(x, 3, 2, 1, ceil_mode=True),
                                              F.max_pool2d_with_indices(x, 2, 1)),
       lambda: (_maxpool_special_input(),), [aten.max_pool2d_with_indices.default])
sample("max_pool_int", lambda a: F.max_pool2d_with_indices(a, 2, 2, 1),
       lambda: (-torch.arange(1, 26).reshape(1, 5, 5),), [aten.max_pool2d_with_indices.default])
sample("avg_pool_k3_s2_p1_ceil_exclude_pad", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
       lambda: (R(2, 3, 8, 7),), AVGPOOL, grad=True)
sample("avg_pool_k3_s2_p1_ceil_include_pad", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True),
       lambda: (R(2, 3, 8, 7),), AVGPOOL, grad=True)
sample("avg_pool_rect_exclude_pad", lambda x: F.avg_pool2d(x, (3, 2), (2, 1), (1, 1), count_include_pad=False),
       lambda: (R(2, 7, 6),), AVGPOOL, grad=True)
sample("avg_pool_default_and_divisor", lambda x: (torch.nn.AvgPool2d(2)(x), F.avg_pool2d(x, 3, 2, 1, divisor_override=5),
                                                  F.avg_pool2d(x, 3, 3, 1, ceil_mode=True, divisor_override=2)),
       lambda: (R(1, 2, 7, 8),), AVGPOOL, grad=True)
sample("avg_pool_int", lambda a: (F.avg_pool2d(a, 2, 2, 1), F.avg_pool2d(a, 3, 2, 1, count_include_pad=False)),
       lambda: (torch.arange(-20, 30).reshape(2, 5, 5),), [aten.avg_pool2d.default])

# ---- nn -------------------------------------------------------------------------------

sample("layer_norm", lambda x, w, b: (F.layer_norm(x, (4, 5), w, b, eps=1e-3), F.layer_norm(x * 3 + 1, (5,))),
       lambda: (R(3, 4, 5), R(4, 5), R(4, 5)), [aten.native_layer_norm.default], grad=True)
sample("softmax", lambda x, m: (F.softmax(x, -1), F.log_softmax(x, 0), F.softmax(x.masked_fill(m, -INF), 1),
                                F.log_softmax(x.masked_fill(m, -INF), -1), torch.softmax(x, 1)),
       lambda: (R(3, 4, 5), torch.rand(3, 4, 5) > 0.7),
       [aten._softmax.default, aten._log_softmax.default], grad=True)
sample("embedding_padding_idx", lambda w, i: (F.embedding(i, w, padding_idx=1), F.embedding(i.flip(0), w)),
       lambda: (R(6, 3), T([0, 1, 2, 1], [1, 4, 0, 4])), [aten.embedding.default], grad=True)
sample("cross_entropy_ignore_smoothing", lambda x, t: (F.cross_entropy(x, t, ignore_index=2, label_smoothing=0.1),
                                                       F.cross_entropy(x, t, reduction="sum", label_smoothing=0.2),
                                                       F.cross_entropy(x, t, reduction="none", ignore_index=0)),
       lambda: (R(6, 4), T(0, 1, 2, 3, 2, 1)),
       [aten._log_softmax.default, aten.gather.default, aten.scatter.value], grad=True)


def _bn_module(training):
    bn = torch.nn.BatchNorm2d(3, momentum=0.3, eps=1e-3)
    bn.train(training)

    def fn(x, w, b, running_mean, running_var, num_batches_tracked):
        state = {"weight": w, "bias": b, "running_mean": running_mean, "running_var": running_var,
                 "num_batches_tracked": num_batches_tracked}
        y = torch.func.functional_call(bn, state, (x,))
        return y, running_mean, running_var, num_batches_tracked

    return fn


def _bn_args():
    return (R(4, 3, 2, 5), R(3), R(3), torch.randn(3), torch.rand(3) + 0.5, torch.tensor(3))


sample("batch_norm_train_module_buffers", _bn_module(True), _bn_args,
       [aten._native_batch_norm_legit_functional.default, aten.add.Tensor], grad=True)
sample("batch_norm_eval_module", _bn_module(False), _bn_args,
       [aten._native_batch_norm_legit_no_training.default], grad=True)


def _bn_functional(x, w, rm, rv):
    y1 = F.batch_norm(x, rm, rv, w, None, training=True, momentum=0.1)  # updates rm, rv in place
    y2 = F.batch_norm(x * 2, None, None, None, w, training=True)  # batch stats only
    return y1, y2, rm, rv


sample("batch_norm_functional_1d", _bn_functional, lambda: (R(5, 4, 3), R(4), torch.randn(4), torch.rand(4) + 0.5),
       [aten._native_batch_norm_legit_functional.default, aten._native_batch_norm_legit.no_stats], grad=True)

# ---- indexing -------------------------------------------------------------------------

sample("gather", lambda x, i, j: (torch.gather(x, 1, i), torch.gather(x, 0, j), torch.gather(x, -1, i[:1])),
       lambda: (R(3, 5), T([0, 4], [1, 1]), T([2, 0, 1], [1, 1, 0])),  # index smaller than the input
       [aten.gather.default, aten.scatter_add.default], grad=True)
sample("scatter_src_value", lambda x, s, i, k: (torch.scatter(x, 1, i, s), torch.scatter(x, 0, k, s * 2),
                                                torch.scatter(x, -1, i, 2.5)),
       lambda: (R(4, 5), R(2, 3), T([0, 4, 2], [1, 3, 0]), T([3, 0, 1], [1, 2, 0])),  # no duplicate targets
       [aten.scatter.src, aten.scatter.value], grad=True)
sample("scatter_src_larger_than_index", lambda x, s, i: torch.scatter(x, 0, i, s),
       lambda: (torch.zeros(4, 5), torch.randn(3, 5), T([3, 1], [0, 2])), [aten.scatter.src])
sample("scatter_add", lambda x, s, i: (torch.scatter_add(x, 0, i, s), x.scatter_add(1, i[:, :2], s[:, :2])),
       lambda: (R(3, 4), R(3, 3), T([0, 2, 2], [1, 2, 0], [2, 0, 2])), [aten.scatter_add.default], grad=True)
_SR_INDEX = lambda: T([0, 0, 2], [1, 3, 3], [3, 3, 3])  # noqa: E731
for _include in (True, False):
    sample(f"scatter_reduce_include_self_{_include}",
           lambda x, s, i, a, b, _inc=_include: tuple(
               t.scatter_reduce(1, i, u, r, include_self=_inc)
               for t, u in ((x, s), (a, b)) for r in ("sum", "prod", "mean", "amax", "amin")),
           lambda: (torch.randn(3, 4), torch.randn(3, 3), _SR_INDEX(), torch.randint(-9, 9, (3, 4)),
                    torch.randint(-9, 9, (3, 3))),
           [aten.scatter_reduce.two])
sample("scatter_reduce_grads", lambda x, s, i: (x.scatter_reduce(1, i, s, "sum"), x.scatter_reduce(1, i, s, "mean")),
       lambda: (R(3, 4), R(3, 3), _SR_INDEX()), [aten.scatter_reduce.two], grad=True)
sample("index", lambda x, i, j: (x[i], x[i, :, j], x[:, i[:2]], x[i[:, None], 1:, j], x[:, None, i[:2]], x[-1, i]),
       lambda: (R(3, 4, 5), T(0, 2, -1), T(1, 4, 4)), [aten.index.Tensor, aten.index_put.default], grad=True)
sample("index_put_accumulate", lambda x, v, i, j: (x.index_put((i,), v, accumulate=True),
                                                   x.index_put((i, j), v[:, 0], accumulate=True),
                                                   x.index_put((j[:3],), v[:3] * 2)),
       lambda: (R(5, 3), R(4, 3), T(0, 2, 2, 4), T(2, 1, 0, 0)),  # duplicates accumulate
       [aten.index_put.default], grad=True)


def _masked_set(x, m, m1, v, w):
    x = x.clone()
    x[m] = 0.5  # 0-d values
    y = x.clone()
    y[m] = v  # one row broadcast to every selected element
    z = x.clone()
    z[:, m1] = w  # one value per selected element, in order
    a = x.index_put((m,), x.new_tensor(1.0), accumulate=True)  # a 0-d tensor of x's dtype
    return x, y, z, a


sample("index_put_bool_mask", _masked_set,
       lambda: (torch.randn(4, 3, 2), torch.rand(4, 3) > 0.5, T(True, False, True), torch.randn(2),
                torch.randn(4, 2, 2)),
       [aten.index_put.default])  # (its backward indexes with the mask: a data-dependent shape)
sample("index_put_bool_mask_nnz_values", lambda x, m, v: x.index_put((m,), v),
       lambda: (torch.arange(12).reshape(4, 3), T(True, False, True, True), torch.randint(0, 9, (3, 3))),
       [aten.index_put.default])
sample("index_select_0d", lambda x, s, i: (x.index_select(1, i), x.index_select(-2, i), s.index_select(0, i - 1),
                                            s.index_select(0, i.reshape(1) - 1)),
       lambda: (torch.randn(3, 4), torch.tensor(2.5), torch.tensor(1)), [aten.index_select.default])
sample("index_select", lambda x, i: (torch.index_select(x, 1, i), x.index_select(0, i[:2]), x.index_select(-1, i)),
       lambda: (R(3, 5), T(0, 2, 2, 4)), [aten.index_select.default], grad=True)
