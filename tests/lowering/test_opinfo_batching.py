"""The OpInfo runner's batches: the samples of several cases (dtype, mode) compiled as one
program give each case the outcome a separate check of it gives, and each sample is judged
on its own slice of the graph."""
from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("expecttest", reason="torch's OpInfo database needs expecttest (dev extra)")

import cstorch_jax  # noqa: E402
from cstorch_jax.coverage.opinfo import check_cases, check_mode, load_op_db, op_id, ops_by_output_group  # noqa: E402

OPS = {op_id(op): op for op in load_op_db()}
aten = torch.ops.aten


def test_each_output_group_gets_the_ops_that_compute_it():
    def f(x, y):
        return torch.sin(x), torch.cos(y) + 1, torch.exp(x)

    jitted = cstorch_jax.jit(f)
    x, y = torch.randn(3), torch.randn(3)
    module = jitted.executable(x, y).captured.module
    first, second = ops_by_output_group(module, [0, 1, 0])
    assert first == {aten.sin.default, aten.exp.default}
    assert second == {aten.cos.default, aten.add.Tensor}


def _outcome(o):
    return dataclasses.astuple(o)


# an op that passes, a random op (judged by shapes only), an op whose grad is n/a, an op with
# no lowering (the batch fails: each case falls back to its own run), a linear-algebra op
@pytest.mark.parametrize("name", ["sin", "nn.functional.dropout", "argmax", "hash_tensor", "linalg.cholesky"])
def test_cases_compiled_together_equal_each_case_checked_alone(name):
    op = OPS[name]
    cases = [(torch.float32, "forward"), (torch.float32, "grad"), (torch.bfloat16, "forward"),
             (torch.bfloat16, "grad"), (torch.float16, "forward")]
    together = check_cases(op, cases)
    for dtype, mode in cases:
        assert _outcome(together[dtype, mode]) == _outcome(check_mode(op, mode, dtype)), (dtype, mode)
