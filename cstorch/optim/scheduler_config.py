"""`configure_lr_scheduler`: a learning-rate scheduler from a config value (the
`learning_rate` entry of a cstorch 2.0-2.3 / Model Zoo `optimizer:` section)."""
from __future__ import annotations

import inspect
from typing import Optional, Union

from . import lr_scheduler as _lr
from .scheduler_base import _is_int, _is_number

#: keys of older releases that are errors now, and what replaced them
_OLD_KEYS = {
    "steps": "total_iters",
    "decay_steps": "total_iters",
    "base_lr": "initial_learning_rate",
    "values": "learning_rates",
    "boundaries": "milestones",
}

#: schedulers made from other schedulers: a list of dicts builds them
_COMPOSITES = (_lr.SequentialLR, _lr.ChainedLR, _lr.ScalePerParamLR)


def _configurable() -> dict:
    """Lower-case name (also without the "LR" suffix) -> learning-rate scheduler class."""
    table = {}
    for name in _lr.__all__:
        cls = getattr(_lr, name)
        if cls is _lr.LRScheduler or issubclass(cls, _COMPOSITES):
            continue
        key = name.lower()
        table[key] = cls
        if key.endswith("lr"):
            table.setdefault(key[:-2], cls)
    return table


def _find_class(name) -> type:
    if not isinstance(name, str):
        raise TypeError(f"`scheduler` must be the name of a learning-rate scheduler, got {name!r}.")
    table = _configurable()
    key = name.replace("_", "").lower()
    if key in table:
        return table[key]
    composite = {c.__name__.lower() for c in _COMPOSITES} | {c.__name__.lower()[:-2] for c in _COMPOSITES}
    if key in composite or key == "chainedscheduler":
        raise ValueError(
            f"scheduler {name!r} is built from other schedulers: give `learning_rate` as a list of scheduler dicts "
            f"(a SequentialLR, or a ChainedScheduler with `main_scheduler: chained`); ScalePerParamLR comes from "
            f"`adjust_learning_rate`."
        )
    names = sorted({c.__name__ for c in table.values()})
    raise ValueError(f"Unknown learning-rate scheduler {name!r}. Available (the 'LR' suffix is optional): "
                     f"{', '.join(names)}.")


def _build(optimizer, spec: dict, index: Optional[int], in_sequence: bool):
    where = "learning_rate" if index is None else f"learning_rate[{index}]"
    if not isinstance(spec, dict):
        raise TypeError(f"{where} must be a dict with a `scheduler` key, got {type(spec).__name__}.")
    spec = dict(spec)
    spec.pop("main_scheduler", None)
    if "scheduler" not in spec:
        raise ValueError(f"{where} has no `scheduler` key naming the scheduler class (e.g. scheduler: "
                         f"CosineDecay); its keys are {sorted(spec)}.")
    cls = _find_class(spec.pop("scheduler"))
    params = inspect.signature(cls.__init__).parameters
    accepted = [p for p in params if p not in ("self", "optimizer")]
    duration = None
    if in_sequence and "total_iters" in spec and "total_iters" not in accepted:
        duration = spec.pop("total_iters")  # how long it runs inside the sequence
    old = [k for k in spec if k in _OLD_KEYS and k not in accepted]
    if old:
        fixes = ", ".join(f"'{k}' -> '{_OLD_KEYS[k]}'" for k in old)
        raise ValueError(f"{where} ({cls.__name__}) uses key(s) of older releases that are no longer supported; "
                         f"rename them: {fixes}.")
    unknown = [k for k in spec if k not in accepted]
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown} for {cls.__name__}; it accepts {accepted}.")
    missing = [p for p, v in params.items()
               if p not in ("self", "optimizer") and v.default is inspect.Parameter.empty and p not in spec]
    if missing:
        raise ValueError(f"{where}: {cls.__name__} needs the key(s) {missing}.")
    scheduler = cls(optimizer, **spec)
    if duration is not None:
        scheduler.total_iters = duration
    return scheduler


