"""A checkpoint layout as an orbax-checkpoint directory.

The arrays of tensors and numpy entries go to orbax by their dotted keys, in their
natural dtypes (bfloat16 stays bfloat16), so JAX code can restore them directly. The
rest of the layout rides along as JSON: the tree structure, every entry's metadata,
pickled objects (base64) and the shapes and dtypes of zero-size arrays, which orbax
cannot store. H5 -> orbax -> H5 therefore reproduces every value and every metadata
entry.
"""
from __future__ import annotations

import base64
import os

import ml_dtypes
import numpy as np

from cstorch_jax.orbax import load_arrays, save_arrays

from .errors import InvalidCheckpointError
from .layout import FORMAT_VERSION, OBJECT, Entry, Layout, check_layout

KIND = "cstorch-checkpoint"


def _dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def is_orbax_dir(path: str) -> bool:
    return os.path.isdir(path)


def write_orbax(layout: Layout, directory, allow_pickle: bool = False) -> None:
    """Write `layout` as a new orbax directory (pickled objects are carried as bytes)."""
    arrays: dict[str, np.ndarray] = {}
    empty: dict[str, list] = {}
    objects: dict[str, str] = {}
    for e in layout.entries:
        if e.payload is None:
            continue
        value = e.payload()
        if e.kind == OBJECT:
            objects[e.key] = base64.b64encode(bytes(value)).decode("ascii")
        elif value.size:
            arrays[e.key] = value
        else:
            empty[e.key] = [list(value.shape), value.dtype.name]
    metadata = {
        "kind": KIND, "format_version": FORMAT_VERSION, "cstorch_version": layout.cstorch_version,
        "skeleton": layout.skeleton, "treespec": layout.treespec,
        "entries": [[e.key, e.metadata] for e in layout.entries], "empty_arrays": empty, "objects": objects,
    }
    save_arrays(os.fspath(directory), arrays, metadata)


def read_orbax(directory, allow_pickle: bool = False) -> Layout:
    """The checked layout of an orbax directory written by `write_orbax`."""
    directory = os.fspath(directory)
    try:
        arrays, meta = load_arrays(directory)
    except Exception as e:  # orbax and tensorstore raise many kinds of error on a damaged directory
        raise InvalidCheckpointError(directory, f"orbax cannot read it ({type(e).__name__}: {e}).") from e
    if not isinstance(meta, dict) or meta.get("kind") != KIND:
        raise InvalidCheckpointError(directory, "it is an orbax checkpoint but was not written by "
                                                "cstorch.checkpoint.to_orbax.")
    if meta.get("format_version") != FORMAT_VERSION:
        raise InvalidCheckpointError(directory, f"it holds checkpoint format {meta.get('format_version')}; this "
                                                f"cstorch reads {FORMAT_VERSION}.")
    try:
        layout = Layout(meta["skeleton"], meta["treespec"], cstorch_version=meta["cstorch_version"], source=directory)
        for key, metadata in meta["entries"]:
            payload = None
            if key in arrays:
                payload = lambda a=arrays[key]: a  # noqa: E731
            elif key in meta["empty_arrays"]:
                shape, dtype = meta["empty_arrays"][key]
                payload = lambda s=tuple(shape), d=_dtype(dtype): np.zeros(s, d)  # noqa: E731
            elif key in meta["objects"]:
                payload = lambda b=meta["objects"][key]: base64.b64decode(b)  # noqa: E731
            layout.entries.append(Entry(key, metadata, payload))
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidCheckpointError(directory, f"its metadata item is garbled ({type(e).__name__}: {e}).") from e
    check_layout(layout)
    return layout
