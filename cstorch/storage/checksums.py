"""CRC-32 checksums of an H5 checkpoint, kept in the file's HDF5 user block.

HDF5 checks none of what a checkpoint's values depend on: a flipped bit in a tensor's
data, in an uncompressed scalar or in a metadata string reads back as a different value
without any error. So `cstorch.save` reserves an HDF5 user block (a region at the start
of the file that HDF5 and every reader of the format skip) and writes there, once the
rest of the file is written:

    b"cstorch-checksums crc32 " <length: 10 digits> b"\\n" <JSON> <zero padding>

The JSON holds the CRC-32 (8 hex digits) of the `__spec__` attribute and, per entry, of
its `<key>.__metadata__` attribute and of its stored data (the array's bytes as stored,
or a pickled object's bytes; null for metadata-only entries). Since every digest has the
same width, the block's size is known before the data is written. `cstorch.load`
verifies the attributes when it opens the file and each entry's data when it is first
read. A file without the block (written by the Cerebras release, or an older cstorch) is
read unverified.
"""
from __future__ import annotations

import json
import zlib
from typing import Optional

import numpy as np

from .errors import InvalidCheckpointError

MAGIC = b"cstorch-checksums crc32 "
_LENGTH_DIGITS = 10
_PLACEHOLDER = "0" * 8


def crc(data) -> str:
    """CRC-32 of a str (UTF-8), bytes or numpy array (its bytes), as 8 hex digits."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif isinstance(data, np.ndarray):
        data = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return f"{zlib.crc32(data):08x}"


def _body(spec: str, entries: dict[str, list]) -> bytes:
    return json.dumps({"__spec__": spec, "entries": entries}, separators=(",", ":")).encode("ascii")


def block_size(entries: dict[str, bool]) -> int:
    """The user-block size (a power of two, at least 512, as HDF5 requires) that holds
    the checksums of `entries` ({key: has_data})."""
    body = _body(_PLACEHOLDER, {k: [_PLACEHOLDER, _PLACEHOLDER if has_data else None] for k, has_data in
                                entries.items()})
    size = 512
    while size < len(MAGIC) + _LENGTH_DIGITS + 1 + len(body):
        size *= 2
    return size


def encode_block(spec: str, entries: dict[str, list], size: int) -> bytes:
    """The user block: the digests `spec` and `entries` ({key: [metadata, data or None]})."""
    body = _body(spec, entries)
    head = MAGIC + f"{len(body):0{_LENGTH_DIGITS}d}\n".encode("ascii")
    block = head + body
    if len(block) > size:
        raise ValueError(f"the checksums need {len(block)} bytes, more than the {size} reserved")
    return block + b"\0" * (size - len(block))


class Checksums:
    """The digests read from a file's user block."""

    def __init__(self, path: str, spec: str, entries: dict[str, list]):
        self.path = path
        self.spec = spec
        self.entries = entries
        self._verified: set[str] = set()

    @classmethod
    def decode(cls, path: str, block: bytes) -> Optional["Checksums"]:
        """The checksums in user block `block`, or None when it holds none."""
        if not block.startswith(MAGIC):
            return None
        start = len(MAGIC) + _LENGTH_DIGITS + 1
        try:
            length = int(block[len(MAGIC):start - 1].decode("ascii"))
            doc = json.loads(block[start:start + length].decode("ascii"))
            spec, entries = doc["__spec__"], doc["entries"]
            ok = isinstance(spec, str) and isinstance(entries, dict) and all(
                isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], (str, type(None)))
                for v in entries.values())
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            ok = False
        if not ok or block[start + length:].strip(b"\0"):
            raise InvalidCheckpointError(path, "its checksum block (the HDF5 user block) is corrupt; the file is "
                                               "damaged. Use an earlier checkpoint.")
        return cls(path, spec, entries)

    def _mismatch(self, what: str, entry: Optional[str] = None) -> InvalidCheckpointError:
        return InvalidCheckpointError(self.path, f"the checksum of {what} does not match the one written with "
                                                 f"it; the file is corrupt. Use an earlier checkpoint.", entry)

    def verify_metadata(self, spec_text: str, metadata_texts: dict[str, str]) -> None:
        """Check `__spec__` and every `<key>.__metadata__` attribute (as stored)."""
        if crc(spec_text) != self.spec:
            raise self._mismatch("the __spec__ attribute")
        if set(metadata_texts) != set(self.entries):
            raise InvalidCheckpointError(self.path, "its checksums list other entries than its structure; the file "
                                                    "is corrupt. Use an earlier checkpoint.")
        for key, text in metadata_texts.items():
            if crc(text) != self.entries[key][0]:
                raise self._mismatch("its metadata", key)

    def verify_data(self, key: str, data) -> None:
        """Check an entry's stored data (checked once per open file: later reads are
        covered by the file being unchanged)."""
        if key in self._verified:
            return
        expected = self.entries[key][1]
        if expected is None or crc(data) != expected:
            raise self._mismatch("its data", key)
        self._verified.add(key)
