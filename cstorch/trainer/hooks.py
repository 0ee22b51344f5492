"""Calling a hook on the Trainer's callbacks.

`call_hook(callbacks, trainer, hook, *args, **kwargs)` calls `hook(trainer, *args,
**kwargs)` on every callback that defines it, in the callbacks' order. An exception
of the `Exception` family propagates with its own type (a `StaticGraphError` stays one)
and a note naming the callback and the hook (the real Trainer wraps it in a
`RuntimeError`); a `KeyboardInterrupt` or `SystemExit` passes untouched.
"""
from __future__ import annotations

from typing import Iterable


def call_hook(callbacks: Iterable, trainer, hook: str, *args, **kwargs) -> None:
    """Call `hook` on every callback that has it (module docstring)."""
    for cb in callbacks:
        fn = getattr(cb, hook, None)
        if fn is None:
            continue
        try:
            fn(trainer, *args, **kwargs)
        except Exception as e:
            e.add_note(f"Encountered error when calling {type(cb).__name__}.{hook}")
            raise
