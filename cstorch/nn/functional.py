"""`cstorch.nn.functional`: the real API's functional ops.

The real system maps several of these onto dedicated wafer kernels and falls back to the
torch expression below elsewhere; here the torch expression is what every backend
compiles (XLA fuses it). Shapes use the real docstrings' names.

* `one_hot(array, num_classes)`: int32 one-hot over a new last dim.
* `bias_add(input_value, bias, dim)`: `input_value + bias` broadcast along `dim`.
* `matmul(weight, input_value, weight_transposed=None)`: `[Ho,Hi] @ [Hi,S]`.
* `ranged_matmul(weight, input_value, num_cols, weight_transposed=None)`:
  `[B,S,Hi] @ weight.T -> [B,S,Ho]`; only the first `num_cols[b]` columns of batch `b` are
  defined on the wafer, here every column is computed.
* `sparse_matmul(input_values, input_indices, weight)`: `input_values [..., M, b, N]` hold
  rows `input_indices [..., M, b]` of a dense `[..., M, B, N]` input; the result holds the
  same rows of `einsum("...MBN,KBN->...MBK", dense, weight)`, i.e. per row
  `out[..., m, i, k] = sum_n input_values[..., m, i, n] * weight[k, input_indices[..., m, i], n]`.
* `sparse_act_matmul(input_value, input_mask, weight, dense_capacity=None)`:
  `(input_value @ weight.T) * input_mask[..., None]`.
* `conditional_arange(mask, start, step, dtype=None)`: along the last dim,
  `start + step * (number of earlier set positions)` where `mask` is set, -1 elsewhere.
* `nth_order_statistic(input, k, dimension)`: an int16 mask of the `k` largest entries
  along `dimension`.
* `unbind(tensor)`: the slices along dim 0 (gradient: the stacked slice gradients).
* `scope_boundary`, `enter_scope`, `exit_scope`: mark a named region of the wafer program;
  the identity here.
The `CSX*` classes are the real system's autograd functions of these kernels; their
`apply(...)` computes the same as the function above. The mesh transfer ones are not
provided (see cstorch.unsupported).

Differences from the real system:
    The wafer kernels are their torch expressions here (`ranged_matmul` computes every
    column); scopes have no effect.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from ..unsupported import module_getattr

SKIP_OPTIONAL_ATTR = "SKIP_OPTIONAL_ATTR"
BEGIN_FORWARD = "BEGIN_FORWARD"
BEGIN_BACKWARD = "BEGIN_BACKWARD"
END_FORWARD = "END_FORWARD"
END_BACKWARD = "END_BACKWARD"

__getattr__ = module_getattr(__name__)


def one_hot(array: torch.Tensor, num_classes: int) -> torch.Tensor:
    """int32 one-hot encoding of `array` over a new last dimension of `num_classes`.

    Args:
        array: integer class ids.
        num_classes: the size of the new dimension (not -1: the graph is static).
    """
    if num_classes == -1:
        raise ValueError("num_class argument to one_hot cannot be -1: pass the number of classes (the graph is "
                         "static, so it cannot be read from the data).")
    classes = torch.arange(num_classes, device=array.device)
    return (array.unsqueeze(-1) == classes).to(torch.int32)


def scope_boundary(input, boundary_type, scope_name):
    """The identity (the real system places a named scope boundary after `input`).

    Args:
        input: the tensor returned unchanged.
        boundary_type: the real system's boundary kind (BEGIN_FORWARD, END_FORWARD, ...; not used).
        scope_name: the scope's name (not used).
    """
    return input


class EnterFunction(torch.autograd.Function):
    """Scope entry: the identity forward and backward."""

    @staticmethod
    def forward(ctx, input, scope_name):
        return input.view_as(input)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


class ExitFunction(EnterFunction):
    """Scope exit: the identity forward and backward."""


def enter_scope(input, scope_name):
    """Enter the named region of the wafer program: the identity here.

    Args:
        input: the tensor returned unchanged (its gradient passes through unchanged).
        scope_name: the region's name (not used).
    """
    return EnterFunction.apply(input, scope_name)


def exit_scope(input, scope_name):
    """Leave the named region of the wafer program: the identity here.

    Args:
        input: the tensor returned unchanged (its gradient passes through unchanged).
        scope_name: the region's name (not used).
    """
    return ExitFunction.apply(input, scope_name)


def sparse_matmul(input_values: torch.Tensor, input_indices: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Rows `input_indices` of a sparse input times a dense weight (see the module docstring).

    Args:
        input_values: [..., M, b, N]: the kept rows of the dense input.
        input_indices: [..., M, b]: which of the B rows each kept row is (below 2**16).
        weight: [K, B, N].
    """
    if weight.size(1) >= 2 ** 16:
        raise NotImplementedError("sparse_matmul requires `input_indices` to fit in uint16 (weight.size(1) < 2**16)")
    # weight[k, idx, n] for every selected row: [..., M, b, K, N]
    rows = weight.permute(1, 0, 2)[input_indices.long()]
    return torch.einsum("...n,...kn->...k", input_values, rows)


