"""The closed-form schedules, with generic argument names (`val`, `initial_val`, ...)."""
from typing import Callable, List, Optional

import torch

from .scheduler_base import (
    Scheduler, TagsType, _check_int, _check_int_list, _check_number, _full, _half_cosine, _steps,
)


class ConstantScheduler(Scheduler):
    """f(t) = val.

    Args:
        val: the value.
        total_iters: how many steps it lasts (informational; used by
            configure_lr_scheduler to place the next scheduler of a sequence).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, val: float, total_iters: Optional[int] = None,
                 param_group_tags: TagsType = None):
        _check_number(type(self).__name__, "val", val)
        if total_iters is not None:
            _check_int(type(self).__name__, "total_iters", total_iters, non_negative=True)
        self.val = val
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    @property
    def initial_val(self):
        return self.val

    def _value(self, t):
        return _full(self.val)


class PolynomialScheduler(Scheduler):
    """Polynomial decay from `initial_val` to `end_val` over `total_iters` steps:

        f(t) = (init - end) * (1 - t/T)^power + end   for t < T,   end afterwards.

    With `cycle=True` the decay restarts at every multiple of T with a longer horizon,
    as in Keras' PolynomialDecay: T is replaced by T * max(1, ceil(t/T)).

    Decision: the real library's cycling form (`ceil((t+1)/T)` combined with "end after
    T") never differs from cycle=False; this follows the documented intent (Keras).

    Args:
        initial_val: the value at step 0.
        end_val: the value at step `total_iters` and after it (without `cycle`).
        total_iters: T, the number of steps of the decay (an integer > 0).
        power: the exponent of the decay (>= 0; 1.0 decays linearly).
        cycle: restart the decay at every multiple of T with the longer horizon described above, instead of
            staying at `end_val`.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, initial_val: float, end_val: float, total_iters: int,
                 power: float = 1.0, cycle: bool = False, param_group_tags: TagsType = None):
        n = type(self).__name__
        _check_number(n, "initial_val", initial_val)
        _check_number(n, "end_val", end_val)
        _check_int(n, "total_iters", total_iters, positive=True)
        _check_number(n, "power", power, non_negative=True)
        self.initial_val = initial_val
        self.end_val = end_val
        self.power = power
        self.cycle = bool(cycle)
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _value(self, t):
        s = _steps(t)
        big_t = float(self.total_iters)
        diff = float(self.initial_val) - float(self.end_val)
        if self.cycle:
            horizon = torch.clamp(torch.ceil(s / big_t), min=1.0) * big_t
            frac = (horizon - s) / horizon
            return frac.pow(self.power) * diff + float(self.end_val)
        frac = torch.clamp(big_t - s, min=0.0) / big_t
        return torch.where(s >= big_t, _full(self.end_val), frac.pow(self.power) * diff + float(self.end_val))


class LinearScheduler(PolynomialScheduler):
    """Linear decay from `initial_val` to `end_val` over `total_iters` steps (the
    polynomial schedule with power 1; an absolute-value schedule, not torch's factor-based
    LinearLR)."""

    def __init__(self, optimizer: torch.optim.Optimizer, initial_val: float, end_val: float, total_iters: int,
                 cycle: bool = False, param_group_tags: TagsType = None):
        super().__init__(optimizer, initial_val=initial_val, end_val=end_val, total_iters=total_iters, power=1.0,
                         cycle=cycle, param_group_tags=param_group_tags)


