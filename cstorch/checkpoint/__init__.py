"""Checkpoint conversions and inspection, over the formats of `cstorch.storage.FORMATS`
(`h5`, `orbax`, `torch`).

- `convert(src, dst, to)`: any checkpoint `cstorch.load` reads, written in format `to`.
  H5 <-> orbax is exact in both directions (every dtype, metadata, links and pickled
  objects, never unpickled).
- `to_orbax(path, orbax_dir)`, `from_orbax(orbax_dir, h5_path)`, `to_h5(path, h5_path)`,
  `to_torch(path, torch_path)`: `convert` to one format. A torch pickle written by
  `to_torch` is readable by `torch.load(..., weights_only=True)` when it holds only
  tensors and Python values.
- `info(path)`: what a checkpoint holds.
- `save_sharded(state_dict, orbax_dir)`: the orbax directory written from the device
  arrays of a run whose state is split over its devices, no gather (`sharded.py`).
- `python -m cstorch.checkpoint info|convert ...` on the command line.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from ..storage import FORMATS, detect
from ..storage.layout import FORMAT_VERSION, LINK, NUMPY, OBJECT, TENSOR, Layout, PickledObject, tensor_dtype

from .sharded import save_sharded

__all__ = ["convert", "to_orbax", "from_orbax", "to_torch", "to_h5", "info", "read_layout", "EntryInfo",
           "save_sharded"]


def read_layout(path, allow_pickle: bool = False) -> Layout:
    """The checked layout of any checkpoint `cstorch.load` reads.

    Args:
        path: the checkpoint (an H5 file, an orbax directory or a torch pickle).
        allow_pickle: let a torch pickle be read with `weights_only=False`.
    """
    return detect(path).read(os.fspath(path), allow_pickle=allow_pickle)


def convert(src, dst, to: str, *, allow_pickle: bool = False) -> None:
    """Write the checkpoint `src` (of any format) as a new checkpoint `dst` of format
    `to`. Pickled objects are unpickled only with `allow_pickle=True`, which writing a
    torch pickle needs when there are any.

    Args:
        src: the checkpoint to read (an H5 file, an orbax directory or a torch pickle).
        dst: the new file or directory (it must not exist).
        to: the format to write: "h5", "orbax" or "torch".
        allow_pickle: unpickle pickled objects (needed to write them into a torch pickle).
    """
    if to not in FORMATS:
        raise ValueError(f"Unknown checkpoint format {to!r}; cstorch writes {', '.join(FORMATS)}.")
    dst = os.fspath(dst)
    if os.path.exists(dst):
        raise FileExistsError(f"'{dst}' already exists. Please delete it and run again.")
    FORMATS[to].write(read_layout(src, allow_pickle), dst, allow_pickle=allow_pickle)


def to_orbax(path, orbax_dir) -> None:
    """Write the checkpoint `path` as a new orbax-checkpoint directory.

    Args:
        path: the checkpoint to read.
        orbax_dir: the new directory (it must not exist).
    """
    convert(path, orbax_dir, "orbax")


def from_orbax(orbax_dir, h5_path) -> None:
    """Write the orbax directory made by `to_orbax` back as an H5 checkpoint.

    Args:
        orbax_dir: the orbax directory to read.
        h5_path: the new H5 file (it must not exist).
    """
    convert(orbax_dir, h5_path, "h5")


def to_h5(path, h5_path, *, allow_pickle: bool = False) -> None:
    """Write any checkpoint `cstorch.load` reads (e.g. a torch pickle) as H5.

    Args:
        path: the checkpoint to read.
        h5_path: the new H5 file (it must not exist).
        allow_pickle: unpickle pickled objects of a torch pickle.
    """
    convert(path, h5_path, "h5", allow_pickle=allow_pickle)


def to_torch(path, torch_path, *, allow_pickle: bool = False) -> None:
    """`torch.save` the state of checkpoint `path` into a new file `torch_path`.
    Pickled objects are unpickled only with `allow_pickle=True`. Numpy arrays stay
    numpy arrays, so a state holding them needs `torch.load(..., weights_only=False)`.

    Args:
        path: the checkpoint to read.
        torch_path: the new file (it must not exist).
        allow_pickle: unpickle pickled objects.
    """
    convert(path, torch_path, "torch", allow_pickle=allow_pickle)


@dataclass
class EntryInfo:
    """One leaf of a checkpoint, as `info()` describes it.

    Args:
        key: the leaf's key in the checkpoint.
        kind: what it is: "TorchTensor", "NumpyArray", "Object" (pickled), "LinkedObject",
            "Scalar", "String" or "None".
        shape: a tensor's or array's shape; None for the others.
        dtype: a tensor's or array's dtype name; None for the others.
        value: a link's target key, a PickledObject, or the value of a scalar or string.
    """

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
    """(header, entries) of a checkpoint: format facts, then one EntryInfo per leaf.

    Args:
        path: the checkpoint to describe.
    """
    fmt = detect(path)
    layout = fmt.read(os.fspath(path))
    header = {"path": os.fspath(path), "format": fmt.name, "format_version": FORMAT_VERSION,
              "cstorch_version": layout.cstorch_version, "entries": len(layout.entries)}
    out = []
    for e in layout.entries:
        m = e.metadata
        kind = e.kind.removesuffix("Serializer")
        if e.kind == TENSOR:
            out.append(EntryInfo(e.key, kind, tuple(m["shapes"][0]), str(tensor_dtype(m)).removeprefix("torch.")))
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
