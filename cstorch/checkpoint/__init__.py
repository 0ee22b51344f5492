"""Checkpoint conversions and inspection.

- `to_orbax(h5_path, orbax_dir)` / `from_orbax(orbax_dir, h5_path)`: exact, in both
  directions (every dtype, metadata, links and pickled objects, never unpickled).
- `to_torch(path, torch_path)`: `torch.save` of the loaded state, readable by
  `torch.load(..., weights_only=True)` when it holds only tensors and Python values.
- `info(path)`: what a checkpoint holds.
- `save_sharded(state_dict, orbax_dir)`: the orbax directory written from the device
  arrays of a run whose state is split over its devices, no gather (`sharded.py`).
- `python -m cstorch.checkpoint info|convert ...` on the command line.
"""
from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Optional

import torch

from ..storage import load, state_from_layout
from ..storage.h5 import H5Reader, write_h5
from ..storage.layout import FORMAT_VERSION, LINK, NUMPY, OBJECT, Layout, PickledObject, layout_of, tensor_dtype
from .orbax_format import read_orbax, write_orbax
from .sharded import save_sharded

__all__ = ["to_orbax", "from_orbax", "to_torch", "to_h5", "info", "read_layout", "EntryInfo", "save_sharded"]


def read_layout(path) -> Layout:
    """The layout of an H5 checkpoint file or a cstorch orbax directory."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return read_orbax(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"No checkpoint at '{path}'.")
    return H5Reader(path).layout()


def to_orbax(h5_path, orbax_dir) -> None:
    """Write the H5 checkpoint `h5_path` as a new orbax-checkpoint directory."""
    write_orbax(read_layout(h5_path), os.fspath(orbax_dir))


def from_orbax(orbax_dir, h5_path) -> None:
    """Write the orbax directory made by `to_orbax` back as an H5 checkpoint."""
    write_h5(read_orbax(os.fspath(orbax_dir)), os.fspath(h5_path))


def to_h5(path, h5_path, *, allow_pickle: bool = False) -> None:
    """Write any checkpoint `cstorch.load` reads (e.g. a torch pickle) as H5."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return from_orbax(path, h5_path)
    write_h5(layout_of(load(path, allow_pickle=allow_pickle), allow_pickle), os.fspath(h5_path))


def to_torch(path, torch_path, *, allow_pickle: bool = False) -> None:
    """`torch.save` the state of checkpoint `path` into a new file `torch_path`.
    Pickled objects are unpickled only with `allow_pickle=True`. Numpy arrays stay
    numpy arrays, so a state holding them needs `torch.load(..., weights_only=False)`."""
    path, torch_path = os.fspath(path), os.fspath(torch_path)
    if os.path.exists(torch_path):
        raise FileExistsError(f"'{torch_path}' already exists. Please delete it and run again.")
    layout = read_layout(path)
    if not allow_pickle and any(e.kind == OBJECT for e in layout.entries):
        keys = [e.key for e in layout.entries if e.kind == OBJECT]
        raise ValueError(f"The checkpoint holds pickled objects at {keys}; converting them to a torch pickle means "
                         f"unpickling them. Pass allow_pickle=True (--allow-pickle) if you trust the file.")
    state = state_from_layout(layout, None, allow_pickle=allow_pickle)  # plain tensors; links stay tied
    tmp = f"{torch_path}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        torch.save(state, tmp)
        os.replace(tmp, torch_path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@dataclass
class EntryInfo:
    key: str
    kind: str
    shape: Optional[tuple] = None
    dtype: Optional[str] = None
    value: object = None

    def describe(self) -> str:
        if self.shape is not None:
            return f"{self.dtype}{list(self.shape)}"
        if self.kind == LINK:
            return f"-> {self.value}"
        return repr(self.value)


def info(path) -> tuple[dict, list[EntryInfo]]:
    """(header, entries) of a checkpoint: format facts, then one EntryInfo per leaf."""
    layout = read_layout(path)
    header = {"path": os.fspath(path), "format": "orbax" if os.path.isdir(path) else "h5",
              "format_version": FORMAT_VERSION, "cstorch_version": layout.cstorch_version, "entries": len(layout.entries)}
    out = []
    for e in layout.entries:
        m = e.metadata
        kind = e.kind.removesuffix("Serializer")
        if "shapes" in m:
            out.append(EntryInfo(e.key, kind, tuple(m["shapes"][0]), str(tensor_dtype(e.key, m)).removeprefix("torch.")))
        elif e.kind == LINK:
            out.append(EntryInfo(e.key, kind, value=m["key"]))
        elif e.kind == OBJECT:
            out.append(EntryInfo(e.key, kind, value=PickledObject(e.key, e.payload())))
        elif e.kind == NUMPY:
            a = e.payload()
            out.append(EntryInfo(e.key, kind, a.shape, a.dtype.name))
        else:
            out.append(EntryInfo(e.key, kind, value=m.get("scalar_value", m.get("string_value"))))
    return header, out
