"""PyTorch's own OpInfo database (`op_db`) through the engine, compared with eager torch.

One forward test and one gradient test per OpInfo entry (see
`cstorch_jax.coverage.opinfo` for what is compared and what is out of scope). By
default each test runs a fixed, seeded subset of the op's float32 samples; `pytest
--full` runs all of them. Known failures are listed, each with its reason, in
`opinfo_expected_failures.py`: under `--full` the list is strict (an op that starts
passing must leave it), on the subset an expected failure may pass.
"""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("expecttest", reason="torch's OpInfo database needs expecttest (dev extra)")

from cstorch_jax.coverage.opinfo import (  # noqa: E402
    DEFAULT_LIMIT, FAIL, MODES, NOT_APPLICABLE, OUT_OF_SCOPE, load_op_db, op_id,
)
from opinfo_expected_failures import EXPECTED_FAILURES, absent_here, expected_failure  # noqa: E402
from opinfo_outcomes import outcome as shared_outcome  # noqa: E402
from opinfo_reached import REACHED, SINCE  # noqa: E402

OPS = {op_id(op): op for op in load_op_db()}


def _run(name: str, mode: str, request) -> None:
    full = request.config.getoption("--full")
    path = request.node.nodeid.split("::")[0]
    siblings = [((torch.float32, m), f"{path}::test_opinfo_{m}[{name}]") for m in MODES]
    outcome = shared_outcome(request, OPS[name], name, (torch.float32, mode), None if full else DEFAULT_LIMIT, siblings)
    expected = expected_failure(name, mode)
    if outcome.status == OUT_OF_SCOPE:
        pytest.skip("; ".join(outcome.reasons))
    if outcome.status == NOT_APPLICABLE:
        pytest.skip(f"{name} has no gradient to test")
    if outcome.status == FAIL:
        if expected:
            pytest.xfail(expected)
        pytest.fail(f"{name} {mode}: {outcome.failed} samples fail: {'; '.join(outcome.reasons)}")
    if expected and full:
        pytest.fail(f"{name} {mode} passes now: remove it from opinfo_expected_failures.py")
    missing = sorted(aten for aten, by in REACHED.items() if by == (name, mode) and aten not in outcome.ops
                     and not torch.__version__ < SINCE.get(aten, "0"))
    assert not missing, f"{name} {mode} no longer runs {missing}; opinfo_reached.py needs another OpInfo op for them"


@pytest.mark.parametrize("name", list(OPS))
def test_opinfo_forward(name, request):
    _run(name, "forward", request)


@pytest.mark.parametrize("name", list(OPS))
def test_opinfo_grad(name, request):
    _run(name, "grad", request)


def test_expected_failures_name_real_ops():
    unknown = sorted(k for k in EXPECTED_FAILURES
                     if (k[0] not in OPS and not absent_here(k[0])) or k[1] not in ("forward", "grad"))
    assert not unknown, unknown
    assert all(reason.strip() for reason in EXPECTED_FAILURES.values())
