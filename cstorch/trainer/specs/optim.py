"""Specs of the optimizer and the schedulers of a trainer YAML.

    OptimizerSpec       init.optimizer: {ClassName: {lr | learning_rate, weight_decay,
                        adjust_learning_rate, **arguments}} (a class of cstorch.optim, any case;
                        a key the class does not take is dropped with a warning, as the
                        Model Zoo does)
    SchedulerSpec       an item of init.schedulers: {ClassName: arguments} (a class of
                        cstorch.optim.lr_scheduler / weight_decay_scheduler, `optimizer`
                        omitted). A class that takes `schedulers` takes a nested list of
                        items (SequentialLR, ChainedLR, ...), one that takes `scheduler` a
                        nested item (ScalePerParamLR). A sequence's `milestones` default to
                        the running sum of its schedulers' `total_iters` (all but the last;
                        inside a sequence a scheduler may be given a `total_iters` it does
                        not take, as its duration).
    LearningRateSpec    an item {learning_rate: <number | {scheduler: Name, ...} | [...]>}:
                        the cstorch 2.0-2.3 `optimizer.learning_rate` form, checked here and
                        built by `cstorch.optim.configure_lr_scheduler`.

Every number among the arguments (nested lists and mappings included: `betas`,
`adjust_learning_rate`, a schedule's values) must be finite: a NaN or infinite one is a
ConfigError naming its key path (`checks.check_finite`). A learning rate (the optimizer's
`lr` / `learning_rate`, a learning-rate scheduler's arguments named in
`checks.LEARNING_RATE_KEYS`) must be >= 0, as the optimizers require
(`checks.check_learning_rate`). The optimizer's own argument checks (the real API's
ValueErrors: a negative momentum, epsilon or weight decay, a beta outside [0, 1), ...)
run on its arguments while parsing, weight_decay included (which the built optimizer
gets through its param groups, where the class checks nothing): a ConfigError naming the
optimizer's key path.

Names are looked up in `cstorch.optim.catalog`, the optimizers and schedulers
`cstorch.optim` defines (nothing else can be named here). Building: `build(model)` /
`build(optimizer)`, after the Trainer's backend exists.
"""
from __future__ import annotations

import copy
import inspect
import itertools
import warnings
from typing import Any, ClassVar, Optional

import cstorch
from cstorch.optim import catalog

from ..checks import (ConfigError, check_dict, check_finite, check_kwargs, check_learning_rate, check_learning_rates,
                      is_int, is_number, show, suggest)
from .base import At, Spec

#: optimizer keys handled by the configuration layer, besides the optimizer's own arguments
_OPTIMIZER_EXTRA_KEYS = ("lr", "learning_rate", "weight_decay", "adjust_learning_rate")


def _check_ranges(target: type, lr, kwargs: dict, path: str) -> None:
    """Run the optimizer class's own argument checks (`public.check` of a spec optimizer)
    on the YAML's arguments with the class's defaults filled in; a ValueError becomes a
    ConfigError naming `path`. Classes without such checks, and arguments the checks
    cannot compare (strings converted later), are left to the build."""
    public, signature = getattr(target, "public", None), getattr(target, "_signature", None)
    if public is None or signature is None:
        return
    args = {k: v for k, v in kwargs.items() if k in signature.parameters}
    if lr is not None:
        args["lr"] = lr
    try:
        bound = signature.bind(**args)
    except TypeError:  # a required argument missing (lr): the build says so
        return
    bound.apply_defaults()
    try:
        public.check(dict(bound.arguments))
    except ValueError as e:
        raise ConfigError(f"{path}: {e} ({target.__name__} refuses this value; give one in its range).") from None
    except TypeError:
        return


def _takes(cls, argument: str) -> bool:
    return argument in inspect.signature(cls).parameters


def _drop_unused(target: type, kwargs: dict, path: str) -> None:
    """Remove from `kwargs` (in place) the keys `target` does not take, with a warning, as
    the Model Zoo's optimizer config does (`Adam: {correct_bias: true}` in its published
    YAMLs: the real Adam always corrects the bias and takes no such argument); passing
    them is deprecated there, not an error."""
    params = inspect.signature(target).parameters
    if any(q.kind is inspect.Parameter.VAR_KEYWORD for q in params.values()):
        return
    accepted = [k for k in params if k not in ("self", "params")] + list(_OPTIMIZER_EXTRA_KEYS)
    unused = sorted(k for k in kwargs if k not in accepted)
    if unused:
        for key in unused:
            del kwargs[key]
        warnings.warn(f"{path}: {target.__name__} got {len(unused)} unexpected and unused parameter(s): {unused} "
                      f"(ignored; passing them is deprecated).{suggest(unused[0], accepted)} Valid keys: "
                      f"{', '.join(sorted(accepted))}.", UserWarning, stacklevel=2)


