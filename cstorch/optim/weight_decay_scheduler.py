"""Weight-decay schedulers: the schedules of `cstorch.optim.scheduler` applied to the
param groups' "weight_decay", with the generic argument names (`val`, `initial_val`,
`end_val`, `base_val`, `max_val`, `vals`, ...). Each is the twin of the learning-rate
scheduler of the same stem (`CosineDecayWD` ~ `CosineDecayLR`)."""
from typing import List

import torch

from . import scheduler as _s
from .scheduler_base import TagsType


class WeightDecayScheduler(_s.Scheduler):
    """Base class of the weight-decay schedulers (param group key "weight_decay")."""

    @property
    def param_group_key(self) -> str:
        return "weight_decay"


class ConstantWD(WeightDecayScheduler, _s.ConstantScheduler):
    """A constant weight decay `val`."""


class PolynomialWD(WeightDecayScheduler, _s.PolynomialScheduler):
    """Polynomial decay of the weight decay from `initial_val` to `end_val`."""


class LinearWD(WeightDecayScheduler, _s.LinearScheduler):
    """Linear change of the weight decay from `initial_val` to `end_val`."""


class ExponentialWD(WeightDecayScheduler, _s.ExponentialScheduler):
    """`initial_val * decay_rate^(t / total_iters)`."""


class InverseExponentialTimeDecayWD(WeightDecayScheduler, _s.InverseExponentialTimeDecayScheduler):
    """`initial_val / (1 + decay_rate * t^step_exponent / total_iters)`."""


class InverseSquareRootDecayWD(WeightDecayScheduler, _s.InverseSquareRootDecayScheduler):
    """`initial_val * scale / sqrt(max(t, warmup_steps))`."""


class CosineDecayWD(WeightDecayScheduler, _s.CosineDecayScheduler):
    """Cosine decay of the weight decay from `initial_val` to `end_val`."""


class SequentialWD(WeightDecayScheduler, _s.SequentialScheduler):
    """Weight-decay schedulers one after the other, switching at `milestones`."""


class PiecewiseConstantWD(WeightDecayScheduler, _s.PiecewiseConstantScheduler):
    """`vals[k]` from milestone k-1 on."""

    def __init__(self, optimizer: torch.optim.Optimizer, vals: List[float], milestones: List[int],
                 param_group_tags: TagsType = None):
        super().__init__(optimizer, constant_cls=ConstantWD, vals=vals, milestones=milestones,
                         param_group_tags=param_group_tags)


class MultiStepWD(WeightDecayScheduler, _s.MultiStepScheduler):
    """`initial_val * gamma^(number of milestones <= t)`."""


class StepWD(WeightDecayScheduler, _s.StepScheduler):
    """`initial_val * gamma^floor(t / step_size)`."""


class CosineAnnealingWD(WeightDecayScheduler, _s.CosineAnnealingScheduler):
    """Periodic cosine annealing of the weight decay between `initial_val` and `eta_min`."""


class LambdaWD(WeightDecayScheduler, _s.LambdaScheduler):
    """`initial_val` times the factors of `set_value_lambda()`."""


class CosineAnnealingWarmRestartsWD(WeightDecayScheduler, _s.CosineAnnealingWarmRestartsScheduler):
    """Cosine annealing of the weight decay restarting every `T_0` steps."""


class MultiplicativeWD(WeightDecayScheduler, _s.MultiplicativeScheduler):
    """`initial_val * coefficient^t`."""


class ChainedWD(WeightDecayScheduler, _s.ChainedScheduler):
    """The product of weight-decay schedules."""


class CyclicWD(WeightDecayScheduler, _s.CyclicScheduler):
    """Cyclical weight decay between `base_val` and `max_val`."""


class OneCycleWD(WeightDecayScheduler, _s.OneCycleScheduler):
    """The 1cycle policy for the weight decay."""


class ScalePerParamWD(WeightDecayScheduler, _s.ScalePerParamScheduler):
    """Multiplies a weight-decay schedule by each param group's `adjust_learning_rate`
    (or `adjust_val`)."""


__all__: List[str] = [
    "WeightDecayScheduler", "ConstantWD", "PolynomialWD", "LinearWD", "ExponentialWD",
    "InverseExponentialTimeDecayWD", "InverseSquareRootDecayWD", "CosineDecayWD", "SequentialWD",
    "PiecewiseConstantWD", "MultiStepWD", "StepWD", "CosineAnnealingWD", "LambdaWD",
    "CosineAnnealingWarmRestartsWD", "MultiplicativeWD", "ChainedWD", "CyclicWD", "OneCycleWD",
    "ScalePerParamWD",
]
