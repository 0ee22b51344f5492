"""`cstorch.save` / `cstorch.load`: H5 checkpoints (format 0.5 layout, first version).

Layout: the state dict is flattened with torch's pytree; each tensor is a dataset at
the root named by its dotted key (`model.fc.weight`, `optimizer.state.0.exp_avg`);
Python scalars, strings and None live only in metadata; a tensor that appears twice
(tied weights) is stored once and linked. Root attributes: `__spec__` (the tree
structure), `__version__` = 0.5, `__cstorch_version__`, and `__SUCCESS__`, written
last. bfloat16 is stored as its int16 bit pattern. Writes go to a temporary file that
is renamed on success, and an existing checkpoint is never overwritten.
"""
from __future__ import annotations

import json
import os
import uuid

import h5py
import numpy as np
import torch
import torch.utils._pytree as pytree

from ._version import __version__

FORMAT_VERSION = 0.5


def _key(path) -> str:
    parts = []
    for k in path:
        for attr in ("key", "idx", "name"):
            if hasattr(k, attr):
                parts.append(str(getattr(k, attr)))
                break
    return ".".join(parts)


def _leaf_metadata(value) -> dict:
    if value is None:
        return {"__TYPE__": "NoneSerializer", "__NONE__": True}
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return {"scalar_value": value, "__TYPE__": "ScalarSerializer", "__NONE__": True}
    if isinstance(value, str):
        return {"string_value": value, "__TYPE__": "StringSerializer", "__NONE__": True}
    raise TypeError(
        f"cstorch.save cannot store a {type(value).__name__}; checkpoints hold tensors, numbers, strings and None "
        f"in dicts, lists and tuples."
    )


def _tensor_to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy()
    return t.numpy()


def save(state_dict, ckpt_path: str) -> None:
    """Write `state_dict` to a new H5 checkpoint at `ckpt_path` (atomically)."""
    ckpt_path = os.fspath(ckpt_path)
    if os.path.exists(ckpt_path):
        raise FileExistsError(f"Checkpoint at '{ckpt_path}' already exists. Please delete the checkpoint and run again.")
    from cstorch_jax import materialize

    state_dict = materialize(state_dict)
    leaves_with_path, spec = pytree.tree_flatten_with_path(state_dict)
    tmp = f"{ckpt_path}.{uuid.uuid4().hex[:8]}.tmp"
    seen: dict[int, str] = {}
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["__spec__"] = json.dumps([None, pytree.treespec_dumps(spec)])
            f.attrs["__version__"] = FORMAT_VERSION
            f.attrs["__cstorch_version__"] = __version__
            for path, value in leaves_with_path:
                key = _key(path)
                if isinstance(value, torch.Tensor):
                    if id(value) in seen:
                        meta = {"key": seen[id(value)], "__LINKED__": True, "__TYPE__": "LinkedObject"}
                    else:
                        seen[id(value)] = key
                        ds = f.create_dataset(key, data=_tensor_to_numpy(value))
                        ds.attrs["__TORCH__"] = True
                        ds.attrs["__TYPE__"] = "TorchTensorSerializer"
                        ds.attrs["dtypes"] = [str(value.dtype)]
                        ds.attrs["shapes"] = [list(value.shape)]
                        meta = {"__TYPE__": "TorchTensorSerializer"}
                else:
                    meta = _leaf_metadata(value)
                f.attrs[f"{key}.__metadata__"] = json.dumps(meta)
            f.attrs["__SUCCESS__"] = True
        os.replace(tmp, ckpt_path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _read_tensor(ds) -> torch.Tensor:
    dtype_name = ds.attrs["dtypes"][0]
    arr = ds[()]
    if dtype_name == "torch.bfloat16":
        return torch.from_numpy(np.array(arr, dtype=np.int16)).view(torch.bfloat16)
    t = torch.from_numpy(np.array(arr))
    return t.to(getattr(torch, dtype_name.removeprefix("torch.")))


def load(ckpt_path: str, map_location=None, **kwargs):
    """Read a checkpoint written by `save` (H5), or fall back to `torch.load`."""
    ckpt_path = os.fspath(ckpt_path)
    if not h5py.is_hdf5(ckpt_path):
        try:
            return torch.load(ckpt_path, map_location=map_location, **kwargs)
        except Exception as e:
            raise RuntimeError(f"Failed to load checkpoint file '{ckpt_path}': {e}") from e
    with h5py.File(ckpt_path, "r") as f:
        if not f.attrs.get("__SUCCESS__", False):
            raise RuntimeError(f"Cannot load partially written checkpoint '{ckpt_path}' (no __SUCCESS__ marker).")
        version = float(f.attrs.get("__version__", 0))
        if version != FORMAT_VERSION:
            raise RuntimeError(f"Checkpoint '{ckpt_path}' has format version {version}; this reader handles "
                               f"{FORMAT_VERSION}.")
        spec = pytree.treespec_loads(json.loads(f.attrs["__spec__"])[1])
        keys = [_key(p) for p, _ in pytree.tree_flatten_with_path(pytree.tree_unflatten([0] * spec.num_leaves, spec))[0]]
        values: dict[str, object] = {}
        leaves = []
        for key in keys:
            meta = json.loads(f.attrs[f"{key}.__metadata__"])
            kind = meta["__TYPE__"]
            if kind == "TorchTensorSerializer":
                v = _read_tensor(f[key])
                if map_location is not None:
                    v = v.to(map_location)
            elif kind == "LinkedObject":
                v = values[meta["key"]]
            elif kind == "ScalarSerializer":
                v = meta["scalar_value"]
            elif kind == "StringSerializer":
                v = meta["string_value"]
            elif kind == "NoneSerializer":
                v = None
            else:
                raise RuntimeError(f"Checkpoint '{ckpt_path}' holds an object of kind {kind!r} at {key!r}, which this "
                                   f"reader does not load.")
            values[key] = v
            leaves.append(v)
    return pytree.tree_unflatten(leaves, spec)