class ExponentialScheduler(Scheduler):
    """f(t) = initial_val * decay_rate^(t / total_iters); with `staircase=True` the
    exponent is floored (decay in discrete jumps every total_iters steps).

    Args:
        initial_val: the value at step 0.
        total_iters: the number of steps over which the value is multiplied by `decay_rate` once (> 0).
        decay_rate: the factor per `total_iters` steps (>= 0).
        staircase: floor the exponent, so that the value changes only every `total_iters` steps.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, initial_val: float, total_iters: int, decay_rate: float,
                 staircase: bool = False, param_group_tags: TagsType = None):
        n = type(self).__name__
        _check_number(n, "initial_val", initial_val)
        _check_int(n, "total_iters", total_iters, positive=True)
        _check_number(n, "decay_rate", decay_rate, non_negative=True)
        self.initial_val = float(initial_val)
        self.decay_rate = decay_rate
        self.staircase = bool(staircase)
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _value(self, t):
        power = _steps(t) / float(self.total_iters)
        if self.staircase:
            power = torch.floor(power)
        return torch.pow(float(self.decay_rate), power) * float(self.initial_val)


class InverseExponentialTimeDecayScheduler(Scheduler):
    """Keras-style inverse time decay:

        f(t) = initial_val / (1 + decay_rate * t^step_exponent / total_iters)

    with the ratio `t^step_exponent / total_iters` floored when `staircase=True`.

    Args:
        initial_val: the value at step 0.
        step_exponent: the power the step is raised to.
        total_iters: the divisor of `t^step_exponent` (an integer > 0).
        decay_rate: the factor of that ratio in the denominator (>= 0).
        staircase: floor the ratio `t^step_exponent / total_iters`.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, initial_val: float, step_exponent: int, total_iters: int,
                 decay_rate: float, staircase: bool = False, param_group_tags: TagsType = None):
        n = type(self).__name__
        _check_number(n, "initial_val", initial_val)
        _check_number(n, "step_exponent", step_exponent)
        _check_int(n, "total_iters", total_iters, positive=True)
        _check_number(n, "decay_rate", decay_rate, non_negative=True)
        self.initial_val = initial_val
        self.step_exponent = step_exponent
        self.decay_rate = decay_rate
        self.staircase = bool(staircase)
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _value(self, t):
        ratio = _steps(t).pow(float(self.step_exponent)) / float(self.total_iters)
        if self.staircase:
            ratio = torch.floor(ratio)
        return float(self.initial_val) / (ratio * float(self.decay_rate) + 1.0)


class InverseSquareRootDecayScheduler(Scheduler):
    """f(t) = initial_val * scale / sqrt(max(t, warmup_steps)).

    Args:
        initial_val: a factor of the numerator.
        scale: the other factor of the numerator.
        warmup_steps: the step below which the denominator stays `sqrt(warmup_steps)`, so that the value is
            constant until then (> 0).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, initial_val: float = 1.0, scale: float = 1.0,
                 warmup_steps: int = 1, param_group_tags: TagsType = None):
        n = type(self).__name__
        _check_number(n, "initial_val", initial_val)
        _check_number(n, "scale", scale)
        _check_number(n, "warmup_steps", warmup_steps, positive=True)
        self.initial_val = initial_val
        self.scale = scale
        self.warmup_steps = warmup_steps
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _value(self, t):
        denom = torch.sqrt(torch.clamp(_steps(t), min=float(self.warmup_steps)))
        return (float(self.initial_val) * float(self.scale)) / denom


class CosineDecayScheduler(Scheduler):
    """Cosine decay from `initial_val` to `end_val` over `total_iters` steps, then `end_val`:

        f(t) = end + (init - end) * (1 + cos(pi * min(t, T) / T)) / 2

    Args:
        initial_val: the value at step 0.
        end_val: the value at step `total_iters` and after it.
        total_iters: T, the number of steps of the decay (an integer > 0).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, initial_val: float, end_val: float, total_iters: int,
                 param_group_tags: TagsType = None):
        n = type(self).__name__
        _check_number(n, "initial_val", initial_val)
        _check_number(n, "end_val", end_val)
        _check_int(n, "total_iters", total_iters, positive=True)
        self.initial_val = initial_val
        self.end_val = end_val
        super().__init__(optimizer, total_iters=total_iters, param_group_tags=param_group_tags)

    def _value(self, t):
        big_t = float(self.total_iters)
        s = torch.clamp(_steps(t), max=big_t)
        diff = float(self.initial_val) - float(self.end_val)
        return _half_cosine(s, big_t - s, big_t) * diff + float(self.end_val)


