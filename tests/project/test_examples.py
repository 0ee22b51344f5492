"""The examples run end to end as scripts, on the CSX and the CPU backend."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("shared_compile_cache")  # its scripts compile once per run (conftest)

ROOT = Path(__file__).resolve().parents[2]
MNIST = ROOT / "examples" / "mnist.py"


def _load_mnist_module():
    spec = importlib.util.spec_from_file_location("examples_mnist", MNIST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("backend", ["CSX", "CPU"])
def test_mnist_example(backend, tmp_path):
    import cstorch

    out_dir = tmp_path / "out"
    steps = 40
    proc = subprocess.run(
        [sys.executable, str(MNIST), "--backend", backend, "--steps", str(steps), "--log-steps", "10",
         "--checkpoint-steps", "20", "--out-dir", str(out_dir)],
        capture_output=True, text=True, timeout=180, cwd=tmp_path,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"

    losses = [(int(s), float(v)) for s, v in re.findall(r"^step (\d+): loss ([0-9.eE+-]+)$", proc.stdout, re.M)]
    assert [s for s, _ in losses] == [1, 10, 20, 30, 40], proc.stdout
    assert losses[-1][1] < losses[0][1], f"loss did not decrease: {losses}"

    accuracy = float(re.search(r"test accuracy: ([0-9.]+)%", proc.stdout).group(1))
    assert accuracy > 50.0, proc.stdout  # chance is 10%

    run_dir = out_dir / "run_000"
    assert f"checkpoints: {run_dir}" in proc.stdout
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoint_20.mdl", "checkpoint_40.mdl"]
    state = cstorch.load(str(run_dir / f"checkpoint_{steps}.mdl"))
    assert set(state) == {"model", "optimizer"}
    expected = _load_mnist_module().make_model().state_dict()
    assert {k: tuple(v.shape) for k, v in state["model"].items()} == {k: tuple(v.shape) for k, v in expected.items()}


def test_mnist_runs_never_collide(tmp_path):
    fresh_run_dir = _load_mnist_module().fresh_run_dir
    first = fresh_run_dir(str(tmp_path / "out"))
    (Path(first) / "checkpoint_1.mdl").write_bytes(b"")
    second = fresh_run_dir(str(tmp_path / "out"))
    assert Path(first).name == "run_000" and Path(second).name == "run_001"
    assert list(Path(second).iterdir()) == []
