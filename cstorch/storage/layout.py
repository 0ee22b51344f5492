"""The checkpoint layout (format 0.5), independent of where it is stored.

A state dict is flattened with torch's pytree. Every leaf gets a dotted key (dict keys
as `str(key)`, list/tuple positions as `0, 1, ...`: `model.fc.weight`,
`optimizer.param_groups.0.betas.1`) and one `Entry`: its per-object metadata (a JSON
dict whose `__TYPE__` names the serializer) and, for tensors, arrays and pickled
objects, a payload. Python numbers, strings and None live in metadata only; a tensor
that appears twice (tied weights) is stored once and its alias becomes a
`LinkedObject` entry. The tree structure itself is `[skeleton, treespec]`, the
skeleton being the nesting with every leaf replaced by "*".

Payload arrays carry their natural numpy dtype (bfloat16 as `ml_dtypes.bfloat16`);
a storage backend decides how to hold them (H5 keeps bfloat16 as int16 bit patterns).
"""
from __future__ import annotations

import json
import pickle
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import ml_dtypes
import numpy as np
import torch
import torch.utils._pytree as pytree

from .._version import __version__

FORMAT_VERSION = 0.5

# RtFx element-type codes of the real system, by torch dtype (int8 and complex have none).
RTFX_CODES = {
    torch.bool: 1, torch.int16: 3, torch.int32: 4, torch.int64: 5, torch.uint8: 6, torch.uint16: 7,
    torch.uint32: 8, torch.uint64: 9, torch.float16: 10, torch.float32: 11, torch.float64: 12, torch.bfloat16: 15,
}
NUMPY_DTYPES = {
    torch.bool: np.bool_, torch.int8: np.int8, torch.int16: np.int16, torch.int32: np.int32, torch.int64: np.int64,
    torch.uint8: np.uint8, torch.uint16: np.uint16, torch.uint32: np.uint32, torch.uint64: np.uint64,
    torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64,
    torch.bfloat16: ml_dtypes.bfloat16, torch.complex64: np.complex64, torch.complex128: np.complex128,
}
TORCH_DTYPES = {str(d): d for d in NUMPY_DTYPES}

TENSOR = "TorchTensorSerializer"
NUMPY = "NumpyArraySerializer"
OBJECT = "ObjectSerializer"
LINK = "LinkedObject"
SCALAR = "ScalarSerializer"
STRING = "StringSerializer"
NONE = "NoneSerializer"


@dataclass
class Entry:
    """One leaf: `metadata` (JSON-able, `__TYPE__` names its kind) and, for tensors,
    arrays and pickled objects, `payload()` giving the np.ndarray or bytes."""
    key: str
    metadata: dict
    payload: Optional[Callable[[], Any]] = None

    @property
    def kind(self) -> str:
        return self.metadata["__TYPE__"]


@dataclass
class Layout:
    skeleton: Any
    treespec: str
    entries: list[Entry] = field(default_factory=list)
    cstorch_version: str = __version__

    @property
    def spec_json(self) -> str:
        return json.dumps([self.skeleton, self.treespec], indent=4)

    def by_key(self) -> dict[str, Entry]:
        return {e.key: e for e in self.entries}


class PickledObject:
    """A Python object stored pickled in a checkpoint and not unpickled, because
    unpickling runs code from the file. `unpickle()` does it when the file is trusted;
    saving a PickledObject writes its bytes back unchanged."""

    def __init__(self, key: str, data: bytes):
        self.key = key
        self.data = data

    def unpickle(self):
        return _unpickle(self.key, self.data)

    def __repr__(self) -> str:
        return (f"PickledObject(key={self.key!r}, {len(self.data)} bytes; not unpickled: pass allow_pickle=True "
                f"to cstorch.load or call .unpickle() if you trust the file)")


def _unpickle(key: str, data: bytes):
    try:
        return pickle.loads(data)
    except ModuleNotFoundError as e:
        raise RuntimeError(f"Could not unpickle the object at {key!r}: {e}. Objects written by the Cerebras "
                           f"library are dill pickles; `pip install dill` to read those.") from e


