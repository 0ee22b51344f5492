"""`cstorch.utils.nest`: walking and mapping nested structures of tensors.

A *scope* is the list of keys (as strings) from the root of a structure to an item:
dict keys, list/tuple indices (namedtuple fields by index). Two walks exist:

* `visit_structure(data, select_fn, strict, scope)` follows the registered *visit
  functions* (dict and UserDict by key, list and tuple by index; more with
  `register_visit_fn`) and yields `(scope, item)` for every item `select_fn` accepts; with
  `strict`, an item that is neither a registered container nor selected is a ValueError.
* `map_structure(map_fn, data, select_fn, scope)` flattens with torch's pytree and
  rebuilds the same structure with `map_fn(scope, item)` in place of every selected item;
  `recurse_spec(spec)` yields the scope of each leaf of a pytree spec in leaf order.

"Lazy" tensors are the real system's device tensors; here the tensors of a CSX backend
live on its torch device (`cstorch.current_torch_device()`), so on CSX every tensor on
that device counts as one and off CSX none does.

Differences from the real system:
    "Lazy" tensors are the tensors of a CSX backend (see above). Visit functions
    are serialized with pickle (so they must be module-level functions), not dill.
"""
from __future__ import annotations

import pickle
import warnings
from collections import UserDict
from inspect import isclass
from typing import Any, Callable, Dict, Generator, List, Optional, Tuple, Union

import torch
from torch.utils._pytree import TreeSpec, tree_flatten, tree_unflatten

from .._backend import current_torch_device, use_cs

TScope = List[str]
TNested = Union[Any, list, tuple, dict]
TSelectFn = Callable[[Any], bool]
TVisitFnRet = Generator[Tuple[List[str], Any], None, None]

#: container types (a tuple of classes) -> the function that yields ([key], child) pairs
_VISIT_FNS: Dict[tuple, Callable] = {}


def _key(types) -> tuple:
    return tuple(sorted(set(types), key=lambda t: f"{t.__module__}.{t.__qualname__}"))


def register_visit_fn(*types):
    """Decorator: `fn(struct)` yields `([key], child)` for every child of a structure of
    one of `types`; `visit_structure` then walks into such structures.

    Args:
        *types: the container types the decorated function visits.
    """

    def decorator(fn):
        for t in types:
            if not isclass(t):
                raise TypeError(f"Expected a type, got {t}")
        key = _key(types)
        if key in _VISIT_FNS and _VISIT_FNS[key] is not fn:
            warnings.warn(f"Visit function for {key} was previously registered to\n{_VISIT_FNS[key]}\n"
                          f"Overwriting with\n{fn}.")
        _VISIT_FNS[key] = fn
        return fn

    return decorator


def unregister_visit_fn(*types) -> None:
    """Forget the visit function registered for exactly these types (or for any one
    type given alone).

    Args:
        *types: the types given to `register_visit_fn`.
    """
    _VISIT_FNS.pop(_key(types), None)
    for t in types:
        _VISIT_FNS.pop((t,), None)


def find_visit_fn(struct: TNested) -> Optional[Callable[[TNested], TVisitFnRet]]:
    """The visit function of the first registration whose types `struct` is an instance of.

    Args:
        struct: a structure.
    """
    for types, fn in _VISIT_FNS.items():
        if isinstance(struct, types):
            return fn
    return None


def serialize_visit_fns() -> Dict[str, str]:
    """The registrations as hex strings (pickled types -> pickled function). Data
    workers here are threads of this process and share the registry; this is for code
    that ships it elsewhere. Functions must be picklable (defined at module level)."""
    out = {}
    for types, fn in _VISIT_FNS.items():
        try:
            out[pickle.dumps(types).hex()] = pickle.dumps(fn).hex()
        except (pickle.PicklingError, AttributeError, TypeError) as e:
            raise RuntimeError(f"Cannot serialize the visit function {fn} registered for {types}: {e}. Define it "
                               f"at module level so that it pickles by reference.") from e
    return out


