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

A layout read from a file is checked (`check_layout`) before anything is built from it:
the structure parses, every leaf has well-formed metadata of a known kind, and every
link leads, without a cycle, to an entry that is not a link. A payload is checked
against its metadata (dtype, shape) when it is read. Each failure is an
`InvalidCheckpointError` naming the file and the entry.
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
from ..backends import csx
from .errors import InvalidCheckpointError

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
KINDS = (TENSOR, NUMPY, OBJECT, LINK, SCALAR, STRING, NONE)
MAX_NUMEL = 2 ** 62  # beyond any tensor torch can hold


@dataclass
class Entry:
    """One leaf: `metadata` (JSON-able, `__TYPE__` names its kind) and, for tensors,
    arrays and pickled objects, `payload()` giving the np.ndarray or bytes. `nbytes` is
    the payload's size when it is known without making the payload (a numpy array or a
    pickle being saved; a tensor's size is in its metadata), else None."""
    key: str
    metadata: dict
    payload: Optional[Callable[[], Any]] = None
    nbytes: Optional[int] = None

    @property
    def kind(self) -> Optional[str]:
        return self.metadata.get("__TYPE__") if isinstance(self.metadata, dict) else None


@dataclass
class Layout:
    skeleton: Any
    treespec: str
    entries: list[Entry] = field(default_factory=list)
    cstorch_version: str = __version__
    source: Optional[str] = None  # the file or directory it was read from

    @property
    def spec_json(self) -> str:
        return json.dumps([self.skeleton, self.treespec], indent=4)

    def by_key(self) -> dict[str, Entry]:
        return {e.key: e for e in self.entries}


class PickledObject:
    """A Python object stored pickled in a checkpoint and not unpickled, because
    unpickling runs code from the file. `unpickle()` does it when the file is trusted;
    saving a PickledObject writes its bytes back unchanged.

    Args:
        key: the entry's key in the checkpoint.
        data: the pickled bytes.
    """

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


def entry_metadata(source, key: str, key_attr) -> dict:
    """The leaf metadata inside a `<key>.__metadata__` attribute (its content is checked
    by `check_layout`)."""
    try:
        m = json.loads(key_attr)
    except (TypeError, ValueError) as e:
        raise InvalidCheckpointError(source, f"its metadata is not valid JSON ({e}); the file is corrupt.", key) \
            from None
    if not isinstance(m, dict) or not isinstance(m.get("__objects__"), list):
        raise InvalidCheckpointError(source, "its metadata attribute is not an object with an '__objects__' list; "
                                             "the file is corrupt.", key)
    if m["__objects__"] != [key] or f"{key}.__metadata__" not in m:
        raise InvalidCheckpointError(source, "the entry is stored as a nested object (e.g. an external link to "
                                             "another file), which cstorch does not read.", key)
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


def entry_tensor(source, entry: "Entry", shape, dtype: torch.dtype) -> torch.Tensor:
    """The tensor an entry's payload holds, checked against its metadata's shape and dtype."""
    a = entry.payload()
    want = np.dtype(NUMPY_DTYPES[dtype])
    if not isinstance(a, np.ndarray) or a.dtype.newbyteorder("=") != want or list(a.shape) != list(shape):
        got = f"{a.dtype.name}{list(a.shape)}" if isinstance(a, np.ndarray) else type(a).__name__
        raise InvalidCheckpointError(source, f"its data is {got} but its metadata says {str(dtype)[6:]}"
                                             f"{list(shape)}; the file is corrupt.", entry.key)
    return numpy_to_tensor(a, dtype).reshape(shape)


def tensor_metadata(shape, dtype: torch.dtype) -> dict:
    meta = {"__TORCH__": True, "shapes": [list(shape)], "dtypes": [str(dtype)]}
    if dtype in RTFX_CODES:
        meta["rtfx_dtypes"] = [RTFX_CODES[dtype]]
    # `compressed` records the compress_weights flag, as the real writer does
    meta.update({"__TYPE__": TENSOR, "__NUMPY__": True, "compressed": bool(csx.performance.compress_weights)})
    return meta


def tensor_dtype(metadata: dict) -> torch.dtype:
    """The dtype of a (checked) tensor entry."""
    return TORCH_DTYPES[metadata["dtypes"][0]]


def _is_shape(shape) -> bool:
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        return False
    numel = 1
    for d in shape:
        numel *= d
    return numel <= MAX_NUMEL