class CosineAnnealingScheduler(Scheduler):
    """SGDR's cosine annealing without restarts, as torch's CosineAnnealingLR: periodic,
    not clamped (after T_max it rises back towards `initial_val`):

        f(t) = eta_min + (init - eta_min) * (1 + cos(pi * t / T_max)) / 2

    Args:
        initial_val: the value at step 0, the top of the cosine.
        T_max: the half period in steps: the value reaches `eta_min` at step `T_max` (> 0).
        eta_min: the bottom of the cosine.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, initial_val: float, T_max: int, eta_min: float = 0.0,
                 param_group_tags: TagsType = None):
        n = type(self).__name__
        _check_number(n, "initial_val", initial_val)
        _check_number(n, "T_max", T_max, positive=True)
        _check_number(n, "eta_min", eta_min)
        self.initial_val = float(initial_val)
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _value(self, t):
        period = float(self.T_max)
        phase = torch.remainder(_steps(t), 2.0 * period)
        dist = torch.minimum(phase, 2.0 * period - phase)  # distance from the last peak, in [0, T_max]
        diff = float(self.initial_val) - float(self.eta_min)
        return _half_cosine(dist, period - dist, period) * diff + float(self.eta_min)


class CosineAnnealingWarmRestartsScheduler(Scheduler):
    """SGDR cosine annealing with warm restarts every `T_0` steps:

        f(t) = eta_min + (init - eta_min) * (1 + cos(pi * T_cur / T_0)) / 2,  T_cur = t mod T_0

    Decision: this is the proper warm-restart cosine (torch's CosineAnnealingWarmRestarts
    with T_mult=1). The real library's closed form uses T_cur = (floor(t/T_0) - 1) * T_0
    after the first period, which makes the value piecewise constant there; that is not
    reproduced. Only `T_mult=1` is supported (as in the real API).

    Args:
        initial_val: the value at step 0 and at every restart.
        T_0: the period in steps: the value restarts at every multiple of `T_0` (an integer > 0).
        T_mult: the growth of the period after each restart; only 1 is accepted (any other value raises
            ValueError).
        eta_min: the value the cosine approaches at the end of every period.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, initial_val: float, T_0: int, T_mult: int = 1,
                 eta_min: float = 0.0, param_group_tags: TagsType = None):
        n = type(self).__name__
        _check_number(n, "initial_val", initial_val)
        _check_int(n, "T_0", T_0, positive=True)
        if T_mult != 1:
            raise ValueError(f"{n}: only T_mult=1 (a fixed period of T_0 steps) is supported, got T_mult={T_mult!r}. "
                             f"For growing periods, chain CosineDecay schedulers in a SequentialLR.")
        _check_number(n, "eta_min", eta_min)
        self.initial_val = float(initial_val)
        self.T_0 = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _value(self, t):
        period = float(self.T_0)
        t_cur = torch.remainder(_steps(t), period)
        diff = float(self.initial_val) - float(self.eta_min)
        return _half_cosine(t_cur, period - t_cur, period) * diff + float(self.eta_min)


class StepScheduler(Scheduler):
    """f(t) = initial_val * gamma^floor(t / step_size).

    Args:
        initial_val: the value at step 0.
        step_size: the number of steps between two multiplications by `gamma` (an integer > 0).
        gamma: the factor applied every `step_size` steps.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, initial_val: float, step_size: int, gamma: float,
                 param_group_tags: TagsType = None):
        n = type(self).__name__
        _check_number(n, "initial_val", initial_val)
        _check_int(n, "step_size", step_size, positive=True)
        _check_number(n, "gamma", gamma)
        self.initial_val = float(initial_val)
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _value(self, t):
        k = torch.floor(_steps(t) / float(self.step_size))
        return torch.pow(float(self.gamma), k) * float(self.initial_val)


class MultiStepScheduler(Scheduler):
    """f(t) = initial_val * gamma^(number of milestones <= t) (a milestone listed twice
    counts twice, as in torch's MultiStepLR).

    Args:
        initial_val: the value at step 0.
        gamma: the factor applied at each milestone.
        milestones: the integer steps at which the value is multiplied by `gamma`.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, initial_val: float, gamma: float, milestones: List[int],
                 param_group_tags: TagsType = None):
        n = type(self).__name__
        _check_number(n, "initial_val", initial_val)
        _check_number(n, "gamma", gamma)
        self.initial_val = initial_val
        self.gamma = gamma
        self.milestones = _check_int_list(n, "milestones", milestones)
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _value(self, t):
        s = _steps(t)
        passed = torch.zeros((), dtype=torch.float32)
        for m in self.milestones:
            passed = passed + (s >= float(m)).to(torch.float32)
        return torch.pow(float(self.gamma), passed) * float(self.initial_val)


