"""`cstorch.save` / `cstorch.load`: checkpoints in the real system's H5 layout
(format 0.5; see `layout.py` and `h5.py`)."""
from __future__ import annotations

import os

import torch

from ..unsupported import module_getattr
from . import serializers
from .h5 import H5Reader, H5Tensor, write_h5
from .layout import FORMAT_VERSION, Layout, PickledObject, entry_tensor, layout_of, state_of

__all__ = ["save", "load", "PickledObject", "H5Tensor", "FORMAT_VERSION", "serializers"]
__getattr__ = module_getattr(__name__)  # names of the real module not provided here (cstorch.unsupported)


def save(state_dict, ckpt_path, *, allow_pickle: bool = False) -> None:
    """Write `state_dict` (nested dicts, lists and tuples of tensors, numpy arrays,
    numbers, strings and None) to a new H5 checkpoint at `ckpt_path`, atomically.
    Refuses to overwrite an existing file. Other objects are stored pickled only with
    `allow_pickle=True`. During a CSX run the torch tensors are first brought up to
    the device's latest values, so the file holds the state of the last step run. In
    a multi-process run every process holds the same state and only process 0 writes."""
    from .._backend import backend
    from ..distributed.processes import is_main_process

    b = backend()
    if b is not None:
        b.run.sync_state_to_host()
    if is_main_process():
        write_h5(layout_of(state_dict, allow_pickle), ckpt_path)


def _is_cpu(map_location) -> bool:
    return map_location is None or torch.device(map_location).type == "cpu"


def state_from_layout(layout: Layout, reader, map_location=None, allow_pickle: bool = False):
    """The nested state of `layout`; tensors are lazy when `reader` is an H5Reader."""
    cache = map_location == "cache" or bool(serializers.cache_deferred_tensors)
    if cache:
        map_location = None
    if not (map_location is None or isinstance(map_location, (str, torch.device))):
        raise TypeError(f"cstorch.load of an H5 checkpoint takes map_location as None, 'cache', a device or a "
                        f"device string, not {type(map_location).__name__}.")

    def make_tensor(entry, shape, dtype):
        if reader is not None and _is_cpu(map_location):
            return H5Tensor(reader, entry, shape, dtype, cache)
        t = entry_tensor(entry, shape, dtype)
        return t if map_location is None else t.to(map_location)

    return state_of(layout, make_tensor, allow_pickle)


def load(ckpt_path, map_location=None, *, allow_pickle: bool = False, **kwargs):
    """Read a checkpoint: an H5 file of format 0.5 (tensors load lazily, read from the
    file when used), an orbax-checkpoint directory written by `cstorch.checkpoint`, or
    anything `torch.load` reads. Pickled objects in an H5 file come back as
    `PickledObject`s unless `allow_pickle=True`, which also lets `torch.load` unpickle
    (`weights_only=False`)."""
    if allow_pickle:
        kwargs.setdefault("weights_only", False)
    if not isinstance(ckpt_path, (str, os.PathLike)):
        return _torch_load(ckpt_path, map_location, **kwargs)
    path = os.fspath(ckpt_path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"No checkpoint at '{path}'.")
    if os.path.isdir(path):
        from ..checkpoint.orbax_format import read_orbax

        return state_from_layout(read_orbax(path), None, map_location, allow_pickle)
    import h5py

    if not h5py.is_hdf5(path):
        return _torch_load(path, map_location, **kwargs)
    reader = H5Reader(path)
    return state_from_layout(reader.layout(), reader, map_location, allow_pickle)


def _torch_load(f, map_location, **kwargs):
    try:
        return torch.load(f, map_location=map_location, **kwargs)
    except FileNotFoundError:
        raise
    except Exception as e:
        hint = (" It is a torch pickle holding objects beyond tensors; pass allow_pickle=True if you trust the file."
                if "weights_only" in str(e) else " It is neither an H5 checkpoint nor a torch pickle.")
        raise RuntimeError(f"Failed to load checkpoint file '{f}'.{hint} ({e})") from e
