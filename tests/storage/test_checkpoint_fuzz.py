"""The checkpoint fuzz (checkpoint_fuzz.py): seeded mutations of valid checkpoints load
exactly or raise `cstorch.InvalidCheckpointError`, within a time bound, never anything
else. 500 cases here (seconds); `pytest --full` runs 10 000."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint_fuzz  # noqa: E402
import pytest  # noqa: E402

CASES, FULL_CASES = 500, 10_000


@pytest.mark.slow
def test_mutated_checkpoints_load_exactly_or_raise_the_project_error(request):
    cases = FULL_CASES if request.config.getoption("--full") else CASES
    results = checkpoint_fuzz.run(seed=0, cases=cases, workers=2, timeout=60)
    failures = [r for r in results if r["outcome"].startswith("FAIL")]
    report = checkpoint_fuzz.summary(results)
    print(f"\n{cases} mutated checkpoints: {report}")
    assert [r["case"] for r in results] == list(range(cases))
    assert not failures, f"{len(failures)} of {cases} cases failed ({report}); the first:\n" + "\n".join(
        f"case {r['case']} ({r.get('family')}: {r.get('mutation')}): {r['outcome']}" for r in failures[:5])
    # the cases reach every family under both oracles, and some do load
    assert {r["family"] for r in results if r["oracle"] == "strict"} == set(checkpoint_fuzz.FAMILIES)
    assert {r["family"] for r in results if r["oracle"] == "robust"} == set(checkpoint_fuzz.FAMILIES) - {"bytes"}
    assert {r["outcome"] for r in results} >= {"equal", "error", "loaded"}
