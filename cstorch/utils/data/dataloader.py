"""`cstorch.utils.data.DataLoader(input_fn, *args, **kwargs)`: a lazily built loader,
and the `RestartableDataLoader` protocol that lets a run resume its data stream.

Data workers. A CSX backend whose `ClusterConfig.num_workers_per_csx` is W (0 counts
as 1; off CSX W is 1) streams from W data workers: the DataLoader calls
`input_fn(*args, **kwargs)` W times, worker `w`'s call inside `w`'s streaming context
(`cstorch.distributed.get_streaming_rank()` is `w`, `num_streamers()` is W), each with
its own copy of the arguments. W is read from the backend when the loaders are first
built (on first use). A run takes global batch `k` from worker `k % W` (see
`streamer.py`). `len(DataLoader)` is the sum of the workers' lengths: the batches of
one pass over every worker, which is the length of the global stream when the workers
shard it (a `DistributedSampler` does) and is what a `DataExecutor` takes as
`num_steps` when none is given. Iterating a DataLoader directly yields one such pass,
round robin, ending at the first worker that has no batch left in its turn.

A loader is restartable when it has `state_dict()`, `load_state_dict(sd)`,
`aggregate_state_dict(worker_states)` and `deaggregate_state_dict(sd)` (the last two
join the W per-worker states and split them again; with one worker they usually pass
the state through). `DataLoader.state_dict()` is legal before a run, on checkpoint
steps and on the final step (call it from a `@checkpoint_closure`); it calls each
worker's `state_dict()` inside that worker's streaming context and worker state,
where `cstorch.distributed.get_worker_state()` tells how many of the worker's batches
the steps run so far have consumed (`worker_step`; never the batches prefetched
ahead), then joins the list with `aggregate_state_dict`. `load_state_dict(sd)` is
legal only before iterating: each worker, in its context and worker state, gets
`load_state_dict(deaggregate_state_dict(sd))`.
"""
from __future__ import annotations

import copy
import inspect
import itertools
from typing import Any, Callable, Optional, Protocol, runtime_checkable

import torch

from ... import _backend
from ..._backend import use_cs
from ...distributed.streaming import streaming_worker
from ...distributed.worker_state import DataLoaderCheckpoint, worker_state
from .streamer import share
from .utils import infer_batch_size


@runtime_checkable
class RestartableDataLoader(Protocol):
    """A loader whose position is saved in checkpoints: `state_dict()` and
    `load_state_dict(sd, strict)` (reading `cstorch.distributed.get_worker_state()`), and
    `aggregate_state_dict(worker_states)`.

    Differences from the real system:
        `aggregate_state_dict` gets one state per data worker. `worker_step` counts the
        worker's batches that steps consumed, never those prefetched, and the
        worker-state counts are those of the current run.
    """

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> None: ...

    def aggregate_state_dict(self, worker_states: list) -> dict: ...

    def deaggregate_state_dict(self, aggregated_state_dict: dict, strict: bool = True) -> dict: ...


_END = object()


def _batch_size(batch, previous=None):
    """Dim 0 shared by the batch's tensors (see `utils.infer_batch_size`). Batches that
    differ from the previous one only warn here: on CSX the compiled step refuses them
    with an error that names the argument and both shapes."""
    csx = use_cs()
    return infer_batch_size(batch, None if csx else previous, is_csx=csx)


def _workers_per_csx() -> int:
    """W: the current CSX backend's `num_workers_per_csx` (0 counts as 1); 1 elsewhere."""
    b = _backend.backend()
    cfg = b.cluster_config if b is not None else None
    return (cfg.num_workers_per_csx or 1) if cfg is not None else 1


