"""PyTorch's OpInfo database in bfloat16 and float16, forward and gradient, every op on the
default seeded subset of its samples (as `python -m cstorch_jax.coverage --dtypes
bfloat16,float16`), each output judged against the same op computed in float64
(`cstorch_jax.coverage.accuracy.judge`: cstorch's error at most twice eager's, dtypes
equal, integers exact). Known failures: the float32 list's that do not depend on the dtype
and `HALF_EXPECTED_FAILURES` (opinfo_expected_failures.py), each with its reason; on the
subset an expected failure may pass.
"""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("expecttest", reason="torch's OpInfo database needs expecttest (dev extra)")

from cstorch_jax.coverage.opinfo import (  # noqa: E402
    DEFAULT_LIMIT, FAIL, MODES, NOT_APPLICABLE, OUT_OF_SCOPE, PASS, load_op_db, op_id,
)
from opinfo_expected_failures import (  # noqa: E402
    EXPECTED_FAILURES, FLOAT32_ONLY, HALF_EXPECTED_FAILURES, absent_here, expected_failure,
)
from opinfo_outcomes import outcome as shared_outcome  # noqa: E402

OPS = {op_id(op): op for op in load_op_db()}
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode", ["forward", "grad"])
@pytest.mark.parametrize("name", list(OPS))
def test_opinfo_in_16_bit(name, mode, dtype, request):
    path = request.node.nodeid.split("::")[0]
    siblings = [((DTYPES[d], m), f"{path}::test_opinfo_in_16_bit[{name}-{m}-{d}]") for m in MODES for d in DTYPES]
    outcome = shared_outcome(request, OPS[name], name, (DTYPES[dtype], mode), DEFAULT_LIMIT, siblings)
    if outcome.status == OUT_OF_SCOPE:
        pytest.skip("; ".join(outcome.reasons))
    if outcome.status == NOT_APPLICABLE:
        pytest.skip(f"{name} has no gradient to test")
    expected = expected_failure(name, mode, dtype)
    if outcome.status == FAIL:
        if expected:
            pytest.xfail(expected)
        pytest.fail(f"{name} {mode} {dtype}: {outcome.failed} samples fail: {'; '.join(outcome.reasons)}")
    assert outcome.status == PASS


def test_half_expected_failures_name_real_ops():
    unknown = sorted(k for k in HALF_EXPECTED_FAILURES
                     if (k[0] not in OPS and not absent_here(k[0])) or k[1] not in ("forward", "grad") or k[2] not in DTYPES)
    assert not unknown, unknown
    assert all(reason.strip() for reason in HALF_EXPECTED_FAILURES.values())
    assert FLOAT32_ONLY <= set(EXPECTED_FAILURES)


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
