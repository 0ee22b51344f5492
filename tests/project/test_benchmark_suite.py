"""`python -m benchmarks --quick` runs a workload under every implementation in one process
and writes its markdown report and PNG plot; no timing asserts. A smoke run: one small
workload (the MLP) and a few steps, without torch.compile (inductor's cold C++ compiles take
a minute on CI's 2 cores); the suite's numbers come from `python -m benchmarks`, which
runs the five workloads with torch.compile and writes benchmarks/RESULTS.md."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ("MLP",)
IMPLS = ("eager", "cstorch", "jax.jit", "cstorch pipelined", "jax.jit pipelined")


def test_benchmark_suite_quick(tmp_path):
    out = tmp_path / "r.md"
    cmd = [sys.executable, "-m", "benchmarks", "--quick", "--workloads", ",".join(WORKLOADS), "--impls", ",".join(IMPLS),
           "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    text = proc.stdout
    assert proc.returncode == 0, f"stdout:\n{text}\nstderr:\n{proc.stderr}"
    for workload in WORKLOADS:
        for impl in IMPLS:
            assert re.search(rf"^{workload}\s+{re.escape(impl)}\s+\d+\.\d+", text, re.M), text
        assert re.search(rf"^{workload}\s+losses vs eager over \d+ steps.*\(OK, tol", text, re.M), text
        assert re.search(rf"^{workload}\s+parameters vs eager after the last step, "
                         r"max \|\|p - eager\|\|/\|\|eager\|\|: cstorch", text, re.M), text
        assert re.search(rf"^{workload}\s+cstorch trace \+ compile: cold .* \(\d+%; from the cache\)", text, re.M), text
    assert "WARNING" not in text, text
    assert out.is_file() and out.stat().st_size > 0
    report = out.read_text()
    for workload in WORKLOADS:
        assert f"## {workload}" in report, report
    assert "## Loss check" in report and "## Cold and warm start" in report
    png = out.with_suffix(".png")
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
