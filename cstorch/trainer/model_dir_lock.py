"""One run at a time in a model_dir: an advisory lock on `model_dir/.cstorch.lock`.

Two runs writing one model_dir overwrite each other's checkpoints and logs (the second
used to die at its first checkpoint, told to delete the other run's file). A Trainer
takes the lock when it starts using its model_dir (construction, before any folder or
file of the run is made) and releases it at the end of each `fit` / `validate` /
`validate_all` (also when it raises), and in `finalize`; a run method of a Trainer that
released it takes it again.

* The lock is `fcntl.flock(LOCK_EX | LOCK_NB)` on the lock file: a second process does
  not wait, it gets `ModelDirInUseError` at once, naming the holder's pid, host and start
  time (which the holder writes into the file) and what to do: wait for that run, or
  give this one another model_dir.
* The kernel drops a flock when its process dies, however it dies; so when the flock is
  granted but the file still names a holder (a clean release empties it), that run died
  without releasing it: the lock is taken over, with a warning naming it.
* Within one process the lock is shared: Trainers of one process on one model_dir (a
  run, then another Trainer resuming it or validating) do not conflict; the flock is
  released when the last of them releases its claim.
* Where the file system refuses flock (some network file systems), a warning says that
  runs sharing the model_dir are not detected, and the run goes on. Without `fcntl`
  (Windows) there is no lock.
* A child made by `fork` (multiprocessing, fork-based DataLoader workers) inherits the
  lock file's descriptor, and with it the flock, which would outlive a killed run for as
  long as the child lives: the child closes the descriptor at once (`os.register_at_fork`;
  closing, not unlocking, which would unlock the parent too) and holds no lock.
* `verify()`, before each checkpoint, checks that the file at the lock's path is still the
  one locked: a lock file deleted or replaced (or model_dir removed and made anew) while
  the run goes on lets a second run lock a new file, and both would write into one folder,
  so the run stops with `ModelDirLockLostError` before it writes.
* A model_dir (or lock file) this user cannot create or open is a `ConfigError` naming
  model_dir (the CLI's exit status 2), not a PermissionError.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import socket
import threading
from typing import Iterator, Optional

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

from .checks import ConfigError

log = logging.getLogger("cstorch.trainer")

#: the lock file's name inside model_dir
LOCK_NAME = ".cstorch.lock"


class ModelDirInUseError(ConfigError):
    """Another run (another process) holds the lock of this model_dir."""


class ModelDirLockLostError(ModelDirInUseError):
    """The lock file of this run's model_dir was deleted or replaced while the run went on
    (or this process is a fork of the run, which holds no lock): another run may be
    writing into model_dir too, so this one stops before writing a checkpoint."""


class _Flock:
    """The process's flock on one lock file, and how many claims share it. `forked`: this
    is a forked child's copy, whose descriptor was closed (the parent holds the flock)."""

    def __init__(self, fd: Optional[int]):
        self.fd = fd
        self.claims = 0
        self.forked = False

    def is_file(self, path: str) -> bool:
        """Whether `path` is still the file this flock holds (not deleted and made anew)."""
        if self.fd is None:
            return True
        try:
            mine, now = os.fstat(self.fd), os.stat(path)
        except OSError:
            return False
        return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)


_HELD: dict[str, _Flock] = {}  # real path of the lock file -> the process's flock of it
_MUTEX = threading.Lock()


