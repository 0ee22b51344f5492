"""An optimizer as one spec: the algorithm (state layout, update rule, update op) and the
public classes built on it (the real API's names, defaults and checks).

An `Algorithm` says, for one parameter,

- `hyper`: a NamedTuple type of the frozen hyper-parameters (floats, ints, bools,
  optional floats, pairs of floats) that the rule is specialised on;
- `rule`: the update as a chain of transforms (`transforms.py`). Each transform that
  keeps state says its layout (`init`), a NamedTuple of `Slot`s (how each state tensor
  starts) with None for the fields a parameter does not keep; the chain's layout,
  `state(hyper, shape)`, is theirs in chain order, and its field order is the order of
  torch.optim's state-dict keys. The rule runs with the state as that NamedTuple of arrays.

A `PublicOptimizer` is one class of the real API on an algorithm (`Adam` and `AdamW`
share one): its signature after `params` (names, annotations and defaults: the real
API's, which config builders read), `check(args)` (the
ValueErrors of the real API, in its order), `defaults(args)` (the param-group values,
in the real key order) and `hyper(group)` (a param group's frozen hyper-parameters).
The learning rate and weight decay are no part of `hyper`: they reach the rule as 0-d
arrays (`Hyper.lr`, `Hyper.weight_decay`), state of a compiled step.

`registry.register(algorithm, *public)` defines the algorithm's update op
(`update_op.py`) and lists its classes; the facade (`cstorch.optim`) builds one class
per `PublicOptimizer`. Every algorithm is a module of `cstorch_jax/optim/algorithms/`,
imported with the package: adding an optimizer is adding one such module (and its test).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import typing
from typing import Any, Callable, Mapping, NamedTuple, Optional

import torch

from .transforms import Hyper, Transform, Update

REQUIRED = object()  # marks a signature argument without a default
NO_ANNOTATION = inspect.Parameter.empty  # a signature argument given as (name, default)


class Slot(NamedTuple):
    """How one state tensor of a parameter starts."""

    shape: Optional[tuple]   # None: the parameter's shape
    fill: Any                # a number, or the name of a param-group value (e.g. "lr") to start from
    float32: bool            # a float32 tensor (step counters, products); else the parameter's dtype


def like_param(fill: Any = 0.0) -> Slot:
    """A tensor of the parameter's shape and dtype."""
    return Slot(None, fill, False)


def counter(fill: float = 0.0) -> Slot:
    """A float32 0-d tensor (step counts, running products, scalar step sizes)."""
    return Slot((), fill, True)


def shaped(shape: tuple, fill: float = 0.0) -> Slot:
    """A tensor of the parameter's dtype and the given shape (factored moments)."""
    return Slot(tuple(shape), fill, False)


@dataclasses.dataclass(frozen=True)
class Algorithm:
    name: str                                             # the update op: torch.ops.cstorch.<name>
    hyper: type                                           # NamedTuple type of the frozen hyper-parameters
    rule: Transform                                       # a chain of transforms; its `init` is the state layout
    check_param: Optional[Callable[[torch.Tensor], None]] = None  # refuses a parameter it cannot update

    def state(self, hyper, shape: tuple) -> NamedTuple:
        """The state layout of a parameter of `shape`: the rule's (`rule.init`), built
        from its transforms' states; a NamedTuple of `Slot`s, None for the fields such a
        parameter does not keep."""
        layout = self.rule.init(hyper, tuple(shape))
        if layout is None:
            raise TypeError(f"{self.name}: no transform of the rule keeps state (an optimizer keeps at least one "
                            f"tensor per parameter)")
        return layout

    def update(self, p, g, state: NamedTuple, hp: Hyper):
        """One parameter's update, `(p', state')`: the rule's chain started from
        Update(p, g, lr) with lr cast to p's dtype (jnp arrays in and out)."""
        done, new = self.rule(Update(p, g, None if hp.lr is None else hp.lr.astype(p.dtype)), state, hp)
        return done.p, new

    def layout(self, hyper, shape: tuple) -> tuple[type, tuple[str, ...]]:
        """The state NamedTuple type and the fields a parameter of `shape` keeps."""
        slots = self.state(hyper, tuple(shape))
        return type(slots), tuple(f for f, s in zip(slots._fields, slots) if s is not None)


