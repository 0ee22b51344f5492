"""Input helpers of Model Zoo data processors."""
from __future__ import annotations

import logging
from typing import Optional

import cstorch
import cstorch.distributed as dist

_log = logging.getLogger(__name__)


def get_streaming_batch_size(effective_batch_size: int, global_rank: Optional[int] = None) -> int:
    """The batch size the calling task streams for a model trained at
    `effective_batch_size` (the batch of one optimizer step).

    On the wafer-scale cluster each of several CSX systems is fed its share by its own
    workers; here one process feeds the whole global batch and the data-parallel mesh
    splits it across devices (`ClusterConfig(num_csx=N)`), so the streaming batch size is
    the effective one (`cstorch.distributed.get_streaming_batch_size`, which refuses a
    batch size that is not an integer (TypeError) or not positive (ValueError))."""
    size = dist.get_streaming_batch_size(effective_batch_size, global_rank=global_rank)
    message = f"Effective batch size is {effective_batch_size}."
    if cstorch.use_cs() and dist.is_streamer():
        message += f" Using batch size {size} for streaming."
    _log.info(message)
    return size


__all__ = ["get_streaming_batch_size"]