# -- keys ------------------------------------------------------------------------------
def flat_keys(spec: pytree.TreeSpec) -> list[str]:
    """Dotted key of every leaf of `spec`, in flatten order."""
    keys: list[str] = []

    def walk(s, prefix):
        if s.is_leaf():
            keys.append(".".join(prefix))
            return
        if s.type in (dict, OrderedDict):
            names = s.context
        elif s.type is defaultdict:
            names = s.context[1]
        else:
            names = range(s.num_children)
        for name, child in zip(names, s.children()):
            walk(child, prefix + [str(name)])

    walk(spec, [])
    return keys


def _skeleton(spec: pytree.TreeSpec):
    skeleton = pytree.tree_unflatten(["*"] * spec.num_leaves, spec)
    try:
        json.dumps(skeleton)
    except TypeError:
        return None
    return skeleton


def key_metadata(key: str, metadata: dict) -> str:
    """The root attribute `<key>.__metadata__`: the one-entry tree `{key: leaf}` and
    the leaf's own metadata."""
    spec = pytree.tree_structure({key: 0})
    return json.dumps({"__spec__": [{key: "*"}, pytree.treespec_dumps(spec)], "__objects__": [key],
                       f"{key}.__metadata__": metadata}, indent=4)


def entry_metadata(key: str, key_attr: str) -> dict:
    """The leaf metadata inside a `<key>.__metadata__` attribute."""
    m = json.loads(key_attr)
    if m.get("__objects__") != [key] or f"{key}.__metadata__" not in m:
        raise RuntimeError(f"The entry {key!r} is stored as a nested object (e.g. an external link to another "
                           f"file), which cstorch does not read.")
    return m[f"{key}.__metadata__"]


# -- tensors <-> numpy ---------------------------------------------------------------------
def tensor_to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def numpy_to_tensor(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    a = np.require(a, requirements="C")
    if dtype == torch.bfloat16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.astype(NUMPY_DTYPES[dtype], copy=True))


def entry_tensor(entry: "Entry", shape, dtype: torch.dtype) -> torch.Tensor:
    """The tensor an entry's payload holds."""
    return numpy_to_tensor(entry.payload(), dtype).reshape(shape)


def tensor_metadata(shape, dtype: torch.dtype) -> dict:
    meta = {"__TORCH__": True, "shapes": [list(shape)], "dtypes": [str(dtype)]}
    if dtype in RTFX_CODES:
        meta["rtfx_dtypes"] = [RTFX_CODES[dtype]]
    from ..backends import csx  # `compressed` records the compress_weights flag, as the real writer does

    meta.update({"__TYPE__": TENSOR, "__NUMPY__": True, "compressed": bool(csx.performance.compress_weights)})
    return meta


def tensor_dtype(key: str, metadata: dict) -> torch.dtype:
    name = metadata["dtypes"][0]
    if name not in TORCH_DTYPES:
        raise RuntimeError(f"The tensor {key!r} has dtype {name}, which cstorch cannot load.")
    return TORCH_DTYPES[name]


# -- state dict -> layout ------------------------------------------------------------------
def _leaf_entry(key: str, value, allow_pickle: bool) -> Entry:
    if isinstance(value, torch.Tensor):
        if value.dtype not in NUMPY_DTYPES:
            raise TypeError(f"cstorch.save cannot store the tensor {key!r} of dtype {value.dtype}; supported: "
                            f"{', '.join(sorted(TORCH_DTYPES))}.")
        if value.is_sparse or value.layout != torch.strided:
            raise TypeError(f"cstorch.save stores dense tensors; {key!r} has layout {value.layout} "
                            f"(call .to_dense() first).")
        return Entry(key, tensor_metadata(value.shape, value.dtype), lambda v=value: tensor_to_numpy(v))
    if value is None:
        return Entry(key, {"__TYPE__": NONE, "__NONE__": True})
    if isinstance(value, (bool, int, float)) and type(value) in (bool, int, float):
        return Entry(key, {"scalar_value": value, "__TYPE__": SCALAR, "__NONE__": True})
    if type(value) is str:
        return Entry(key, {"string_value": value, "__TYPE__": STRING, "__NONE__": True})
    if isinstance(value, np.ndarray) and value.dtype != object:
        return Entry(key, {"is_bfloat16": value.dtype == ml_dtypes.bfloat16, "__TYPE__": NUMPY, "__NUMPY__": True},
                     lambda v=value: v)
    if isinstance(value, PickledObject):
        return Entry(key, {"__TYPE__": OBJECT, "__BYTES__": True}, lambda v=value: v.data)
    if not allow_pickle:
        raise TypeError(
            f"cstorch.save cannot store the {type(value).__name__} at {key!r} without pickling it. Checkpoints hold "
            f"tensors, numpy arrays, numbers, strings and None in dicts, lists and tuples; pass allow_pickle=True "
            f"to store other objects pickled (loading them back then needs allow_pickle=True too)."
        )
    try:
        data = pickle.dumps(value)
    except Exception as e:
        raise TypeError(f"cstorch.save could not pickle the {type(value).__name__} at {key!r}: {e}") from e
    return Entry(key, {"__TYPE__": OBJECT, "__BYTES__": True}, lambda d=data: d)


