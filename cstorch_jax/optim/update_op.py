"""An optimizer update as ONE custom op whose math is an algorithm's jnp rule.

`define_update(algorithm)` exposes an `Algorithm` (`spec.py`) to torch as

    cstorch::<name>(Tensor[] params, Tensor[] grads, Tensor[] state, Tensor? lr,
                    Tensor? weight_decay, float[] hyper) -> Tensor[]

for the parameters of one param group: `state` holds every parameter's state tensors,
parameter after parameter, in the algorithm's field order (the fields its layout
keeps for that parameter's shape); `lr` and `weight_decay` are 0-d float32 tensors;
`hyper` is the frozen hyper-parameters (`spec.encode_hyper`). The result is
[*new params, *new state] in the same layout. The fake kernel gives shapes, the eager
kernel (CPU/GPU backends) runs the jitted rule on the torch tensors, and the lowering
inlines the rule into the compiled step, so eager and compiled numerics come from one
definition.
"""
from __future__ import annotations

import functools
from typing import Optional, Sequence

import jax
import torch
from torch import Tensor

from ..lowering_table import register  # not `..lowering`: that loads every family of lowerings
from .eager import run_eagerly
from .spec import Algorithm, decode_hyper, encode_hyper
from .transforms import Hyper


def apply_rule(algorithm: Algorithm, params, grads, state, lr, weight_decay, hyper) -> list:
    """Run the algorithm's rule over every parameter; arrays in, arrays out, in the
    op's layout. `hyper` is the decoded NamedTuple of frozen hyper-parameters."""
    hp = Hyper(hyper, lr, weight_decay)
    new_params, new_state = [], []
    pos = 0
    for p, g in zip(params, grads):
        state_type, fields = algorithm.layout(hyper, p.shape)
        held = dict(zip(fields, state[pos: pos + len(fields)]))
        pos += len(fields)
        st = state_type(**{f: held.get(f) for f in state_type._fields})
        new_p, st2 = algorithm.update(p, g, st, hp)
        kept = tuple(f for f in st2._fields if getattr(st2, f) is not None)
        if kept != fields:
            raise RuntimeError(f"update rule {algorithm.name} returned state {list(kept)}, expected {list(fields)}")
        new_params.append(new_p.astype(p.dtype))
        new_state.extend(getattr(st2, f).astype(held[f].dtype) for f in fields)
    return [*new_params, *new_state]


def define_update(algorithm: Algorithm):
    """Register `torch.ops.cstorch.<algorithm.name>` (see the module docstring)."""
    name = algorithm.name

    @functools.partial(jax.jit, static_argnums=(4,))
    def jitted(params, grads, state, hyper_tensors, static):
        hyper, has_lr, has_wd = static
        lr = hyper_tensors[0] if has_lr else None
        wd = hyper_tensors[-1] if has_wd else None
        return apply_rule(algorithm, params, grads, state, lr, wd, hyper)

    def eager(params: list[Tensor], grads: list[Tensor], state: list[Tensor], lr: Optional[Tensor],
              weight_decay: Optional[Tensor], hyper: list[float]) -> list[Tensor]:
        static = (decode_hyper(algorithm.hyper, tuple(hyper)), lr is not None, weight_decay is not None)
        tensors = [t for t in (lr, weight_decay) if t is not None]
        return run_eagerly(lambda *a: jitted(*a, static), [params, grads, state, tensors], [*params, *state])

    op = torch.library.custom_op(f"cstorch::{name}", eager, mutates_args=())

    @op.register_fake
    def _(params, grads, state, lr, weight_decay, hyper):
        return [torch.empty_like(t) for t in (*params, *state)]

    @register(getattr(torch.ops.cstorch, name).default)
    def _lower(params, grads, state, lr, weight_decay, hyper):
        return apply_rule(algorithm, params, grads, state, lr, weight_decay,
                          decode_hyper(algorithm.hyper, tuple(hyper)))

    return op


def call_update(op, params: Sequence[Tensor], grads: Sequence[Tensor], states: Sequence[Sequence[Tensor]],
                lr: Optional[Tensor], weight_decay: Optional[Tensor], hyper) -> tuple[list[Tensor], list[list[Tensor]]]:
    """Call an update op on torch tensors, `states[i]` being parameter i's state tensors
    in its layout's field order; returns (new params, new state tensors per parameter)."""
    flat = [t for st in states for t in st]
    out = op(list(params), list(grads), flat, lr, weight_decay, encode_hyper(hyper))
    new_params, rest = out[: len(params)], out[len(params):]
    new_states, pos = [], 0
    for st in states:
        new_states.append(rest[pos: pos + len(st)])
        pos += len(st)
    return new_params, new_states
