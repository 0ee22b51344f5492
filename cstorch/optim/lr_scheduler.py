"""Learning-rate schedulers: the schedules of `cstorch.optim.scheduler` applied to the
param groups' "lr", with learning-rate argument names (`initial_learning_rate`,
`end_learning_rate`, `base_lr`, `max_lr`, ...). See `cstorch.optim.scheduler` for how
the value reaches the optimizer on every backend."""
from typing import List, Optional

import torch

from . import scheduler as _s
from .scheduler_base import TagsType, _alias


class LRScheduler(_s.Scheduler, torch.optim.lr_scheduler.LRScheduler):
    """Base class of the learning-rate schedulers (param group key "lr"). It is also a
    `torch.optim.lr_scheduler.LRScheduler` for isinstance checks; the behaviour is the
    closed-form one of `cstorch.optim.scheduler.Scheduler`."""

    @property
    def param_group_key(self) -> str:
        return "lr"

    def get_last_lr(self) -> list:
        """The learning rate each param group holds now (None where not scheduled)."""
        return self.get_last_value()

    def get_lr(self) -> list:
        """The closed form at the current step, per param group."""
        return self.get()


class ConstantLR(LRScheduler, _s.ConstantScheduler):
    """A constant learning rate (`total_iters`: how long it lasts inside a sequence).

    Args:
        learning_rate: the learning rate.
        total_iters: how many steps it lasts (informational; configure_lr_scheduler uses it to place the
            next scheduler of a sequence). None: no end.
    """

    val = _alias("learning_rate")

    def __init__(self, optimizer: torch.optim.Optimizer, learning_rate: float, total_iters: Optional[int] = None,
                 param_group_tags: TagsType = None):
        super().__init__(optimizer, val=learning_rate, total_iters=total_iters, param_group_tags=param_group_tags)


class PolynomialLR(LRScheduler, _s.PolynomialScheduler):
    """Polynomial decay from `initial_learning_rate` to `end_learning_rate` over
    `total_iters` steps (see PolynomialScheduler).

    Args:
        initial_learning_rate: the learning rate at step 0.
        end_learning_rate: the learning rate at step `total_iters` and after it (without `cycle`).
        total_iters: T, the number of steps of the decay (an integer > 0).
        power: the exponent of the decay (>= 0; 1.0 decays linearly).
        cycle: restart the decay at every multiple of T with the horizon T * ceil(t / T) instead of staying
            at `end_learning_rate`.

    Differences from the real system:
        `cycle=True` cycles (the Keras rule); the real code ignores it.
    """

    initial_val = _alias("initial_learning_rate")
    end_val = _alias("end_learning_rate")

    def __init__(self, optimizer: torch.optim.Optimizer, initial_learning_rate: float, end_learning_rate: float,
                 total_iters: int, power: float = 1.0, cycle: bool = False, param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_learning_rate, end_val=end_learning_rate,
                         total_iters=total_iters, power=power, cycle=cycle, param_group_tags=param_group_tags)


class LinearLR(LRScheduler, _s.LinearScheduler):
    """Linear decay (or warm-up) from `initial_learning_rate` to `end_learning_rate` over
    `total_iters` steps, then constant. Absolute rates, not torch's factors.

    Args:
        initial_learning_rate: the learning rate at step 0.
        end_learning_rate: the learning rate at step `total_iters` and after it (without `cycle`).
        total_iters: the number of steps of the change (an integer > 0).
        cycle: restart at every multiple of `total_iters` with a longer horizon (see PolynomialLR).
    """

    initial_val = _alias("initial_learning_rate")
    end_val = _alias("end_learning_rate")

    def __init__(self, optimizer: torch.optim.Optimizer, initial_learning_rate: float, end_learning_rate: float,
                 total_iters: int, cycle: bool = False, param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_learning_rate, end_val=end_learning_rate,
                         total_iters=total_iters, cycle=cycle, param_group_tags=param_group_tags)


class ExponentialLR(LRScheduler, _s.ExponentialScheduler):
    """`initial_learning_rate * decay_rate^(t / total_iters)` (floored exponent with
    `staircase=True`). torch's ExponentialLR(gamma) is total_iters=1, decay_rate=gamma.

    Args:
        initial_learning_rate: the learning rate at step 0.
        total_iters: the number of steps over which the rate is multiplied by `decay_rate` once (> 0).
        decay_rate: the factor per `total_iters` steps (>= 0).
        staircase: floor the exponent, so that the rate changes only every `total_iters` steps.
    """

    initial_val = _alias("initial_learning_rate")

    def __init__(self, optimizer: torch.optim.Optimizer, initial_learning_rate: float, total_iters: int,
                 decay_rate: float, staircase: bool = False, param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_learning_rate, total_iters=total_iters,
                         decay_rate=decay_rate, staircase=staircase, param_group_tags=param_group_tags)


