"""Atomic creation of a checkpoint file, shared by every format that writes one file.

`write_atomically(path, write)` refuses an existing `path`, has `write(tmp, check)` fill
a temporary file next to it, flushes that to disk and links it to `path` in one step
(never replacing a file that appeared meanwhile), then flushes the directory. Whatever
stops it (an error, Ctrl-C, SIGTERM) removes the temporary file and leaves `path`
untouched; signals take effect only where `write` calls `check()` (see
`interrupts.py`). A write refused for want of space (ENOSPC, EDQUOT) or by the
process's file-size limit (EFBIG) raises an OSError of that errno whose message names
`path`, the cause and the fix.

The temporary file is `<path>.<host>-<pid>-<random>.tmp`: `<host>` is a hash of the host
name and `<pid>` the writing process. A process killed outright (SIGKILL, power loss)
leaves its temporary file behind; the next write into the same folder removes such
orphans — only names of exactly this pattern, written on this host by a process that no
longer runs.
"""
from __future__ import annotations

import errno
import logging
import os
import re
import socket
import uuid
import zlib
from typing import Callable

from .safe_signals import signals_at_safe_points

log = logging.getLogger("cstorch.storage")

_HOST = f"{zlib.crc32(socket.gethostname().encode()):08x}"
_TEMP_NAME = re.compile(r"^(?P<target>.+)\.(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-[0-9a-f]{8}\.tmp$")


def temp_path(path: str) -> str:
    """A fresh temporary name next to `path`, owned by this process."""
    return f"{path}.{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"


def _process_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone else's process, or a pid we cannot ask about: assume it is alive
    return True


def orphan_temp_files(directory: str) -> list[str]:
    """Temporary files in `directory` left by checkpoint writes of dead processes of this host."""
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return []
    found = []
    for name in names:
        m = _TEMP_NAME.match(name)
        if m and m["host"] == _HOST and not _process_runs(int(m["pid"])):
            found.append(os.path.join(directory, name))
    return found


def remove_orphan_temp_files(directory: str) -> None:
    for path in orphan_temp_files(directory):
        try:
            os.remove(path)
            log.info("removed %s, left by a checkpoint write that was killed", path)
        except OSError:
            pass  # already gone (another process cleaned it), or not ours to remove


def _exists_error(path: str) -> FileExistsError:
    return FileExistsError(f"Checkpoint at '{path}' already exists. Please delete the checkpoint and run again.")


def _publish(tmp: str, path: str) -> None:
    """Make `tmp` appear at `path` in one step, never replacing an existing file."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise _exists_error(path) from None
    except OSError:  # a file system without hard links
        if os.path.exists(path):
            raise _exists_error(path) from None
        os.replace(tmp, path)


_NO_ROOM = {errno.ENOSPC: "the disk is full", errno.EFBIG: "the file would exceed the process's file-size limit "
                                                             "(ulimit -f)"}
if hasattr(errno, "EDQUOT"):
    _NO_ROOM[errno.EDQUOT] = "the disk quota is exhausted"


def _no_room_error(path: str, e: OSError) -> OSError:
    folder = os.path.dirname(os.path.abspath(path))
    return OSError(e.errno, f"Cannot write the checkpoint {path}: {os.strerror(e.errno)}; {_NO_ROOM[e.errno]}. The "
                            f"partial file was removed and earlier checkpoints are untouched. Free space in {folder} "
                            f"(or raise the limit) and save again.")


def _fsync_directory(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path, write: Callable[[str, Callable[[], None]], None]) -> None:
    """Create the file `path` (which must not exist) with `write(tmp, check)`; see the
    module docstring."""
    path = os.fspath(path)
    if os.path.exists(path):
        raise _exists_error(path)
    remove_orphan_temp_files(os.path.dirname(path))
    tmp = temp_path(path)
    with signals_at_safe_points() as check:
        try:
            write(tmp, check)
            check()
            with open(tmp, "rb+") as fd:
                os.fsync(fd.fileno())
            check()
            _publish(tmp, path)
            _fsync_directory(path)
        except OSError as e:
            if e.errno in _NO_ROOM:
                raise _no_room_error(path, e) from e
            raise
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
