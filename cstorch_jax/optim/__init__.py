"""Optimizer update rules as pure jnp functions, each exposed to torch as ONE custom op
(`torch.ops.cstorch.*`) whose fake kernel gives shapes, whose eager kernel runs the
jnp rule on torch tensors, and whose lowering inlines the rule into the compiled step."""
from .adamw import adamw_rule, adamw_update
from .sgd import sgd_rule, sgd_update

__all__ = ["sgd_rule", "sgd_update", "adamw_rule", "adamw_update"]
