"""Optimizer update rules as pure jnp functions, each exposed to torch as ONE custom op
(`torch.ops.cstorch.<name>`, see `update_op`): the fake kernel gives shapes, the eager
kernel runs the rule on torch tensors, the lowering inlines it into the compiled step."""
from .adadelta import adadelta_rule, adadelta_update
from .adafactor import adafactor_rule, adafactor_update
from .adagrad import adagrad_rule, adagrad_update
from .adam import adam_rule, adam_update
from .adamax import adamax_rule, adamax_update
from .asgd import asgd_rule, asgd_update
from .lamb import lamb_rule, lamb_update
from .lion import lion_rule, lion_update
from .muon import muon_rule, muon_update
from .nadam import nadam_rule, nadam_update
from .radam import radam_rule, radam_update
from .rmsprop import rmsprop_rule, rmsprop_update
from .rprop import rprop_rule, rprop_update
from .sgd import sgd_rule, sgd_update
from .update_op import UpdateConfig, apply_rule, call_update, define_update

__all__ = [
    "define_update", "call_update", "apply_rule", "UpdateConfig", "adadelta_rule", "adadelta_update",
    "adafactor_rule", "adafactor_update", "adagrad_rule", "adagrad_update", "adam_rule", "adam_update",
    "adamax_rule", "adamax_update", "asgd_rule", "asgd_update", "lamb_rule", "lamb_update", "lion_rule",
    "lion_update", "muon_rule", "muon_update", "nadam_rule", "nadam_update", "radam_rule", "radam_update",
    "rmsprop_rule", "rmsprop_update", "rprop_rule", "rprop_update", "sgd_rule", "sgd_update",
]
