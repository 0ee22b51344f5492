"""The H5 file of a checkpoint layout (the real system's format 0.5).

File root attributes: `__spec__` (JSON `[skeleton, treespec]`), `__version__` = 0.5,
`__cstorch_version__`, one `<key>.__metadata__` JSON per leaf and `__SUCCESS__`,
written last. One dataset per tensor, numpy array or pickled object, flat at the root
and named by its dotted key. Tensor datasets hold the numpy data (bfloat16 as its int16
bit pattern), LZ4-compressed through hdf5plugin (filter 32004) unless 0-d; a pickled
object is an empty dataset whose `__BYTES__` attribute holds the pickle. HDF5 checksums
its own structures and, through the Fletcher-32 filter, every chunk; the HDF5 user block
holds CRC-32s of the rest (`checksums.py`). Readers of the format need nothing more.

Writing is atomic (`atomic.py`): a temporary file is written, flushed and linked to
`path`, which must not exist; large arrays are written in slabs so that Ctrl-C stops a
save between two of them. A write that fails (a full disk: ENOSPC; a file-size limit:
EFBIG) must never fail inside HDF5, which then keeps the file's objects open and writes
them again when the process exits (a crash, SIGSEGV, after the error was handled). So
HDF5 writes the file in place only where that is safe: where the disk's free space and
the process's file-size limit both exceed the most the file can take (`size_bound`;
`writes_in_place`). Elsewhere (and for a layout whose payload sizes are not known in
advance) the file is built in memory (HDF5's core driver, no backing store) and its
bytes are then written with plain writes, which fail cleanly with the OSError: this
costs host memory of up to twice the file's size while it is saved. Both ways write the
same HDF5 objects at the same offsets; a file built in memory also keeps the free space
HDF5 leaves at the end of a file before closing it (HDF5 trims it when it closes a file
on disk; up to a few kilobytes), its superblock giving that length. The one failure left
to HDF5 is a disk that another writer fills during a save written in place.

Reading keeps the file open and checks everything it uses: the attributes when opened,
each dataset's dtype and shape against the entry's metadata when first read, and the
checksums. Tensors are read when used (`H5Tensor`), after checking that the file has
not changed since it was opened.
"""
from __future__ import annotations

import json
import math
import os
import resource
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

import h5py
import hdf5plugin
import ml_dtypes
import numpy as np
import torch
from tqdm import tqdm

from cstorch_jax import LazyTensor

from ..backends import csx
from . import serializers
from .atomic import write_atomically
from .checksums import Checksums, block_size, count_strings, crc, seal
from .errors import InvalidCheckpointError
from .layout import (FORMAT_VERSION, NUMPY, NUMPY_DTYPES, OBJECT, TENSOR, Entry, Layout, check_layout, entry_metadata,
                     entry_tensor, key_metadata, structure, tensor_dtype)

_LZ4 = hdf5plugin.LZ4()
_LIBVER = ("v110", "v110")  # checksummed superblock, object headers, heaps and chunk indexes (HDF5 >= 1.10)
_SIGNATURE = b"\x89HDF\r\n\x1a\n"
SLAB_BYTES = 64 << 20  # a large array is written in slabs of about this size, with a safe point after each
_MAX_EXPANSION = 1024  # LZ4 expands data at most ~255 times: a dataset larger than this times the file is corrupt
_IMAGE_INCREMENT = 4 << 20  # the in-memory file grows by this much at a time


# -- writing --------------------------------------------------------------------------------
def _stored_array(a: np.ndarray) -> np.ndarray:
    return a.view(np.int16) if a.dtype == ml_dtypes.bfloat16 else a


