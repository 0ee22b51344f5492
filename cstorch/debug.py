"""Debug names of the real API: `name_scope`, `set_debug_scope`, `add_debug_name`,
`get_debug_name`.

* `add_debug_name(module, root_name=None)` sets `module._debug_name` on the module and every
  submodule to its dotted path from `module` (`root_name` prefixed, when given);
  `get_debug_name(module)` returns it, or the module's class name when it has none.
* `name_scope(name, raw=False)` is a context manager that names the operations run inside
  it; `set_debug_scope(name)` names every operation traced after it (None or "" clears).
  The real compiler uses these names in its reports. Here the compiled step's report
  names each operation by the nn.Module it comes from (`step.report.ops`), and these two
  only record the current names (`current_name_scope()`, `current_debug_scope()`); they
  never change what is computed.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Optional

import torch

__all__ = ["name_scope", "set_debug_scope", "add_debug_name", "get_debug_name", "current_name_scope",
           "current_debug_scope"]

_local = threading.local()


def _stack() -> list:
    if not hasattr(_local, "scopes"):
        _local.scopes = []
    return _local.scopes


@contextlib.contextmanager
def name_scope(name: str, raw: bool = False) -> Iterator[None]:
    """Name the operations run inside the block `name` (nested scopes join with ".";
    `raw=True` uses `name` as it is).

    Args:
        name: the scope's name.
        raw: use `name` as it is instead of joining it to the enclosing scope's name.

    Differences from the real system:
        The names are recorded and change nothing in the compiled step; the same holds
        for `set_debug_scope`, `add_debug_name` and `get_debug_name`.
    """
    if not isinstance(name, str):
        raise TypeError(f"name_scope takes a str name, got {type(name).__name__}")
    stack = _stack()
    stack.append(name if raw or not stack else f"{stack[-1]}.{name}")
    try:
        yield
    finally:
        stack.pop()


def current_name_scope() -> Optional[str]:
    """The innermost `name_scope` name (None outside one)."""
    stack = _stack()
    return stack[-1] if stack else None


_debug_scope: Optional[str] = None


def set_debug_scope(name: Optional[str]) -> None:
    """Name every operation traced from now on `name` (None or "" clears it).

    Args:
        name: the scope name; None or "" clears it.
    """
    global _debug_scope
    _debug_scope = name or None


def current_debug_scope() -> Optional[str]:
    return _debug_scope


def add_debug_name(module: torch.nn.Module, root_name: Optional[str] = None) -> None:
    """Set `_debug_name` on `module` and its submodules to their dotted paths.

    Args:
        module: the root module.
        root_name: the root's name, which prefixes its submodules' paths; None: "" (the submodules get their
            attribute paths).
    """

    def name(m: torch.nn.Module, path: str) -> None:
        m._debug_name = path
        for child_name, child in m.named_children():
            name(child, f"{path}.{child_name}" if path else child_name)

    name(module, root_name or "")


def get_debug_name(module: torch.nn.Module) -> str:
    """The module's `_debug_name` (see `add_debug_name`), else its class name.

    Args:
        module: the module.
    """
    debug_name = getattr(module, "_debug_name", None)
    return debug_name if debug_name else type(module).__name__
