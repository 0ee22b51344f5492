"""Real, public Model Zoo 2.x code run unmodified with `cszoo fit`: the fc_mnist model
(`model.py`: `MNISTModelConfig(ModelConfig)`, `MNISTModel(config)`), its data processor
(`data.py`: `MNISTDataProcessorConfig(DataConfig)`, `get_streaming_batch_size`,
`SampleGenerator`, `cstorch.amp.get_floating_point_dtype`, `cstorch.use_cs`) and its
published YAML (`configs/params.yaml`, the legacy flat format), copied byte for byte from
Cerebras/modelzoo (real/fc_mnist/ORIGIN.md: where from, licence). Only sizes change, through
the YAML (`runconfig.max_steps`), and the MNIST download is replaced at the data boundary
(real/boundary/torchvision).

The published YAML trains in mixed precision (`model.mixed_precision: True`, bfloat16 on
both backends): CSX (XLA) and CPU (eager torch) round bfloat16 intermediates at different
places, so they agree to bfloat16 precision, not to float32's. With mixed precision off,
the one other key changed, the same code trains to the same parameters (<= 1e-5)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch
import yaml

import cstorch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "real")
STEPS = 4


def _copy(tmp_path, changes=None) -> str:
    """A copy of the fc_mnist folder whose params.yaml has `runconfig.max_steps = STEPS`
    and `changes` ({(section, key): value}); returns the YAML's path."""
    folder = tmp_path / "fc_mnist"
    shutil.copytree(os.path.join(REAL, "fc_mnist"), folder)
    path = folder / "configs" / "params.yaml"
    params = yaml.safe_load(path.read_text())
    published = yaml.safe_load(open(os.path.join(REAL, "fc_mnist", "configs", "params.yaml")).read())
    assert params == published
    params["runconfig"]["max_steps"] = STEPS
    for (section, key), value in (changes or {}).items():
        params[section][key] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return str(path)


def _fit(params_yaml, device, model_dir) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(REAL, "boundary"), ROOT]))
    done = subprocess.run([sys.executable, "-m", "cerebras.modelzoo.cli.main", "fit", params_yaml,
                           "--target_device", device, "-o", str(model_dir)],
                          env=env, cwd=os.path.dirname(params_yaml), capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stderr


def _model(model_dir) -> dict:
    state = cstorch.load(str(model_dir / f"checkpoint_{STEPS}.mdl"))
    assert state["global_step"] == STEPS
    return {k: torch.as_tensor(v) for k, v in state["model"].items()}


def _eval_loss(log: str) -> float:
    (line,) = [ln for ln in log.splitlines() if "eval/loss=" in ln]
    return float(line.split("eval/loss=")[1].split(",")[0])


def test_the_copies_are_the_published_files():
    origin = open(os.path.join(REAL, "fc_mnist", "ORIGIN.md")).read()
    for name in ("model.py", "data.py", "configs/params.yaml"):
        assert f"fc_mnist/{name}" in origin
    for name in ("model.py", "data.py"):
        assert open(os.path.join(REAL, "fc_mnist", name)).read().startswith("# Copyright 2022 Cerebras Systems.")


@pytest.mark.slow
def test_published_fc_mnist_fits_on_csx_and_cpu(tmp_path):
    params_yaml = _copy(tmp_path)
    models, losses = {}, {}
    for device in ("CSX", "CPU"):
        log = _fit(params_yaml, device, tmp_path / device)
        models[device], losses[device] = _model(tmp_path / device), _eval_loss(log)
        assert "MNISTDataProcessorConfig: the field(s) ['to_float16'] are deprecated" in log
    assert list(models["CSX"]) == [f"model.fc_layers.{i}.{w}" for i in range(10) for w in ("weight", "bias")] + [
        "model.last_layer.weight", "model.last_layer.bias"]
    # bfloat16 on both: agreement to bfloat16's precision (2^-8 relative)
    assert abs(losses["CSX"] - losses["CPU"]) <= 2 ** -8 * abs(losses["CPU"])
    for k, v in models["CPU"].items():
        torch.testing.assert_close(models["CSX"][k], v, rtol=0, atol=2 ** -8 * float(v.abs().max()), msg=k)


@pytest.mark.slow
def test_fc_mnist_in_float32_trains_to_the_same_parameters_on_csx_and_cpu(tmp_path):
    params_yaml = _copy(tmp_path, {("model", "mixed_precision"): False})
    for device in ("CSX", "CPU"):
        _fit(params_yaml, device, tmp_path / device)
    csx, cpu = _model(tmp_path / "CSX"), _model(tmp_path / "CPU")
    for k in cpu:
        torch.testing.assert_close(csx[k], cpu[k], rtol=1e-5, atol=1e-6, msg=k)
