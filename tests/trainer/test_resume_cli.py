"""A run killed mid-way and restarted with the same command autoloads the latest
checkpoint and ends with the weights of an uninterrupted run (the digits example config,
with dropout so the RNG state matters, validation and a learning-rate schedule)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import torch
import yaml

import cstorch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(ROOT, "examples", "configs")


def _config(tmp_path) -> str:
    with open(os.path.join(CONFIGS, "digits.yaml")) as f:
        params = yaml.safe_load(f)
    init, fit = params["trainer"]["init"], params["trainer"]["fit"]
    init["model"]["name"] = os.path.join(CONFIGS, "digits.py") + ":DigitsClassifier"
    init["model"]["dropout"] = 0.2
    init["loop"] = {"max_steps": 24, "eval_frequency": 8, "eval_steps": 2}
    init["checkpoint"] = {"steps": 6}
    init["callbacks"].append({os.path.join(os.path.dirname(__file__), "killer.py") + ":KillAfterCheckpoint": {}})
    for key in ("train_dataloader", "val_dataloader"):
        fit[key]["data_processor"] = os.path.join(CONFIGS, "digits.py") + ":DigitsDataProcessor"
    del params["trainer"]["validate"]
    path = tmp_path / "digits_resume.yaml"
    path.write_text(yaml.safe_dump(params))
    return str(path)


def _fit(config, model_dir, device, kill_at=None):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("CSTORCH_TEST_KILL_AT_STEP", None)
    if kill_at is not None:
        env["CSTORCH_TEST_KILL_AT_STEP"] = str(kill_at)
    return subprocess.run([sys.executable, "-m", "cstorch.trainer", "fit", config, "--target_device", device,
                           "--model_dir", str(model_dir)], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("device", ["CSX", "CPU"])
def test_killed_run_restarts_with_the_same_command_and_matches(device, tmp_path):
    config = _config(tmp_path)
    whole = _fit(config, tmp_path / "whole", device)
    assert whole.returncode == 0, whole.stderr[-3000:]

    killed = _fit(config, tmp_path / "resumed", device, kill_at=12)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    names = sorted(f for f in os.listdir(tmp_path / "resumed") if f.endswith(".mdl"))
    assert names == ["checkpoint_12.mdl", "checkpoint_6.mdl"]

    resumed = _fit(config, tmp_path / "resumed", device)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "checkpoint_12.mdl" in resumed.stderr and "Autoloading" in resumed.stderr

    final_whole = cstorch.load(str(tmp_path / "whole" / "checkpoint_24.mdl"))
    final_resumed = cstorch.load(str(tmp_path / "resumed" / "checkpoint_24.mdl"))
    assert final_whole["global_step"] == final_resumed["global_step"] == 24
    for part in ("model", "optimizer"):
        flat_whole = dict(torch.utils._pytree.tree_flatten_with_path(final_whole[part])[0])
        flat_resumed = dict(torch.utils._pytree.tree_flatten_with_path(final_resumed[part])[0])
        assert flat_whole.keys() == flat_resumed.keys()
        for key, value in flat_whole.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(value, flat_resumed[key]), f"{part} {key}"
    # the resumed run trained on: its final weights are not those it loaded
    loaded = cstorch.load(str(tmp_path / "resumed" / "checkpoint_12.mdl"))["model"]
    assert any(not torch.equal(loaded[k], final_resumed["model"][k]) for k in loaded)
