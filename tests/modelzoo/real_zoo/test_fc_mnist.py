"""The real Model Zoo's fc_mnist (model, data processor, both published YAMLs) trained with
`cszoo fit` on CSX and on the CPU backend, from the snapshot: the same parameters; the
checkpoint then validated with `cszoo validate --checkpoint_path`.

The data is torchvision's MNIST folder written with synthetic digits (`synthetic.py`),
read by torchvision's own MNIST reader inside the real data processor. The legacy
`params.yaml` trains in bfloat16 mixed precision on both backends, so the two agree to
bfloat16's precision; `params_cszoov2.yaml` (float16 requested: CSX computes in float16,
the CPU backend in bfloat16) is run with its own `precision.enabled` set false, and
agrees to float32 rounding."""
from __future__ import annotations

import pytest
import torch

from . import synthetic, zoo

pytestmark = [pytest.mark.slow, pytest.mark.skipif(zoo.missing() is not None, reason=str(zoo.missing())),
              pytest.mark.usefixtures("shared_compile_cache")]  # a fit and its validation compile once (conftest)

CONFIGS = zoo.MODELS / "vision" / "fc_mnist" / "configs"
STEPS = 4


def _run_both(tmp_path, params):
    out = {}
    for device in ("CSX", "CPU"):
        model_dir = tmp_path / device
        zoo.cszoo("fit", params, "--target_device", device, "--model_dir", model_dir, cwd=tmp_path)
        out[device] = zoo.checkpoint(model_dir, STEPS)
    return out


def test_legacy_params_yaml(tmp_path):
    synthetic.write_mnist(tmp_path / "mnist")
    params = zoo.shrink(CONFIGS / "params.yaml", tmp_path / "params.yaml", {
        "train_input.data_dir": str(tmp_path / "mnist"), "eval_input.data_dir": str(tmp_path / "mnist"),
        "runconfig.max_steps": STEPS, "runconfig.checkpoint_steps": STEPS})
    models = _run_both(tmp_path, params)
    assert list(models["CSX"]) == [f"model.fc_layers.{i}.{w}" for i in range(10) for w in ("weight", "bias")] + [
        "model.last_layer.weight", "model.last_layer.bias"]
    for k, v in models["CPU"].items():  # bfloat16 compute on both: agreement to bfloat16's 2^-8
        torch.testing.assert_close(models["CSX"][k], v, rtol=0, atol=2 ** -8 * float(v.abs().max()), msg=k)


def test_cszoov2_yaml_fit_then_validate_the_checkpoint(tmp_path):
    synthetic.write_mnist(tmp_path / "mnist")
    params = zoo.shrink(CONFIGS / "params_cszoov2.yaml", tmp_path / "params.yaml", {
        "trainer.init.precision.enabled": False,
        "trainer.init.loop.max_steps": STEPS, "trainer.init.checkpoint.steps": STEPS,
        "trainer.fit.train_dataloader.data_dir": str(tmp_path / "mnist"),
        "trainer.fit.val_dataloader.data_dir": str(tmp_path / "mnist"),
        "trainer.validate.val_dataloader.data_dir": str(tmp_path / "mnist"),
        "trainer.validate_all.val_dataloaders.data_dir": str(tmp_path / "mnist")})
    models = _run_both(tmp_path, params)
    zoo.assert_same_parameters(models["CSX"], models["CPU"], rtol=1e-5, atol=1e-6)
    losses = {}
    for device in ("CSX", "CPU"):
        done = zoo.cszoo("validate", params, "--target_device", device, "--model_dir", tmp_path / f"val_{device}",
                         "--checkpoint_path", tmp_path / "CSX" / f"checkpoint_{STEPS}.mdl", cwd=tmp_path)
        losses[device] = zoo.eval_loss(done)
    assert abs(losses["CSX"] - losses["CPU"]) <= 1e-5 * abs(losses["CPU"])
