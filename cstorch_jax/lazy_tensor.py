"""`LazyTensor`: a torch tensor whose shape and dtype are known now and whose value
is produced on first use (a device computation still running, a dataset in a file).

Any torch op, `.item()`, `print`, `.numpy()`, `torch.save` or `copy.deepcopy` fetches
the value and works on the plain tensor. Whether a fetched value is kept is the
subclass's choice (`_keeps_value`); an op that writes to the tensor or returns a view
of it always keeps the value, so in-place updates and views stay consistent.
"""
from __future__ import annotations

import torch
from torch.utils._pytree import tree_is_leaf, tree_map


def _written_or_aliased(func) -> tuple[set, set]:
    """Positions and names of the arguments `func` writes to or returns a view of."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return None, None
    marked = [(i, a.name) for i, a in enumerate(schema.arguments) if a.alias_info is not None]
    return {i for i, _ in marked}, {n for _, n in marked}


class LazyTensor(torch.Tensor):
    _keeps_value = True

    @staticmethod
    def __new__(cls, shape, dtype: torch.dtype, *args, **kwargs):
        t = torch.Tensor._make_wrapper_subclass(cls, tuple(shape), dtype=dtype, device="cpu")
        t._value = None
        return t

    def _fetch(self) -> torch.Tensor:
        """The value as a plain CPU tensor of this shape and dtype."""
        raise NotImplementedError

    def is_ready(self) -> bool:
        """True when the value can be had without waiting."""
        return self._value is not None

    def materialize(self, keep: bool = False) -> torch.Tensor:
        """The value as a plain host tensor (fetched now unless kept from before)."""
        if self._value is not None:
            return self._value
        value = self._fetch()
        if keep or self._keeps_value:
            self._value = value
        return value

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        positions, names = _written_or_aliased(func)

        def unwrap(x, keep):
            return tree_map(lambda t: t.materialize(keep) if isinstance(t, LazyTensor) else t, x)

        kwargs = kwargs or {}
        args = [unwrap(a, positions is None or i in positions) for i, a in enumerate(args)]
        kwargs = {k: unwrap(v, names is None or k in names) for k, v in kwargs.items()}
        return func(*args, **kwargs)

    def __repr__(self, *, tensor_contents=None) -> str:
        return repr(self.materialize())

    # direct paths for the common host reads (skip the dispatcher round trip)
    def _number(self):
        """The value as a Python number read without making a torch tensor, where the
        subclass can (a one-element device value); None otherwise."""
        return None

    def item(self):
        n = self._number()
        return self.materialize().item() if n is None else n

    def __float__(self):
        n = self._number()
        return float(self.materialize() if n is None else n)

    def __int__(self):
        n = self._number()
        return int(self.materialize() if n is None else n)

    def __bool__(self):
        n = self._number()
        return bool(self.materialize() if n is None else n)

    def numpy(self, *, force: bool = False):
        return self.materialize().numpy()

    def tolist(self):
        return self.materialize().tolist()

    def __array__(self, dtype=None, copy=None):
        arr = self.materialize().numpy()
        return arr if dtype is None else arr.astype(dtype)

    # serialised and copied as the plain tensor it stands for
    def __reduce_ex__(self, protocol):
        return self.materialize().__reduce_ex__(protocol)

    def __deepcopy__(self, memo):
        return self.materialize().clone()


def map_leaves(fn, tree):
    """`torch.utils._pytree.tree_map(fn, tree)`: the same result, with tuples, lists and
    dicts (exactly those types: the usual step and closure arguments) walked directly,
    without building a tree spec, and every other container left to torch's pytree."""
    kind = type(tree)
    if kind is tuple or kind is list:
        return kind([map_leaves(fn, x) for x in tree])
    if kind is dict:
        return {k: map_leaves(fn, v) for k, v in tree.items()}
    if isinstance(tree, torch.Tensor) or tree_is_leaf(tree):
        return fn(tree)
    return tree_map(fn, tree)


def materialize(x):
    """Plain host tensors for every LazyTensor in a pytree."""
    return map_leaves(lambda t: t.materialize() if isinstance(t, LazyTensor) else t, x)
