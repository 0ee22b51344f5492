"""Switches for lazily loaded checkpoint tensors (names of the Cerebras API).

- `check_deferred_backing_storage` (default on): a lazy tensor whose file changed on
  disk since `cstorch.load` refuses to read it.
- `cache_deferred_tensors` (default off): keep a lazy tensor's value once read
  (`cstorch.load(path, map_location="cache")` turns it on for that load).

Both are used as context managers, `with check_deferred_backing_storage(False): ...`,
or read with `bool(...)`.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager


class BooleanContext:
    def __init__(self, default: bool):
        self._default = default
        self._local = threading.local()

    def __bool__(self) -> bool:
        return getattr(self._local, "value", self._default)

    @contextmanager
    def __call__(self, value: bool):
        old = bool(self)
        self._local.value = bool(value)
        try:
            yield
        finally:
            self._local.value = old


check_deferred_backing_storage = BooleanContext(True)
cache_deferred_tensors = BooleanContext(False)