def sparse_act_matmul(input_value: torch.Tensor, input_mask: torch.Tensor, weight: torch.Tensor,
                      dense_capacity: Optional[int] = None) -> torch.Tensor:
    """`input_value @ weight.T` with the rows whose mask is 0 set to 0.

    Args:
        input_value: [..., M, N].
        input_mask: [..., M]: 0 zeroes a row of the result.
        weight: [K, N].
        dense_capacity: the real kernel's capacity hint (not used).
    """
    if input_value.shape[:-1] != input_mask.shape:
        raise AssertionError(
            f"Expect input_value and input_mask to have the same shape (except for last dim of input_value).\n"
            f"Instead got input_value.shape = {input_value.shape} and input_mask.shape = {input_mask.shape}")
    out = torch.einsum("...mn,kn->...mk", input_value, weight)
    return out * input_mask.unsqueeze(-1).to(out.dtype)


def bias_add(input_value: torch.Tensor, bias: torch.Tensor, dim: int) -> torch.Tensor:
    """`input_value` plus the 1-D `bias` broadcast along dimension `dim`.

    Args:
        input_value: a tensor of two or more dimensions.
        bias: a 1-D tensor as long as dimension `dim`.
        dim: the dimension the bias runs along.
    """
    if bias.dim() != 1:
        raise AssertionError(f"Expected 1D bias weight. Instead got bias.shape = {bias.shape}")
    if input_value.dim() < 2:
        raise AssertionError(f"Expected >= 2D input_value. Instead got input_value.shape = {input_value.shape}")
    if not 0 <= dim < input_value.dim():
        raise AssertionError(f"`dim` must in [0, len(input_value.shape) - 1]. Instead got: dim={dim}")
    if bias.shape[0] != input_value.shape[dim]:
        raise AssertionError(f"Expect bias.shape[0] == input_value.shape[dim={dim}]. Instead got bias.shape = "
                             f"{bias.shape} and input_value.shape = {input_value.shape}")
    shape = [1] * input_value.dim()
    shape[dim] = bias.shape[0]
    return input_value + bias.reshape(shape)


def _check_transposed(weight, weight_transposed):
    if weight_transposed is not None and weight_transposed.shape != weight.t().shape:
        raise AssertionError(f"Expected weight_transposed.shape to be the transpose of weight.shape. "
                             f"{weight_transposed.shape} != transpose({weight.shape}, 1, 0).")


def matmul(weight: torch.Tensor, input_value: torch.Tensor, weight_transposed: torch.Tensor = None) -> torch.Tensor:
    """`weight [Ho, Hi] @ input_value [Hi, S]`.

    Args:
        weight: [Ho, Hi].
        input_value: [Hi, S].
        weight_transposed: the real kernel's transposed weight [Hi, Ho], only checked for its shape.
    """
    if weight.dim() != 2 or input_value.dim() != 2 or weight.shape[1] != input_value.shape[0]:
        raise AssertionError(f"matmul expects a 2D weight [Ho, Hi] and a 2D input_value [Hi, S]. Instead got "
                             f"weight.shape = {weight.shape} and input_value.shape = {input_value.shape}")
    _check_transposed(weight, weight_transposed)
    return torch.matmul(weight, input_value)


