"""`cstorch.optim`: drop-in optimizers whose update is one compiled op each, closed-form
LR / weight-decay schedulers, and configuration helpers.

The built-in optimizer classes (`SGD`, `Adam`, ...) are built by `spec_optimizer`, one
per public optimizer spec registered in `cstorch_jax.optim`."""
from . import lr_scheduler, scheduler, weight_decay_scheduler
from .configure import configure_optimizer, configure_param_groups
from .lr_scheduler import *  # noqa: F401,F403  (LRScheduler, ConstantLR, ..., ScalePerParamLR)
from .optimizer import Optimizer
from .scheduler import Scheduler
from .scheduler_config import configure_lr_scheduler
from .spec_optimizer import BUILTIN_OPTIMIZERS, SpecOptimizer
from .weight_decay_scheduler import *  # noqa: F401,F403  (WeightDecayScheduler, ConstantWD, ...)

globals().update(BUILTIN_OPTIMIZERS)

__all__ = [
    "Optimizer", *BUILTIN_OPTIMIZERS,
    "configure_optimizer", "configure_param_groups", "configure_lr_scheduler",
    "scheduler", "lr_scheduler", "weight_decay_scheduler", "Scheduler",
    *lr_scheduler.__all__, *weight_decay_scheduler.__all__,
]