def deserialize_visit_fns(visit_fn_map: Dict[str, str]) -> None:
    """Register the visit functions of a `serialize_visit_fns()` map.

    Args:
        visit_fn_map: the map `serialize_visit_fns()` returned.
    """
    for types, fn in visit_fn_map.items():
        register_visit_fn(*pickle.loads(bytes.fromhex(types)))(pickle.loads(bytes.fromhex(fn)))


@register_visit_fn(dict, UserDict)
def visit_dict(struct: Union[dict, UserDict]) -> TVisitFnRet:
    """A dict's children, scoped by their key.

    Args:
        struct: a dict or UserDict.
    """
    for k, v in struct.items():
        yield [str(k)], v


@register_visit_fn(list, tuple)
def visit_list_tuple(struct: Union[tuple, list]) -> TVisitFnRet:
    """A list's or tuple's children, scoped by their index.

    Args:
        struct: a list or tuple.
    """
    for i, v in enumerate(struct):
        yield [str(i)], v


def visit_structure(data_structure: TNested, select_fn: TSelectFn, strict: bool = False,
                    scope: Optional[TScope] = None) -> Generator[Tuple[TScope, Any], None, None]:
    """Yield `(scope, item)` for every item of the nested structure that `select_fn`
    accepts, in the visit functions' order.

    Args:
        data_structure: the nested structure.
        select_fn: `item -> bool`: which leaves to yield.
        strict: raise ValueError on a leaf that is neither a known container nor selected.
        scope: a prefix of every scope (a list of keys).
    """
    scope = list(scope or [])
    visit = find_visit_fn(data_structure)
    if visit is not None:
        for pair in visit(data_structure):
            if not isinstance(pair, (list, tuple)):
                raise TypeError(f"Expected visit function to return a list or tuple, got {type(pair)}")
            if len(pair) != 2:
                raise ValueError(f"Expected visit function to return a list or tuple of length 2, got {len(pair)}")
            sub, child = pair
            yield from visit_structure(child, select_fn, strict, scope + list(sub))
    elif select_fn(data_structure):
        yield scope, data_structure
    elif strict:
        raise ValueError(f"Unknown data structure: {data_structure}")


def visit_torch_tensors(data_structure: TNested, strict: bool = False,
                        scope: Optional[TScope] = None) -> Generator[Tuple[TScope, torch.Tensor], None, None]:
    """Yield `(scope, tensor)` for every torch tensor of the structure.

    Args:
        data_structure: the nested structure.
        strict: raise ValueError on a leaf that is neither a known container nor a tensor.
        scope: a prefix of every scope (a list of keys).
    """
    yield from visit_structure(data_structure, lambda x: isinstance(x, torch.Tensor), strict, scope)


def visit_device_tensors(data_structure: TNested, device_type: str, strict: bool = False,
                         scope: Optional[TScope] = None) -> Generator[Tuple[TScope, torch.Tensor], None, None]:
    """Yield `(scope, tensor)` for every tensor whose device type is `device_type`.

    Args:
        data_structure: the nested structure.
        device_type: the device type, e.g. "cpu" or "cuda".
        strict: raise ValueError on a leaf that is neither a known container nor a tensor.
        scope: a prefix of every scope (a list of keys).
    """
    for s, t in visit_torch_tensors(data_structure, strict, scope):
        if t.device.type == device_type:
            yield s, t


def _is_lazy(x) -> bool:
    return isinstance(x, torch.Tensor) and use_cs() and x.device == current_torch_device()


def visit_lazy_tensors(data_structure: TNested, strict: bool = False,
                       scope: Optional[TScope] = None) -> Generator[Tuple[TScope, torch.Tensor], None, None]:
    """Yield `(scope, tensor)` for every device tensor of a CSX backend (see the module
    docstring).

    Args:
        data_structure: the nested structure.
        strict: raise ValueError on a leaf that is neither a known container nor a device tensor.
        scope: a prefix of every scope (a list of keys).
    """
    yield from visit_structure(data_structure, _is_lazy, strict, scope)


def _children(spec: TreeSpec) -> list:
    return list(spec.children()) if hasattr(spec, "children") else list(spec.children_specs)


