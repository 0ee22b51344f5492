"""What differs between the torch and jax releases cstorch runs on (torch 2.11 - 2.15,
jax/jaxlib 0.10.2 - 0.12): each difference is named here with the versions it concerns,
so that the rest of the engine is written against one API.

ATen overloads that exist only in some torch releases:
- `aten.cholesky.default` (torch.cholesky, deprecated since 1.9) is gone from torch 2.15's
  operator registry; `torch.linalg.cholesky` (`aten.linalg_cholesky_ex`) is the same math.
"""
from __future__ import annotations

import torch
from torch._ops import OpOverload

#: overloads that some supported torch release lacks, with the release that removed them
VERSIONED_OVERLOADS = {"cholesky.default": "2.15"}


def aten_overloads(*names: str) -> tuple[OpOverload, ...]:
    """The `torch.ops.aten` overloads named "op.overload" that this torch has. A name
    missing here must be listed in VERSIONED_OVERLOADS (a typo is an error)."""
    found = []
    for name in names:
        op_name, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, op_name, None)
        op = getattr(packet, overload, None) if packet is not None else None
        if op is not None:
            found.append(op)
        elif name not in VERSIONED_OVERLOADS:
            raise AttributeError(f"torch {torch.__version__} has no aten.{name}, and it is not listed in "
                                 f"cstorch_jax.compat.VERSIONED_OVERLOADS")
    return tuple(found)
