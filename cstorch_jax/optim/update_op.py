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

from .. import stacks
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
        _, fields = algorithm.layout(hyper, p.shape)
        new_p, *new = _rule_of(algorithm, hp, tuple(p.shape), fields)(p, g, *state[pos: pos + len(fields)])
        pos += len(fields)
        new_params.append(new_p)
        new_state.extend(new)
    return [*new_params, *new_state]


def _rule_of(algorithm: Algorithm, hp: Hyper, shape: tuple, fields: tuple[str, ...]):
    """f(p, g, *state in `fields` order) -> (new p, *new state): the rule for one parameter
    of `shape`, keeping the dtypes it is given."""
    state_type, _ = algorithm.layout(hp.static, shape)

    def rule(p, g, *held):
        values = dict(zip(fields, held))
        new_p, st = algorithm.update(p, g, state_type(**{f: values.get(f) for f in state_type._fields}), hp)
        kept = tuple(f for f in st._fields if getattr(st, f) is not None)
        if kept != fields:
            raise RuntimeError(f"update rule {algorithm.name} returned state {list(kept)}, expected {list(fields)}")
        return (new_p.astype(p.dtype), *(getattr(st, f).astype(v.dtype) for f, v in zip(fields, held)))

    return rule


def apply_rule_stacked(algorithm: Algorithm, params, grads, state, lr, weight_decay, hyper,
                       held: stacks.Stacks) -> list:
    """`apply_rule`, where the parameters that are the rows of one stacked array (a kind
    of parameter of a run of repeated layers, `cstorch_jax/stacks.py`), and each of their
    state fields the rows of one too, are updated at once: the rule vmapped over the
    stacked arrays, whose results' rows `held` records. Each row is computed as the
    parameter alone would be: exactly for an elementwise rule; a rule that reduces over
    the parameter (a norm) may sum in another order, a last-bit difference."""
    fields_of, spans, pos = [], [], 0
    for p in params:
        _, fields = algorithm.layout(hyper, p.shape)
        fields_of.append(fields)
        spans.append(range(pos, pos + len(fields)))
        pos += len(fields)
    new_params, new_state = list(params), [None] * len(params)
    hp = Hyper(hyper, lr, weight_decay)
    for group in held.groups(params):  # positions of one stacked array's rows, in row order
        fields = fields_of[group[0]]
        columns = [held.stacked([state[spans[m][f]] for m in group]) for f in range(len(fields))]
        if any(c is None for c in columns) or any(fields_of[m] != fields for m in group):
            continue
        stacked_params = held.stacked([params[m] for m in group])
        stacked_grads = held.stack([grads[m] for m in group])
        rule = _rule_of(algorithm, hp, tuple(params[group[0]].shape), fields)
        rows = [held.rows(r) for r in jax.vmap(rule)(stacked_params, stacked_grads, *columns)]
        for r, m in enumerate(group):
            new_params[m] = rows[0][r]
            new_state[m] = [field_rows[r] for field_rows in rows[1:]]
    rest = [i for i in range(len(params)) if new_state[i] is None]
    if rest:
        plain = apply_rule(algorithm, [params[i] for i in rest], [grads[i] for i in rest],
                           [state[k] for i in rest for k in spans[i]], lr, weight_decay, hyper)
        at = len(rest)
        for i, new_p in zip(rest, plain):
            new_params[i] = new_p
            new_state[i], at = plain[at: at + len(spans[i])], at + len(spans[i])
    return [*new_params, *(v for st in new_state for v in st)]


#: the update ops defined, by their overload: the algorithm of each
ALGORITHMS: dict = {}


def parameter_states(node: torch.fx.Node) -> list[tuple[torch.fx.Node, list[torch.fx.Node]]] | None:
    """For a captured graph's node calling an update op: (parameter, its state nodes in the
    layout's field order) for each parameter it updates; None for any other node."""
    algorithm = ALGORITHMS.get(node.target) if node.op == "call_function" else None
    if algorithm is None:
        return None
    params, _, state = node.args[:3]
    hyper = decode_hyper(algorithm.hyper, tuple(node.args[5]))
    out, pos = [], 0
    for p in params:
        _, fields = algorithm.layout(hyper, tuple(p.meta["val"].shape))
        out.append((p, list(state[pos: pos + len(fields)])))
        pos += len(fields)
    return out


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
        held = stacks.current()
        decoded = decode_hyper(algorithm.hyper, tuple(hyper))
        if held is not None:
            return apply_rule_stacked(algorithm, params, grads, state, lr, weight_decay, decoded, held)
        return apply_rule(algorithm, params, grads, state, lr, weight_decay, decoded)

    ALGORITHMS[getattr(torch.ops.cstorch, name).default] = algorithm

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
