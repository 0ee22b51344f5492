"""The porting guide's full training and evaluation examples of the 1.8 API
(guide_training.py, guide_evaluation.py: the guide's text with its `...` filled in)
run on CSX (as written, backend="wse_ws") and on CPU (backend="cpu").

Training: the example's literal numbers stand (num_steps=1000, checkpoint_steps=100,
a checkpoint when `i % checkpoint_steps == 0`); the fill-in `max_steps` bounds the run.
Checked: the checkpoints written, their weights (the step's, against eager torch),
CSX = CPU parameters, and that a run resumed from a checkpoint ends with the
uninterrupted run's parameters. Evaluation: accuracy and mean loss against eager torch.
"""
from __future__ import annotations

import os
import re

import pytest
import torch

import cstorch
from guide import BATCH_SIZE, EVAL, Classifier, eager_training, parameters, run_example

pytestmark = pytest.mark.usefixtures("shared_compile_cache")  # its scripts compile once per run (conftest)

TOTAL = 120  # steps of the uninterrupted run: checkpoints at steps 0 and 100


def _close(got: dict, want: dict, rtol: float, atol: float) -> None:
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=rtol, atol=atol, msg=lambda m: f"{name}: {m}")


def _checkpoints(folder) -> list[str]:
    return sorted(os.listdir(folder), key=lambda n: int(re.findall(r"\d+", n)[0]))


@pytest.mark.slow
def test_training_example_checkpoints_resume_and_csx_equals_cpu(tmp_path, capsys):
    reference = eager_training(TOTAL)
    final = {}
    for device in ("CSX", "CPU"):
        full = run_example("guide_training.py", device, tmp_path / device / "full", MAX_STEPS=TOTAL)
        assert _checkpoints(tmp_path / device / "full") == ["checkpoint_0.mdl", "checkpoint_100.mdl"]
        losses = [float(v) for v in re.findall(r"^Loss:\s+(\S+)$", capsys.readouterr().out, re.M)]
        assert len(losses) == TOTAL
        final[device] = parameters(full["model"])
        _close(final[device], reference[-1], rtol=1e-4, atol=1e-5)
        for step in (0, 100):  # a checkpoint holds the weights after its step
            saved = cstorch.load(str(tmp_path / device / "full" / f"checkpoint_{step}.mdl"))
            assert int(saved["global_step"]) == step
            _close({k: torch.as_tensor(v) for k, v in saved["model"].items()}, reference[step], rtol=1e-4, atol=1e-5)
        del full

        # a new run from the checkpoint of step 100 (the state of a run stopped there)
        resumed = run_example("guide_training.py", device, tmp_path / device / "resumed", MAX_STEPS=TOTAL,
                              checkpoint_path=str(tmp_path / device / "full" / "checkpoint_100.mdl"))
        assert resumed["global_step"] == 100 and resumed["dataloader"].total_steps == TOTAL - 101
        assert _checkpoints(tmp_path / device / "resumed") == ["checkpoint_0.mdl"]
        capsys.readouterr()
        # the resumed run restored model, optimizer, scheduler and loss scaler: it ends where the
        # uninterrupted run ended
        _close(parameters(resumed["model"]), final[device], rtol=0, atol=1e-7)
        del resumed
    _close(final["CSX"], final["CPU"], rtol=1e-5, atol=1e-6)


def _eager_evaluation(checkpoint: dict) -> tuple[float, float]:
    model = Classifier()
    model.load_state_dict(checkpoint)
    x, y = EVAL
    with torch.no_grad():
        logits = model(x)
        losses = [torch.nn.functional.cross_entropy(logits[i:i + BATCH_SIZE], y[i:i + BATCH_SIZE]).item()
                  for i in range(0, len(x), BATCH_SIZE)]
    return (logits.argmax(-1) == y).float().mean().item(), sum(losses) / len(losses)


def test_evaluation_example(tmp_path, capsys):
    torch.manual_seed(3)
    weights = Classifier().state_dict()
    cstorch.save({"model": weights}, str(tmp_path / "trained.mdl"))
    accuracy, mean_loss = _eager_evaluation(weights)
    for device in ("CSX", "CPU"):
        ns = run_example("guide_evaluation.py", device, tmp_path / device,
                         EVAL_CHECKPOINT=str(tmp_path / "trained.mdl"))
        printed = re.findall(r"^Eval Accuracy: (\S+)$", capsys.readouterr().out, re.M)
        assert len(printed) == 1 and float(printed[0]) == pytest.approx(accuracy, abs=1e-6)
        assert ns["total_steps"] == 100
        assert ns["total_loss"] / ns["total_steps"] == pytest.approx(mean_loss, rel=1e-5)
