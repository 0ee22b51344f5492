"""Integrity of an H5 checkpoint: what HDF5 checks itself, and CRC-32s in its user block.

`cstorch.save` writes the file so that no damaged byte is ever parsed, decompressed or
returned unnoticed:

- HDF5 checks its own metadata: the file is written with `libver=("v110", "v110")`
  (readable by HDF5 1.10 and later), whose superblock, object headers, attribute heaps
  and chunk indexes carry checksums, and every chunked dataset has the Fletcher-32
  filter after LZ4, so a damaged chunk is refused before LZ4 decodes it.
- The rest is checked by CRC-32s that `cstorch.save` writes into the HDF5 user block (a
  region at the start of the file that HDF5 and every reader of the format skip), once
  the HDF5 file is complete:

      b"cstorch-checksums crc32 " <body length: 10 digits> b" " <body CRC> b"\\n" <body> <zeros>

  The body is JSON: the CRC of the `__spec__` attribute; per entry, the CRCs of its
  `<key>.__metadata__` attribute and of its stored data (dtype, shape and bytes of the
  array as stored, or the pickled object's bytes; null for metadata-only entries); and
  the offset of every global heap collection, where HDF5 keeps the text of string
  attributes without a checksum.

`cstorch.load` checks the structure of those heap collections before HDF5 opens the file
(HDF5's own parser loops forever on some damaged ones: `check_heap` refuses what would
make it loop or read past the collection), the attributes' CRCs after reading them, and
each entry's data CRC when it is first read. A well-formed edit (e.g. an attribute
rewritten with h5py) therefore fails its checksum too, after the checks that say what is
wrong with it. Every number in the body has a fixed width, so the user block's size is
known before the data is written. A file without the block (written by the Cerebras
release, an older cstorch, or an interrupted save) is read with HDF5's own checks only.
"""
from __future__ import annotations

import json
import mmap
import os
import struct
import zlib
from typing import Optional

import numpy as np

from .errors import InvalidCheckpointError

MAGIC = b"cstorch-checksums crc32 "
_HEAD = len(MAGIC) + 10 + 1 + 8 + 1
_PLACEHOLDER = "0" * 8
_OFFSET = "0" * 16  # a file offset, in hex
_HEAP = b"GCOL\x01\x00\x00\x00"  # a global heap collection: signature, version 1, three reserved bytes
_HEAP_MIN = 4096  # HDF5 never makes a smaller collection
_OBJECT_HEADER = 16  # heap object index (2), reference count (2), reserved (4), size (8)
_SLACK_HEAPS = 64


