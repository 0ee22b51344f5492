"""Per-parameter update transforms, composed the way optax composes its optimizers.

An optimizer's rule is a chain of transforms over one parameter. Each transform is a
`Transform` of two functions, as an optax `GradientTransformation` is:

    init(hp, shape) -> layout                      (the state this transform keeps)
    update(update, state, hp) -> (update, state)   (also: transform(update, state, hp))

`layout` is a NamedTuple of `spec.Slot`s saying how each state tensor of a parameter of
`shape` starts, None for a field such a parameter does not keep; a transform that keeps
nothing has the layout None. In `update`, `update` is an `Update` in flight, `state` the
transform's own state (that NamedTuple, of arrays) and `hp` the hyper-parameters (`Hyper`:
the learning rate and weight decay as 0-d arrays, the frozen ones as Python values; `init`
gets the frozen ones, whose fields `Hyper` also answers). `chain` builds a rule's state
from its transforms' states: their fields in chain order, each transform updating its own
(the names are torch.optim's state-dict keys, so they must not repeat). A chain starts from

    Update(p=p, u=g, lr=lr)                        (lr cast to p's dtype; None if absent)

and the parameter's new value is the chain's final `p`. The shared transforms are the
steps every torch-style optimizer spells the same way:

    maximize()                 u = -u                    (when hp.maximize)
    add_l2_decay()             u = u + wd * p            (weight decay as an L2 gradient)
    decay_weights()            p = p * (1 - lr * wd)     (decoupled weight decay)
    scale_by_learning_rate()   p = p - lr * u            (p - u when lr is None)

An algorithm adds its own core transform, which turns `u` into its direction and may
set `lr` to its effective step size (Adam's lr / (1 - beta1^t)); a core that computes
the new parameter itself writes `p` and is last in the chain. Every transform is pure
jnp on arrays: a Python branch only on `hp`'s frozen values and on shapes.
"""
from __future__ import annotations

import collections
import functools
import math
from typing import Any, Callable, NamedTuple, Optional

import jax.numpy as jnp


class Update(NamedTuple):
    """One parameter's update in flight through a chain."""

    p: Any                  # the parameter (changed by decoupled decay, or by a core that writes it)
    u: Any                  # the update direction so far (starts as the gradient)
    lr: Optional[Any]       # the step size `scale_by_learning_rate` applies (starts as hp.lr)


class Hyper:
    """An algorithm's hyper-parameters for one param group: `lr` and `weight_decay`
    (0-d arrays or None) and the frozen ones (`static`, a NamedTuple) as attributes."""

    __slots__ = ("static", "lr", "weight_decay")

    def __init__(self, static: NamedTuple, lr=None, weight_decay=None):
        self.static, self.lr, self.weight_decay = static, lr, weight_decay

    def __getattr__(self, name: str):
        return getattr(self.static, name)


class Transform(NamedTuple):
    """One step of a rule: `init(hp, shape)`, the layout of the state it keeps (None:
    none), and `update(update, state, hp) -> (update, state)` (module docstring)."""

    init: Callable[[Any, tuple], Optional[NamedTuple]]
    update: Callable[[Update, Optional[NamedTuple], Hyper], tuple[Update, Optional[NamedTuple]]]

    def __call__(self, update: Update, state, hp: Hyper):
        return self.update(update, state, hp)


def _keeps_nothing(hp, shape: tuple) -> None:
    return None


def stateless(update: Callable) -> Transform:
    """A transform that keeps no state (its `update` gets None and returns it)."""
    return Transform(_keeps_nothing, update)


@functools.lru_cache(maxsize=None)
def _joined_type(fields: tuple[str, ...]) -> type:
    return collections.namedtuple("ChainState", fields)


