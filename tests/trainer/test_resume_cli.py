"""A run killed mid-way and restarted with the same command autoloads the latest
checkpoint and continues exactly as an uninterrupted run: every step's loss and the
final weights and optimizer state are bit for bit the same (the digits example config,
with dropout so the RNG state matters, validation and a learning-rate schedule).
Negative controls: restarting without restoring the RNG state, or the train stream's
position, must break that comparison."""
from __future__ import annotations

import csv
import glob
import os
import shutil
import signal
import subprocess
import sys

import pytest
import torch
import yaml

import cstorch

pytestmark = pytest.mark.usefixtures("shared_compile_cache")  # its scripts compile once per run (conftest)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(ROOT, "examples", "configs")
STEPS, EVERY, KILL_AT = 24, 6, 12


def _config(tmp_path) -> str:
    """The digits config, its model and data files and the test callbacks next to it."""
    with open(os.path.join(CONFIGS, "digits.yaml")) as f:
        params = yaml.safe_load(f)
    for source in (os.path.join(CONFIGS, "digits.py"), os.path.join(os.path.dirname(__file__), "killer.py")):
        shutil.copy(source, tmp_path)
    init, fit = params["trainer"]["init"], params["trainer"]["fit"]
    init["model"]["dropout"] = 0.2
    init["loop"] = {"max_steps": STEPS, "eval_frequency": 8, "eval_steps": 2}
    init["checkpoint"] = {"steps": EVERY}
    init["logging"] = {"log_steps": 1}  # every step's loss in metrics.csv
    init["callbacks"] += [{"killer.py:KillAfterCheckpoint": {}}, {"killer.py:ForgetOnLoad": {}}]
    del params["trainer"]["validate"]
    path = tmp_path / "digits_resume.yaml"
    path.write_text(yaml.safe_dump(params))
    return str(path)


def _fit(config, model_dir, device, kill_at=None, forget=None):
    env = dict(os.environ, PYTHONPATH=ROOT)
    for key, value in (("CSTORCH_TEST_KILL_AT_STEP", kill_at), ("CSTORCH_TEST_FORGET", forget)):
        env.pop(key, None)
        if value is not None:
            env[key] = str(value)
    return subprocess.run([sys.executable, "-m", "cstorch.trainer", "fit", config, "--target_device", device,
                           "--model_dir", str(model_dir)], env=env, capture_output=True, text=True, timeout=300)


def _summary_dirs(model_dir) -> set:
    return {p for p in glob.glob(os.path.join(str(model_dir), "*", "metrics.csv"))}


def _losses(csv_paths) -> dict:
    """{global step: loss as written (repr of the float)} of the metrics.csv files."""
    out = {}
    for path in sorted(csv_paths):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["name"] == "loss":
                    out[int(row["step"])] = row["value"]
    return out


def _resume(root, config, name, device, forget=None) -> tuple[dict, dict]:
    """Restart a copy of the killed run: (losses of the restarted run, its final checkpoint)."""
    model_dir = root / name
    shutil.copytree(root / "killed", model_dir)
    before = _summary_dirs(model_dir)
    done = _fit(config, model_dir, device, forget=forget)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"checkpoint_{KILL_AT}.mdl" in done.stderr and "Autoloading" in done.stderr
    return _losses(_summary_dirs(model_dir) - before), cstorch.load(str(model_dir / f"checkpoint_{STEPS}.mdl"))


def _differences(a: dict, b: dict) -> list:
    """Keys of the model and optimizer states whose tensors differ (bit for bit)."""
    diff = []
    for part in ("model", "optimizer"):
        flat_a = dict(torch.utils._pytree.tree_flatten_with_path(a[part])[0])
        flat_b = dict(torch.utils._pytree.tree_flatten_with_path(b[part])[0])
        assert flat_a.keys() == flat_b.keys()
        diff += [(part, key) for key, value in flat_a.items()
                 if isinstance(value, torch.Tensor) and not torch.equal(value, flat_b[key])]
    return diff


# each device also runs one negative control: the RNG state on CSX (the XLA key is an input
# of the compiled step), the stream position on CPU (the same stream code serves both)
@pytest.mark.slow
@pytest.mark.parametrize("device, forget", [("CSX", "rng"), ("CPU", "stream")], ids=["CSX", "CPU"])
def test_killed_run_restarts_with_the_same_command_and_matches(device, forget, tmp_path):
    config = _config(tmp_path)
    whole = _fit(config, tmp_path / "whole", device)
    assert whole.returncode == 0, whole.stderr[-3000:]
    want = _losses(_summary_dirs(tmp_path / "whole"))
    assert sorted(want) == list(range(1, STEPS + 1))
    whole_final = cstorch.load(str(tmp_path / "whole" / f"checkpoint_{STEPS}.mdl"))

    killed = _fit(config, tmp_path / "killed", device, kill_at=KILL_AT)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    names = sorted(f for f in os.listdir(tmp_path / "killed") if f.endswith(".mdl"))
    assert names == sorted(f"checkpoint_{s}.mdl" for s in range(EVERY, KILL_AT + 1, EVERY))
    killed_losses = _losses(_summary_dirs(tmp_path / "killed"))
    assert set(killed_losses) >= set(range(1, KILL_AT + 1))
    assert {s: killed_losses[s] for s in killed_losses} == {s: want[s] for s in killed_losses}

    losses, final = _resume(tmp_path, config, "resumed", device)
    assert sorted(losses) == list(range(KILL_AT + 1, STEPS + 1))  # it went on from the checkpoint
    assert losses == {s: want[s] for s in losses}  # every step's loss, bit for bit
    assert final["global_step"] == whole_final["global_step"] == STEPS
    assert _differences(final, whole_final) == []
    # the resumed run trained on: its final weights are not those it loaded
    loaded = cstorch.load(str(tmp_path / "killed" / f"checkpoint_{KILL_AT}.mdl"))["model"]
    assert any(not torch.equal(loaded[k], final["model"][k]) for k in loaded)

    # negative control: the same restart without restoring one part must fail the comparison
    # (dropout masks replay from the seed without the RNG state; the data restarts at its
    # first batch without the stream position)
    losses, final = _resume(tmp_path, config, f"forget_{forget}", device, forget=forget)
    assert sorted(losses) == list(range(KILL_AT + 1, STEPS + 1))
    assert [s for s in losses if losses[s] != want[s]], f"forgetting the {forget} changed no loss"
    assert _differences(final, whole_final), f"forgetting the {forget} changed no weight"