class DataLoader:
    """Wraps `input_fn(*args, **kwargs)`, which returns a torch DataLoader or any
    iterable of (nested) tensors, once per data worker. The loaders are built on first
    use; the arguments are deep-copied so later changes by the caller do not leak in.

    Args:
        input_fn: a function that builds the loader: it returns a torch DataLoader or any iterable of
            (nested) tensors. It is called once per data worker, when the loader is first used.
        *args: positional arguments for `input_fn` (deep-copied now).
        **kwargs: keyword arguments for `input_fn` (deep-copied now).

    Differences from the real system:
        With `ClusterConfig(num_workers_per_csx=W)` the W data workers are threads
        of one process: `input_fn` is called W times and global batch k comes from
        worker k % W; `len(DataLoader)` is the sum of the workers' lengths, and
        every worker streams whole global batches.
    """

    def __init__(self, input_fn: Callable, *args, **kwargs):
        if not callable(input_fn):
            raise TypeError(f"Expected input_fn to be a callable that returns an iterable, got {type(input_fn)}")
        self.input_fn = input_fn
        self.input_args = copy.deepcopy(args)
        self.input_kwargs = copy.deepcopy(kwargs)
        self._workers: Optional[list] = None
        self.batch_size = None
        self._iterating = False

    @property
    def workers(self) -> list:
        """The inner loader of every data worker (built on first use)."""
        if self._workers is None:
            self._workers = self._build_workers(_workers_per_csx())
        return self._workers

    def _build_workers(self, count: int) -> list:
        loaders = []
        for w in range(count):
            args, kwargs = ((self.input_args, self.input_kwargs) if w == 0
                            else copy.deepcopy((self.input_args, self.input_kwargs)))
            with streaming_worker(w, count):
                loaders.append(self.input_fn(*args, **kwargs))
        return loaders

    @property
    def num_workers(self) -> int:
        return len(self.workers)

    @property
    def dataloader(self):
        """The inner loader (worker 0's when there are several workers)."""
        return self.workers[0]

    @property
    def is_restartable(self) -> bool:
        return isinstance(self.dataloader, RestartableDataLoader)

    def start_stream(self) -> list:
        """A run starts iterating the workers' loaders (from now on `load_state_dict`
        is refused during the run): their list."""
        self._iterating = True
        return self.workers

    def record_batch(self, batch) -> None:
        """Note a batch a run takes (in step order): tracks and checks its batch size."""
        size = self.batch_size
        if size is not None and type(batch) in (tuple, list) and batch:
            # the usual batch: plain tensors of the size already known (nothing to update or warn about)
            for t in batch:
                if type(t) is not torch.Tensor or (t.shape[0] if t.dim() else 1) != size:
                    break
            else:
                return
        self.batch_size = _batch_size(batch, size)

    def __iter__(self):
        self._iterating = True
        count = self.num_workers
        passes = []
        for w, inner in enumerate(self.workers):
            with streaming_worker(w, count):
                passes.append(iter(inner))
        for k in itertools.count():
            w = k % count
            with streaming_worker(w, count):
                batch = next(passes[w], _END)
            if batch is _END:
                return
            self.record_batch(batch)
            yield batch

    def __len__(self) -> int:
        return sum(len(inner) for inner in self.workers)

    def __copy__(self) -> "DataLoader":
        return DataLoader(self.input_fn, *self.input_args, **self.input_kwargs)

    # -- restartable state -------------------------------------------------------------
    def _require_restartable(self, what: str) -> None:
        if not self.is_restartable:
            raise RuntimeError(
                f"DataLoader is not configured for {what} state. Please implement RestartableDataLoader "
                f"interface to enable `state_dict()` and `load_state_dict()` methods."
            )

    def _worker_state(self, rank: int, steps: int) -> DataLoaderCheckpoint:
        """Worker `rank`'s view after `steps` steps: the batches of it those steps took."""
        taken = share(steps, rank, self.num_workers)
        return DataLoaderCheckpoint(local_worker_id=rank, num_workers_per_csx=self.num_workers, appliance_step=steps,
                                    worker_step=taken, samples_streamed=taken * (self.batch_size or 0))

    def _steps_consumed(self) -> int:
        """Steps run so far by the active executor (0 outside a run), checking that the
        state may be read now."""
        b = _backend.backend()
        ex = b.run.executor if b is not None else None
        if ex is None or ex.iteration < 0:
            return 0
        if not (ex.is_checkpoint_step or ex.on_final_iteration):
            raise RuntimeError(
                "DataLoader state can only be requested at a checkpoint step. Please ensure that `state_dict` "
                "is called on the `cstorch.utils.DataLoader` at a checkpoint step. If you're calling it inside "
                "of a method, please decorate it with the `cstorch.checkpoint_closure` method decorator."
            )
        return ex.iteration + 1

    def state_dict(self) -> dict[str, Any]:
        """The aggregated state of the workers' loaders, as of the current step."""
        self._require_restartable("getting")
        steps = self._steps_consumed()
        states = []
        for w, inner in enumerate(self.workers):
            with streaming_worker(w, self.num_workers), worker_state(self._worker_state(w, steps)):
                states.append(inner.state_dict())
        with worker_state(self._worker_state(0, steps)):
            return copy.deepcopy(self.dataloader.aggregate_state_dict(states))

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:
        """Restore every worker's position (before iterating)."""
        self._require_restartable("setting")
        b = _backend.backend()
        if self._iterating and b is not None and b.run.executor is not None:
            raise RuntimeError(
                "DataLoader state can only be loaded onto before execution. Please make sure to call "
                "`load_state_dict()` only before iterating the data executor."
            )
        for w, inner in enumerate(self.workers):
            kwargs = _strict_kwargs(inner, strict)
            with streaming_worker(w, self.num_workers), worker_state(self._worker_state(w, 0)):
                inner.load_state_dict(inner.deaggregate_state_dict(state_dict, **kwargs), **kwargs)


def _strict_kwargs(inner, strict: bool) -> dict:
    """`{"strict": strict}` when the loader's load and deaggregate methods take it."""
    takes = [("strict" in inspect.signature(m).parameters) for m in (inner.load_state_dict,
                                                                     inner.deaggregate_state_dict)]
    if takes[0] != takes[1]:
        raise TypeError(
            "A RestartableDataLoader's load_state_dict and deaggregate_state_dict must either both take a "
            "`strict` argument or neither."
        )
    return {"strict": strict} if takes[0] else {}
