"""Trainer checkpoints written by an earlier release load and resume exactly.

`data/` holds checkpoints that an earlier release wrote with `fit_toy` below, named by
the commit that wrote them (`python tests/trainer/test_old_checkpoints.py <model_dir>`
with that release's cstorch first on the path writes `checkpoint_3.mdl` there): the toy
classifier trained on CSX with AdamW, a cosine schedule and float16 with a dynamic loss
scale, stopped at step 3 of 6.

An old checkpoint holds what today's code holds at step 3: the same entries, the same
counters, the same values up to the last bits of float32 arithmetic (XLA's CPU code, and so
the last bit of a product, depends on the machine that compiled it: the fixture was written
on another one). Today's Trainer resumes from it exactly: it ends where today's Trainer ends
when it resumes from a checkpoint of its own holding those same values - the same
parameters, optimizer state, schedule, loss scale, global step and train-stream position,
bit for bit.
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


def _is_tensor(x) -> bool:
    return isinstance(x, torch.Tensor) or hasattr(x, "shape")


SKIP = ("__metadata__", "rng")  # the release's version; the RNG (no random op here)


def _entries(path: Path) -> dict:
    return {k: v for k, v in _flat(cstorch.load(str(path))).items() if not k.startswith(SKIP)}


def _with_values(tree, values: dict, prefix=""):
    """`tree` (a checkpoint's nested dicts and lists) with each leaf at a dotted path of
    `values` replaced by that value, in the leaf's own type."""
    if isinstance(tree, dict):
        return {key: _with_values(sub, values, f"{prefix}{key}.") for key, sub in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_with_values(sub, values, f"{prefix}{i}.") for i, sub in enumerate(tree))
    path = prefix.rstrip(".")
    if path not in values:
        return tree
    value = values[path]
    return torch.as_tensor(value).to(torch.as_tensor(tree).dtype).clone() if _is_tensor(tree) else value


@pytest.mark.skipif(not OLD, reason="no checkpoint of an earlier release in tests/trainer/data")
@pytest.mark.parametrize("old", OLD, ids=[p.name for p in OLD])
def test_a_checkpoint_of_an_earlier_release_resumes_exactly(tmp_path, old):
    fit_toy(tmp_path / "today", 3)
    ours = tmp_path / "today" / "checkpoint_3.mdl"
    theirs, today = _entries(old), _entries(ours)
    assert sorted(theirs) == sorted(today)
    assert "dataloader.batches_consumed" in theirs and "global_step" in theirs and "grad_scaler.loss_scale" in theirs
    for k, a in theirs.items():
        if _is_tensor(a):
            torch.testing.assert_close(torch.as_tensor(a), torch.as_tensor(today[k]), rtol=1e-6, atol=1e-7, msg=k)
        else:
            assert a == today[k], k

    # today's checkpoint, its values replaced by the old one's: where today's code resumes from them
    same_values = tmp_path / "same_values.mdl"
    cstorch.save(_with_values(cstorch.load(str(ours)), theirs), str(same_values))
    cstorch.amp.precision._reset()
    fit_toy(tmp_path / "from_ours", STEPS, ckpt_path=same_values)
    cstorch.amp.precision._reset()
    resumed = fit_toy(tmp_path / "from_theirs", STEPS, ckpt_path=old)
    assert resumed.global_step == STEPS
    want = _entries(tmp_path / "from_ours" / f"checkpoint_{STEPS}.mdl")
    got = _entries(tmp_path / "from_theirs" / f"checkpoint_{STEPS}.mdl")
    assert sorted(want) == sorted(got)
    for k in want:
        a, b = want[k], got[k]
        if _is_tensor(a):
            assert torch.equal(torch.as_tensor(b), torch.as_tensor(a)), k
        else:
            assert b == a, k


if __name__ == "__main__":  # write the fixture with the cstorch on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    fit_toy(Path(sys.argv[1]), 3)
