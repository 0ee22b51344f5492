"""Schedulers built from others: sequential, piecewise constant, chained, per-group scaled."""
from typing import List

import torch

from .closed_form_schedulers import ConstantScheduler
from .scheduler_base import Scheduler, TagsType, _check_int_list, _check_number, _is_number


class _Composite(Scheduler):
    """A scheduler evaluating other schedulers' closed forms. The children stop being
    live schedulers of their own: they no longer write the param groups and their
    `last_epoch` stays where it was; only the composite's step counts."""

    _schedulers: list

    def _children(self) -> list:
        return list(self._schedulers)

    def _check_children(self, optimizer, what: str) -> None:
        n = type(self).__name__
        if not isinstance(self._schedulers, (list, tuple)) or not self._schedulers:
            raise ValueError(f"{n} needs a non-empty list of schedulers, got {self._schedulers!r}.")
        for i, s in enumerate(self._schedulers):
            if not isinstance(s, Scheduler):
                raise TypeError(f"{n}: {what}[{i}] is a {type(s).__name__}, not a cstorch.optim scheduler.")
            if s.optimizer is not optimizer:
                raise ValueError(f"{n} expects every scheduler to belong to the same optimizer, but {what}[{i}] "
                                 f"schedules a different optimizer.")
            if s.param_group_key != self.param_group_key:
                raise ValueError(f"{n} schedules '{self.param_group_key}' but {what}[{i}] ({type(s).__name__}) "
                                 f"schedules '{s.param_group_key}'.")
            if isinstance(s, ScalePerParamScheduler):
                raise ValueError(f"{n}: {what}[{i}] is a {type(s).__name__}, whose per-group scaling cannot be "
                                 f"nested; wrap the {n} in it instead.")
            if s._owner is not None and s._owner is not self:
                raise ValueError(f"{n}: {what}[{i}] already belongs to a {type(s._owner).__name__}; create a new "
                                 f"scheduler for each composite.")
        if len({id(s) for s in self._schedulers}) != len(self._schedulers):
            raise ValueError(f"{n}: the same scheduler object appears twice in {what}; create one per position.")

    def _inherit_tags(self, param_group_tags) -> TagsType:
        """Without explicit tags, a composite takes its children's (when they all agree)."""
        if param_group_tags is not None:
            return param_group_tags
        tags = [s.param_group_tags for s in self._schedulers if isinstance(s, Scheduler)]
        if tags and all(t == tags[0] for t in tags) and tags[0] is not None:
            return sorted(tags[0], key=lambda x: (x is None, x or ""))
        return None

    def _post_init(self) -> None:
        n = type(self).__name__
        for i, s in enumerate(self._schedulers):
            if s.param_group_tags != self.param_group_tags:
                raise ValueError(
                    f"{n} expects every scheduler to have the same param_group_tags as itself "
                    f"({self.param_group_tags}), but scheduler {i} ({type(s).__name__}) has {s.param_group_tags}."
                )
        for s in self._schedulers:
            self._adopt(s)


