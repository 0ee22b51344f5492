"""The one error of an unreadable checkpoint."""
from __future__ import annotations

from typing import Optional

from cstorch_jax import CstorchError


class InvalidCheckpointError(CstorchError):
    """A file or directory given as a checkpoint cannot be read as one: it is not a
    checkpoint at all, or it is truncated, corrupt or inconsistent (garbled metadata,
    links that form a cycle or lead nowhere, stored data whose dtype or shape differs
    from its metadata, a failed checksum). The message names the file and, where one
    is at fault, the entry; `path` and `entry` hold them. A run that meets it should
    fall back to an earlier checkpoint.

    Args:
        path: the file or directory that was read (kept as a string in `path`).
        problem: what is wrong with it.
        entry: the entry of the checkpoint at fault, if one is.
    """

    def __init__(self, path, problem: str, entry: Optional[str] = None):
        self.path = None if path is None else str(path)
        self.entry = entry
        self.problem = problem
        where = f"Checkpoint '{self.path}'" + (f", entry {entry!r}" if entry is not None else "")
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):  # picklable across processes (the message is rebuilt from its parts)
        return type(self), (self.path, self.problem, self.entry)
