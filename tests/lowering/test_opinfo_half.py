"""OpInfo samples of common training ops in bfloat16 and float16, forward and gradient,
judged against the same op computed in float64 (`cstorch_jax.coverage.accuracy.judge`).

The whole 16-bit sweep (every op, both dtypes) takes hours of CPU on the CI machine; it
runs from `python -m cstorch_jax.coverage --dtypes bfloat16,float16` and its figures are
in the README. Here, within the CI budget, one seeded sample per mode of the ops a
mixed-precision training step spends its time in (pointwise math, activations, softmax,
normalization, loss, matmul, reductions).
"""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("expecttest", reason="torch's OpInfo database needs expecttest (dev extra)")

from cstorch_jax.coverage.opinfo import FAIL, PASS, check_mode, load_op_db, op_id  # noqa: E402

TRAINING_OPS = ["add", "mul", "exp", "nn.functional.gelu", "softmax", "nn.functional.layer_norm",
                "nn.functional.cross_entropy", "matmul", "sum", "cumsum"]
SAMPLES = 1
OPS = {op_id(op): op for op in load_op_db() if op_id(op) in TRAINING_OPS}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("mode", ["forward", "grad"])
@pytest.mark.parametrize("name", TRAINING_OPS)
def test_training_op_in_16_bit_is_as_accurate_as_eager(name, mode, dtype):
    outcome = check_mode(OPS[name], mode, dtype, limit=SAMPLES)
    assert outcome.status != FAIL, f"{name} {mode} {dtype}: {'; '.join(outcome.reasons)}"
    assert outcome.status == PASS, f"{name} {mode} {dtype}: {outcome.status}: {'; '.join(outcome.reasons)}"


def test_coverage_command_reports_per_dtype(capsys, tmp_path):
    import json

    from cstorch_jax.coverage.__main__ import main

    assert main(["--ops", "exp", "--dtypes", "float32,bfloat16", "--limit", "1", "--jobs", "1",
                 "--json", str(tmp_path / "out.json")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for dtype in ("float32", "bfloat16"):
        assert f"exp {dtype} forward: pass 1/1 grad: pass 1/1" in out, out
        assert f"{dtype} (0 ops out of scope): forward 1 / 1 in-scope ops pass (100.0 %) grad 1 / 1" in out, out
    assert set(json.loads((tmp_path / "out.json").read_text())) == {"float32", "bfloat16"}
