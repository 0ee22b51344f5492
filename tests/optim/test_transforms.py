"""Per-parameter transforms with their own state (`cstorch_jax/optim/transforms.py`): a
chain's state is built from its transforms' states, in chain order, and each transform
updates its own part; `when` drops a transform's state with the transform."""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import pytest

from cstorch_jax.optim.spec import counter, like_param
from cstorch_jax.optim.transforms import (Hyper, Transform, Update, chain, maximize, scale_by_learning_rate,
                                          stateless, when)


class Flags(NamedTuple):
    maximize: bool
    averaged: bool


class Sum(NamedTuple):
    total: object


class Count(NamedTuple):
    count: object
    unused: object


def add_total():
    """u = u + total; total' = total + u (its own state)."""
    def update(u, state, hp):
        return u._replace(u=u.u + state.total), Sum(state.total + u.u)
    return Transform(lambda hp, shape: Sum(like_param()), update)


def count_steps():
    def update(u, state, hp):
        return u, state._replace(count=state.count + 1)
    return Transform(lambda hp, shape: Count(counter(), None), update)


def test_a_chain_joins_its_transforms_states_in_order_and_each_updates_its_own():
    rule = chain(maximize(), add_total(), count_steps(), scale_by_learning_rate())
    layout = rule.init(Flags(False, False), (3,))
    assert layout._fields == ("total", "count", "unused")
    assert layout == (like_param(), counter(), None)
    state = type(layout)(jnp.full(3, 2.0), jnp.zeros(()), None)
    done, new = rule(Update(jnp.zeros(3), jnp.ones(3), jnp.asarray(0.5)), state, Hyper(Flags(False, False)))
    assert jnp.allclose(done.p, -0.5 * 3.0)  # p - lr * (g + total)
    assert jnp.allclose(new.total, 3.0) and float(new.count) == 1.0 and new.unused is None


def test_one_stateful_transform_keeps_its_own_state_type():
    layout = chain(maximize(), add_total(), scale_by_learning_rate()).init(Flags(False, False), (2,))
    assert type(layout) is Sum


def test_when_drops_the_state_of_a_transform_it_leaves_out():
    rule = chain(add_total(), when(lambda hp: hp.averaged, count_steps()))
    assert rule.init(Flags(False, True), (2,))._fields == ("total", "count", "unused")
    assert type(rule.init(Flags(False, False), (2,))) is Sum


def test_two_transforms_may_not_keep_a_field_of_the_same_name():
    with pytest.raises(TypeError, match="state fields of the same name"):
        chain(add_total(), add_total()).init(Flags(False, False), (2,))


def test_a_stateless_transform_keeps_nothing():
    assert stateless(lambda u, state, hp: (u, state)).init(Flags(False, False), (2,)) is None
    assert chain(maximize(), scale_by_learning_rate()).init(Flags(False, False), (2,)) is None