def configure_lr_scheduler(optimizer, learning_rate: Union[float, str, dict, list],
                           adjust_learning_rate: Optional[dict] = None):
    """A learning-rate scheduler for `optimizer` described by `learning_rate`:

    * a number (or a numeric string): `ConstantLR`;
    * a dict `{"scheduler": <name>, **constructor arguments}`, where the name is a class
      of `cstorch.optim.lr_scheduler` with or without its "LR" suffix (`"CosineDecay"`,
      `"CosineDecayLR"`, case-insensitive);
    * a list of such dicts: a `SequentialLR` whose milestones are the running sum of the
      schedulers' `total_iters` (all but the last scheduler need one; a scheduler without
      a `total_iters` argument may still be given one for this purpose), or a
      `ChainedScheduler` when an entry says `main_scheduler: chained`.

    Keys of older releases (steps, decay_steps, base_lr, values, boundaries) and unknown
    keys are ValueErrors that name them. With `adjust_learning_rate` (the per-parameter
    factors that `configure_param_groups` wrote into the groups) the scheduler is wrapped
    in `ScalePerParamLR`.

    Args:
        optimizer: the optimizer to schedule.
        learning_rate: a number (or a numeric string), a scheduler dict or a list of them (above).
        adjust_learning_rate: the per-parameter factors given to `configure_param_groups`; with it, the
            scheduler is wrapped in ScalePerParamLR.
    """
    if isinstance(learning_rate, str):
        try:
            learning_rate = float(learning_rate)
        except ValueError:
            raise ValueError(f"learning_rate {learning_rate!r} is a string but not a number; give a number, a "
                             f"scheduler dict or a list of scheduler dicts.") from None
    if _is_number(learning_rate):
        scheduler = _lr.ConstantLR(optimizer, float(learning_rate))
    elif isinstance(learning_rate, dict):
        scheduler = _build(optimizer, learning_rate, None, in_sequence=False)
    elif isinstance(learning_rate, (list, tuple)):
        scheduler = _from_list(optimizer, list(learning_rate))
    else:
        raise TypeError(f"learning_rate must be a number, a scheduler dict or a list of scheduler dicts, got "
                        f"{type(learning_rate).__name__}.")
    if adjust_learning_rate:
        scheduler = _lr.ScalePerParamLR(optimizer, scheduler)
    return scheduler


def _from_list(optimizer, specs: list):
    if not specs:
        raise ValueError("learning_rate is an empty list; give at least one scheduler dict.")
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict):
            raise TypeError(f"learning_rate[{i}] must be a scheduler dict, got {type(spec).__name__}.")
    kinds = {str(s["main_scheduler"]).lower() for s in specs if s.get("main_scheduler") is not None}
    bad = kinds - {"sequential", "chained"}
    if bad:
        raise ValueError(f"main_scheduler must be 'sequential' or 'chained', got {sorted(bad)}.")
    if len(kinds) > 1:
        raise ValueError("the entries of learning_rate disagree on main_scheduler (both 'sequential' and "
                         "'chained'); set it on one entry or the same on all.")
    chained = kinds == {"chained"}
    schedulers = [_build(optimizer, s, i, in_sequence=not chained and len(specs) > 1) for i, s in enumerate(specs)]
    if len(schedulers) == 1:
        return schedulers[0]
    if chained:
        return _lr.ChainedScheduler(schedulers)
    milestones, total = [], 0
    for i, s in enumerate(schedulers[:-1]):
        if not _is_int(s.total_iters) or s.total_iters <= 0:
            raise ValueError(
                f"learning_rate[{i}] ({type(s).__name__}) needs a positive integer `total_iters`: in a sequence it "
                f"says after how many steps the next scheduler takes over (got {s.total_iters!r})."
            )
        total += int(s.total_iters)
        milestones.append(total)
    return _lr.SequentialLR(optimizer, schedulers, milestones)


__all__ = ["configure_lr_scheduler"]