@dataclasses.dataclass(frozen=True)
class PublicOptimizer:
    name: str                                             # the class name in cstorch.optim
    algorithm: Algorithm
    signature: tuple[tuple, ...]                          # (argument, annotation, default or REQUIRED) after
    #                                                       `params`; (argument, default) leaves it unannotated
    check: Callable[[Mapping[str, Any]], None]            # raises the real API's ValueErrors
    defaults: Callable[[Mapping[str, Any]], dict]         # param-group defaults, in the real key order
    hyper: Callable[[Mapping[str, Any]], Any]             # a param group's frozen hyper-parameters
    doc: str = ""
    global_step: bool = False                             # `enable_global_step` of the optimizer
    convert_state_dict: Optional[Callable[[dict], dict]] = None   # a foreign layout into torch's keys
    check_group: Optional[Callable[[Mapping[str, Any]], None]] = None  # before each update of a group

    def parameters(self) -> tuple[tuple[str, Any, Any], ...]:
        """The signature as (argument, annotation or NO_ANNOTATION, default or REQUIRED)."""
        return tuple((entry[0], NO_ANNOTATION, entry[1]) if len(entry) == 2 else tuple(entry)
                     for entry in self.signature)


# -- frozen hyper-parameters as the op's float list --------------------------------------
@functools.lru_cache(maxsize=None)
def _field_kinds(hyper_type: type) -> tuple[tuple[str, str], ...]:
    hints = typing.get_type_hints(hyper_type)
    kinds = []
    for name in hyper_type._fields:
        hint = hints[name]
        if hint in (float, int, bool):
            kind = hint.__name__
        elif hint == Optional[float]:
            kind = "optional"
        elif hint == tuple[float, float]:
            kind = "pair"
        else:
            raise TypeError(f"{hyper_type.__name__}.{name}: a frozen hyper-parameter is a float, int, bool, "
                            f"Optional[float] or tuple[float, float], got {hint}")
        kinds.append((name, kind))
    return tuple(kinds)


def encode_hyper(hyper) -> list[float]:
    """The frozen hyper-parameters as the update op's `float[]` argument."""
    out: list[float] = []
    for (_, kind), value in zip(_field_kinds(type(hyper)), hyper):
        if kind == "optional":
            out += [0.0, 0.0] if value is None else [1.0, float(value)]
        elif kind == "pair":
            out += [float(value[0]), float(value[1])]
        else:
            out.append(float(value))
    return out


@functools.lru_cache(maxsize=None)
def decode_hyper(hyper_type: type, values: tuple[float, ...]):
    """Inverse of `encode_hyper`."""
    fields, pos = {}, 0
    for name, kind in _field_kinds(hyper_type):
        if kind == "optional":
            fields[name] = values[pos + 1] if values[pos] else None
            pos += 2
        elif kind == "pair":
            fields[name] = (values[pos], values[pos + 1])
            pos += 2
        else:
            fields[name] = {"int": int, "bool": bool, "float": float}[kind](values[pos])
            pos += 1
    return hyper_type(**fields)


# -- the real API's argument checks ---------------------------------------------------------
def check_hyperparameter(value, low: float = 0.0, *, high: float | None = None, label: str) -> None:
    """ValueError "Invalid <label>: <value>" unless low <= value (< high); 0-d tensors pass."""
    if isinstance(value, torch.Tensor):
        return
    if value is None or value < low or (high is not None and value >= high):
        raise ValueError(f"Invalid {label}: {value}")


def check_betas(betas) -> None:
    for i, beta in enumerate(betas):
        check_hyperparameter(beta, high=1.0, label=f"beta parameter at index {i}")


def check_adam_hyperparameters(args: Mapping[str, Any]) -> None:
    """The checks every Adam-like optimizer makes, in order: lr, eps, weight_decay >= 0
    and 0 <= beta < 1 for each beta."""
    check_hyperparameter(args["lr"], label="learning rate")
    check_hyperparameter(args["eps"], label="epsilon value")
    check_betas(args["betas"])
    check_hyperparameter(args["weight_decay"], label="weight_decay value")


# -- state dicts of the real system -----------------------------------------------------------
def steps_from_beta_powers(state_dict: dict) -> dict:
    """The real system's Adam-family optimizers keep beta1^(t+1) after t steps as
    `beta1_power` (and beta2's as `beta2_power`) where torch keeps `step` = t: rewrite
    such a state dict into torch's layout. Other state dicts are returned unchanged."""
    if not any("beta1_power" in st for st in state_dict.get("state", {}).values()):
        return state_dict
    beta1_of = {i: g.get("betas", (0.9, 0.999))[0] for g in state_dict["param_groups"] for i in g["params"]}
    converted = {}
    for i, st in state_dict["state"].items():
        st = dict(st)
        power = st.pop("beta1_power", None)
        st.pop("beta2_power", None)
        if power is not None and "step" not in st:
            beta1, power = float(beta1_of.get(i, 0.9)), float(power)
            t = 0
            if 0 < beta1 < 1 and power > 0:
                t = max(round(math.log(power) / math.log(beta1)) - 1, 0)
            st["step"] = torch.tensor(float(t))
        converted[i] = st
    return {**state_dict, "state": converted}
