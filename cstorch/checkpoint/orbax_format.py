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

import ml_dtypes
import numpy as np

from cstorch_jax.orbax import load_arrays, save_arrays

from ..storage.layout import FORMAT_VERSION, OBJECT, Entry, Layout

KIND = "cstorch-checkpoint"


def _dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def write_orbax(layout: Layout, directory: str) -> None:
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
    save_arrays(directory, arrays, metadata)


def read_orbax(directory: str) -> Layout:
    arrays, meta = load_arrays(directory)
    if meta.get("kind") != KIND:
        raise RuntimeError(f"'{directory}' is an orbax checkpoint but was not written by cstorch.checkpoint.to_orbax.")
    if meta["format_version"] != FORMAT_VERSION:
        raise RuntimeError(f"'{directory}' holds checkpoint format {meta['format_version']}; this cstorch reads "
                           f"{FORMAT_VERSION}.")
    layout = Layout(meta["skeleton"], meta["treespec"], cstorch_version=meta["cstorch_version"])
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
    return layout
