"""Optimizers as specs: each algorithm (`algorithms/<name>.py`) is a chain of per-parameter
jnp transforms (`transforms.py`), its state built from theirs, and the public classes
of the real API built on it (`spec.py`), exposed to torch as ONE custom op
(`torch.ops.cstorch.<name>`, see `update_op`): the fake kernel gives shapes, the eager
kernel runs the rule on torch tensors, the lowering inlines it into the compiled step."""
from . import algorithms  # noqa: F401  (registers every algorithm and its update op)
from .registry import public_optimizers, register, registered_algorithms
from .spec import NO_ANNOTATION, REQUIRED, Algorithm, PublicOptimizer, Slot, counter, decode_hyper, encode_hyper, like_param, shaped
from .transforms import (
    Hyper,
    Transform,
    Update,
    add_l2_decay,
    chain,
    decay_weights,
    maximize,
    one_minus_power,
    scale_by_learning_rate,
    stateless,
    when,
)
from .update_op import apply_rule, call_update, define_update

__all__ = [
    "Algorithm", "PublicOptimizer", "Slot", "REQUIRED", "NO_ANNOTATION", "like_param", "counter", "shaped", "register",
    "public_optimizers", "registered_algorithms", "encode_hyper", "decode_hyper", "define_update", "call_update",
    "apply_rule", "Hyper", "Transform", "Update", "stateless", "chain", "when", "maximize", "add_l2_decay", "decay_weights",
    "scale_by_learning_rate", "one_minus_power",
]
