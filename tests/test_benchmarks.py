"""The step-overhead benchmark runs (tiny sizes) and reports both models; no timing asserts."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_step_overhead_quick():
    proc = subprocess.run([sys.executable, "-m", "benchmarks.step_overhead", "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    out = proc.stdout
    assert proc.returncode == 0, f"stdout:\n{out}\nstderr:\n{proc.stderr}"
    for model in ("MLP", "GPT"):
        for impl in ("cstorch", "jax.jit"):
            assert re.search(rf"^{model}\s+{impl}\s+\d", out, re.M), out
        assert re.search(rf"^{model}\s+ratio cstorch/jax \(median\): \d+\.\d+x .*\(OK,", out, re.M), out
