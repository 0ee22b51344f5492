"""`cstorch_jax.lazy_tensor.map_leaves`: torch's `tree_map`, walking the builtin
containers itself (the closure arguments of every step go through it)."""
from collections import OrderedDict, namedtuple

import torch
from torch.utils._pytree import tree_flatten, tree_map

from cstorch_jax.lazy_tensor import map_leaves

Pair = namedtuple("Pair", "a b")


def _same_tree(x, y):
    xs, x_spec = tree_flatten(x)
    ys, y_spec = tree_flatten(y)
    assert x_spec == y_spec
    assert all(type(a) is type(b) and (torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b)
               for a, b in zip(xs, ys))


def test_map_leaves_is_tree_map_on_every_kind_of_tree():
    t = torch.arange(3.0)
    trees = [
        t, 3, None, "s", 2.5,
        ((t, 1), {}),
        [t, (t, [None, {"k": t, "j": 4}])],
        {"b": t, "a": [t, 2.0]},  # insertion order kept
        (Pair(t, 1), OrderedDict(z=t, y=3)),  # other containers: torch's pytree
        ({"deep": Pair(a=[t], b={"x": (t,)})}, {"kw": t}),
    ]

    def double(x):
        return x * 2 if isinstance(x, torch.Tensor) else x

    for tree in trees:
        _same_tree(map_leaves(double, tree), tree_map(double, tree))


def test_map_leaves_builds_new_containers_and_calls_fn_once_per_leaf():
    t = torch.zeros(1)
    tree = ([t, t], {"a": (t,)})
    seen = []
    out = map_leaves(lambda x: seen.append(x) or 7, tree)
    assert out == ([7, 7], {"a": (7,)}) and len(seen) == 3
    assert out[0] is not tree[0] and tree == ([t, t], {"a": (t,)})
