"""The checkpoint formats cstorch reads and writes, and how a file's format is found.

Every format is one `CheckpointFormat`: how to recognise it, how to read a file into a
(checked) layout, how to write a layout, and how `cstorch.load` turns a file into a
state. `cstorch.load`/`save`, the converters of `cstorch.checkpoint` and its command
line all go through `FORMATS` and `detect`:

| name    | what                                                  | `cstorch.load` gives |
|---------|-------------------------------------------------------|----------------------|
| `h5`    | the real system's H5 file, format 0.5 (`h5.py`)       | lazy `H5Tensor`s     |
| `orbax` | an orbax-checkpoint directory written by cstorch      | tensors              |
| `torch` | a `torch.save` file (zip or legacy pickle)            | what `torch.load` gives |

`detect` asks them in this order; a file none recognises is not a checkpoint.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import torch

from . import serializers
from .errors import InvalidCheckpointError
from .h5 import H5Reader, H5Tensor, is_h5, read_h5, write_h5
from .layout import Layout, entry_tensor, state_of
from .orbax_dir import is_orbax_dir, read_orbax, write_orbax
from .torch_file import is_torch_file, read_torch, torch_load, write_torch


@dataclass(frozen=True)
class CheckpointFormat:
    """A checkpoint format: how it is recognised, read, written and loaded. The registry
    `FORMATS` holds one per format, by name.

    Args:
        name: the format's name ("h5", "orbax", "torch").
        description: one line saying what the format is.
        detect: `path -> bool`: whether the file or directory at path is of this format.
        read: `(path, allow_pickle) -> Layout`: the checked layout of a checkpoint.
        write: `(layout, path, allow_pickle) -> None`: a new file or directory at path.
        load: `(path, map_location, allow_pickle, **torch_load_kwargs) -> state`: what
            `cstorch.load` returns.
    """

    name: str
    description: str
    detect: Callable[[str], bool]  # path -> is it one of ours
    read: Callable[..., Layout]  # (path, allow_pickle) -> checked layout
    write: Callable[..., None]  # (layout, path, allow_pickle) -> a new file or directory at path
    load: Callable[..., Any]  # (path, map_location, allow_pickle, **torch_load_kwargs) -> state


def _is_cpu(map_location) -> bool:
    return map_location is None or torch.device(map_location).type == "cpu"


def state_from_layout(layout: Layout, reader=None, map_location=None, allow_pickle: bool = False):
    """The nested state of a checked `layout`; tensors are lazy when `reader` is an H5Reader.

    Args:
        layout: the checked layout of a checkpoint.
        reader: the H5Reader the layout came from (tensors then read lazily); None: tensors read at once.
        map_location: as for `cstorch.load`: None, "cache", a device or a device string.
        allow_pickle: unpickle the pickled objects (else they stay PickledObject).
    """
    cache = map_location == "cache" or bool(serializers.cache_deferred_tensors)
    if cache:
        map_location = None
    if not (map_location is None or isinstance(map_location, (str, torch.device))):
        raise TypeError(f"cstorch.load of an H5 checkpoint takes map_location as None, 'cache', a device or a "
                        f"device string, not {type(map_location).__name__}.")

    def make_tensor(entry, shape, dtype):
        if reader is not None and _is_cpu(map_location):
            return H5Tensor(reader, entry, shape, dtype, cache)
        t = entry_tensor(layout.source, entry, shape, dtype)
        return t if map_location is None else t.to(map_location)

    return state_of(layout, make_tensor, allow_pickle)


def _load_h5(path, map_location=None, allow_pickle=False, **_):
    reader = H5Reader(path)
    return state_from_layout(reader.layout(), reader, map_location, allow_pickle)


def _load_orbax(path, map_location=None, allow_pickle=False, **_):
    return state_from_layout(read_orbax(path), None, map_location, allow_pickle)


def _load_torch(path, map_location=None, allow_pickle=False, **kwargs):
    return torch_load(path, map_location, allow_pickle, **kwargs)


FORMATS: dict[str, CheckpointFormat] = {}


def register(fmt: CheckpointFormat) -> None:
    if fmt.name in FORMATS:
        raise ValueError(f"a checkpoint format named {fmt.name!r} is registered already")
    FORMATS[fmt.name] = fmt


register(CheckpointFormat("h5", "H5 checkpoint", is_h5, read_h5, write_h5, _load_h5))
register(CheckpointFormat("orbax", "cstorch orbax directory", is_orbax_dir, read_orbax, write_orbax, _load_orbax))
register(CheckpointFormat("torch", "torch pickle", is_torch_file, read_torch, write_torch, _load_torch))


def detect(path) -> CheckpointFormat:
    """The format of the checkpoint at `path`.

    Args:
        path: a file or directory; a path that is not a checkpoint of a known format raises
            InvalidCheckpointError.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"No checkpoint at '{path}'.")
    for fmt in FORMATS.values():
        if fmt.detect(path):
            return fmt
    kinds = ", ".join(f.description for f in FORMATS.values())
    raise InvalidCheckpointError(path, f"Failed to load checkpoint file: it is not a checkpoint (cstorch reads: "
                                       f"{kinds}).")
