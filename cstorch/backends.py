"""`cstorch.backends`: process-wide flags that tune how a run executes.

    cstorch.backends.csx.performance.prefetch_batches = 4    # default 2
    cstorch.backends.csx.performance.progress = False        # default "auto"

Flags (every backend reads them, despite the `csx` in the path):

* `csx.performance.prefetch_batches` (int >= 0, default 2): how many batches the host
  input pipeline prepares ahead of the step, per data worker (see
  `cstorch.utils.data.streamer`). 0 turns prefetching off: the loader is pulled on the
  main thread at each step.
* `csx.performance.progress` (`True`, `False` or `"auto"`, default `"auto"`): a tqdm
  progress bar of the run on stderr; `"auto"` shows it only when stderr is a terminal.

Contracts. A flag is read when a `DataExecutor` starts iterating and holds for that
whole run. Assigning a value of the wrong type or range raises ValueError naming what
is accepted; an unknown flag name raises AttributeError; assigning another value while
a `DataExecutor` is iterating raises RuntimeError ("Detected changes in the backend
flags during the execution run..."). The flags keep their values across runs and
backends until assigned again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class _Flag:
    default: Any
    accepts: Callable[[Any], bool]
    accepted: str  # what `accepts` lets through, for the error message


def _non_negative_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _progress_mode(v) -> bool:
    return v is True or v is False or v == "auto"


def _refuse_during_run(path: str, value) -> None:
    from ._backend import backend

    b = backend()
    if b is not None and b.run.executor is not None:
        raise RuntimeError(
            f"Detected changes in the backend flags during the execution run: {path} was set to {value!r} while "
            f"a DataExecutor is iterating. Backend flags hold for a whole run: set them before iterating the "
            f"DataExecutor (before `for batch in executor:`) or after the run has ended."
        )


class _FlagGroup:
    """A set of named flags with defaults; assignment validates the value and refuses
    changes during a run."""

    def __init__(self, path: str, flags: dict[str, _Flag]):
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_flags", flags)
        for name, flag in flags.items():
            object.__setattr__(self, name, flag.default)

    def __setattr__(self, name: str, value) -> None:
        path = f"{self._path}.{name}"
        flag = self._flags.get(name)
        if flag is None:
            raise AttributeError(f"{self._path} has no flag {name!r}; its flags are {sorted(self._flags)}.")
        if not flag.accepts(value):
            raise ValueError(f"{path} must be {flag.accepted}, got {value!r}.")
        if value != getattr(self, name):
            _refuse_during_run(path, value)
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        values = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._flags)
        return f"{self._path}({values})"


class _Namespace:
    """A read-only node of the flag tree (its groups cannot be replaced)."""

    def __init__(self, path: str, **children):
        object.__setattr__(self, "_path", path)
        for name, child in children.items():
            object.__setattr__(self, name, child)

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"{self._path}.{name} is a group of flags: assign its flags one by one instead.")


csx = _Namespace(
    "cstorch.backends.csx",
    performance=_FlagGroup("cstorch.backends.csx.performance", {
        "prefetch_batches": _Flag(2, _non_negative_int, "an integer >= 0 (0 turns prefetching off)"),
        "progress": _Flag("auto", _progress_mode, 'True, False or "auto" (a bar only when stderr is a terminal)'),
    }),
)

__all__ = ["csx"]