class OptimizerSpec(Spec):
    """`init.optimizer`: one key, the optimizer class, holding its arguments."""

    #: the class name as written (any case)
    name: str
    #: the optimizer class of cstorch.optim
    cls: type
    #: the learning rate (`lr` or `learning_rate`), when given as a number
    lr: Optional[float] = None
    #: parameter-name substring -> learning-rate factor (`configure_param_groups`)
    adjust_learning_rate: Optional[dict[str, float]] = None
    #: the optimizer's other arguments (weight_decay included: biases and norms get none)
    kwargs: dict[str, Any] = {}

    @classmethod
    def from_yaml(cls, at: At) -> dict:
        opt = check_dict(at.value, at.path)
        if len(opt) != 1:
            raise ConfigError(f"{at.path} must have exactly one key, the optimizer class (e.g. {{AdamW: {{lr: "
                              f"0.001}}}}); got {sorted(map(str, opt)) or 'none'}.")
        (name, kwargs), = opt.items()
        try:
            target = catalog.optimizer_class(str(name))
        except ValueError:
            known = catalog.optimizer_names()
            raise ConfigError(f"{at.path}: unknown optimizer {name!r}.{suggest(name, known)} Optimizers (any case): "
                              f"{', '.join(known)}.") from None
        p = f"{at.path}.{name}"
        kwargs = dict(check_dict(kwargs, p))
        renamed = catalog.RENAMED_OPTIMIZER_KEYS
        old = [k for k in kwargs if k in renamed and not _takes(target, k)]
        if old:
            fixes = ", ".join(f"{k} -> {renamed[k]}" if renamed[k] else f"{k} (remove)" for k in old)
            raise ConfigError(f"{p}: keys of an older format are not accepted: {fixes}.")
        _drop_unused(target, kwargs, p)
        check_kwargs(target, kwargs, p, skip=("params", "lr"), extra=_OPTIMIZER_EXTRA_KEYS)
        if "lr" in kwargs and "learning_rate" in kwargs:
            raise ConfigError(f"{p}: give lr or learning_rate, not both.")
        lr = None
        for key in ("lr", "learning_rate"):
            if key not in kwargs:
                continue
            lr = kwargs.pop(key)
            if not is_number(lr):
                if isinstance(lr, (dict, list)):
                    raise ConfigError(f"{p}.{key} is a schedule; move it to the schedulers section as "
                                      f"schedulers: [{{learning_rate: <this value>}}] (or use {{ClassName: kwargs}} "
                                      f"scheduler items).")
                raise ConfigError(f"{p}.{key} must be a number, got {show(lr)}.")
            check_finite(lr, f"{p}.{key}")
            check_learning_rate(lr, f"{p}.{key}")
        adjust = kwargs.pop("adjust_learning_rate", None)
        if adjust is not None and not (isinstance(adjust, dict) and all(
                isinstance(k, str) and is_number(v) for k, v in adjust.items())):
            raise ConfigError(f"{p}.adjust_learning_rate must map parameter-name substrings to numbers, got "
                              f"{show(adjust)}.")
        check_finite(adjust, f"{p}.adjust_learning_rate")
        check_finite(kwargs, p)  # eps, betas, momentum, weight_decay, ...
        _check_ranges(target, lr, kwargs, p)
        return {"path": p, "name": str(name), "cls": target, "lr": lr, "adjust_learning_rate": adjust,
                "kwargs": kwargs}

    def build(self, model):
        """The optimizer of `model`'s parameters, grouped by `configure_param_groups` (no
        weight decay for biases and norms; `adjust_learning_rate` factors per group)."""
        params = copy.deepcopy(self.kwargs)
        if self.lr is not None:
            params["lr"] = self.lr
        if self.adjust_learning_rate is not None:
            params["adjust_learning_rate"] = dict(self.adjust_learning_rate)
        groups = cstorch.optim.configure_param_groups(model, params)  # takes weight_decay, adjust_learning_rate
        return cstorch.optim.configure_optimizer(self.cls.__name__, groups, **params)


