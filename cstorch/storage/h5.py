"""The H5 file of a checkpoint layout (the real system's format 0.5).

File root attributes: `__spec__` (JSON `[skeleton, treespec]`), `__version__` = 0.5,
`__cstorch_version__`, one `<key>.__metadata__` JSON per leaf and `__SUCCESS__`,
written last. One dataset per tensor, numpy array or pickled object, flat at the root
and named by its dotted key. Tensor datasets hold the numpy data (bfloat16 as its int16
bit pattern), LZ4-compressed through hdf5plugin (filter 32004) unless 0-d; a pickled
object is an empty dataset whose `__BYTES__` attribute holds the pickle.

Writing is atomic: a temporary file `<path>.<8 hex>.tmp` is written, flushed to disk
and then linked to `path`, which must not exist. Reading keeps the file open;
tensors are read when first used (`H5Tensor`), after checking that the file has not
changed since it was opened.
"""
from __future__ import annotations

import json
import os
import sys
import uuid

import h5py
import hdf5plugin
import ml_dtypes
import numpy as np
import torch
from torch.utils._pytree import treespec_loads

from cstorch_jax import LazyTensor

from . import serializers
from .layout import (FORMAT_VERSION, NUMPY, OBJECT, TENSOR, Entry, Layout, entry_metadata, entry_tensor, flat_keys,
                     key_metadata)

_LZ4 = hdf5plugin.LZ4()


def _stored_array(a: np.ndarray) -> np.ndarray:
    return a.view(np.int16) if a.dtype == ml_dtypes.bfloat16 else a


def _write_entry(f: h5py.File, e: Entry, value) -> None:
    if e.payload is None:
        return
    if e.kind == OBJECT:
        ds = f.create_dataset(e.key, data=h5py.Empty("f"), track_order=True)
        ds.attrs.update(e.metadata)
        ds.attrs["__BYTES__"] = np.void(bytes(value))
        return
    arr = _stored_array(np.require(value, requirements="C"))
    ds = f.create_dataset(e.key, data=arr, **(_LZ4 if arr.ndim else {}))
    ds.attrs.update(e.metadata)
    ds.attrs["__NUMPY__"] = True


def _payloads(entries):
    """(entry, payload) in order, the payloads (host copies of the tensors) made by
    `cstorch.backends.csx.performance.transfer_processes` threads, a bounded window ahead."""
    from concurrent.futures import ThreadPoolExecutor

    from ..backends import csx

    workers = csx.performance.transfer_processes
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cstorch-save") as pool:
        window = []
        for e in entries:
            window.append((e, pool.submit(e.payload) if e.payload is not None else None))
            if len(window) > 2 * workers:
                e0, f0 = window.pop(0)
                yield e0, f0.result() if f0 is not None else None
        for e0, f0 in window:
            yield e0, f0.result() if f0 is not None else None


def _progress(total: int, desc: str):
    if total < 64 or not sys.stdout.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=" entries", dynamic_ncols=True, file=sys.stdout)