def metadata_problem(m) -> Optional[str]:
    """What is wrong with an entry's metadata, or None when it is well formed."""
    if not isinstance(m, dict):
        return "its metadata is not a JSON object"
    kind = m.get("__TYPE__")
    if kind not in KINDS:
        return f"its metadata names the kind {kind!r}, which cstorch does not read"
    if kind == TENSOR:
        shapes, dtypes = m.get("shapes"), m.get("dtypes")
        if not (isinstance(shapes, list) and len(shapes) == 1 and _is_shape(shapes[0])):
            return f"its metadata gives the shapes {shapes!r}, not one list of sizes"
        if not (isinstance(dtypes, list) and len(dtypes) == 1 and isinstance(dtypes[0], str)):
            return f"its metadata gives the dtypes {dtypes!r}, not one dtype name"
        if dtypes[0] not in TORCH_DTYPES:
            return f"its metadata gives the dtype {dtypes[0]}, which cstorch cannot load"
    elif kind == NUMPY and not isinstance(m.get("is_bfloat16", False), bool):
        return f"its metadata gives is_bfloat16 = {m['is_bfloat16']!r}, not true or false"
    elif kind == SCALAR and type(m.get("scalar_value")) not in (bool, int, float):
        return f"its metadata gives the scalar {m.get('scalar_value')!r}, not a number or bool"
    elif kind == STRING and not isinstance(m.get("string_value"), str):
        return f"its metadata gives the string {m.get('string_value')!r}, not a string"
    elif kind == LINK and not isinstance(m.get("key"), str):
        return f"its metadata links to {m.get('key')!r}, not to an entry name"
    return None


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
                     lambda v=value: v, value.nbytes)
    if isinstance(value, PickledObject):
        return Entry(key, {"__TYPE__": OBJECT, "__BYTES__": True}, lambda v=value: v.data, len(value.data))
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
    return Entry(key, {"__TYPE__": OBJECT, "__BYTES__": True}, lambda d=data: d, len(data))


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
def structure(layout: Layout) -> tuple[pytree.TreeSpec, list[str]]:
    """The layout's tree structure and the dotted key of every leaf."""
    try:
        spec = pytree.treespec_loads(layout.treespec)
        keys = flat_keys(spec)
        pytree.tree_unflatten([None] * spec.num_leaves, spec)  # every node's context fits its children
    except Exception as e:  # anything torch's treespec parser raises on a garbled string
        raise InvalidCheckpointError(layout.source, f"its tree structure (__spec__) cannot be read ({type(e).__name__}"
                                                    f": {e}); the file is corrupt.") from None
    if len(set(keys)) != len(keys) or "" in keys:
        raise InvalidCheckpointError(layout.source, "its tree structure (__spec__) names a leaf twice or with an "
                                                    "empty key; the file is corrupt.")
    return spec, keys


def resolve_links(layout: Layout, by_key: dict[str, Entry]) -> dict[str, str]:
    """{link key: key of the entry it finally leads to}, following links of links."""
    targets = {}
    for key, e in by_key.items():
        if e.kind != LINK:
            continue
        chain = [key]
        target = e.metadata["key"]
        while target in by_key and by_key[target].kind == LINK and target not in chain:
            chain.append(target)
            target = by_key[target].metadata["key"]
        if target in chain:
            cycle = " -> ".join(chain[chain.index(target):] + [target])
            raise InvalidCheckpointError(layout.source, f"its links form a cycle ({cycle}); the file is corrupt.",
                                         key)
        if target not in by_key:
            raise InvalidCheckpointError(layout.source, f"it links to {target!r}, which the checkpoint does not "
                                                        f"hold; the file is corrupt.", key)
        targets[key] = target
    return targets


def check_layout(layout: Layout) -> None:
    """Raise an InvalidCheckpointError unless every leaf of the structure has well-formed
    metadata and every link leads to an entry that is not a link."""
    _, keys = structure(layout)
    by_key = layout.by_key()
    for key in keys:
        if key not in by_key:
            raise InvalidCheckpointError(layout.source, "its structure lists this leaf but the checkpoint has no "
                                                        "entry for it; the file is corrupt.", key)
        problem = metadata_problem(by_key[key].metadata)
        if problem is not None:
            raise InvalidCheckpointError(layout.source, f"{problem}; the file is corrupt.", key)
    resolve_links(layout, {k: by_key[k] for k in keys})


def state_of(layout: Layout, make_tensor: Callable[[Entry, list, torch.dtype], torch.Tensor],
             allow_pickle: bool = False):
    """Rebuild the nested state of a checked layout: tensors from
    `make_tensor(entry, shape, dtype)`, links re-tied to the same object, tuples as
    tuples, int keys as ints."""
    spec, keys = structure(layout)
    by_key = layout.by_key()
    out = {}
    for key in keys:
        e = by_key[key]
        kind = e.kind
        if kind == TENSOR:
            out[key] = make_tensor(e, e.metadata["shapes"][0], tensor_dtype(e.metadata))
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
    for key, target in resolve_links(layout, {k: by_key[k] for k in keys}).items():
        out[key] = out[target]
    return pytree.tree_unflatten([out[k] for k in keys], spec)