class InverseExponentialTimeDecayLR(LRScheduler, _s.InverseExponentialTimeDecayScheduler):
    """`initial_learning_rate / (1 + decay_rate * t^step_exponent / total_iters)`.

    Args:
        initial_learning_rate: the learning rate at step 0.
        step_exponent: the power the step is raised to.
        total_iters: the divisor of `t^step_exponent` (an integer > 0).
        decay_rate: the factor of that ratio in the denominator (>= 0).
        staircase: floor the ratio `t^step_exponent / total_iters`.
    """

    initial_val = _alias("initial_learning_rate")

    def __init__(self, optimizer: torch.optim.Optimizer, initial_learning_rate: float, step_exponent: int,
                 total_iters: int, decay_rate: float, staircase: bool = False, param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_learning_rate, step_exponent=step_exponent,
                         total_iters=total_iters, decay_rate=decay_rate, staircase=staircase,
                         param_group_tags=param_group_tags)


class InverseSquareRootDecayLR(LRScheduler, _s.InverseSquareRootDecayScheduler):
    """`initial_learning_rate * scale / sqrt(max(t, warmup_steps))`.

    Args:
        initial_learning_rate: a factor of the numerator.
        scale: the other factor of the numerator.
        warmup_steps: the step below which the denominator stays `sqrt(warmup_steps)`, so that the rate is
            constant until then (> 0).
    """

    initial_val = _alias("initial_learning_rate")

    def __init__(self, optimizer: torch.optim.Optimizer, initial_learning_rate: float = 1.0, scale: float = 1.0,
                 warmup_steps: int = 1, param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_learning_rate, scale=scale, warmup_steps=warmup_steps,
                         param_group_tags=param_group_tags)


class CosineDecayLR(LRScheduler, _s.CosineDecayScheduler):
    """Cosine decay from `initial_learning_rate` to `end_learning_rate` over `total_iters`
    steps, then constant.

    Args:
        initial_learning_rate: the learning rate at step 0.
        end_learning_rate: the learning rate at step `total_iters` and after it.
        total_iters: the number of steps of the decay (an integer > 0).
    """

    initial_val = _alias("initial_learning_rate")
    end_val = _alias("end_learning_rate")

    def __init__(self, optimizer: torch.optim.Optimizer, initial_learning_rate: float, end_learning_rate: float,
                 total_iters: int, param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_learning_rate, end_val=end_learning_rate,
                         total_iters=total_iters, param_group_tags=param_group_tags)