class MultiplicativeScheduler(Scheduler):
    """f(t) = initial_val * factor(t)^t, `factor = set_value_lambda()`: by default the
    constant `coefficient` (torch's MultiplicativeLR with a constant factor). A subclass
    may override `set_value_lambda()` to return another callable of the step (a float32
    0-d tensor) written with torch ops; the closed form is exact for a constant factor.

    Args:
        initial_val: the value at step 0.
        coefficient: the constant per-step factor that the default `set_value_lambda()` returns.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, initial_val: float, coefficient: float,
                 param_group_tags: TagsType = None):
        n = type(self).__name__
        _check_number(n, "initial_val", initial_val)
        _check_number(n, "coefficient", coefficient)
        self.initial_val = initial_val
        self.coefficient = coefficient
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def set_value_lambda(self) -> Callable[[torch.Tensor], object]:
        """The per-step factor as a function of the step: the constant `coefficient`."""
        coefficient = float(self.coefficient)
        return lambda s: coefficient

    def _value(self, t):
        s = _steps(t)
        factor = torch.as_tensor(self.set_value_lambda()(s), dtype=torch.float32)
        return torch.pow(factor, s) * float(self.initial_val)


class LambdaScheduler(Scheduler):
    """f(t) = product over the callables `lam` of `set_value_lambda()` of
    `initial_val * lam(t)`. Meant to be subclassed: override `set_value_lambda()` to
    return a list of callables that map the step (a float32 0-d tensor) to a factor with
    torch ops (a traced step cannot branch on the step's value). With one callable this
    is torch's LambdaLR. The default pair (t/30 and 0.95^t) is the real library's demo.

    Args:
        initial_val: the factor each callable's value is multiplied by (with one callable `lam`, the value
            is `initial_val * lam(t)`).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, initial_val: float, param_group_tags: TagsType = None):
        _check_number(type(self).__name__, "initial_val", initial_val)
        self.initial_val = initial_val
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def set_value_lambda(self) -> List[Callable[[torch.Tensor], torch.Tensor]]:
        return [lambda s: s / 30.0, lambda s: torch.pow(0.95, s)]

    def _value(self, t):
        s = _steps(t)
        value = _full(1.0)
        for lam in self.set_value_lambda():
            value = value * (torch.as_tensor(lam(s), dtype=torch.float32) * float(self.initial_val))
        return value