def chain(*transforms: Transform) -> Transform:
    """Apply `transforms` in order. Its state is theirs, field after field in chain
    order: the one transform's own NamedTuple when only one keeps state, else one
    NamedTuple of all their fields (a name may not repeat)."""

    def layouts(hp, shape):
        return [t.init(hp, shape) for t in transforms]

    def init(hp, shape):
        kept = [layout for layout in layouts(hp, shape) if layout is not None]
        if len(kept) <= 1:
            return kept[0] if kept else None
        fields = tuple(f for layout in kept for f in layout._fields)
        if len(set(fields)) != len(fields):
            raise TypeError(f"the transforms of a chain keep state fields of the same name: {fields}")
        return _joined_type(fields)(*(v for layout in kept for v in layout))

    def update(update: Update, state, hp: Hyper):
        kept = [(i, layout) for i, layout in enumerate(layouts(hp.static, tuple(update.p.shape)))
                if layout is not None]
        if len(kept) <= 1:  # the chain's state is that one transform's own
            for i, t in enumerate(transforms):
                if kept and i == kept[0][0]:
                    update, state = t.update(update, state, hp)
                else:
                    update, _ = t.update(update, None, hp)
            return update, state
        parts, pos = {}, 0
        for i, layout in kept:  # each transform's fields, in chain order
            parts[i] = type(layout)(*state[pos:pos + len(layout)])
            pos += len(layout)
        for i, t in enumerate(transforms):
            update, new = t.update(update, parts.get(i), hp)
            if i in parts:
                parts[i] = new
        return update, type(state)(*(v for i, _ in kept for v in parts[i]))

    return Transform(init, update)


def when(predicate: Callable[[Any], bool], transform: Transform) -> Transform:
    """`transform` where `predicate(hp)` holds (a frozen hyper-parameter), else nothing
    (and then none of its state)."""

    def init(hp, shape):
        return transform.init(hp, shape) if predicate(hp) else None

    def update(update: Update, state, hp: Hyper):
        return transform.update(update, state, hp) if predicate(hp) else (update, state)

    return Transform(init, update)


def maximize() -> Transform:
    """u = -u when `hp.maximize` (ascend instead of descend)."""

    def apply(update: Update, state, hp: Hyper):
        return (update._replace(u=-update.u) if hp.maximize else update), state

    return stateless(apply)


def add_l2_decay() -> Transform:
    """u = u + weight_decay * p: weight decay as an L2 term of the gradient."""

    def apply(update: Update, state, hp: Hyper):
        wd = hp.weight_decay.astype(update.p.dtype)
        return update._replace(u=update.u + wd * update.p), state

    return stateless(apply)


def decay_weights() -> Transform:
    """p = p * (1 - lr * weight_decay): decoupled weight decay, with the chain's step
    size at this point."""

    def apply(update: Update, state, hp: Hyper):
        wd = hp.weight_decay.astype(update.p.dtype)
        return update._replace(p=update.p * (1 - update.lr * wd)), state

    return stateless(apply)


def scale_by_learning_rate() -> Transform:
    """p = p - lr * u (p - u when the chain has no step size)."""

    def apply(update: Update, state, hp: Hyper):
        step = update.u if update.lr is None else update.lr * update.u
        return update._replace(p=update.p - step), state

    return stateless(apply)


def ema(average, value, decay):
    """decay * average + (1 - decay) * value: one step of an exponential moving average,
    in the form Adam's second moment, LAMB's moments, Adadelta, Adafactor and Muon write
    it. The order of the terms is part of the numerics: XLA contracts a product and a sum
    into one fused multiply-add, so `(1 - decay) * value + decay * average` (optax's Lion)
    rounds differently."""
    return decay * average + (1 - decay) * value


def lerp_toward(average, value, decay):
    """average + (1 - decay) * (value - average): the same moving average in torch's
    `lerp_` form (Adam's, Adamax's and NAdam's first moment). It rounds differently from
    `ema`, which is why each algorithm names the form it follows."""
    return average + (1 - decay) * (value - average)


def adam_moments(state, g, hp, first=lerp_toward):
    """(m', v') of the gradient g from `state.exp_avg` and `state.exp_avg_sq` (any state
    with these fields: Adam, NAdam, RAdam, LAMB), with `hp.beta1` and `hp.beta2`:
    m' = first(m, g, beta1) and v' = ema(v, g^2, beta2). `first` is `lerp_toward` as
    torch.optim computes Adam, or `ema` as the real system computes LAMB."""
    return first(state.exp_avg, g, hp.beta1), ema(state.exp_avg_sq, g * g, hp.beta2)


def one_minus_power(beta: float, t):
    """1 - beta^t for a float32 step count t, accurate to float32 rounding even when
    beta is close to 1 (1 - float32(0.999) alone is off by 1e-5 relative)."""
    return -jnp.expm1(t * math.log(beta)) if beta > 0 else jnp.where(t > 0, 1.0, 0.0).astype(t.dtype)
