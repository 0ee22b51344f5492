"""Fuzzed compile-cache entries (tests/engine/compile_cache_fuzz.py, in its own process: a crash
is a failure, not the end of the test run): every mutated entry either loads the exact
program or is refused with one warning and the step compiled again; no pickle payload
ever runs. CI runs 100 cases; `pytest --full` runs 2000."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "compile_cache_fuzz.py"


def test_fuzzed_entries_load_exactly_or_recompile_with_a_warning(tmp_path, request):
    cases = 2000 if request.config.getoption("--full") else 100
    marker = tmp_path / "marker"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "cache"), str(marker), "--cases", str(cases)],
                         env=env, capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["n_failures"] == 0, result["failures"]
    assert not marker.exists()
    refused = sum(o.get("refused", 0) for o in result["outcomes"].values())
    assert refused >= cases // 2, result["outcomes"]  # the mutations reached the checks
