"""`@step_closure` and `@checkpoint_closure`: host code that runs on a step's
materialised values, after the step's compute."""
from __future__ import annotations

import functools
from typing import Callable

from . import _backend


def step_closure(closure: Callable) -> Callable:
    """Calling the decorated function queues it with its (snapshotted) arguments; it
    runs after the step with plain host tensors. Called inside a traced CSX step, it
    repeats every step with that step's values. With no backend it runs at once.

    Args:
        closure: the function to queue; its arguments are snapshotted when it is called.

    Differences from the real system:
        On CSX the closures of step k run at the end of step k+1 (in order), so the
        device always has work; checkpoint steps, the last step and the end of the
        run flush them.
    """
    @functools.wraps(closure)
    def queued(*args, **kwargs):
        b = _backend.backend()
        if b is None:
            return closure(*args, **kwargs)
        b.run.queue(closure, args, kwargs, checkpoint=False)

    queued.is_step_closure = True
    return queued


def checkpoint_closure(closure: Callable) -> Callable:
    """A step closure that runs only on checkpoint steps of the active DataExecutor,
    after the model and optimizer tensors have been updated with that step's values.

    Args:
        closure: the function to run on checkpoint steps (typically one that calls `cstorch.save`).
    """
    @functools.wraps(closure)
    def queued(*args, **kwargs):
        b = _backend.backend()
        if b is None:
            raise RuntimeError(
                "Cannot fetch a checkpoint outside of an execution context. Please make all calls to any "
                "checkpoint closures inside the training loop."
            )
        b.run.queue(closure, args, kwargs, checkpoint=True)

    queued.is_step_closure = True
    queued.is_checkpoint_closure = True
    return queued
