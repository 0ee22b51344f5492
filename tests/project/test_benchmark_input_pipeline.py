"""The input-pipeline benchmark runs (tiny sizes) and reports every mode; no timing asserts."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_input_pipeline_quick():
    proc = subprocess.run([sys.executable, "-m", "benchmarks.input_pipeline", "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    out = proc.stdout
    assert proc.returncode == 0, f"stdout:\n{out}\nstderr:\n{proc.stderr}"
    assert re.search(r"^compute per step with a fast loader \(calibration\): \d+\.\d+ ms -> loader sleeps "
                     r"\d+\.\d+ ms per batch$", out, re.M), out
    assert re.search(r"^fast loader\s+(\d+\.\d+\s+){4}-$", out, re.M), out
    for prefetch in (0, 2, "auto"):
        assert re.search(rf"^prefetch_batches={prefetch}\s+(\d+\.\d+\s+){{4}}-?\d+%$", out, re.M), out
    assert re.search(r"^ratio prefetch_batches=0 / prefetch_batches=2 \(median\): \d+\.\d+x$", out, re.M), out
    assert re.search(r"^input hidden: -?\d+% with prefetch_batches=2, -?\d+% with auto, -?\d+% without", out,
                     re.M), out
    assert re.search(r"^losses: prefetch_batches=0 vs 2 and auto, \d+ fetched, max \|diff\| \S+ \(OK, tol", out,
                     re.M), out