def _write_array(f: h5py.File, key: str, arr: np.ndarray, check: Callable[[], None]) -> h5py.Dataset:
    if arr.ndim == 0:
        return f.create_dataset(key, data=arr)
    if arr.nbytes <= SLAB_BYTES:
        return f.create_dataset(key, data=arr, fletcher32=True, **_LZ4)
    ds = f.create_dataset(key, shape=arr.shape, dtype=arr.dtype, fletcher32=True, **_LZ4)
    row_bytes = max(1, arr.nbytes // arr.shape[0])
    rows = max(1, SLAB_BYTES // row_bytes // ds.chunks[0]) * ds.chunks[0]  # whole chunks per slab
    for start in range(0, arr.shape[0], rows):
        ds[start:start + rows] = arr[start:start + rows]
        check()
    return ds


def _write_entry(f: h5py.File, e: Entry, value, check: Callable[[], None]) -> Optional[str]:
    """Write the entry's dataset (`value` is its payload), if it has one; the checksum of
    its stored data."""
    if e.payload is None:
        return None
    if e.kind == OBJECT:
        data = bytes(value)
        ds = f.create_dataset(e.key, data=h5py.Empty("f"), track_order=True)
        ds.attrs.update(e.metadata)
        ds.attrs["__BYTES__"] = np.void(data)
        return crc(data)
    arr = _stored_array(np.require(value, requirements="C"))
    ds = _write_array(f, e.key, arr, check)
    ds.attrs.update(e.metadata)
    ds.attrs["__NUMPY__"] = True
    return crc(arr)


def _payloads(entries):
    """(entry, payload) in order, the payloads (host copies of the tensors) made by
    `cstorch.backends.csx.performance.transfer_processes` threads, a bounded window ahead.
    Abandoned (an interrupted save), it cancels the copies not yet started."""
    workers = csx.performance.transfer_processes
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cstorch-save")
    try:
        window = []
        for e in entries:
            window.append((e, pool.submit(e.payload) if e.payload is not None else None))
            if len(window) > 2 * workers:
                e0, f0 = window.pop(0)
                yield e0, f0.result() if f0 is not None else None
        for e0, f0 in window:
            yield e0, f0.result() if f0 is not None else None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _progress(total: int, desc: str):
    if total < 64 or not sys.stdout.isatty():
        return None
    return tqdm(total=total, desc=desc, unit=" entries", dynamic_ncols=True, file=sys.stdout)


def _payload_bytes(e: Entry) -> Optional[int]:
    """The size of the entry's payload, or None when it is not known before it is made."""
    if e.kind == TENSOR:
        dtype = np.dtype(NUMPY_DTYPES[tensor_dtype(e.metadata)])
        return math.prod(e.metadata["shapes"][0]) * dtype.itemsize
    return e.nbytes


def size_bound(layout: Layout, userblock: int) -> Optional[int]:
    """An upper bound of the size of the H5 file of `layout` (with a user block of
    `userblock` bytes), or None when the size of some payload is not known before it is
    made (a layout read from a file). Generous: twice the data (LZ4 expands data that does
    not compress by less than 1 %, and chunks at an array's edges are padded) and twice
    the text, plus 64 KiB per array and 1 MiB for HDF5's own structures."""
    total = userblock + (1 << 20) + 2 * len(layout.spec_json)
    for e in layout.entries:
        total += 4096 + 2 * len(key_metadata(e.key, e.metadata))
        if e.payload is None:
            continue
        n = _payload_bytes(e)
        if n is None:
            return None
        total += 2 * n + (64 << 10) + 2 * len(json.dumps(e.metadata))
    return total


def room(folder: str) -> float:
    """How large a file may grow in `folder`: the disk's free space (for unprivileged
    users) and the process's file-size limit, the smaller; 0 when it cannot be told."""
    try:
        st = os.statvfs(folder or ".")
    except OSError:
        return 0
    free = st.f_bavail * st.f_frsize
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return free if soft == resource.RLIM_INFINITY else min(free, soft)


def writes_in_place(layout: Layout, folder: str, userblock: int) -> bool:
    """Whether HDF5 writes the H5 file of `layout` in place in `folder` rather than it
    being built in memory (module doc): only when `folder` has room (`room`) for the
    most the file can take (`size_bound`)."""
    bound = size_bound(layout, userblock)
    return bound is not None and bound <= room(folder)


def _fill(f: h5py.File, layout: Layout, check: Callable[[], None], progress) -> dict:
    """Write the layout into the open HDF5 file `f`; the checksums of its entries."""
    digests = {}
    f.attrs["__spec__"] = layout.spec_json
    f.attrs["__version__"] = FORMAT_VERSION
    f.attrs["__cstorch_version__"] = layout.cstorch_version
    for e, value in _payloads(layout.entries):
        check()
        data_digest = _write_entry(f, e, value, check)
        text = key_metadata(e.key, e.metadata)
        f.attrs[f"{e.key}.__metadata__"] = text
        digests[e.key] = [crc(text), data_digest]
        if progress is not None:
            progress.update(1)
    f.attrs["__SUCCESS__"] = True
    return digests


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data):]


