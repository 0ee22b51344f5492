"""`cstorch::gemm`: a float32 matrix product with its operand transposes as flags.

    gemm(a, b, bias, trans_a, trans_b) = op(a) @ op(b) (+ bias)

op(x) is x with its last two dims swapped when the flag is set, the leading dims are
batch dims (equal in a and b), and `bias` (optional) is a vector added to every row.
The op never appears in a captured graph: the CPU graph pass `passes/gemm_routing.py`
puts it in place of large mm/bmm/addmm nodes, reading transposed operands in place.

On CPU it lowers to the BLAS custom call of `cstorch_jax/native` (XLA's dot where that
is not available); anywhere else to XLA's dot with the transposes as dimension numbers.
Same math in every case: one float32 dot product per output element.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import torch

from .. import native
from .products import HIGHEST
from .registry import register


def _operand(x: torch.Tensor, trans: bool) -> torch.Tensor:
    return x.transpose(-1, -2) if trans else x


@torch.library.custom_op("cstorch::gemm", mutates_args=())
def gemm_op(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, trans_a: bool,
            trans_b: bool) -> torch.Tensor:
    out = torch.matmul(_operand(a, trans_a), _operand(b, trans_b))
    return out if bias is None else out + bias


@gemm_op.register_fake
def _(a, b, bias, trans_a, trans_b):
    m = a.shape[-1] if trans_a else a.shape[-2]
    n = b.shape[-2] if trans_b else b.shape[-1]
    return a.new_empty((*a.shape[:-2], m, n))


def _xla_dot(a, b, bias, trans_a, trans_b):
    batch = tuple(range(a.ndim - 2))
    lhs_contract = a.ndim - 2 if trans_a else a.ndim - 1
    rhs_contract = b.ndim - 1 if trans_b else b.ndim - 2
    out = jax.lax.dot_general(a, b, (((lhs_contract,), (rhs_contract,)), (batch, batch)), precision=HIGHEST,
                              preferred_element_type=jnp.float32)
    return out if bias is None else out + bias


@register(torch.ops.cstorch.gemm.default)
def gemm(a, b, bias, trans_a, trans_b):
    targets = native.gemm_targets()
    if targets is None or a.dtype != jnp.float32 or b.dtype != jnp.float32:
        return _xla_dot(a, b, bias, trans_a, trans_b)
    m = a.shape[-1] if trans_a else a.shape[-2]
    n = b.shape[-2] if trans_b else b.shape[-1]
    out = jax.ShapeDtypeStruct((*a.shape[:-2], m, n), jnp.float32)
    cpu = jax.ffi.ffi_call(targets[0] if bias is None else targets[1], out)
    args = (a, b) if bias is None else (a, b, bias.astype(jnp.float32))
    # the custom call is registered for the CPU only; other platforms get XLA's dot
    return jax.lax.platform_dependent(
        *args, cpu=lambda *xs: cpu(*xs, trans_a=trans_a, trans_b=trans_b),
        default=lambda *xs: _xla_dot(xs[0], xs[1], xs[2] if bias is not None else None, trans_a, trans_b))