class SequentialLR(LRScheduler, _s.SequentialScheduler):
    """Learning-rate schedulers one after the other, switching at `milestones`; each
    starts from its own step 0 (see SequentialScheduler).

    Args:
        optimizer: the optimizer every scheduler in `schedulers` schedules.
        schedulers: the learning-rate schedulers to run one after the other, each from its own step 0.
        milestones: the steps where each next scheduler takes over: increasing, one fewer than `schedulers`.
        last_epoch: the step before the first one (-1: the sequence starts at step 0).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, schedulers: List[LRScheduler], milestones: List[int],
                 last_epoch: int = -1, param_group_tags: TagsType = None):
        super().__init__(optimizer, schedulers=schedulers, milestones=milestones, last_epoch=last_epoch,
                         param_group_tags=param_group_tags)


class PiecewiseConstantLR(LRScheduler, _s.PiecewiseConstantScheduler):
    """`learning_rates[k]` from milestone k-1 on (`len(learning_rates) == len(milestones) + 1`).

    Args:
        learning_rates: the learning rate before the first milestone and the one after each milestone.
        milestones: the increasing integer steps where the learning rate changes.
    """

    vals = _alias("learning_rates")

    def __init__(self, optimizer: torch.optim.Optimizer, learning_rates: List[float], milestones: List[int],
                 param_group_tags: TagsType = None):
        super().__init__(optimizer, constant_cls=ConstantLR, vals=learning_rates, milestones=milestones,
                         param_group_tags=param_group_tags)


class MultiStepLR(LRScheduler, _s.MultiStepScheduler):
    """`initial_learning_rate * gamma^(number of milestones <= t)` (torch's MultiStepLR).

    Args:
        initial_learning_rate: the learning rate at step 0.
        gamma: the factor applied at each milestone.
        milestones: the integer steps at which the rate is multiplied by `gamma`.
    """

    initial_val = _alias("initial_learning_rate")

    def __init__(self, optimizer: torch.optim.Optimizer, initial_learning_rate: float, gamma: float,
                 milestones: List[int], param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_learning_rate, gamma=gamma, milestones=milestones,
                         param_group_tags=param_group_tags)


class StepLR(LRScheduler, _s.StepScheduler):
    """`initial_learning_rate * gamma^floor(t / step_size)` (torch's StepLR).

    Args:
        initial_learning_rate: the learning rate at step 0.
        step_size: the number of steps between two multiplications by `gamma` (an integer > 0).
        gamma: the factor applied every `step_size` steps.
    """

    initial_val = _alias("initial_learning_rate")

    def __init__(self, optimizer: torch.optim.Optimizer, initial_learning_rate: float, step_size: int, gamma: float,
                 param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_learning_rate, step_size=step_size, gamma=gamma,
                         param_group_tags=param_group_tags)


class CosineAnnealingLR(LRScheduler, _s.CosineAnnealingScheduler):
    """torch's CosineAnnealingLR from `initial_learning_rate` (periodic, period 2*T_max).

    Args:
        initial_learning_rate: the learning rate at step 0, the top of the cosine.
        T_max: the half period in steps: the rate reaches `eta_min` at step `T_max` (> 0).
        eta_min: the bottom of the cosine.
    """

    initial_val = _alias("initial_learning_rate")

    def __init__(self, optimizer: torch.optim.Optimizer, initial_learning_rate: float, T_max: int, eta_min: float = 0.0,
                 param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_learning_rate, T_max=T_max, eta_min=eta_min,
                         param_group_tags=param_group_tags)


class LambdaLR(LRScheduler, _s.LambdaScheduler):
    """`initial_learning_rate` times the factors of `set_value_lambda()` (override it;
    see LambdaScheduler).

    Args:
        initial_learning_rate: the factor each callable's value is multiplied by (with one callable `lam`,
            the rate is `initial_learning_rate * lam(t)`).
    """

    initial_val = _alias("initial_learning_rate")

    def __init__(self, optimizer: torch.optim.Optimizer, initial_learning_rate: float,
                 param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_learning_rate, param_group_tags=param_group_tags)


class CosineAnnealingWarmRestarts(LRScheduler, _s.CosineAnnealingWarmRestartsScheduler):
    """Cosine annealing from `initial_learning_rate` to `eta_min`, restarting every `T_0`
    steps (T_mult must be 1). Unlike the real library's formula, the value keeps
    following the cosine after the first restart (see CosineAnnealingWarmRestartsScheduler).

    Args:
        initial_learning_rate: the learning rate at step 0 and at every restart.
        T_0: the period in steps (an integer > 0).
        T_mult: the growth of the period after each restart; only 1 is accepted.
        eta_min: the rate the cosine approaches at the end of every period.

    Differences from the real system:
        It restarts properly (`t mod T_0`, as torch); the real code is piecewise
        constant after the first period.
    """

    initial_val = _alias("initial_learning_rate")

    def __init__(self, optimizer: torch.optim.Optimizer, initial_learning_rate: float, T_0: int, T_mult: int = 1,
                 eta_min: float = 0.0, param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_learning_rate, T_0=T_0, T_mult=T_mult, eta_min=eta_min,
                         param_group_tags=param_group_tags)


class MultiplicativeLR(LRScheduler, _s.MultiplicativeScheduler):
    """`initial_learning_rate * coefficient^t`.

    Args:
        initial_learning_rate: the learning rate at step 0.
        coefficient: the constant per-step factor.
    """

    initial_val = _alias("initial_learning_rate")

    def __init__(self, optimizer: torch.optim.Optimizer, initial_learning_rate: float, coefficient: float,
                 param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_learning_rate, coefficient=coefficient,
                         param_group_tags=param_group_tags)


class ChainedLR(LRScheduler, _s.ChainedScheduler):
    """The product of learning-rate schedules (see ChainedScheduler in
    `cstorch.optim.scheduler`); the optimizer is the schedulers'.

    Args:
        schedulers: the learning-rate schedulers whose values are multiplied (of one optimizer; every
            scheduler after the first needs a non-zero initial value, which divides its value).
    """

    def __init__(self, schedulers: List[LRScheduler], param_group_tags: TagsType = None):
        super().__init__(schedulers=schedulers, param_group_tags=param_group_tags)


class ChainedScheduler(ChainedLR):
    """Alias of ChainedLR (torch's name)."""


class CyclicLR(LRScheduler, _s.CyclicScheduler):
    """torch's CyclicLR between `base_lr` and `max_lr` (no momentum cycling).

    Args:
        base_lr: the learning rate at the start of every cycle, the bottom of the triangle.
        max_lr: the top of the first triangle; `mode` scales the amplitude `max_lr - base_lr`.
        step_size_up: the number of steps of the rising half of a cycle (> 0).
        step_size_down: the number of steps of the falling half (> 0); None: `step_size_up`.
        mode: "triangular" (constant amplitude), "triangular2" (halved every cycle) or "exp_range"
            (amplitude times `gamma^t`).
        gamma: the base of the "exp_range" scale.
        scale_mode: "cycle" or "iterations": what a subclass's scale function is evaluated on (the built-in
            modes set it themselves).
    """

    base_val = _alias("base_lr")
    max_val = _alias("max_lr")

    def __init__(self, optimizer: torch.optim.Optimizer, base_lr: float, max_lr: float, step_size_up: int = 2000,
                 step_size_down: Optional[int] = None, mode: str = "triangular", gamma: float = 1.0,
                 scale_mode: str = "cycle", param_group_tags: TagsType = None):
        super().__init__(optimizer, base_val=base_lr, max_val=max_lr, step_size_up=step_size_up,
                         step_size_down=step_size_down, mode=mode, gamma=gamma, scale_mode=scale_mode,
                         param_group_tags=param_group_tags)


class OneCycleLR(LRScheduler, _s.OneCycleScheduler):
    """The 1cycle policy from `initial_learning_rate` (torch's max_lr / div_factor) up to
    `max_lr` and down to `initial_learning_rate / final_div_factor`.

    Args:
        initial_learning_rate: the learning rate at step 0 (torch's `max_lr / div_factor`).
        max_lr: the peak, reached at step `pct_start * total_steps - 1`.
        total_steps: N, the number of steps of the cycle (an integer > 0).
        pct_start: the fraction of N spent rising to the peak (strictly between 0 and 1).
        final_div_factor: the rate at the end is `initial_learning_rate / final_div_factor` (> 0).
        three_phase: a third phase: down to `initial_learning_rate` first, then to the minimum.
        anneal_strategy: the shape of each phase, "cos" or "linear".

    Differences from the real system:
        The learning rate holds its minimum after `total_steps`.
    """

    initial_val = _alias("initial_learning_rate")
    max_val = _alias("max_lr")

    def __init__(self, optimizer: torch.optim.Optimizer, initial_learning_rate: float, max_lr: float,
                 total_steps: int = 1000, pct_start: float = 0.3, final_div_factor: float = 1e4,
                 three_phase: bool = False, anneal_strategy: str = "cos", param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_learning_rate, max_val=max_lr, total_steps=total_steps,
                         pct_start=pct_start, final_div_factor=final_div_factor, three_phase=three_phase,
                         anneal_strategy=anneal_strategy, param_group_tags=param_group_tags)


class ScalePerParamLR(LRScheduler, _s.ScalePerParamScheduler):
    """Multiplies a learning-rate schedule by each param group's `adjust_learning_rate`.

    Args:
        scheduler: the learning-rate scheduler whose value is multiplied, per param group, by the group's
            `adjust_learning_rate` (read when this scheduler is created; default 1.0).
    """

    adjustment_scalars = _alias("lr_adjustment_scalars")

    def __init__(self, optimizer: torch.optim.Optimizer, scheduler: LRScheduler, param_group_tags: TagsType = None):
        super().__init__(optimizer, scheduler=scheduler, param_group_tags=param_group_tags)


__all__: List[str] = [
    "LRScheduler", "ConstantLR", "PolynomialLR", "LinearLR", "ExponentialLR", "InverseExponentialTimeDecayLR",
    "InverseSquareRootDecayLR", "CosineDecayLR", "SequentialLR", "PiecewiseConstantLR", "MultiStepLR", "StepLR",
    "CosineAnnealingLR", "LambdaLR", "CosineAnnealingWarmRestarts", "MultiplicativeLR", "ChainedLR",
    "ChainedScheduler", "CyclicLR", "OneCycleLR", "ScalePerParamLR",
]
