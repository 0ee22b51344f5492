"""Checkpoints as torch pickles (`torch.save` files).

`torch.load` runs with `weights_only=True` (passed explicitly, so no environment
variable turns it off) unless the caller passes `allow_pickle=True`. A file is taken
for a torch pickle only when it looks like one (a zip archive, torch's default, or a
legacy pickle starting with torch's magic number); anything else is not a checkpoint.
"""
from __future__ import annotations

import os
import pickle

import torch

from .atomic import write_atomically
from .errors import InvalidCheckpointError
from .layout import OBJECT, Layout, entry_tensor, layout_of, state_of

# pickle protocol 2, then the long 0x1950a86a20f9469cfc6c that torch.save writes first
_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"
_ZIP_MAGIC = b"PK\x03\x04"  # a zip archive's first local file header (torch's default format)


def is_torch_file(path: str) -> bool:
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        head = f.read(len(_LEGACY_MAGIC))
    return head == _LEGACY_MAGIC or head.startswith(_ZIP_MAGIC)


def torch_load(f, map_location=None, allow_pickle: bool = False, **kwargs):
    """`torch.load(f)`; its failures as errors that say whether the file is corrupt or
    holds objects that only `allow_pickle=True` unpickles."""
    kwargs.setdefault("weights_only", not allow_pickle)
    try:
        return torch.load(f, map_location=map_location, **kwargs)
    except FileNotFoundError:
        raise
    except pickle.UnpicklingError as e:
        if kwargs["weights_only"] and "Weights only load failed" in str(e):
            raise RuntimeError(f"Failed to load checkpoint file '{f}'. It is a torch pickle holding objects beyond "
                               f"tensors; pass allow_pickle=True if you trust the file. ({e})") from e
        raise InvalidCheckpointError(f, f"the torch pickle is corrupt: {e}") from e
    except Exception as e:  # torch's zip reader and unpickler raise many kinds of error on a damaged file
        raise InvalidCheckpointError(f, f"the torch pickle is corrupt ({type(e).__name__}: {e})") from e


def read_torch(path: str, allow_pickle: bool = False) -> Layout:
    """The layout of the state a torch pickle holds."""
    layout = layout_of(torch_load(path, allow_pickle=allow_pickle), allow_pickle)
    layout.source = path
    return layout


def write_torch(layout: Layout, path, allow_pickle: bool = False) -> None:
    """`torch.save` the state of `layout` into a new file `path` (atomically). Pickled
    objects are unpickled only with `allow_pickle=True`. Numpy arrays stay numpy arrays,
    so a state holding them needs `torch.load(..., weights_only=False)`."""
    keys = [e.key for e in layout.entries if e.kind == OBJECT]
    if keys and not allow_pickle:
        raise ValueError(f"The checkpoint holds pickled objects at {keys}; converting them to a torch pickle means "
                         f"unpickling them. Pass allow_pickle=True (--allow-pickle) if you trust the file.")
    state = state_of(layout, lambda e, shape, dtype: entry_tensor(layout.source, e, shape, dtype), allow_pickle)

    def write(tmp, check):
        torch.save(state, tmp)

    write_atomically(path, write)
