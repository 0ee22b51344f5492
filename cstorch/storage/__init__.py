"""`cstorch.save` / `cstorch.load`: checkpoints in the real system's H5 layout
(format 0.5; see `layout.py` and `h5.py`), and the other formats of `formats.py`."""
from __future__ import annotations

import os

from .._backend import backend
from ..distributed.processes import is_main_process
from ..unsupported import module_getattr
from . import constants, serializers
from .errors import InvalidCheckpointError
from .formats import FORMATS, CheckpointFormat, detect, state_from_layout
from .h5 import H5Tensor
from .layout import FORMAT_VERSION, PickledObject, layout_of
from .torch_file import torch_load

__all__ = ["save", "load", "PickledObject", "H5Tensor", "FORMAT_VERSION", "constants", "serializers",
           "InvalidCheckpointError",
           "FORMATS", "CheckpointFormat", "detect", "state_from_layout"]
__getattr__ = module_getattr(__name__)  # names of the real module not provided here (cstorch.unsupported)


def save(state_dict, ckpt_path, *, allow_pickle: bool = False) -> None:
    """Write `state_dict` (nested dicts, lists and tuples of tensors, numpy arrays,
    numbers, strings and None) to a new H5 checkpoint at `ckpt_path`, atomically.
    Refuses to overwrite an existing file. Other objects are stored pickled only with
    `allow_pickle=True`. During a CSX run the torch tensors are first brought up to
    the device's latest values, so the file holds the state of the last step run. In
    a multi-process run every process holds the same state and only process 0 writes.
    Ctrl-C or SIGTERM during the write abandons it (no file, no temporary file) and
    then raises KeyboardInterrupt, or exits (SIGTERM); see `interrupts.py`.

    Args:
        state_dict: the state to write: nested dicts, lists and tuples of tensors, numpy arrays, numbers,
            strings and None.
        ckpt_path: the path of the new file (it must not exist).
        allow_pickle: store any other object pickled (else such an object raises).

    Differences from the real system:
        Pickled objects only with `allow_pickle=True` on save and load (without it they
        load as `PickledObject` placeholders). Only tensors, arrays and pickled objects are
        linked when repeated (the real writer links any repeated object, which is read).
        `int8` and complex tensors get no RtFx code. S3 paths and safetensors are not
        supported. The file is written in the HDF5 1.10 format with Fletcher-32 on every
        chunk and CRC-32s in the HDF5 user block, which other readers of the format, the
        real library included, skip.
    """
    b = backend()
    if b is not None:
        b.run.sync_state_to_host()
    if is_main_process():
        FORMATS["h5"].write(layout_of(state_dict, allow_pickle), ckpt_path)


def load(ckpt_path, map_location=None, *, allow_pickle: bool = False, **kwargs):
    """Read a checkpoint: an H5 file of format 0.5 (tensors load lazily, read from the
    file when used), an orbax-checkpoint directory written by `cstorch.checkpoint`, or
    a torch pickle (also a file object). Pickled objects in an H5 file come back as
    `PickledObject`s unless `allow_pickle=True`, which also lets `torch.load` unpickle
    (`weights_only=False`). A file that is not a checkpoint, or a damaged one, raises
    `InvalidCheckpointError` naming the file and the entry at fault.

    Args:
        ckpt_path: the path of an H5 file, an orbax directory or a torch pickle, or an open file object of a
            torch pickle.
        map_location: where tensors go: None (lazy CPU tensors of an H5 file), "cache" (lazy tensors kept in
            memory once read), a device or a device string (tensors read at once and moved there).
        allow_pickle: unpickle pickled objects (and read a torch pickle with `weights_only=False`).
        **kwargs: passed to `torch.load` for a torch pickle; ignored for the other formats.

    Differences from the real system:
        Format versions below 0.5 (legacy) and external links are refused with a
        clear error; S3 paths and safetensors are not supported. A torch pickle is
        read with `weights_only=True` unless `allow_pickle=True`.
    """
    if not isinstance(ckpt_path, (str, os.PathLike)):
        return torch_load(ckpt_path, map_location, allow_pickle, **kwargs)
    return detect(ckpt_path).load(os.fspath(ckpt_path), map_location, allow_pickle, **kwargs)
