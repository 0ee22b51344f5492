"""`call_once(error_callable=None)`: a decorator that runs a function only on its first
call (the real `cerebras.pytorch.utils.call_once`).

The first call runs the function and keeps its result; every later call, whatever its
arguments, returns that result without running the function, after calling
`error_callable()` when one is given (it may raise to forbid a second call). Calls are
serialised by a lock, so concurrent first calls run the function once. If the first
call raises, nothing is kept and the next call runs the function again.
"""
import functools
import threading
from typing import Callable, Optional


def call_once(error_callable: Optional[Callable] = None):
    """The decorator: see the module's doc."""

    def decorator(fn: Callable) -> Callable:
        lock = threading.Lock()
        result = []

        @functools.wraps(fn)
        def once(*args, **kwargs):
            with lock:
                if not result:
                    result.append(fn(*args, **kwargs))
                    return result[0]
                if error_callable is not None:
                    error_callable()
                return result[0]

        return once

    return decorator


__all__ = ["call_once"]
