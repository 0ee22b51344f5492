"""Run a jnp update rule on torch tensors (the eager kernel of an optimizer op).

The CPU/GPU backends call the same jitted jnp rule that the compiled step inlines,
so eager and compiled numerics come from one definition. CPU tensors cross by DLPack
without a copy; tensors on other devices go through the host.
"""
from __future__ import annotations

from typing import Callable, Sequence

import jax
import torch

from ..dtypes import to_jax


def _in(t: torch.Tensor):
    t = t.detach()
    if t.device.type == "cpu" and t.dtype != torch.int64:
        return jax.dlpack.from_dlpack(t.contiguous())
    return to_jax(t)


def _out(a, like: torch.Tensor) -> torch.Tensor:
    out = torch.from_dlpack(a)
    return out if out.device == like.device and out.dtype == like.dtype else out.to(like.device, like.dtype)


def run_eagerly(jitted_rule: Callable, tensor_lists: Sequence[Sequence[torch.Tensor]],
                likes: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """`jitted_rule(*lists_of_arrays)` -> flat list of arrays, returned as torch tensors
    shaped and typed like `likes`."""
    lists = [[_in(t) for t in ts] for ts in tensor_lists]
    outs = jitted_rule(*lists)
    return [_out(a, like) for a, like in zip(outs, likes)]