def _child_keys(spec: TreeSpec, n: int) -> list:
    context = spec.context
    if isclass(context) and issubclass(context, tuple) and hasattr(context, "_fields"):  # a namedtuple
        return list(range(n))
    if spec.type is not None and issubclass(spec.type, dict) and hasattr(spec.type, "default_factory"):
        context = context[1]  # defaultdict: (default_factory, keys)
    if isinstance(context, (list, tuple)) and len(context) == n:
        return list(context)
    return list(range(n))


def recurse_spec(spec: TreeSpec, scope: Optional[TScope] = None) -> Generator[TScope, None, None]:
    """Yield the scope of every leaf of a torch pytree spec, in leaf order.

    Args:
        spec: a torch pytree TreeSpec.
        scope: a prefix of every scope (a list of keys).
    """
    if spec.num_leaves == 0:
        return
    scope = list(scope or [])
    children = _children(spec)
    if not children:
        yield scope
        return
    for key, child in zip(_child_keys(spec, len(children)), children):
        yield from recurse_spec(child, scope + [str(key)])


def map_structure(map_fn: Callable, data_structure: TNested, select_fn: TSelectFn,
                  scope: Optional[TScope] = None):
    """The structure rebuilt with `map_fn(scope, item)` in place of every leaf that
    `select_fn` accepts.

    Args:
        map_fn: `(scope, item) -> new item`.
        data_structure: the nested structure (a torch pytree).
        select_fn: `item -> bool`: which leaves to map.
        scope: a prefix of every scope (a list of keys).
    """
    leaves, spec = tree_flatten(data_structure)
    mapped = [map_fn(s, x) if select_fn(x) else x for s, x in zip(recurse_spec(spec, scope), leaves)]
    return tree_unflatten(mapped, spec)


def map_torch_tensors(map_fn: Callable, data_structure: TNested, scope: Optional[TScope] = None):
    """`map_structure` over the torch tensors.

    Args:
        map_fn: `(scope, tensor) -> new item`.
        data_structure: the nested structure (a torch pytree).
        scope: a prefix of every scope (a list of keys).
    """
    return map_structure(map_fn, data_structure, lambda x: isinstance(x, torch.Tensor), scope)


def map_lazy_tensors(map_fn: Callable, data_structure: TNested, scope: Optional[TScope] = None):
    """`map_structure` over the device tensors of a CSX backend.

    Args:
        map_fn: `(scope, tensor) -> new item`.
        data_structure: the nested structure (a torch pytree).
        scope: a prefix of every scope (a list of keys).
    """
    return map_structure(map_fn, data_structure, _is_lazy, scope)


def diff(data_structure_1: TNested, data_structure_2: TNested) -> Generator[str, None, None]:
    """Describe where two structures differ: their dotted keys, then each value that
    differs under the same key.

    Args:
        data_structure_1: a nested structure.
        data_structure_2: the other one.
    """

    def flat(data):
        leaves, spec = tree_flatten(data)
        return {".".join(s): v for v, s in zip(leaves, recurse_spec(spec))}

    one, two = flat(data_structure_1), flat(data_structure_2)
    if set(one) != set(two):
        yield (f"Data structures have differing keys.\n"
               f"Keys only in data structure 1: {sorted(set(one) - set(two))}\n"
               f"Keys only in data structure 2: {sorted(set(two) - set(one))}\n")
    for key, a in one.items():
        if key not in two:
            continue
        b = two[key]
        same = torch.equal(a, b) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) else a == b
        if not (same if isinstance(same, bool) else bool(torch.as_tensor(same).all())):
            yield f"Found mismatching values for {key}: {a} != {b}"


__all__ = [
    "TScope", "TNested", "TSelectFn", "TVisitFnRet", "register_visit_fn", "unregister_visit_fn", "find_visit_fn",
    "serialize_visit_fns", "deserialize_visit_fns", "visit_dict", "visit_list_tuple", "visit_structure",
    "visit_torch_tensors", "visit_device_tensors", "visit_lazy_tensors", "recurse_spec", "map_structure",
    "map_torch_tensors", "map_lazy_tensors", "diff",
]
