"""Ctrl-C and SIGTERM during a checkpoint write, delivered where the writer can stop.

Python runs a signal handler at whatever bytecode the main thread is executing. During
an H5 write that is often h5py's cleanup (a weakref callback of a closed object), where a
`KeyboardInterrupt` cannot propagate: it is printed as "Exception ignored" and lost, and
the program keeps going. So while a checkpoint is written, `signals_at_safe_points()`
replaces the SIGINT and SIGTERM handlers by one that only records the signal; the writer
calls `check()` between the pieces it writes, and that is where the signal takes effect:

- a handler installed before (Python's `default_int_handler` for SIGINT, or the user's
  own) is called there: when it raises (`KeyboardInterrupt`), the write is abandoned and
  its temporary file removed before the exception propagates;
- a signal whose disposition was the default (SIGTERM, or SIGINT set to SIG_DFL), which
  would kill the process, instead raises `SystemExit(128 + signum)` there: a clean exit
  that removes the temporary file and runs `finally` blocks;
- a signal set to SIG_IGN stays ignored.

A signal that arrives after the last safe point is delivered when the block ends, so
`cstorch.save` then raises after the checkpoint is complete. Outside the main thread
(where handlers cannot be installed) the block changes nothing.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _no_check() -> None:
    pass


def _deliver(signum: int, handler) -> None:
    if handler == signal.SIG_DFL:
        raise SystemExit(128 + signum)
    if callable(handler):
        handler(signum, None)


@contextmanager
def signals_at_safe_points() -> Iterator[Callable[[], None]]:
    """Within the block, SIGINT and SIGTERM take effect only when the yielded `check()`
    is called, or when the block ends without an exception (see the module docstring)."""
    if threading.current_thread() is not threading.main_thread():
        yield _no_check
        return
    handlers = {}
    for signum in SIGNALS:
        handler = signal.getsignal(signum)
        if handler not in (signal.SIG_IGN, None):  # None: installed outside Python; leave those alone
            handlers[signum] = handler
    pending: list[int] = []

    def check() -> None:
        while pending:
            signum = pending.pop(0)
            _deliver(signum, handlers[signum])

    for signum in handlers:
        signal.signal(signum, lambda s, frame: pending.append(s))
    try:
        yield check
    finally:  # when the block raised, the signals that arrived meanwhile add nothing
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    check()
