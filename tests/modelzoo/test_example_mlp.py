"""The Model Zoo 2.x style example (examples/configs/modelzoo_mlp: a model taking its
`ModelConfig` subclass, a data processor taking its `DataConfig` subclass, found by their
YAML names next to the YAML) trains with `cszoo fit` on CSX and on CPU to the same
parameters, and a second `cszoo fit` continuing from the first one's checkpoint ends
with the uninterrupted run's parameters and optimizer state (with dropout on, so the
restored RNG state matters; CSX and CPU draw different masks, so the parity runs have
none)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch

import cstorch

pytestmark = pytest.mark.usefixtures("shared_compile_cache")  # its scripts compile once per run (conftest)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
YAML = os.path.join(ROOT, "examples", "configs", "modelzoo_mlp", "configs", "params_mlp_digits.yaml")
STEPS, HALF = 40, 20


def _cszoo(*argv, cwd=None) -> str:
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-m", "cerebras.modelzoo.cli.main", *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stderr


def _state(path) -> dict:
    state = cstorch.load(str(path))
    return {"model": state["model"], "optimizer": state["optimizer"]["state"], "step": state["global_step"]}


def _assert_same(a: dict, b: dict, **tol):
    assert a["step"] == b["step"]
    for k in a["model"]:
        torch.testing.assert_close(torch.as_tensor(a["model"][k]), torch.as_tensor(b["model"][k]), **tol, msg=k)
    for key, value in a["optimizer"].items():
        for name, t in value.items():
            torch.testing.assert_close(torch.as_tensor(t), torch.as_tensor(b["optimizer"][key][name]), **tol)


@pytest.mark.slow
def test_modelzoo_example_fits_on_csx_and_cpu_and_resumes(tmp_path):
    final = {}
    for device in ("CSX", "CPU"):
        log = _cszoo("fit", YAML, "--target_device", device, "-o", str(tmp_path / device))
        assert "eval/accuracy" in log
        names = sorted(p.name for p in (tmp_path / device).glob("*.mdl"))
        assert names == [f"checkpoint_{HALF}.mdl", f"checkpoint_{STEPS}.mdl"]
        final[device] = _state(tmp_path / device / f"checkpoint_{STEPS}.mdl")
    _assert_same(final["CSX"], final["CPU"], rtol=1e-5, atol=1e-6)

    # with dropout: uninterrupted, and interrupted after HALF steps (its checkpoint) then
    # continued by the same command
    example = tmp_path / "example"
    shutil.copytree(os.path.dirname(os.path.dirname(YAML)), example)
    yaml_path = example / "configs" / os.path.basename(YAML)
    yaml_path.write_text(yaml_path.read_text().replace("dropout: 0.0", "dropout: 0.2"))
    _cszoo("fit", str(yaml_path), "--target_device", "CSX", "-o", str(tmp_path / "whole"))
    whole = _state(tmp_path / "whole" / f"checkpoint_{STEPS}.mdl")
    resumed = tmp_path / "resumed"
    _cszoo("fit", str(yaml_path), "--target_device", "CSX", "-o", str(resumed), "--max_steps", str(HALF))
    assert sorted(p.name for p in resumed.glob("*.mdl")) == [f"checkpoint_{HALF}.mdl"]
    log = _cszoo("fit", str(yaml_path), "--target_device", "CSX", "-o", str(resumed))
    assert f"checkpoint_{HALF}.mdl" in log and "Autoloading" in log
    _assert_same(_state(resumed / f"checkpoint_{STEPS}.mdl"), whole, rtol=0, atol=0)
    # dropout changed the run (so the RNG state had to be restored for the equality above)
    assert not torch.equal(torch.as_tensor(whole["model"]["net.0.weight"]),
                           torch.as_tensor(final["CSX"]["model"]["net.0.weight"]))