def layout_of(state_dict, allow_pickle: bool = False) -> Layout:
    """The layout of `state_dict`; payloads are read from it only when stored."""
    leaves, spec = pytree.tree_flatten(state_dict)
    if spec.is_leaf():
        raise TypeError(f"cstorch.save expects a dict, list or tuple of values, got a {type(state_dict).__name__}; "
                        f"wrap it, e.g. {{'value': x}}.")
    try:
        treespec = pytree.treespec_dumps(spec)
    except (TypeError, NotImplementedError) as e:
        raise TypeError(f"cstorch.save cannot describe this state's structure: {e}") from e
    keys = flat_keys(spec)
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"cstorch.save: the dotted keys {dup} name more than one value (a key containing '.' "
                         f"collides with a nested one); rename the keys so every path is unique.")
    if "" in keys:
        raise ValueError("cstorch.save: a value sits under an empty key path (e.g. the dict key ''), which cannot "
                         "name an entry of the checkpoint; give it a non-empty key.")
    layout = Layout(_skeleton(spec), treespec)
    first_key: dict[int, str] = {}
    for key, value in zip(keys, leaves):
        linkable = isinstance(value, (torch.Tensor, np.ndarray, PickledObject))
        if linkable and id(value) in first_key:
            layout.entries.append(Entry(key, {"key": first_key[id(value)], "__LINKED__": True, "__TYPE__": LINK,
                                              "__NONE__": True}))
            continue
        if linkable:
            first_key[id(value)] = key
        layout.entries.append(_leaf_entry(key, value, allow_pickle))
    return layout


# -- layout -> state dict ------------------------------------------------------------------
def state_of(layout: Layout, make_tensor: Callable[[Entry, list, torch.dtype], torch.Tensor],
             allow_pickle: bool = False):
    """Rebuild the nested state: tensors from `make_tensor(entry, shape, dtype)`,
    links re-tied to the same object, tuples as tuples, int keys as ints."""
    spec = pytree.treespec_loads(layout.treespec)
    keys = flat_keys(spec)
    by_key = layout.by_key()
    out = {}
    for key in keys:
        if key not in by_key:
            raise RuntimeError(f"The checkpoint has no entry for {key!r}, which its structure lists; the file is "
                               f"corrupt.")
        e = by_key[key]
        kind = e.kind
        if kind == TENSOR:
            out[key] = make_tensor(e, e.metadata["shapes"][0], tensor_dtype(key, e.metadata))
        elif kind == NUMPY:
            out[key] = e.payload()
        elif kind == OBJECT:
            data = e.payload()
            out[key] = _unpickle(key, data) if allow_pickle else PickledObject(key, data)
        elif kind == SCALAR:
            out[key] = e.metadata["scalar_value"]
        elif kind == STRING:
            out[key] = e.metadata["string_value"]
        elif kind == NONE:
            out[key] = None
        elif kind == LINK:
            out[key] = None  # re-tied below, once every target exists
        else:
            raise RuntimeError(f"The entry {key!r} has kind {kind!r}, which cstorch does not read.")
    for key in keys:
        e = by_key[key]
        if e.kind == LINK:
            target = e.metadata["key"]
            while by_key.get(target) is not None and by_key[target].kind == LINK:
                target = by_key[target].metadata["key"]
            if target not in out:
                raise RuntimeError(f"The entry {key!r} links to {target!r}, which the checkpoint does not hold.")
            out[key] = out[target]
    return pytree.tree_unflatten([out[k] for k in keys], spec)