def _write_image(tmp: str, userblock: int, image: bytes, check: Callable[[], None]) -> None:
    """Create `tmp` holding a zeroed user block of `userblock` bytes, then `image` (the
    HDF5 file as HDF5 lays it out after the user block), in slabs with a safe point
    after each."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        _write_all(fd, memoryview(bytes(userblock)))
        view = memoryview(image)
        for start in range(0, len(view), SLAB_BYTES):
            _write_all(fd, view[start:start + SLAB_BYTES])
            check()
    finally:
        os.close(fd)


def _write_file(layout: Layout, tmp: str, check: Callable[[], None], in_place: Optional[bool] = None) -> None:
    """Write the H5 file of `layout` at `tmp` (built in memory, or in place where
    `writes_in_place` says so, or as `in_place` says), then its checksums."""
    strings = 2 + len(layout.entries) + sum(count_strings(e.metadata) for e in layout.entries if e.payload)
    size = block_size({e.key: e.payload is not None for e in layout.entries}, strings)
    if in_place is None:
        in_place = writes_in_place(layout, os.path.dirname(os.path.abspath(tmp)), size)
    progress = _progress(len(layout.entries), "Saving checkpoint")
    try:
        if in_place:
            with h5py.File(tmp, "w", userblock_size=size, libver=_LIBVER) as f:
                digests = _fill(f, layout, check, progress)
        else:
            with h5py.File(tmp, "w", driver="core", backing_store=False, block_size=_IMAGE_INCREMENT,
                           userblock_size=size, libver=_LIBVER) as f:
                digests = _fill(f, layout, check, progress)
                f.flush()
                image = f.id.get_file_image()
            _write_image(tmp, size, image, check)
            del image
    finally:
        if progress is not None:
            progress.close()
    check()
    seal(tmp, size, crc(layout.spec_json), digests, strings)


def write_h5(layout: Layout, path, allow_pickle: bool = False) -> None:
    """Write `layout` as a new H5 checkpoint at `path` (atomically; `path` must not exist;
    built in memory where the disk may lack room for it: module doc). Pickled objects are
    carried as bytes, whatever `allow_pickle` says."""
    write_atomically(path, lambda tmp, check: _write_file(layout, tmp, check))


# -- reading --------------------------------------------------------------------------------
def _stored_dtype(meta: dict) -> tuple[Optional[np.dtype], bool]:
    """The dtype an entry's dataset must have (None: any, for a numpy array) and whether
    it holds bfloat16 bit patterns."""
    if meta["__TYPE__"] == TENSOR:
        dtype = tensor_dtype(meta)
        return np.dtype(np.int16 if dtype == torch.bfloat16 else NUMPY_DTYPES[dtype]), dtype == torch.bfloat16
    bf16 = bool(meta.get("is_bfloat16"))
    return (np.dtype(np.int16) if bf16 else None), bf16


def is_h5(path: str) -> bool:
    """Whether `path` is an HDF5 file: its signature at offset 0, 512, 1024, 2048, ...
    (after a user block), found without HDF5 parsing anything."""
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        offset = 0
        while offset + len(_SIGNATURE) <= size:
            f.seek(offset)
            if f.read(len(_SIGNATURE)) == _SIGNATURE:
                return True
            offset = 512 if offset == 0 else offset * 2
    return False


def _flag(value) -> bool:
    return isinstance(value, (bool, np.bool_)) and bool(value)


class H5Reader:
    """An open H5 checkpoint: validated on open, read entry by entry."""

    def __init__(self, path: str):
        self.path = os.fspath(path)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            self.checksums = Checksums.read(self.path, fd)  # before HDF5 parses anything
        finally:
            os.close(fd)
        try:
            self.file = h5py.File(self.path, "r")
        except Exception as e:
            raise InvalidCheckpointError(
                self.path, f"the file is truncated or corrupt: HDF5 cannot open it ({e}). The file was probably cut "
                           f"short by a failed copy or an interrupted write; use an earlier checkpoint.") from e
        self._stat = self._fingerprint()
        try:
            self._check_header()
        except BaseException:
            self.file.close()
            raise

    def _check_header(self) -> None:
        version = self._attr("__version__")
        if version is None:
            raise InvalidCheckpointError(self.path, "it is an HDF5 file but not a cstorch checkpoint (it has no "
                                                    "__version__ attribute).")
        if not (isinstance(version, (int, float, np.integer, np.floating)) and not isinstance(version, bool)):
            raise InvalidCheckpointError(self.path, f"its __version__ attribute is {version!r}, not a number; the "
                                                    f"file is corrupt.")
        version = float(version)
        if version != FORMAT_VERSION:
            hint = ("is an older (legacy) layout; re-save it with the Cerebras release that wrote it"
                    if version < FORMAT_VERSION else "was written by a newer release")
            raise InvalidCheckpointError(self.path, f"it has format version {version}, which {hint}. This cstorch "
                                                    f"reads format version {FORMAT_VERSION}.")
        if not _flag(self._attr("__SUCCESS__")):
            raise InvalidCheckpointError(self.path, "Cannot load partially written checkpoint: it has no __SUCCESS__ "
                                                    "marker, so the save that wrote it did not finish. Use an earlier "
                                                    "checkpoint.")

    def _h5(self, what: str, read: Callable, entry: Optional[str] = None):
        """`read()`, with whatever h5py raises on a damaged file as an InvalidCheckpointError."""
        try:
            return read()
        except InvalidCheckpointError:
            raise
        except Exception as e:
            raise InvalidCheckpointError(self.path, f"HDF5 cannot read {what} ({type(e).__name__}: {e}); the file is "
                                                    f"corrupt.", entry) from e

    def _attr(self, name: str, entry: Optional[str] = None):
        """A root attribute's value, or None when there is none. An attribute that claims
        more data than the file holds is corrupt (reading it would allocate that much)."""
        def read():
            attrs = self.file.attrs
            if name not in attrs:
                return None
            aid = attrs.get_id(name)
            if aid.shape is not None and int(np.prod(aid.shape, dtype=object)) * aid.dtype.itemsize > self._stat[1]:
                raise InvalidCheckpointError(self.path, f"its attribute {name} claims shape {list(aid.shape)}, more "
                                                        f"than the file holds; the file is corrupt.", entry)
            return attrs[name]

        return self._h5(f"the attribute {name}", read, entry)

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

    def _text(self, name: str, entry: Optional[str] = None, default: Optional[str] = None) -> str:
        value = self._attr(name, entry)
        if value is None and default is not None:
            return default
        if value is None:
            raise InvalidCheckpointError(self.path, f"it has no {name} attribute; the file is corrupt.", entry)
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                pass
        if not isinstance(value, str):
            raise InvalidCheckpointError(self.path, f"its {name} attribute is not a string; the file is corrupt.",
                                         entry)
        return value

    def layout(self) -> Layout:
        """The checked layout; the checksums of every attribute it uses are verified."""
        spec_text = self._text("__spec__")
        try:
            skeleton, treespec = json.loads(spec_text)
            if not isinstance(treespec, str):
                raise ValueError("the treespec is not a string")
        except (TypeError, ValueError) as e:
            raise InvalidCheckpointError(self.path, f"its __spec__ attribute is not a [skeleton, treespec] pair "
                                                    f"({e}); the file is corrupt.") from None
        layout = Layout(skeleton, treespec, cstorch_version=self._text("__cstorch_version__", default=""),
                        source=self.path)
        texts = {}
        for key in structure(layout)[1]:
            texts[key] = self._text(f"{key}.__metadata__", key)
            meta = entry_metadata(self.path, key, texts[key])
            payload = None
            kind = meta.get("__TYPE__") if isinstance(meta, dict) else None
            if kind == OBJECT:
                payload = lambda k=key: self.read_bytes(k)  # noqa: E731
            elif kind in (TENSOR, NUMPY):
                payload = lambda k=key, m=meta: self.read_array(k, m)  # noqa: E731
            layout.entries.append(Entry(key, meta, payload))
        check_layout(layout)
        if self.checksums is not None:
            self.checksums.verify_metadata(spec_text, texts)
        return layout

    def _dataset(self, key: str) -> h5py.Dataset:
        ds = self._h5("the dataset", lambda: self.file.get(key), key)
        if not isinstance(ds, h5py.Dataset):
            raise InvalidCheckpointError(self.path, f"it has no dataset {key!r} although its metadata describes one; "
                                                    f"the file is corrupt.", key)
        return ds

    def read_array(self, key: str, meta: dict) -> np.ndarray:
        """The entry's array in its natural dtype (bfloat16 viewed back from int16),
        checked against the entry's metadata and checksum."""
        self.check_unchanged(key)
        ds = self._dataset(key)
        shape, dtype = self._h5("the dataset's shape and dtype", lambda: (ds.shape, ds.dtype), key)
        want_shape = meta["shapes"][0] if meta["__TYPE__"] == TENSOR else None
        if shape is None or dtype.hasobject:
            raise InvalidCheckpointError(self.path, f"the dataset {key!r} holds no array of numbers; the file is "
                                                    f"corrupt.", key)
        if want_shape is not None and list(shape) != list(want_shape):
            raise InvalidCheckpointError(self.path, f"the dataset {key!r} has shape {list(shape)} but its metadata "
                                                    f"says {list(want_shape)}; the file is corrupt.", key)
        want_dtype, bf16 = _stored_dtype(meta)
        if want_dtype is not None and dtype.newbyteorder("=") != want_dtype:
            said = meta["dtypes"][0] if want_shape is not None else "bfloat16, stored as int16"
            raise InvalidCheckpointError(self.path, f"the dataset {key!r} holds {dtype.name} data but its metadata "
                                                    f"says {said}; the file is corrupt.", key)
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if nbytes > _MAX_EXPANSION * max(self._stat[1], 1 << 20):
            raise InvalidCheckpointError(self.path, f"the dataset {key!r} claims shape {list(shape)}, far more data "
                                                    f"than the file can hold; the file is corrupt.", key)
        arr = self._h5("the dataset's data", lambda: np.asarray(ds[()]), key)
        if list(arr.shape) != list(shape) or arr.dtype != dtype:
            raise InvalidCheckpointError(self.path, f"the dataset {key!r} read back as {arr.dtype.name}"
                                                    f"{list(arr.shape)}; the file is corrupt.", key)
        if self.checksums is not None:
            self.checksums.verify_data(key, arr)
        return arr.view(ml_dtypes.bfloat16) if bf16 else arr

    def read_bytes(self, key: str) -> bytes:
        self.check_unchanged(key)
        ds = self._dataset(key)
        raw = self._h5("the pickled object", lambda: ds.attrs.get("__BYTES__"), key)
        if not isinstance(raw, np.void):
            raise InvalidCheckpointError(self.path, f"the object {key!r} has no __BYTES__ payload; the file is "
                                                    f"corrupt.", key)
        data = raw.tobytes()
        if self.checksums is not None:
            self.checksums.verify_data(key, data)
        return data


def read_h5(path, allow_pickle: bool = False) -> Layout:
    """The checked layout of an H5 checkpoint (pickled objects stay bytes)."""
    return H5Reader(path).layout()


class H5Tensor(LazyTensor):
    """A tensor of an H5 checkpoint, read from the file each time it is used (or
    once, when caching), after checking that the file is unchanged.

    Args:
        reader: the reader of the checkpoint file.
        entry: the tensor's entry in the file.
        shape: the tensor's shape.
        dtype: the tensor's dtype.
        cache: keep the values once read instead of reading them at every use.
    """

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
        return entry_tensor(self._reader.path, self._entry, self.shape, self.dtype)
