"""Trainer checkpoints written by an earlier release load and resume exactly.

`data/` holds checkpoints that an earlier release wrote with `fit_toy` below, named by
the commit that wrote them (`python tests/trainer/test_old_checkpoints.py <model_dir>`
with that release's cstorch first on the path writes `checkpoint_3.mdl` there): the toy
classifier trained on CSX with AdamW, a cosine schedule and float16 with a dynamic loss
scale, stopped at step 3 of 6. Today's Trainer resumes from one and must end where an
uninterrupted run of today's code ends: the same parameters, optimizer state, schedule,
loss scale, global step and train-stream position, bit for bit.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import cstorch

DATA = Path(__file__).resolve().parent / "data"
OLD = sorted(DATA.glob("trainer_*_step3.mdl"))
STEPS = 6


def fit_toy(model_dir: Path, max_steps: int, ckpt_path=None):
    """The toy run: the Trainer, fit to `max_steps` (from `ckpt_path` when given)."""
    from cstorch.trainer import Checkpoint, MixedPrecision, Trainer, TrainingLoop
    from toy import Net, loader

    trainer = Trainer(device="CSX", model_dir=str(model_dir), model=Net, seed=3, loggers=[],
                      optimizer=lambda m: cstorch.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.01),
                      schedulers=lambda opt: cstorch.optim.lr_scheduler.CosineDecayLR(
                          opt, initial_learning_rate=0.01, end_learning_rate=0.001, total_iters=STEPS),
                      precision=MixedPrecision(fp16_type="float16", loss_scaling_factor="dynamic"),
                      loop=TrainingLoop(max_steps=max_steps, eval_frequency=None), checkpoint=Checkpoint(steps=3))
    trainer.fit(loader(), ckpt_path=None if ckpt_path is None else str(ckpt_path))
    return trainer


def _flat(tree, prefix=""):
    """{dotted path: leaf} of a checkpoint's nested dicts and lists."""
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    if isinstance(tree, (list, tuple)):
        return {k: v for i, sub in enumerate(tree) for k, v in _flat(sub, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): tree}


@pytest.mark.skipif(not OLD, reason="no checkpoint of an earlier release in tests/trainer/data")
@pytest.mark.parametrize("old", OLD, ids=[p.name for p in OLD])
def test_a_checkpoint_of_an_earlier_release_resumes_exactly(tmp_path, old):
    fit_toy(tmp_path / "whole", STEPS)
    cstorch.amp.precision._reset()
    resumed = fit_toy(tmp_path / "resumed", STEPS, ckpt_path=old)
    assert resumed.global_step == STEPS
    want = _flat(cstorch.load(str(tmp_path / "whole" / f"checkpoint_{STEPS}.mdl")))
    got = _flat(cstorch.load(str(tmp_path / "resumed" / f"checkpoint_{STEPS}.mdl")))
    skip = ("__metadata__", "rng")  # the release's version; the RNG (no random op here)
    keys = sorted(k for k in want if not k.startswith(skip))
    assert keys == sorted(k for k in got if not k.startswith(skip))
    assert "dataloader.batches_consumed" in keys and "global_step" in keys and "grad_scaler.loss_scale" in keys
    for k in keys:
        a, b = want[k], got[k]
        if isinstance(a, torch.Tensor) or hasattr(a, "shape"):
            assert torch.equal(torch.as_tensor(b), torch.as_tensor(a)), k
        else:
            assert b == a, k


if __name__ == "__main__":  # write the fixture with the cstorch on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    fit_toy(Path(sys.argv[1]), 3)