class SequentialScheduler(_Composite):
    """Runs `schedulers[k]` between milestones k-1 and k, each from its own step 0:

        f(t) = schedulers[k](t - milestones[k-1]),  k = number of milestones <= t

    (torch's SequentialLR). `milestones` are increasing integer steps, one fewer than
    the schedulers; all schedulers must schedule the same optimizer with the same tags.

    Args:
        optimizer: the optimizer every scheduler in `schedulers` schedules.
        schedulers: the schedulers to run one after the other (they stop writing the param groups
            themselves).
        milestones: the steps where each next scheduler takes over: increasing, one fewer than `schedulers`.
        last_epoch: the step before the first one (-1: the sequence starts at step 0).
        param_group_tags: the tags of the param groups it schedules; None: the schedulers' tags when they
            all agree. Every scheduler must have the same tags.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, schedulers: List[Scheduler], milestones: List[int],
                 last_epoch: int = -1, param_group_tags: TagsType = None):
        n = type(self).__name__
        milestones = _check_int_list(n, "milestones", milestones)
        self._schedulers = list(schedulers) if isinstance(schedulers, (list, tuple)) else schedulers
        self._check_children(optimizer, "schedulers")
        if len(milestones) != len(self._schedulers) - 1:
            raise ValueError(f"{n} needs one milestone fewer than schedulers (the step where each next scheduler "
                             f"takes over); got {len(self._schedulers)} schedulers and {len(milestones)} milestones.")
        if any(m < 0 for m in milestones) or any(b < a for a, b in zip(milestones, milestones[1:])):
            raise ValueError(f"{n}: milestones must be non-negative and increasing, got {milestones}.")
        self._milestones = milestones
        super().__init__(optimizer, total_iters=None, last_epoch=last_epoch,
                         param_group_tags=self._inherit_tags(param_group_tags))

    @property
    def milestones(self) -> list:
        return self._milestones

    def _value(self, t):
        value = self._schedulers[0]._value(t)
        for m, s in zip(self._milestones, self._schedulers[1:]):
            local = torch.clamp(t - m, min=0)
            value = torch.where(t >= m, s._value(local), value)
        return value


class PiecewiseConstantScheduler(SequentialScheduler):
    """f(t) = vals[k], k = number of milestones <= t (a sequence of constants);
    `len(vals) == len(milestones) + 1`. `constant_cls` is the constant scheduler of the
    same parameter (ConstantLR / ConstantWD; the LR and WD twins pass theirs).

    Args:
        optimizer: the optimizer to schedule.
        constant_cls: the constant scheduler class of the scheduled parameter (ConstantLR, ConstantWD).
        vals: the value before the first milestone and the value after each milestone.
        milestones: the increasing integer steps where the value changes (one fewer than `vals`).
        param_group_tags: the tags of the param groups it schedules (see Scheduler); None: every group.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, constant_cls: type, vals: List[float], milestones: List[int],
                 param_group_tags: TagsType = None):
        n = type(self).__name__
        milestones = _check_int_list(n, "milestones", milestones)
        if not isinstance(vals, (list, tuple)) or len(vals) != len(milestones) + 1:
            raise ValueError(f"{n} needs one more value than milestones (a value before the first milestone and "
                             f"one after each); got {len(vals) if isinstance(vals, (list, tuple)) else vals!r} "
                             f"values and {len(milestones)} milestones.")
        for i, v in enumerate(vals):
            _check_number(n, f"vals[{i}]", v)
        if not (isinstance(constant_cls, type) and issubclass(constant_cls, ConstantScheduler)):
            raise TypeError(f"{n}: constant_cls must be a constant scheduler class (ConstantLR or ConstantWD), got "
                            f"{constant_cls!r}; or use PiecewiseConstantLR / PiecewiseConstantWD.")
        self.vals = list(vals)
        bounds = [0, *milestones]
        children = [constant_cls(optimizer, v, b - a, param_group_tags=param_group_tags)
                    for v, a, b in zip(vals, bounds, bounds[1:])]
        children.append(constant_cls(optimizer, vals[-1], param_group_tags=param_group_tags))
        super().__init__(optimizer, children, milestones, param_group_tags=param_group_tags)