def crc(data) -> str:
    """CRC-32 of a str (UTF-8), bytes or numpy array (its dtype, shape and bytes), as 8
    hex digits."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")  # as h5py decodes it
    elif isinstance(data, np.ndarray):
        head = zlib.crc32(f"{data.dtype.str}{list(data.shape)}".encode("ascii"))
        return f"{zlib.crc32(np.ascontiguousarray(data).reshape(-1).view(np.uint8), head):08x}"
    return f"{zlib.crc32(data):08x}"


def _body(spec: str, entries: dict[str, list], heaps: Optional[list]) -> bytes:
    return json.dumps({"spec": spec, "entries": entries, "heaps": heaps}, separators=(",", ":")).encode("ascii")


def count_strings(metadata: dict) -> int:
    """How many strings HDF5 puts in global heaps for these dataset attributes."""
    return sum(1 if isinstance(v, str) else sum(isinstance(x, str) for x in v) if isinstance(v, list) else 0
               for v in metadata.values())


def block_size(entries: dict[str, bool], strings: int) -> int:
    """The user-block size (a power of two, at least 512, as HDF5 requires) that holds
    the checksums of `entries` ({key: has_data}) and of the global heap collections of
    `strings` strings (each collection holds at least one)."""
    body = _body(_PLACEHOLDER, {k: [_PLACEHOLDER, _PLACEHOLDER if has_data else None] for k, has_data in
                                entries.items()}, [_OFFSET] * (strings + _SLACK_HEAPS))
    size = 512
    while size < _HEAD + len(body):
        size *= 2
    return size


def heap_collections(fd: int, start: int, limit: int) -> Optional[list]:
    """The offsets (hex) of the global heap collections in the file after `start`, or None
    when more than `limit` look like one (data that happens to hold the signature)."""
    end = os.fstat(fd).st_size
    found = []
    if end <= start:
        return found
    with mmap.mmap(fd, end, prot=mmap.PROT_READ) as m:
        at = m.find(_HEAP, start)
        while at >= 0:
            if check_heap(fd, at) is None:
                found.append(f"{at:016x}")
                if len(found) > limit:
                    return None
            at = m.find(_HEAP, at + 1)
    return found


def check_heap(fd: int, offset: int) -> Optional[str]:
    """What is wrong with the global heap collection at `offset`, walking its objects as
    HDF5 does (each object: a 16-byte header, then its size rounded up to 8 bytes; index 0
    is the free space, its size counting its header), or None when HDF5 can parse it. A
    collection that is no longer there (freed by a later edit) is no concern: HDF5 reaches
    collections only through checksummed object headers."""
    head = os.pread(fd, 16, offset)
    if head[:4] != _HEAP[:4]:
        return None
    (size,) = struct.unpack("<Q", head[8:16])
    if head[4:8] != _HEAP[4:] or size < _HEAP_MIN or offset + size > os.fstat(fd).st_size:
        return f"a global heap collection at {offset} has a damaged header"
    data = os.pread(fd, size, offset)
    at = 16
    while at + _OBJECT_HEADER <= size:
        index, _ = struct.unpack("<HH", data[at:at + 4])
        (length,) = struct.unpack("<Q", data[at + 8:at + 16])
        need = _OBJECT_HEADER + (length + 7) // 8 * 8 if index else length
        if need < _OBJECT_HEADER or at + need > size:
            return f"an object of the global heap collection at {offset} is damaged"
        at += need
    return None


def seal(path: str, block: int, spec: str, entries: dict[str, list], strings: int) -> None:
    """Write the checksum block into the user block (of `block` bytes) of the finished file."""
    with open(path, "r+b") as fh:
        heaps = heap_collections(fh.fileno(), block, strings + _SLACK_HEAPS)
        body = _body(spec, entries, heaps)
        data = MAGIC + f"{len(body):010d} {crc(body)}\n".encode("ascii") + body
        if len(data) > block:
            raise ValueError(f"the checksums need {len(data)} bytes, more than the {block} reserved")
        fh.write(data + b"\0" * (block - len(data)))


class Checksums:
    """The digests of a file's user block; `read` checks its heap collections."""

    def __init__(self, path: str, spec: str, entries: dict[str, list]):
        self.path = path
        self.spec = spec
        self.entries = entries
        self._verified: set[str] = set()

    @classmethod
    def read(cls, path: str, fd: int) -> Optional["Checksums"]:
        """The checksums of the open file `fd` (None when it holds none), after checking
        the structure of the global heap collections they list. Reads nothing else."""
        head = os.pread(fd, _HEAD, 0)
        if not head.startswith(MAGIC):
            return None
        try:
            length, digest = head[len(MAGIC):-1].decode("ascii").split(" ")
            body = os.pread(fd, int(length), _HEAD)
            if crc(body) != digest:
                raise ValueError("the block's own checksum does not match")
            doc = json.loads(body.decode("ascii"))
            spec, entries, heaps = doc["spec"], doc["entries"], doc["heaps"]
            for offset in heaps or []:
                problem = check_heap(fd, int(offset, 16))
                if problem is not None:
                    raise InvalidCheckpointError(path, f"{problem}; the file is corrupt. Use an earlier checkpoint.")
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            raise InvalidCheckpointError(path, f"its checksum block (the HDF5 user block) is corrupt ({e}); the "
                                               f"file is damaged. Use an earlier checkpoint.") from None
        return cls(path, spec, entries)

    def _mismatch(self, what: str, entry: Optional[str] = None) -> InvalidCheckpointError:
        return InvalidCheckpointError(self.path, f"the checksum of {what} does not match the one written with "
                                                 f"it; the file is corrupt or was changed after it was saved. Use an "
                                                 f"earlier checkpoint.", entry)

    def verify_metadata(self, spec_text: str, metadata_texts: dict[str, str]) -> None:
        """Check `__spec__` and every `<key>.__metadata__` attribute (as stored)."""
        if crc(spec_text) != self.spec:
            raise self._mismatch("the __spec__ attribute")
        if set(metadata_texts) != set(self.entries):
            raise InvalidCheckpointError(self.path, "its checksums list other entries than its structure; the file "
                                                    "is corrupt.")
        for key, text in metadata_texts.items():
            if crc(text) != self.entries[key][0]:
                raise self._mismatch("its metadata", key)

    def verify_data(self, key: str, data) -> None:
        """Check an entry's stored data (once per open file: later reads are covered by
        the file being unchanged)."""
        if key in self._verified:
            return
        expected = self.entries.get(key, [None, None])[1]
        if expected is None or crc(data) != expected:
            raise self._mismatch("its data", key)
        self._verified.add(key)