def ranged_matmul(weight: torch.Tensor, input_value: torch.Tensor, num_cols: torch.Tensor,
                  weight_transposed: torch.Tensor = None) -> torch.Tensor:
    """`input_value [B, S, Hi] @ weight.T -> [B, S, Ho]` (every column computed).

    Args:
        weight: [Ho, Hi].
        input_value: [B, S, Hi].
        num_cols: [B]: the columns defined per batch on the wafer (checked for its shape only).
        weight_transposed: the real kernel's transposed weight [Hi, Ho], only checked for its shape.

    Differences from the real system:
        Every column is computed (on the wafer only the first `num_cols[b]` of batch
        `b` are defined).
    """
    if weight.dim() != 2 or input_value.dim() != 3 or weight.shape[1] != input_value.shape[2]:
        raise AssertionError(f"ranged_matmul expects a 2D weight [Ho, Hi] and a 3D input_value [B, S, Hi]. Instead "
                             f"got weight.shape = {weight.shape} and input_value.shape = {input_value.shape}")
    if num_cols.dim() != 1:
        raise AssertionError(f"Expected len(num_cols.shape) == 1. Instead got len(num_cols.shape) = {num_cols.dim()}")
    _check_transposed(weight, weight_transposed)
    return torch.einsum("...mn,kn->...mk", input_value, weight)


def conditional_arange(mask: torch.Tensor, start: torch.Tensor, step: torch.Tensor,
                       dtype: torch.dtype = None) -> torch.Tensor:
    """Evenly spaced values at the set positions of `mask` (-1 elsewhere).

    Args:
        mask: the positions that get a value (along the last dimension).
        start: a 0-d tensor: the first value.
        step: a 0-d tensor: the spacing.
        dtype: the result's dtype; None: that of `start + step * position`.
    """
    if start.dim() != 0:
        raise AssertionError(f"Expected 0D tensor for start. Instead got {start.shape}")
    if step.dim() != 0:
        raise AssertionError(f"Expected 0D tensor for step. Instead got {step.shape}")
    mask = mask.bool()
    position = torch.cumsum(mask, dim=-1) - 1
    values = start + step * position
    out = torch.where(mask, values, torch.full_like(values, -1))
    return out if dtype is None else out.to(dtype)


def nth_order_statistic(input: torch.Tensor, k: int, dimension: int) -> torch.Tensor:
    """int16 mask (same shape as `input`) of the `k` largest entries along `dimension`.

    Args:
        input: the tensor.
        k: how many entries to mark.
        dimension: the dimension along which the largest entries are found.
    """
    _, indices = input.topk(k, dim=dimension)
    mask = torch.zeros_like(input, dtype=torch.int16)
    return mask.scatter(dimension, indices, torch.ones_like(indices, dtype=torch.int16))


class UnbindFunction(torch.autograd.Function):
    """`torch.unbind(input, 0)`, with the slices' gradients stacked back."""

    @staticmethod
    def forward(ctx, input: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        return tuple(torch.unbind(input, dim=0))

    @staticmethod
    def backward(ctx, *grad_outputs: torch.Tensor):
        return torch.stack(grad_outputs, dim=0)


def unbind(tensor: torch.Tensor) -> Tuple[torch.Tensor, ...]:
    """The slices of `tensor` along its first dimension.

    Args:
        tensor: the tensor to slice.
    """
    return UnbindFunction.apply(tensor)


def _kernel(name: str, fn, doc: str):
    """A class standing for one of the real system's kernel autograd functions."""
    return type(name, (), {"__doc__": doc, "apply": staticmethod(fn), "__module__": __name__})


CSXSparseMatMul = _kernel("CSXSparseMatMul", sparse_matmul, "`apply` = sparse_matmul.")
CSXSparseActMatMul = _kernel("CSXSparseActMatMul", sparse_act_matmul, "`apply` = sparse_act_matmul.")
CSXBiasAdd = _kernel("CSXBiasAdd", bias_add, "`apply(input_value, bias, dim)` = bias_add.")
CSXMatMul = _kernel("CSXMatMul", lambda weight, input_value, weight_transposed=None:
                    matmul(weight, input_value, weight_transposed), "`apply` = matmul.")
CSXRangedMatMul = _kernel("CSXRangedMatMul", lambda weight, input_value, num_cols, weight_transposed=None:
                          ranged_matmul(weight, input_value, num_cols, weight_transposed), "`apply` = ranged_matmul.")
CSXConditionalArange = _kernel("CSXConditionalArange", conditional_arange, "`apply` = conditional_arange.")
CSXNthOrderStatisic = _kernel("CSXNthOrderStatisic", nth_order_statistic, "`apply` = nth_order_statistic.")