def _after_fork_in_child() -> None:
    """In a child made by fork: close the inherited lock descriptors (the flock stays the
    parent's; LOCK_UN would release it for both) and forget them."""
    global _MUTEX
    _MUTEX = threading.Lock()  # another thread may have held it at the fork
    for flock in _HELD.values():
        if flock.fd is not None:
            with contextlib.suppress(OSError):
                os.close(flock.fd)
            flock.fd = None
        flock.forked = True
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _holder_text(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _describe(text: str) -> str:
    """"pid P on host H, started T" from the lock file's text (what can be read of it)."""
    try:
        info = json.loads(text)
    except ValueError:
        info = None
    if not isinstance(info, dict):
        return "a run whose pid and host the lock file does not record"
    return (f"pid {info.get('pid', '?')} on host {info.get('host', '?')}, started {info.get('started', '?')}")


def _flock(path: str) -> Optional[int]:
    """The fd of `path` flocked by this process (ModelDirInUseError when another holds
    it; None when the file system cannot lock)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _describe(_holder_text(fd))
        os.close(fd)
        model_dir = os.path.dirname(path)
        raise ModelDirInUseError(
            f"model_dir {model_dir} is in use by another run ({holder}; lock file {path}). Two runs in one model_dir "
            f"overwrite each other's checkpoints and logs. Wait for that run to finish (or stop it), or give this run "
            f"another model_dir.") from None
    except OSError as e:
        os.close(fd)
        log.warning("Cannot lock %s (%s): another run using this model_dir at the same time would not be detected.",
                    path, e)
        return None
    previous = _holder_text(fd)
    if previous:
        log.warning("Taking over the stale lock of model_dir %s: the run that held it (%s) ended without releasing "
                    "it.", os.path.dirname(path), _describe(previous))
    me = {"pid": os.getpid(), "host": socket.gethostname(),
          "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
    return fd


def _unflock(fd: Optional[int]) -> None:
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)  # a clean release: the next holder finds no stale holder
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


class ModelDirLock:
    """One Trainer's claim on the lock of `model_dir` (module doc). `acquire` makes
    model_dir when missing; `acquire` / `release` are idempotent; `holding()` holds it
    for a block and releases it at the end of the outermost one."""

    def __init__(self, model_dir):
        self.model_dir = os.path.abspath(os.fspath(model_dir))
        self.path = os.path.join(self.model_dir, LOCK_NAME)
        self._claim: Optional[tuple[str, _Flock]] = None  # (key, the flock claimed) while held
        self._depth = 0

    @property
    def held(self) -> bool:
        return self._claim is not None

    def acquire(self) -> None:
        if self.held or fcntl is None:
            return
        try:
            os.makedirs(self.model_dir, exist_ok=True)
            key = os.path.realpath(self.path)
            with _MUTEX:
                flock = _HELD.get(key)
                if flock is None or not flock.is_file(self.path):
                    flock = _HELD[key] = _Flock(_flock(self.path))
                flock.claims += 1
        except OSError as e:
            raise ConfigError(
                f"model_dir {self.model_dir} cannot be written: {e.strerror or e} ({e.filename or self.path}). The run "
                f"writes its lock file, checkpoints and logs inside model_dir; give a model_dir this user can "
                f"write (or change the folder's permissions).") from None
        self._claim = key, flock

    def verify(self, before: str = "going on") -> None:
        """ModelDirLockLostError when this claim's lock is no longer the file at the lock's
        path (deleted, replaced, model_dir removed and made anew) or this process is a
        fork of the run that took it; `before` says what the run was about to do. Nothing
        when the lock is not held or the file system cannot lock."""
        if self._claim is None:
            return
        flock = self._claim[1]
        if flock.forked:
            raise ModelDirLockLostError(
                f"This process (pid {os.getpid()}) is a fork of the run that holds the lock of model_dir "
                f"{self.model_dir} and holds no lock itself; it stops before {before}. Run the Trainer in the "
                f"process that built it.")
        if flock.fd is not None and not flock.is_file(self.path):
            raise ModelDirLockLostError(
                f"The lock file {self.path} of model_dir {self.model_dir} was deleted or replaced while this run (pid "
                f"{os.getpid()}) went on, so another run may have locked model_dir and be writing into it too. This "
                f"run stops before {before}. Make sure no other run uses {self.model_dir}, then restart this run "
                f"(it resumes from its last checkpoint), or give it another model_dir.")

    def release(self) -> None:
        claim, self._claim = self._claim, None
        if claim is None:
            return
        key, flock = claim
        with _MUTEX:
            flock.claims -= 1
            if flock.claims == 0:
                if _HELD.get(key) is flock:
                    del _HELD[key]
                _unflock(flock.fd)

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Hold the lock in the block (taking it when not held); the outermost block
        releases it at its end, also on an exception."""
        self.acquire()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.release()


__all__ = ["ModelDirLock", "ModelDirInUseError", "ModelDirLockLostError", "LOCK_NAME"]
