"""An optimizer update as ONE custom op whose math is a pure jnp rule.

A rule updates one parameter:

    rule(p, g, state, hp, **static) -> (p', state')

with `state` a dict of that parameter's state arrays (returned with the same keys),
`hp` a dict of 0-d arrays (the tensor hyper-parameters: learning rate, weight decay)
and `static` the frozen hyper-parameters (floats, bools, tuples). A rule may branch on
`static` and on shapes, never on a traced value.

`define_update(name, rule)` exposes it to torch as

    cstorch::<name>(Tensor[] params, Tensor[] grads, Tensor[] state, Tensor[] hparams,
                    str config) -> Tensor[]

where `state` holds every parameter's state tensors, parameter after parameter, in the
order of the config's `state_keys[i]`; `hparams` are named by `config.hparams`, and
`config` is the JSON of an `UpdateConfig`. The result is [*new params, *new state] in
the same layout. The fake kernel gives shapes, the eager kernel (CPU/GPU backends)
runs the jitted rule on the torch tensors, and the lowering inlines the rule into the
compiled step, so eager and compiled numerics come from one definition.
"""
from __future__ import annotations

import dataclasses
import functools
import json
from typing import Callable, Sequence

import jax
import torch
from torch import Tensor

from ..lowering import register
from .eager import run_eagerly

Rule = Callable[..., tuple]


@dataclasses.dataclass(frozen=True)
class UpdateConfig:
    state_keys: tuple[tuple[str, ...], ...]  # per parameter, the names of its state tensors
    hparams: tuple[str, ...]                 # names of the 0-d tensor hyper-parameters
    static: tuple[tuple[str, object], ...]   # frozen hyper-parameters, sorted by name

    def encode(self) -> str:
        return json.dumps({"state_keys": self.state_keys, "hparams": self.hparams, "static": dict(self.static)},
                          sort_keys=True)

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def decode(text: str) -> "UpdateConfig":
        d = json.loads(text)
        static = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in d["static"].items()))
        return UpdateConfig(tuple(tuple(k) for k in d["state_keys"]), tuple(d["hparams"]), static)


def apply_rule(rule: Rule, params, grads, state, hparams, config: UpdateConfig) -> list:
    """Run `rule` over every parameter; arrays in, arrays out, in the op's layout."""
    hp = dict(zip(config.hparams, hparams))
    static = dict(config.static)
    new_params, new_state = [], []
    pos = 0
    for p, g, keys in zip(params, grads, config.state_keys):
        st = dict(zip(keys, state[pos: pos + len(keys)]))
        pos += len(keys)
        p2, st2 = rule(p, g, st, hp, **static)
        if set(st2) != set(keys):
            raise RuntimeError(f"update rule {rule.__name__} returned state {sorted(st2)}, expected {sorted(keys)}")
        new_params.append(p2.astype(p.dtype))
        new_state.extend(st2[k].astype(st[k].dtype) for k in keys)
    return [*new_params, *new_state]


def define_update(name: str, rule: Rule):
    """Register `torch.ops.cstorch.<name>` for `rule` (see the module docstring)."""
    qualname = f"cstorch::{name}"

    @functools.partial(jax.jit, static_argnums=(4,))
    def jitted(params, grads, state, hparams, config_text):
        return apply_rule(rule, params, grads, state, hparams, UpdateConfig.decode(config_text))

    def eager(params: list[Tensor], grads: list[Tensor], state: list[Tensor], hparams: list[Tensor],
              config: str) -> list[Tensor]:
        return run_eagerly(lambda *a: jitted(*a, config), [params, grads, state, hparams], [*params, *state])

    op = torch.library.custom_op(qualname, eager, mutates_args=())

    @op.register_fake
    def _(params, grads, state, hparams, config):
        return [torch.empty_like(t) for t in (*params, *state)]

    @register(getattr(torch.ops.cstorch, name).default)
    def _lower(params, grads, state, hparams, config):
        return apply_rule(rule, params, grads, state, hparams, UpdateConfig.decode(config))

    return op


def call_update(op, params: Sequence[Tensor], grads: Sequence[Tensor], states: Sequence[dict],
                hparams: dict[str, Tensor], static: dict) -> tuple[list[Tensor], list[dict]]:
    """Call an update op on torch tensors; return (new params, new state dicts)."""
    keys = tuple(tuple(st) for st in states)
    config = UpdateConfig(keys, tuple(hparams), tuple(sorted(static.items()))).encode()
    flat = [t for st in states for t in st.values()]
    out = op(list(params), list(grads), flat, list(hparams.values()), config)
    new_params, rest = out[: len(params)], out[len(params):]
    new_states, pos = [], 0
    for k in keys:
        new_states.append(dict(zip(k, rest[pos: pos + len(k)])))
        pos += len(k)
    return new_params, new_states