class CyclicScheduler(Scheduler):
    """Cyclical schedule (CLR, torch's CyclicLR): a triangle between `base_val` and
    `max_val`, rising for `step_size_up` steps and falling for `step_size_down` steps
    (default: `step_size_up`). `mode` scales the amplitude:

    * "triangular": 1;
    * "triangular2": 1 / 2^(cycle - 1), cycle = 1, 2, ...;
    * "exp_range": gamma^t.

    `set_scale_fn()` returns that scale as a function and, as in the real library, sets
    `scale_mode` to what it takes: "cycle" (the cycle number) for the triangular modes,
    "iterations" (the step) for exp_range. A subclass may override `set_scale_fn()` to
    return its own scale function of a float32 0-d tensor (torch ops only), evaluated on
    the cycle number or the step as `scale_mode` says.

    Args:
        base_val: the value at the start of every cycle, the bottom of the triangle.
        max_val: the top of the first triangle; `mode` scales the amplitude `max_val - base_val`.
        step_size_up: the number of steps of the rising half of a cycle (> 0).
        step_size_down: the number of steps of the falling half (> 0); None: `step_size_up`.
        mode: "triangular", "triangular2" or "exp_range" (above).
        gamma: the base of the "exp_range" scale `gamma^t`.
        scale_mode: "cycle" or "iterations": what a scale function is evaluated on (the built-in modes set
            it themselves through `set_scale_fn()`).
    """

    MODES = ("triangular", "triangular2", "exp_range")

    def __init__(self, optimizer: torch.optim.Optimizer, base_val: float, max_val: float, step_size_up: int = 2000,
                 step_size_down: int = None, mode: str = "triangular", gamma: float = 1.0, scale_mode: str = "cycle",
                 param_group_tags: TagsType = None):
        n = type(self).__name__
        _check_number(n, "base_val", base_val)
        _check_number(n, "max_val", max_val)
        _check_number(n, "step_size_up", step_size_up, positive=True)
        if step_size_down is None:
            step_size_down = step_size_up
        _check_number(n, "step_size_down", step_size_down, positive=True)
        if mode not in self.MODES:
            raise ValueError(f"{n}: `mode` must be one of {', '.join(self.MODES)}; got {mode!r}.")
        _check_number(n, "gamma", gamma)
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"{n}: `scale_mode` must be 'cycle' or 'iterations', got {scale_mode!r}.")
        self.base_val = base_val
        self.max_val = max_val
        self.step_size_up = step_size_up
        self.step_size_down = step_size_down
        self.mode = mode
        self.gamma = gamma
        self.scale_mode = scale_mode
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _value(self, t):
        s = _steps(t)
        up, down = float(self.step_size_up), float(self.step_size_down)
        total = up + down
        pos = torch.remainder(s, total)  # steps into the current cycle
        cycle = (s - pos) / total + 1.0
        frac = torch.where(pos <= up, pos / up, (total - pos) / down)
        height = frac * (float(self.max_val) - float(self.base_val))
        scale_fn = self.set_scale_fn()
        scale = scale_fn(cycle if self.scale_mode == "cycle" else s)
        return height * torch.as_tensor(scale, dtype=torch.float32) + float(self.base_val)

    def set_scale_fn(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """The amplitude scale of `mode` as a function of a float32 0-d tensor x (see the
        class docstring); sets `scale_mode` to what x is for that mode."""
        if self.mode == "triangular":
            self.scale_mode = "cycle"
            return torch.ones_like
        if self.mode == "triangular2":
            self.scale_mode = "cycle"
            return lambda x: torch.pow(0.5, x - 1.0)
        self.scale_mode = "iterations"
        gamma = float(self.gamma)
        return lambda x: torch.pow(gamma, x)


class OneCycleScheduler(Scheduler):
    """The 1cycle policy (torch's OneCycleLR, with `initial_val` = max / div_factor):
    anneal `initial_val` -> `max_val` until step pct_start*N - 1, then `max_val` ->
    `initial_val / final_div_factor` until step N - 1 (with `three_phase=True`: back to
    `initial_val` at step 2*pct_start*N - 2, then to the minimum at N - 1). `anneal_strategy`
    is "cos" or "linear".

    Decision: after step N - 1 the value stays at the minimum (torch raises there, the real
    library's formula extrapolates the last phase, which may oscillate or turn negative).

    Args:
        initial_val: the value at step 0 (torch's `max_lr / div_factor`).
        max_val: the peak, reached at step `pct_start * total_steps - 1`.
        total_steps: N, the number of steps of the cycle (an integer > 0).
        pct_start: the fraction of N spent rising to the peak (strictly between 0 and 1).
        final_div_factor: the value at the end is `initial_val / final_div_factor` (> 0).
        three_phase: a third phase: down to `initial_val` first, then to the minimum (above).
        anneal_strategy: the shape of each phase, "cos" or "linear".
    """

    def __init__(self, optimizer: torch.optim.Optimizer, initial_val: float, max_val: float, total_steps: int = 1000,
                 pct_start: float = 0.3, final_div_factor: float = 1e4, three_phase: bool = False,
                 anneal_strategy: str = "cos", param_group_tags: TagsType = None):
        n = type(self).__name__
        _check_number(n, "initial_val", initial_val)
        _check_number(n, "max_val", max_val)
        _check_int(n, "total_steps", total_steps, positive=True)
        _check_number(n, "pct_start", pct_start)
        if not 0 < pct_start < 1:
            raise ValueError(f"{n}: `pct_start` must be a fraction in (0, 1), got {pct_start!r}.")
        _check_number(n, "final_div_factor", final_div_factor, positive=True)
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"{n}: `anneal_strategy` must be 'cos' or 'linear', got {anneal_strategy!r}.")
        self.initial_val = initial_val
        self.max_val = max_val
        self.total_steps = total_steps
        self.pct_start = pct_start
        self.final_div_factor = final_div_factor
        self.three_phase = bool(three_phase)
        self.anneal_strategy = anneal_strategy
        for start, end, _, _ in self._phases():
            if end - start <= 0:
                raise ValueError(
                    f"{n}: with total_steps={total_steps}, pct_start={pct_start} and three_phase={three_phase} a "
                    f"phase would span {end - start:g} steps (from step {start:g} to {end:g}); every phase needs a "
                    f"positive length. Increase total_steps or adjust pct_start."
                )
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _phases(self) -> list:
        """(start step, end step, start value, end value) per phase."""
        n, p = float(self.total_steps), float(self.pct_start)
        init, peak = float(self.initial_val), float(self.max_val)
        low = init / float(self.final_div_factor)
        if self.three_phase:
            ends = [p * n - 1.0, 2.0 * p * n - 2.0, n - 1.0]
            values = [(init, peak), (peak, init), (init, low)]
        else:
            ends = [p * n - 1.0, n - 1.0]
            values = [(init, peak), (peak, low)]
        starts = [0.0] + ends[:-1]
        return [(s, e, a, b) for s, e, (a, b) in zip(starts, ends, values)]

    def _anneal(self, s, start, end, v_start, v_end):
        elapsed, remaining = s - start, end - s
        if self.anneal_strategy == "cos":
            return _half_cosine(elapsed, remaining, end - start) * (v_start - v_end) + v_end
        return remaining / (end - start) * (v_start - v_end) + v_end

    def _value(self, t):
        phases = self._phases()
        s = torch.clamp(_steps(t), max=phases[-1][1])
        value = self._anneal(s, *phases[0])
        for (start, end, a, b) in phases[1:]:
            value = torch.where(s > start, self._anneal(s, start, end, a, b), value)
        return value


# --------------------------------------------------------------------------------------
# composite schedules
# --------------------------------------------------------------------------------------