def _scheduler_class(name: str, where: str) -> type:
    """The scheduler class `name` (exact, else the one equal ignoring case)."""
    table = catalog.scheduler_classes()
    if name in table:
        return table[name]
    folded = [k for k in table if k.lower() == str(name).lower()]
    if len(folded) == 1:
        return table[folded[0]]
    raise ConfigError(f"{where}: unknown scheduler {name!r}.{suggest(name, table)} Schedulers are classes of "
                      f"cstorch.optim.lr_scheduler / weight_decay_scheduler: {', '.join(sorted(table))}.")


class SchedulerSpec(Spec):
    """An item `{ClassName: arguments}` of `init.schedulers` (module doc)."""

    #: the class name as written
    name: str
    #: the scheduler class
    cls: type
    #: its own arguments (not optimizer, schedulers, scheduler, milestones)
    kwargs: dict[str, Any] = {}
    #: `total_iters` as given: the scheduler's duration inside a sequence
    duration: Optional[int] = None
    #: the nested schedulers of a class that takes `schedulers`
    schedulers: Optional[tuple["SchedulerSpec", ...]] = None
    #: the milestones of a sequence (given, or the running sum of its durations)
    milestones: Optional[tuple[int, ...]] = None
    #: the nested scheduler of a class that takes `scheduler`
    scheduler: Optional["SchedulerSpec"] = None

    #: read as an item of a sequence (a `total_iters` the class does not take is its duration)
    in_sequence: ClassVar[bool] = False

    @classmethod
    def from_yaml(cls, at: At) -> dict:
        if not isinstance(at.value, dict) or len(at.value) != 1:
            raise ConfigError(f"{at.path} must be a mapping with exactly one key, the scheduler class, holding its "
                              f"arguments (e.g. {{CosineDecayLR: {{initial_learning_rate: 0.001, ...}}}}); got "
                              f"{show(at.value)}.")
        (name, kwargs), = at.value.items()
        name, p = str(name), f"{at.path}.{name}"
        kwargs = dict(check_dict(kwargs, p))
        target = _scheduler_class(name, at.path)
        duration = kwargs.get("total_iters")
        if cls.in_sequence and "total_iters" in kwargs and not _takes(target, "total_iters"):
            kwargs.pop("total_iters")  # how long it runs inside the sequence: for the milestones only
        fields: dict[str, Any] = {"path": p, "name": name, "cls": target,
                                  "duration": duration if is_int(duration) else None}
        skip = ["optimizer"]
        if _takes(target, "schedulers"):
            fields.update(cls._nested_list(target, name, kwargs, p, at.base_dir))
            skip += ["schedulers", "milestones"] if _takes(target, "milestones") else ["schedulers"]
        elif _takes(target, "scheduler"):
            if kwargs.get("scheduler") is None:
                raise ConfigError(f"{p}.scheduler is missing: {name} scales one scheduler, "
                                  f"{{SchedulerClass: arguments}}.")
            fields["scheduler"] = SchedulerSpec.sub(At(f"{p}.scheduler", kwargs.pop("scheduler"), at.base_dir))
            skip.append("scheduler")
        check_kwargs(target, kwargs, p, skip=tuple(skip))
        check_finite(kwargs, p)
        if issubclass(target, cstorch.optim.lr_scheduler.LRScheduler):
            check_learning_rates(kwargs, p)
        fields["kwargs"] = kwargs
        return fields

    @classmethod
    def _nested_list(cls, target, name: str, kwargs: dict, p: str, base_dir: Optional[str]) -> dict:
        """`schedulers` (and `milestones` for a sequence) of a composite at key path `p`,
        popped from `kwargs`."""
        children = kwargs.pop("schedulers", None)
        if not isinstance(children, list) or not children:
            raise ConfigError(f"{p}.schedulers must be a non-empty list of {{SchedulerClass: arguments}} items.")
        sequential = _takes(target, "milestones")
        item_spec = SequencedSchedulerSpec if sequential else SchedulerSpec
        nested = tuple(item_spec.sub(At(f"{p}.schedulers[{j}]", child, base_dir))
                       for j, child in enumerate(children))
        if not sequential:
            return {"schedulers": nested}
        milestones = kwargs.pop("milestones", None)
        if milestones is None:
            for j, child in enumerate(nested[:-1]):
                if child.duration is None or child.duration <= 0:
                    raise ConfigError(f"{p}.schedulers[{j}] needs a positive integer total_iters: {name}'s "
                                      f"milestones are computed from the total_iters of all but the last scheduler "
                                      f"(or give {p}.milestones).")
            milestones = list(itertools.accumulate(child.duration for child in nested[:-1]))
        elif not (isinstance(milestones, list) and len(milestones) == len(children) - 1
                  and all(is_int(m) and m >= 0 for m in milestones)):
            raise ConfigError(f"{p}.milestones must be a list of {len(children) - 1} step number(s), one fewer than "
                              f"the schedulers (or leave it out to use their total_iters); got {show(milestones)}.")
        return {"schedulers": nested, "milestones": tuple(milestones)}

    def build(self, optimizer):
        """The scheduler of `optimizer` (nested schedulers built first)."""
        kwargs = copy.deepcopy(self.kwargs)
        if self.schedulers is not None:
            kwargs["schedulers"] = [child.build(optimizer) for child in self.schedulers]
        if self.milestones is not None:
            kwargs["milestones"] = list(self.milestones)
        if self.scheduler is not None:
            kwargs["scheduler"] = self.scheduler.build(optimizer)
        if _takes(self.cls, "optimizer"):
            kwargs["optimizer"] = optimizer
        return self.cls(**kwargs)


