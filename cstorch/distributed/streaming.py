"""Which data worker is running: the streaming context of an input worker.

A CSX run with `ClusterConfig(num_workers_per_csx=W)` streams its input from W data
workers. Here a worker is a thread of the host input pipeline, not a process: the
`DataLoader` calls `input_fn` once per worker and iterates each worker's loader inside
that worker's context (see `cstorch.utils.data.streamer`). The context is per thread,
so code in `input_fn` or in the loader's iteration (a `DistributedSampler`, for
instance) learns its share of the stream:

* `num_streamers()`: W inside a worker; 1 outside.
* `get_streaming_rank()`: the worker id in [0, W) inside a worker; 0 outside.
* `is_streamer()`: whether the calling code runs inside a worker.
* `get_ordinal()` / `num_tasks()`: the worker id and the worker count (the tasks of a
  run here are its data workers), 0 and 1 outside; `is_master_ordinal()` is ordinal 0.
* `is_receiver()` / `num_receivers()`: the task that receives the step's outputs is the
  training loop itself (not a data worker), and there is one.
* `get_streaming_batch_size(effective_batch_size, global_rank=None)`: the batch size a
  worker streams. Every worker streams whole global batches (the engine shards a
  batch over the devices), so it is `effective_batch_size` unchanged.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class _Worker:
    rank: int
    count: int


_local = threading.local()


def _current() -> Optional[_Worker]:
    return getattr(_local, "worker", None)


class streaming_worker:
    """`with streaming_worker(rank, count):` runs the body as data worker `rank` of
    `count`, in the calling thread only (the worker context before it is restored on
    exit). One object may be entered again and again (not nested in itself): the input
    pipeline enters its worker's context around every pull from the loader."""

    __slots__ = ("_worker", "_outer")

    def __init__(self, rank: int, count: int):
        if not 0 <= rank < count:
            raise ValueError(f"A streaming worker's rank must be in [0, {count}), got {rank}.")
        self._worker = _Worker(rank, count)

    def __enter__(self) -> None:
        self._outer = getattr(_local, "worker", None)
        _local.worker = self._worker

    def __exit__(self, *exc) -> None:
        _local.worker = self._outer


def num_streamers() -> int:
    """The number of data workers streaming this run's input (1 outside a worker)."""
    w = _current()
    return w.count if w is not None else 1


def get_streaming_rank() -> int:
    """The calling data worker's id (0 outside a worker).

    Differences from the real system:
        The data workers of `ClusterConfig(num_workers_per_csx=W)` are threads of one
        process and `input_fn` is called once per worker: inside it this is the worker's
        id.
    """
    w = _current()
    return w.rank if w is not None else 0


def is_streamer() -> bool:
    """Whether the calling code runs inside a data worker."""
    return _current() is not None


def get_ordinal() -> int:
    """The calling task's ordinal: the data worker's id, 0 outside a worker."""
    return get_streaming_rank()


def num_tasks() -> int:
    """The number of tasks: the data workers of the run, 1 outside a worker."""
    return num_streamers()


def is_master_ordinal(local: bool = False) -> bool:
    """Whether the calling task is ordinal 0 (`local` is accepted for the XLA-style API).

    Args:
        local: accepted for the XLA-style API; it does not change the result.
    """
    return get_ordinal() == 0


def is_receiver() -> bool:
    """Whether the calling code receives the step's outputs (the training loop, not a data worker).

    Differences from the real system:
        The training loop is the one receiver (`num_receivers()` is 1).
    """
    return not is_streamer()


def num_receivers() -> int:
    """The number of tasks receiving the step's outputs: 1."""
    return 1


def get_streaming_batch_size(effective_batch_size: int, global_rank: Optional[int] = None) -> int:
    """The batch size a data worker streams: the whole `effective_batch_size` (every
    worker streams global batches; `global_rank` does not change that here).

    Args:
        effective_batch_size: the global batch size (a positive integer).
        global_rank: the worker's rank (it does not change the result here).

    Differences from the real system:
        It returns its argument: every worker streams whole global batches.
    """
    if not isinstance(effective_batch_size, int):
        raise TypeError(f"Expected effective batch size to be an integer, but got type {type(effective_batch_size)} "
                        f"with value {effective_batch_size}.")
    if effective_batch_size <= 0:
        raise ValueError(f"Expected effective batch size to be a positive integer, but got value "
                         f"{effective_batch_size}.")
    return effective_batch_size
