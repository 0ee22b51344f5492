"""`cstorch.optim`: drop-in optimizers whose update is one compiled op each, closed-form
LR / weight-decay schedulers, and configuration helpers."""
from . import lr_scheduler, scheduler, weight_decay_scheduler
from .adadelta import Adadelta
from .adafactor import Adafactor
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .configure import configure_optimizer, configure_param_groups
from .lamb import Lamb
from .lion import Lion
from .lr_scheduler import *  # noqa: F401,F403  (LRScheduler, ConstantLR, ..., ScalePerParamLR)
from .muon import Muon
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .scheduler import Scheduler
from .scheduler_config import configure_lr_scheduler
from .sgd import SGD
from .weight_decay_scheduler import *  # noqa: F401,F403  (WeightDecayScheduler, ConstantWD, ...)

__all__ = [
    "Optimizer", "Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "Adamax", "ASGD", "Lamb", "Lion", "Muon",
    "NAdam", "RAdam", "RMSprop", "Rprop", "SGD",
    "configure_optimizer", "configure_param_groups", "configure_lr_scheduler",
    "scheduler", "lr_scheduler", "weight_decay_scheduler", "Scheduler",
    *lr_scheduler.__all__, *weight_decay_scheduler.__all__,
]