def _publish(tmp: str, path: str) -> None:
    """Make `tmp` appear at `path` in one step, never replacing an existing file."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise FileExistsError(f"Checkpoint at '{path}' already exists. Please delete the checkpoint and run "
                              f"again.") from None
    except OSError:  # a file system without hard links
        if os.path.exists(path):
            raise FileExistsError(f"Checkpoint at '{path}' already exists. Please delete the checkpoint and run "
                                  f"again.") from None
        os.replace(tmp, path)
        return
    os.remove(tmp)


def write_h5(layout: Layout, path: str) -> None:
    """Write `layout` as a new H5 checkpoint at `path` (atomically; `path` must not exist)."""
    path = os.fspath(path)
    if os.path.exists(path):
        raise FileExistsError(f"Checkpoint at '{path}' already exists. Please delete the checkpoint and run again.")
    tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    progress = _progress(len(layout.entries), "Saving checkpoint")
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["__spec__"] = layout.spec_json
            f.attrs["__version__"] = FORMAT_VERSION
            f.attrs["__cstorch_version__"] = layout.cstorch_version
            for e, value in _payloads(layout.entries):
                _write_entry(f, e, value)
                f.attrs[f"{e.key}.__metadata__"] = key_metadata(e.key, e.metadata)
                if progress is not None:
                    progress.update(1)
            f.attrs["__SUCCESS__"] = True
        with open(tmp, "rb+") as fd:
            os.fsync(fd.fileno())
        _publish(tmp, path)
        dir_fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    finally:
        if progress is not None:
            progress.close()
        if os.path.exists(tmp):
            os.remove(tmp)


class H5Reader:
    """An open H5 checkpoint: validated on open, read entry by entry."""

    def __init__(self, path: str):
        self.path = os.fspath(path)
        try:
            self.file = h5py.File(self.path, "r")
        except OSError as e:
            raise RuntimeError(
                f"Checkpoint '{self.path}' is truncated or corrupt: HDF5 cannot open it ({e}). The file was probably "
                f"cut short by a failed copy or an interrupted write; use an earlier checkpoint."
            ) from e
        self._stat = self._fingerprint()
        attrs = self.file.attrs
        if "__version__" not in attrs:
            raise RuntimeError(f"'{self.path}' is an HDF5 file but not a cstorch checkpoint (it has no __version__ "
                               f"attribute).")
        version = float(attrs["__version__"])
        if version != FORMAT_VERSION:
            hint = ("is an older (legacy) layout; re-save it with the Cerebras release that wrote it"
                    if version < FORMAT_VERSION else "was written by a newer release")
            raise RuntimeError(f"Checkpoint '{self.path}' has format version {version}, which {hint}. This cstorch "
                               f"reads format version {FORMAT_VERSION}.")
        if not attrs.get("__SUCCESS__", False):
            raise RuntimeError(f"Cannot load partially written checkpoint at '{self.path}': it has no __SUCCESS__ "
                               f"marker, so the save that wrote it did not finish. Use an earlier checkpoint.")

    def _fingerprint(self):
        st = os.fstat(self.file.id.get_vfd_handle())
        return st.st_mtime_ns, st.st_size

    def check_unchanged(self, key: str) -> None:
        if serializers.check_deferred_backing_storage and self._fingerprint() != self._stat:
            raise RuntimeError(
                f"Attempting to read the lazily loaded tensor {key!r} from '{self.path}', but the file has been "
                f"modified since it was loaded, so its value may differ from the one loaded. Do not modify a "
                f"checkpoint while a run uses it; if this is a false alarm, read it under "
                f"`with cstorch.storage.serializers.check_deferred_backing_storage(False):`."
            )

    def layout(self) -> Layout:
        attrs = self.file.attrs
        try:
            skeleton, treespec = json.loads(attrs["__spec__"])
        except (KeyError, ValueError) as e:
            raise RuntimeError(f"Checkpoint '{self.path}' has no readable __spec__ attribute: {e}") from e
        layout = Layout(skeleton, treespec, cstorch_version=str(attrs.get("__cstorch_version__", "")))
        for key in flat_keys(treespec_loads(treespec)):
            name = f"{key}.__metadata__"
            if name not in attrs:
                raise RuntimeError(f"Checkpoint '{self.path}' lists {key!r} in its structure but has no metadata for "
                                   f"it; the file is corrupt.")
            meta = entry_metadata(key, attrs[name])
            payload = None
            if meta["__TYPE__"] == OBJECT:
                payload = lambda k=key: self.read_bytes(k)  # noqa: E731
            elif meta.get("__NUMPY__") or meta["__TYPE__"] in (TENSOR, NUMPY):
                payload = lambda k=key, m=meta: self.read_array(k, m)  # noqa: E731
            layout.entries.append(Entry(key, meta, payload))
        return layout

    def _dataset(self, key: str):
        try:
            return self.file[key]
        except KeyError:
            raise RuntimeError(f"Checkpoint '{self.path}' has no dataset {key!r} although its metadata describes "
                               f"one; the file is corrupt.") from None

    def read_array(self, key: str, meta: dict) -> np.ndarray:
        """The entry's array in its natural dtype (bfloat16 viewed back from int16)."""
        self.check_unchanged(key)
        ds = self._dataset(key)
        try:
            arr = ds[()]
        except OSError as e:
            raise RuntimeError(f"Could not read {key!r} from checkpoint '{self.path}' (the data is corrupt: {e}).") \
                from e
        arr = np.asarray(arr)
        if "shapes" in meta and list(arr.shape) != list(meta["shapes"][0]):
            raise RuntimeError(f"Checkpoint '{self.path}': the dataset {key!r} has shape {list(arr.shape)} but its "
                               f"metadata says {list(meta['shapes'][0])}; the file is corrupt.")
        if meta.get("dtypes", [None])[0] == "torch.bfloat16" or meta.get("is_bfloat16"):
            arr = arr.view(ml_dtypes.bfloat16)
        return arr

    def read_bytes(self, key: str) -> bytes:
        self.check_unchanged(key)
        raw = self._dataset(key).attrs.get("__BYTES__")
        if raw is None:
            raise RuntimeError(f"Checkpoint '{self.path}': the object {key!r} has no __BYTES__ payload.")
        return raw.tobytes()


class H5Tensor(LazyTensor):
    """A tensor of an H5 checkpoint, read from the file each time it is used (or
    once, when caching), after checking that the file is unchanged."""

    @staticmethod
    def __new__(cls, reader: H5Reader, entry: Entry, shape, dtype: torch.dtype, cache: bool):
        t = LazyTensor.__new__(cls, shape, dtype)
        t._reader = reader
        t._entry = entry
        t._keeps_value = cache
        return t

    def __init__(self, *args, **kwargs):
        pass

    def _fetch(self) -> torch.Tensor:
        return entry_tensor(self._entry, self.shape, self.dtype)
