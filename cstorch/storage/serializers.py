"""Switches for lazily loaded checkpoint tensors (names of the Cerebras API).

- `check_deferred_backing_storage` (default on): a lazy tensor whose file changed on
  disk since `cstorch.load` refuses to read it.
- `cache_deferred_tensors` (default off): keep a lazy tensor's value once read
  (`cstorch.load(path, map_location="cache")` turns it on for that load).
- `use_external_link` (default off): on the real system, saving a lazily loaded tensor
  writes an H5 external link to the file it came from instead of its values. Accepted
  and without effect here: `cstorch.save` always writes the values, so the file holds
  the same state either way and does not depend on the older file.

All are used as context managers, `with check_deferred_backing_storage(False): ...`,
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
use_external_link = BooleanContext(False)