class ChainedScheduler(_Composite):
    """The product of schedules, normalised by the later ones' initial values:

        f(t) = schedulers[0](t) * prod_{i>0} schedulers[i](t) / schedulers[i].initial_val

    Every scheduler sees the same step. The optimizer is that of the schedulers.

    Args:
        schedulers: the schedulers whose values are multiplied (of one optimizer; every scheduler after the
            first needs a non-zero `initial_val`).
        param_group_tags: the tags of the param groups it schedules; None: the schedulers' tags when they
            all agree. Every scheduler must have the same tags.
    """

    def __init__(self, schedulers: List[Scheduler], param_group_tags: TagsType = None):
        n = type(self).__name__
        self._schedulers = list(schedulers) if isinstance(schedulers, (list, tuple)) else schedulers
        if not isinstance(self._schedulers, list) or not self._schedulers:
            raise ValueError(f"{n} needs a non-empty list of cstorch.optim schedulers, got {schedulers!r}.")
        if not isinstance(self._schedulers[0], Scheduler):
            raise TypeError(f"{n}: schedulers[0] is a {type(self._schedulers[0]).__name__}, not a cstorch.optim "
                            f"scheduler.")
        optimizer = self._schedulers[0].optimizer
        self._check_children(optimizer, "schedulers")
        for i, s in enumerate(self._schedulers[1:], start=1):
            init = getattr(s, "initial_val", None)
            if not _is_number(init) or init == 0:
                raise ValueError(f"{n} divides every scheduler after the first by its initial value, but "
                                 f"scheduler {i} ({type(s).__name__}) has initial value {init!r}; put a scheduler "
                                 f"with a non-zero initial value there.")
        super().__init__(optimizer, total_iters=None, param_group_tags=self._inherit_tags(param_group_tags))

    def _value(self, t):
        value = self._schedulers[0]._value(t)
        for s in self._schedulers[1:]:
            value = value * (s._value(t) / float(s.initial_val))
        return value


class ScalePerParamScheduler(Scheduler):
    """Wraps a scheduler and multiplies its value, per param group, by the group's
    `adjust_learning_rate` (or `adjust_val`; default 1.0), read at construction
    (muP-style per-layer scaling).

    Args:
        optimizer: the optimizer of `scheduler`.
        scheduler: the scheduler whose value is scaled per param group (not already part of another
            composite).
        param_group_tags: the tags of the param groups it schedules; None: those of `scheduler`, which must
            be the same.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, scheduler: Scheduler, param_group_tags: TagsType = None):
        n = type(self).__name__
        if not isinstance(scheduler, Scheduler):
            raise TypeError(f"{n} wraps a cstorch.optim scheduler, got {type(scheduler).__name__}.")
        if scheduler.optimizer is not optimizer:
            raise ValueError(f"{n}: the wrapped scheduler schedules a different optimizer.")
        if scheduler.param_group_key != self.param_group_key:
            raise ValueError(f"{n} schedules '{self.param_group_key}' but the wrapped {type(scheduler).__name__} "
                             f"schedules '{scheduler.param_group_key}'.")
        if isinstance(scheduler, ScalePerParamScheduler):
            raise ValueError(f"{n} cannot wrap another {type(scheduler).__name__}.")
        if scheduler._owner is not None:
            raise ValueError(f"{n}: the wrapped scheduler already belongs to a {type(scheduler._owner).__name__}.")
        scalars = []
        for gi, g in enumerate(optimizer.param_groups):
            factor = g.get("adjust_learning_rate", g.get("adjust_val", 1.0))
            _check_number(n, f"param_groups[{gi}]['adjust_learning_rate']", factor)
            scalars.append(factor)
        self.adjustment_scalars = scalars
        self._scheduler_nested = scheduler
        if param_group_tags is None and scheduler.param_group_tags is not None:
            param_group_tags = sorted(scheduler.param_group_tags, key=lambda x: (x is None, x or ""))
        super().__init__(optimizer, total_iters=None, param_group_tags=param_group_tags)

    def _children(self) -> list:
        return [self._scheduler_nested]

    def _post_init(self) -> None:
        if self._scheduler_nested.param_group_tags != self.param_group_tags:
            raise ValueError(
                f"{type(self).__name__} expects the wrapped scheduler to have its param_group_tags "
                f"({self.param_group_tags}), got {self._scheduler_nested.param_group_tags}."
            )
        self._adopt(self._scheduler_nested)

    def _value(self, t):
        return self._scheduler_nested._value(t)

    def _group_values(self, t):
        value = self._value(t).to(torch.float32)
        return [value * float(scale) if self._applies(g) else None
                for g, scale in zip(self.optimizer.param_groups, self.adjustment_scalars)]

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["_scheduler"] = state.pop("_scheduler_nested")
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        nested = state.pop("_scheduler", None)
        state.pop("_scheduler_nested", None)
        if nested is not None:
            self._scheduler_nested.load_state_dict(nested)
        super().load_state_dict(state)
