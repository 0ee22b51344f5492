"""configure_lr_scheduler: every input form and its errors."""
from __future__ import annotations

import pytest
import torch

import cstorch
from cstorch.optim import lr_scheduler as L
from test_schedulers import REL, assert_values, ref_cosine_decay, ref_polynomial, ref_step

# --------------------------------------------------------------------------------------
# configure_lr_scheduler
# --------------------------------------------------------------------------------------
def sgd():
    return cstorch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.5)


def lr_values(opt, sched, steps):
    out = []
    for _ in range(steps + 1):
        out.append(float(opt.param_groups[0]["lr"]))
        sched.step()
    return out


def test_configure_constant():
    for value in (0.02, "2e-2"):
        opt = sgd()
        sched = cstorch.optim.configure_lr_scheduler(opt, value)
        assert type(sched) is L.ConstantLR
        assert lr_values(opt, sched, 3) == pytest.approx([0.02] * 4, rel=REL)


@pytest.mark.parametrize("name", ["CosineDecay", "CosineDecayLR", "cosinedecay"])
def test_configure_dict(name):
    opt = sgd()
    sched = cstorch.optim.configure_lr_scheduler(
        opt, {"scheduler": name, "initial_learning_rate": 0.1, "end_learning_rate": 0.01, "total_iters": 10})
    assert type(sched) is L.CosineDecayLR
    assert_values(lr_values(opt, sched, 12), [ref_cosine_decay(t, 0.1, 0.01, 10) for t in range(13)], name)


def test_configure_list_is_sequential():
    opt = sgd()
    sched = cstorch.optim.configure_lr_scheduler(opt, [
        {"scheduler": "Linear", "initial_learning_rate": 0.0, "end_learning_rate": 0.1, "total_iters": 5},
        {"scheduler": "Step", "initial_learning_rate": 0.1, "step_size": 2, "gamma": 0.5, "total_iters": 6},
        {"scheduler": "CosineDecayLR", "initial_learning_rate": 0.05, "end_learning_rate": 0.0, "total_iters": 8},
    ])
    assert type(sched) is L.SequentialLR and sched.milestones == [5, 11]

    def ref(t):
        if t < 5:
            return ref_polynomial(t, 0.0, 0.1, 5)
        if t < 11:
            return ref_step(t - 5, 0.1, 2, 0.5)
        return ref_cosine_decay(t - 11, 0.05, 0.0, 8)

    assert_values(lr_values(opt, sched, 22), [ref(t) for t in range(23)], "configured sequence")


def test_configure_chained_and_adjusted():
    opt = cstorch.optim.SGD([{"params": [torch.nn.Parameter(torch.ones(1))], "adjust_learning_rate": 0.25},
                             {"params": [torch.nn.Parameter(torch.ones(1))]}], lr=0.5)
    sched = cstorch.optim.configure_lr_scheduler(opt, [
        {"scheduler": "Exponential", "initial_learning_rate": 0.1, "total_iters": 1, "decay_rate": 0.9,
         "main_scheduler": "chained"},
        {"scheduler": "StepLR", "initial_learning_rate": 2.0, "step_size": 3, "gamma": 0.5},
    ], adjust_learning_rate={"layer0": 0.25})
    assert type(sched) is L.ScalePerParamLR and type(sched._scheduler_nested) is L.ChainedScheduler
    for t in range(8):
        base = 0.1 * 0.9 ** t * 0.5 ** (t // 3)
        assert_values([float(g["lr"]) for g in opt.param_groups], [0.25 * base, base], f"step {t}")
        sched.step()


def test_configure_errors():
    with pytest.raises(ValueError, match="'steps' -> 'total_iters'"):
        cstorch.optim.configure_lr_scheduler(sgd(), {"scheduler": "Linear", "initial_learning_rate": 0.1,
                                                     "end_learning_rate": 0.0, "steps": 10})
    with pytest.raises(ValueError, match="'boundaries' -> 'milestones'"):
        cstorch.optim.configure_lr_scheduler(sgd(), {"scheduler": "PiecewiseConstant", "values": [0.1, 0.01],
                                                     "boundaries": [5]})
    with pytest.raises(ValueError, match="'warmup'"):
        cstorch.optim.configure_lr_scheduler(sgd(), {"scheduler": "Constant", "learning_rate": 0.1, "warmup": 3})
    with pytest.raises(ValueError, match="Unknown learning-rate scheduler 'Cosine'"):
        cstorch.optim.configure_lr_scheduler(sgd(), {"scheduler": "Cosine"})
    with pytest.raises(ValueError, match="`scheduler` key"):
        cstorch.optim.configure_lr_scheduler(sgd(), {"learning_rate": 0.1})
    with pytest.raises(ValueError, match="total_iters"):
        cstorch.optim.configure_lr_scheduler(sgd(), [{"scheduler": "Constant", "learning_rate": 0.1},
                                                     {"scheduler": "Constant", "learning_rate": 0.2}])
    with pytest.raises(ValueError, match="end_learning_rate"):
        cstorch.optim.configure_lr_scheduler(sgd(), {"scheduler": "Linear", "initial_learning_rate": 0.1,
                                                     "total_iters": 3})
    with pytest.raises(ValueError, match="main_scheduler"):
        cstorch.optim.configure_lr_scheduler(sgd(), [{"scheduler": "Constant", "learning_rate": 0.1,
                                                      "main_scheduler": "parallel", "total_iters": 2},
                                                     {"scheduler": "Constant", "learning_rate": 0.2}])
    with pytest.raises(TypeError, match="learning_rate"):
        cstorch.optim.configure_lr_scheduler(sgd(), None)
