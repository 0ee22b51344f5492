"""The sharded-state rule: where each state tensor lives on a mesh of n devices.

In the sharded-state mode (`FullyShardedDataParallel`, FSDP / ZeRO-3 style) every
state tensor (parameter, buffer, optimizer state) is split into n equal slices along
one of its dimensions, one slice per device, and the compiled step's program says so
in its input and output shardings. XLA's SPMD partitioner then inserts the
collectives: an all-gather of a weight before the ops that need all of it, a
reduce-scatter (or an all-reduce and a slice) of its gradient, and the optimizer
update runs on each device's slice only, since a parameter and its optimizer state
have the same shape and hence the same split.

The rule depends on the shape alone, so the program, the upload of a host tensor and
a checkpoint restored onto another mesh all agree without being told:

    shard_dim(shape, n) = the first dimension d with shape[d] >= n and shape[d] % n == 0
                          (None when there is none: the tensor is replicated)

The first such dimension, not the largest: every dividing dimension gives each
device exactly 1/n of the tensor, and dim 0 (where it divides) keeps each slice one
contiguous block of the row-major tensor, as FSDP's flat shards are. A 0-d tensor
(a step counter, a hyper-parameter, the loss scale) is always replicated.
"""
from __future__ import annotations

from typing import Optional, Sequence

from jax.sharding import PartitionSpec


def shard_dim(shape: Sequence[int], n: int) -> Optional[int]:
    """The dimension of a tensor of `shape` split over `n` devices (None: replicated)."""
    if n <= 1:
        return None
    for d, size in enumerate(shape):
        if size >= n and size % n == 0:
            return d
    return None


def partition_spec(shape: Sequence[int], n: int, axis: str) -> PartitionSpec:
    """The `PartitionSpec` of the rule: mesh axis `axis` on `shard_dim`, or replicated."""
    d = shard_dim(shape, n)
    if d is None:
        return PartitionSpec()
    return PartitionSpec(*([None] * d), axis)
