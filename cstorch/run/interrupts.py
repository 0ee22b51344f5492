"""Ctrl-C (SIGINT) and SIGTERM during a run (a `DataExecutor` loop), on the main thread.

While a run is going, `RunInterrupts` holds the two signals where Python's defaults would
do harm:

- SIGINT with Python's default handler raises `KeyboardInterrupt` at once, as always,
  except inside a step's critical section, where it is held and raised when the section
  ends. On CSX that is from the moment the compiled step is dispatched (its state buffers
  are donated to it) until the run has recorded the new state: raised inside it, the run
  would hold deleted buffers, its end could not bring the state to the host, the training
  done in the run would be lost and the backend unusable. On the CPU/GPU backends it is
  the whole `@cstorch.trace` step body, which runs eagerly: interrupted between
  `backward()` and `optimizer.zero_grad()`, it would leave gradients that the next step
  adds to. So an interrupted run always ends holding the state of its last step, which
  its end brings to the host, and a new run (a notebook cell run again) continues from
  there.
  Python swallows an exception raised inside a garbage-collector callback or a `__del__`
  (jax registers one: `_xla_gc_callback`), printing "Exception ignored in ...": a Ctrl-C
  that lands there would be lost and the loop would go on. The run sees it through
  `sys.unraisablehook` and raises it at the next step boundary instead.
- SIGTERM with the default disposition (which kills the process on the spot) lets the
  step in progress finish, its closures and a checkpoint being written included, and
  raises `SystemExit(128 + 15)` before the next step starts: the run ends as after any
  error (state brought to the host, threads joined, `finally` blocks run) and the process
  exits with 143.
- A handler the user installed for either signal is left alone, and outside the main
  thread (where Python cannot install handlers) nothing changes.

A checkpoint written during the run (`cstorch.save`, `cstorch/storage/safe_signals.py`)
defers both signals to its safe points and then calls these handlers: Ctrl-C abandons the
save, SIGTERM lets it complete and the run exits after the step.
"""
from __future__ import annotations

import signal
import sys
import threading

EXIT_ON_SIGTERM = 128 + signal.SIGTERM


class RunInterrupts:
    def __init__(self):
        self._previous: dict[int, object] = {}
        self._critical = 0
        self._section = _CriticalSection(self)
        self._held_interrupt = False
        self._terminate = False
        self._previous_unraisable_hook = None

    def install(self) -> None:
        """At the start of a run: take SIGINT / SIGTERM where they have Python's defaults."""
        if self._previous or threading.current_thread() is not threading.main_thread():
            return
        self._held_interrupt = self._terminate = False
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, self._on_interrupt)
            self._previous_unraisable_hook = sys.unraisablehook
            sys.unraisablehook = self._on_unraisable
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self._previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._on_terminate)

    def uninstall(self) -> None:
        """At the end of the run: the handlers that were there before."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
        if self._previous_unraisable_hook is not None:
            if sys.unraisablehook == self._on_unraisable:  # else someone replaced it since: theirs stays
                sys.unraisablehook = self._previous_unraisable_hook
            self._previous_unraisable_hook = None
        self._terminate = self._held_interrupt = False

    def critical(self) -> "_CriticalSection":
        """A block (`with interrupts.critical():`) in which a Ctrl-C is held and raised
        when the block ends (unless the block raised: its exception propagates)."""
        return self._section

    def at_step_boundary(self) -> None:
        """Between steps: SystemExit(143) if SIGTERM arrived during the run, the
        KeyboardInterrupt of a Ctrl-C that was held or swallowed."""
        if self._terminate:
            self._terminate = False
            raise SystemExit(EXIT_ON_SIGTERM)
        self._raise_held_interrupt()

    def _raise_held_interrupt(self) -> None:
        if self._held_interrupt:
            self._held_interrupt = False
            raise KeyboardInterrupt

    def _on_interrupt(self, signum, frame) -> None:
        if self._critical:
            self._held_interrupt = True
            return
        raise KeyboardInterrupt

    def _on_unraisable(self, unraisable) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            self._held_interrupt = True  # swallowed by a gc callback or a __del__: raised at the next boundary
            return
        self._previous_unraisable_hook(unraisable)

    def _on_terminate(self, signum, frame) -> None:
        self._terminate = True


class _CriticalSection:
    """`RunInterrupts.critical()`: a plain context manager (a step's dispatch enters it
    every step; a generator-based one costs several times more)."""

    __slots__ = ("_owner",)

    def __init__(self, owner: RunInterrupts):
        self._owner = owner

    def __enter__(self) -> None:
        owner = self._owner
        if not owner._critical:
            owner._raise_held_interrupt()
        owner._critical += 1

    def __exit__(self, exc_type, exc, tb) -> bool:
        owner = self._owner
        owner._critical -= 1
        if exc_type is None and not owner._critical:
            owner._raise_held_interrupt()
        return False
