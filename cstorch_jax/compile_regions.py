"""`torch.compiler.nested_compile_region` while a step is captured.

The decorator marks a function (a transformer block's forward, say) for torch.compile to
compile once and reuse; in eager torch it does nothing. Under torch.export's flags, which
cstorch's capture sets, torch sends the call through TorchDynamo, which skips the frame
because cstorch's dispatch modes are active and runs it eagerly, where it is sent through
Dynamo again: a `RecursionError`. While a step is captured the marked function therefore
runs as in eager torch, inline: the step's graph holds its ops once per call.
"""
from __future__ import annotations

import contextlib
import importlib
from typing import Iterator

# the module (the package's attribute of that name is the operator)
_MODULE = importlib.import_module("torch._higher_order_ops.invoke_subgraph")


def _inline(func, *args, **kwargs):
    """The marked function's call, as eager torch makes it."""
    return func(*args, **kwargs)


@contextlib.contextmanager
def regions_inline() -> Iterator[None]:
    """Functions marked with `nested_compile_region` run inline in the block."""
    saved = _MODULE.invoke_subgraph_placeholder
    _MODULE.invoke_subgraph_placeholder = _inline
    try:
        yield
    finally:
        _MODULE.invoke_subgraph_placeholder = saved
