"""An independent implementation of the Cerebras H5 checkpoint layout (format 0.5).

Written from the format description only (not from ``cstorch.storage``), so that
tests can check ``cstorch.save`` / ``cstorch.load`` against a second, separate
implementation of the same on-disk layout.

Only ``h5py``, ``hdf5plugin``, ``json``, ``numpy``, ``pickle`` and
``torch.utils._pytree`` are used.  The real library pickles arbitrary objects
with ``dill``; a standard ``pickle`` of a plain object is what dill writes too.

Layout summary::

    root attrs
        __spec__             json.dumps([skeleton, treespec_dumps(spec)], indent=4)
        __version__          0.5 (float)
        __cstorch_version__  "2.10.0"
        <K>.__metadata__     json.dumps({"__spec__": [{K: "*"}, treespec_dumps(spec_K)],
                                         "__objects__": [K],
                                         "<K>.__metadata__": <per-object metadata>},
                                        indent=4)
        __SUCCESS__          True (written last)
    datasets (flat at the root, one per tensor / pickled object)
        <K>                  tensor data (bf16 as int16 bits), LZ4 (32004) if ndim >= 1
                             or h5py.Empty("f") with __BYTES__ for pickled objects
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import h5py
import hdf5plugin
import numpy as np
import torch
from torch.utils import _pytree as pytree

FORMAT_VERSION = 0.5
CSTORCH_VERSION = "2.10.0"

RTFX_DTYPES = {
    torch.bool: 1,
    torch.int16: 3,
    torch.int32: 4,
    torch.int64: 5,
    torch.uint8: 6,
    torch.uint16: 7,
    torch.uint32: 8,
    torch.uint64: 9,
    torch.float16: 10,
    torch.float32: 11,
    torch.float64: 12,
    torch.bfloat16: 15,
}

_TORCH_DTYPES_BY_NAME = {str(dt): dt for dt in RTFX_DTYPES}

LZ4_FILTER_ID = 32004


# --------------------------------------------------------------------------- keys


def _key_entry_str(entry) -> str:
    if isinstance(entry, pytree.MappingKey):
        return str(entry.key)
    if isinstance(entry, pytree.SequenceKey):
        return str(entry.idx)
    if isinstance(entry, pytree.GetAttrKey):
        return str(entry.name)
    raise TypeError(f"unsupported pytree key entry {entry!r}")


def key_of(path) -> str:
    """The checkpoint key of a pytree key path: the elements joined with '.'."""
    return ".".join(_key_entry_str(e) for e in path)


def flatten_with_keys(state) -> tuple[list[str], list[Any], pytree.TreeSpec]:
    """Flatten ``state`` like ``tree_flatten`` and give each leaf its dotted key."""
    leaves, spec = pytree.tree_flatten(state)
    with_path, spec2 = pytree.tree_flatten_with_path(state)
    assert spec2 == spec and len(with_path) == len(leaves)
    keys = [key_of(path) for path, _ in with_path]
    return keys, leaves, spec


def keys_from_spec(spec: pytree.TreeSpec) -> list[str]:
    """Leaf keys, in flatten order, of a tree described by ``spec``."""
    placeholders = [object() for _ in range(spec.num_leaves)]
    tree = pytree.tree_unflatten(placeholders, spec)
    with_path, _ = pytree.tree_flatten_with_path(tree)
    return [key_of(path) for path, _ in with_path]


def spec_entry(tree) -> list:
    """``[skeleton, treespec_dumps(spec)]`` of ``tree``; skeleton is None if not JSON-able."""
    leaves, spec = pytree.tree_flatten(tree)
    skeleton = pytree.tree_unflatten(["*"] * len(leaves), spec)
    try:
        json.dumps(skeleton)
    except (TypeError, ValueError):
        skeleton = None
    return [skeleton, pytree.treespec_dumps(spec)]


# ---------------------------------------------------------------- metadata dicts


def tensor_metadata(t: torch.Tensor) -> dict:
    return {
        "__TORCH__": True,
        "shapes": [list(t.shape)],
        "dtypes": [str(t.dtype)],
        "rtfx_dtypes": [RTFX_DTYPES[t.dtype]],
        "__TYPE__": "TorchTensorSerializer",
        "__NUMPY__": True,
        "compressed": False,
    }


def leaf_metadata(leaf, *, alias_of: str | None = None) -> dict:
    """The per-object metadata dict stored under ``"K.__metadata__"`` inside M."""
    if alias_of is not None:
        return {"key": alias_of, "__LINKED__": True, "__TYPE__": "LinkedObject", "__NONE__": True}
    if isinstance(leaf, torch.Tensor):
        return tensor_metadata(leaf)
    if leaf is None:
        return {"__TYPE__": "NoneSerializer", "__NONE__": True}
    if isinstance(leaf, (bool, int, float)):
        return {"scalar_value": leaf, "__TYPE__": "ScalarSerializer", "__NONE__": True}
    if isinstance(leaf, str):
        return {"string_value": leaf, "__TYPE__": "StringSerializer", "__NONE__": True}
    return {"__TYPE__": "ObjectSerializer", "__BYTES__": True}


def wrapped_metadata(key: str, leaf, per_object: dict) -> dict:
    """M: the JSON object stored in the root attribute ``"K.__metadata__"``."""
    return {
        "__spec__": spec_entry({key: leaf}),
        "__objects__": [key],
        f"{key}.__metadata__": per_object,
    }


def metadata_attr(key: str) -> str:
    return f"{key}.__metadata__"


# ------------------------------------------------------------------------ writer


def _write_tensor(f: h5py.File, key: str, t: torch.Tensor, meta: dict) -> None:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        data = t.view(torch.int16).numpy()
    else:
        data = t.numpy()
    if t.ndim >= 1:
        ds = f.create_dataset(key, data=data, **hdf5plugin.LZ4())
    else:
        ds = f.create_dataset(key, data=data)
    for name, value in meta.items():
        ds.attrs[name] = value


def _write_object(f: h5py.File, key: str, obj) -> None:
    ds = f.create_dataset(key, data=h5py.Empty("f"))
    ds.attrs["__TYPE__"] = "ObjectSerializer"
    ds.attrs["__BYTES__"] = np.void(pickle.dumps(obj))


def write_real_layout(path, entries) -> None:
    """Write ``entries`` (a nested state) to ``path`` in the format-0.5 layout."""
    keys, leaves, spec = flatten_with_keys(entries)
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate checkpoint keys: {keys}")

    with h5py.File(path, "w") as f:
        f.attrs["__spec__"] = json.dumps(spec_entry(entries), indent=4)
        f.attrs["__version__"] = FORMAT_VERSION
        f.attrs["__cstorch_version__"] = CSTORCH_VERSION

        first_key_by_id: dict[int, str] = {}
        for key, leaf in zip(keys, leaves):
            alias_of = first_key_by_id.get(id(leaf))
            if alias_of is None:
                first_key_by_id[id(leaf)] = key
            meta = leaf_metadata(leaf, alias_of=alias_of)

            if alias_of is None:
                if meta["__TYPE__"] == "TorchTensorSerializer":
                    _write_tensor(f, key, leaf, meta)
                elif meta["__TYPE__"] == "ObjectSerializer":
                    _write_object(f, key, leaf)

            f.attrs[metadata_attr(key)] = json.dumps(
                wrapped_metadata(key, leaf, meta), indent=4
            )

        f.attrs["__SUCCESS__"] = True


# ------------------------------------------------------------------------ reader


def _as_str(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _read_tensor(f: h5py.File, key: str, meta: dict) -> torch.Tensor:
    dtype = _TORCH_DTYPES_BY_NAME[meta["dtypes"][0]]
    shape = tuple(meta["shapes"][0])
    data = np.asarray(f[key][()])
    if dtype == torch.bfloat16:
        assert data.dtype == np.int16, data.dtype
        t = torch.from_numpy(data.copy()).view(torch.bfloat16)
    else:
        t = torch.from_numpy(data.copy())
    assert t.dtype == dtype, (key, t.dtype, dtype)
    assert tuple(t.shape) == shape, (key, tuple(t.shape), shape)
    return t


def read_real_layout(path, *, allow_pickle: bool = True):
    """Read a format-0.5 file back into a nested state of plain torch tensors."""
    with h5py.File(path, "r") as f:
        if not bool(f.attrs.get("__SUCCESS__", False)):
            raise RuntimeError(f"{path}: no __SUCCESS__ marker, incomplete checkpoint")
        version = float(f.attrs["__version__"])
        if version != FORMAT_VERSION:
            raise RuntimeError(f"{path}: unsupported checkpoint version {version}")

        spec = pytree.treespec_loads(json.loads(_as_str(f.attrs["__spec__"]))[1])
        keys = keys_from_spec(spec)

        values: dict[str, Any] = {}
        leaves = []
        for key in keys:
            wrapped = json.loads(_as_str(f.attrs[metadata_attr(key)]))
            meta = wrapped[metadata_attr(key)]
            kind = meta["__TYPE__"]
            if kind == "TorchTensorSerializer":
                value = _read_tensor(f, key, meta)
            elif kind == "ScalarSerializer":
                value = meta["scalar_value"]
            elif kind == "StringSerializer":
                value = meta["string_value"]
            elif kind == "NoneSerializer":
                value = None
            elif kind == "LinkedObject":
                value = values[meta["key"]]
            elif kind == "ObjectSerializer":
                if not allow_pickle:
                    raise RuntimeError(f"{key}: refusing to unpickle without allow_pickle")
                value = pickle.loads(f[key].attrs["__BYTES__"].tobytes())
            else:
                raise RuntimeError(f"{key}: unknown serializer {kind!r}")
            values[key] = value
            leaves.append(value)

    return pytree.tree_unflatten(leaves, spec)
