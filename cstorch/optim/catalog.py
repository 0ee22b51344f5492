"""The names a configuration may give for optimizers and schedulers, and the keys of
older formats that are errors now: the public catalog that configuration layers (the
Trainer YAML in `cstorch.trainer.specs`, the legacy converter) read, so that they
depend on these functions rather than on how `cstorch.optim` defines its classes.

* `optimizer_class(name)` / `optimizer_names()`: the optimizer classes by name, any case
  (those of `cstorch.optim` and Optimizer subclasses defined elsewhere).
* `RENAMED_OPTIMIZER_KEYS`: optimizer keys of older formats -> their replacement (None:
  removed).
* `scheduler_classes()`: the classes of `lr_scheduler` and `weight_decay_scheduler` by
  exact name (their base classes left out).
* `lr_scheduler_class(name)`: the learning-rate scheduler of the cstorch 2.0-2.3
  `learning_rate: {scheduler: <name>}` form (any case, "LR" suffix optional).
* `RENAMED_SCHEDULER_KEYS`: scheduler keys of older releases -> their replacement.
"""
from __future__ import annotations

import types

from . import lr_scheduler, weight_decay_scheduler
from .configure import _RENAMED_KEYS, _subclasses, optimizer_class
from .optimizer import Optimizer
from .spec_optimizer import SpecOptimizer
from .scheduler_config import _OLD_KEYS, _find_class

RENAMED_OPTIMIZER_KEYS = types.MappingProxyType(dict(_RENAMED_KEYS))
RENAMED_SCHEDULER_KEYS = types.MappingProxyType(dict(_OLD_KEYS))


def optimizer_names() -> list[str]:
    """The names `optimizer_class` accepts (in any case), sorted."""
    return sorted({c.__name__ for c in _subclasses(Optimizer)
                   if c is not SpecOptimizer and not c.__name__.startswith("_")})


def scheduler_classes() -> dict[str, type]:
    """Name -> class of every scheduler of `cstorch.optim.lr_scheduler` and
    `cstorch.optim.weight_decay_scheduler` (without their base classes)."""
    table = {}
    for module, base in ((lr_scheduler, "LRScheduler"), (weight_decay_scheduler, "WeightDecayScheduler")):
        for name in module.__all__:
            if name != base:
                table[name] = getattr(module, name)
    return table


def lr_scheduler_class(name) -> type:
    """The learning-rate scheduler class the legacy `learning_rate: {scheduler: name}`
    form names; TypeError / ValueError naming the accepted names otherwise."""
    return _find_class(name)


__all__ = ["optimizer_class", "optimizer_names", "RENAMED_OPTIMIZER_KEYS", "scheduler_classes",
           "lr_scheduler_class", "RENAMED_SCHEDULER_KEYS"]