class SequencedSchedulerSpec(SchedulerSpec):
    """A scheduler item inside a sequence (`total_iters` may be its duration only)."""

    in_sequence: ClassVar[bool] = True


class LearningRateSpec(Spec):
    """An item `{learning_rate: value}` of `init.schedulers` (module doc); `path` is that
    of the value."""

    #: a number (or numeric string), a `{scheduler: Name, ...}` dict or a list of them
    value: Any

    @classmethod
    def from_yaml(cls, at: At) -> dict:
        value, where = at.value, at.path
        if isinstance(value, str):
            try:
                float(value)
            except ValueError:
                raise ConfigError(f"{where} {show(value)} is a string but not a number.") from None
            check_finite(value, where, strings=True)
            check_learning_rate(value, where, strings=True)
            return {"value": value}
        if is_number(value):
            check_finite(value, where)
            check_learning_rate(value, where)
            return {"value": value}
        specs = value if isinstance(value, list) else [value]
        if not isinstance(value, (list, dict)) or not specs:
            raise ConfigError(f"{where} must be a number, a scheduler dict or a non-empty list of scheduler dicts, "
                              f"got {show(value)}.")
        for i, spec in enumerate(specs):
            w = f"{where}[{i}]" if isinstance(value, list) else where
            if not isinstance(spec, dict) or "scheduler" not in spec:
                raise ConfigError(f"{w} must be a dict with a `scheduler` key naming the scheduler class "
                                  f"(e.g. scheduler: CosineDecay), got {show(spec)}.")
            try:
                target = catalog.lr_scheduler_class(spec["scheduler"])
            except (TypeError, ValueError) as e:
                raise ConfigError(f"{w}.scheduler: {e}") from None
            # in a list, total_iters is also the scheduler's duration inside the sequence
            extra = ("scheduler", "main_scheduler") + (("total_iters",) if isinstance(value, list) else ())
            check_kwargs(target, spec, w, skip=("optimizer",), extra=extra, renamed=catalog.RENAMED_SCHEDULER_KEYS)
            check_finite(spec, w, strings=True)
            check_learning_rates(spec, w, strings=True)
        return {"value": copy.deepcopy(value)}

    def build(self, optimizer, adjusted: bool):
        """`configure_lr_scheduler(optimizer, value)`, wrapped in ScalePerParamLR when the
        optimizer's groups carry `adjust_learning_rate` factors (`adjusted`)."""
        return cstorch.optim.configure_lr_scheduler(optimizer, copy.deepcopy(self.value),
                                                    adjust_learning_rate=True if adjusted else None)


__all__ = ["OptimizerSpec", "SchedulerSpec", "SequencedSchedulerSpec", "LearningRateSpec"]
