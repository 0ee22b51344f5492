"""The host input pipeline of a run: data workers, prefetch and progress.

A `DataExecutor` run takes its global batches from `HostPipeline.next_batch(k)`:

* **Workers.** The `DataLoader` holds W inner loaders, one per data worker
  (`ClusterConfig.num_workers_per_csx`, 1 off CSX); global batch `k` comes from worker
  `k % W`, round robin, as the real system streams. Worker `w` supplies exactly the
  batches the run will take from it (`share(num_steps, w, W)`), restarting its loader
  when exhausted; a pass that yields nothing is an error. Every pull from a worker's
  loader (and the `iter()` that starts a pass) runs inside that worker's streaming
  context (`cstorch.distributed.streaming`).
* **Prefetch.** With `prefetch_batches = P > 0` each worker gets a daemon producer
  thread that pulls its batches ahead into a bounded queue of P batches. The producer
  stages each batch before queueing it (`stage(batch)`; on CSX `Run.stage_batch`: the
  host-to-device copy), so a step finds its batch's copy made. (A staging thread of its
  own, beside the producers, cost ~50 µs more per step of a small model on 2 cores: one
  more thread to wake and hand the GIL to at every step.) A producer holds at most one
  batch beyond its full queue, so a worker's loader
  is never more than P + 1 batches ahead of the steps. The order of batches and the
  number taken from each loader are those of a run without prefetch. With P = 0 there
  is no thread: the main thread pulls the loader at each step. Caveat: a loader that
  draws from torch's global random generator (a torch DataLoader with `shuffle=True`
  and no `generator`, random augmentations) draws in an order that depends on thread
  timing when P > 0, since the main thread draws from it too; give such a loader its
  own `torch.Generator` (as `DistributedSampler` does) or set P = 0 to reproduce runs.
* **Start when slow** (`prefetch_batches = "auto"` where the step computes on the host's
  own cores: the CPU backend, CSX on the cpu platform). There a producer thread hides
  nothing the cores are not already busy with, and handing each batch across threads
  costs the step time (≈ 50 µs per step of a small model on 2 cores, measured: the
  producer wakes and takes the GIL while the step runs). So the main thread pulls the
  batches itself, timing each pull, and starts the producers (P = 2) only once the loader
  is slow: a median of `SLOW_LOADER_S` or more over `SLOW_WINDOW` consecutive pulls (each
  worker's first pull, which starts its loader, not counted; a median, so that one pull
  held up by another process on a loaded machine does not make a fast loader slow). From then on the run is
  prefetched as above; the batches and their order are the same either way.
* **Errors.** An exception raised by a worker's loader (or by `stage`) travels through
  the queue in place of the batch it was producing and is raised again, the same
  exception object with its original traceback and a note, at the step that would have
  received that batch. Pulled on the main thread, it is raised at that step at once,
  with a note naming the worker and the global batch all the same.
* **Stop.** `close()` closes every queue, which wakes a producer blocked on a full
  queue; a producer inside the loader stops when that call returns. `close()` then
  joins the threads (waiting up to `_JOIN_TIMEOUT_S` for a loader call to return, with
  a warning if one does not). Nothing polls: both sides wait on a condition variable.

`PipelineStats` holds the live counters; `ProgressBar` shows them with tqdm.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, Callable, Optional

from tqdm import tqdm

from ...distributed.streaming import streaming_worker
from .._console import above_bar

log = logging.getLogger("cstorch")

_JOIN_TIMEOUT_S = 10.0

#: start when slow: the median seconds per pull, over `SLOW_WINDOW` consecutive pulls, at
#: which the producer threads start (ten times what a thread handoff costs a step)
SLOW_LOADER_S = 0.5e-3
SLOW_WINDOW = 4

_EMPTY_LOADER = (
    "Iterating the dataloader did not return any values. This is possibly because the dataset is too small for the "
    "specified batch_size or drop_last settings. Please make sure that the dataloader is able to generate at least "
    "one batch."
)


def share(num_batches: int, rank: int, num_workers: int) -> int:
    """How many of global batches `0 .. num_batches-1` worker `rank` supplies (those
    `k` with `k % num_workers == rank`)."""
    return max(0, -(-(num_batches - rank) // num_workers))


@dataclass
class PipelineStats:
    """Live counters of a run's host input pipeline (`DataExecutor.pipeline_stats`).

    Updated while the run iterates, so they can be read from the loop body, from a
    closure or after the run. Lists have one entry per data worker.

    * `num_steps`: the steps of the run; `steps`: steps completed (loop body and
      end-of-step work done).
    * `produced`: batches taken from each worker's loader so far. With prefetch a
      worker runs ahead of the steps by at most `queue_capacity + 1` batches.
    * `queued`: batches waiting in each worker's queue now; `queue_capacity`: the
      queue size per worker (`prefetch_batches`; 0 means no queue and no thread).
    * `input_wait_s`: seconds the main thread waited for its next batch (without
      prefetch this includes the loader's own time).
    * `loader_s`: seconds spent inside each worker's loader producing batches.
    * `started_at` / `ended_at`: `time.perf_counter()` at the start and end of the run.
    """

    num_steps: int = 0
    steps: int = 0
    produced: list = field(default_factory=list)
    queued: list = field(default_factory=list)
    queue_capacity: int = 0
    input_wait_s: float = 0.0
    loader_s: list = field(default_factory=list)
    started_at: Optional[float] = None
    ended_at: Optional[float] = None

    @classmethod
    def for_run(cls, num_steps: int, num_workers: int, queue_capacity: int) -> "PipelineStats":
        return cls(num_steps=num_steps, produced=[0] * num_workers, queued=[0] * num_workers,
                   queue_capacity=queue_capacity, loader_s=[0.0] * num_workers, started_at=time.perf_counter())

    @property
    def elapsed_s(self) -> float:
        """Seconds since the run started (until it ended, once it has)."""
        if self.started_at is None:
            return 0.0
        return (self.ended_at if self.ended_at is not None else time.perf_counter()) - self.started_at

    @property
    def steps_per_s(self) -> float:
        """Completed steps per second of the run so far."""
        elapsed = self.elapsed_s
        return self.steps / elapsed if elapsed > 0 else 0.0

    @property
    def input_wait_share(self) -> float:
        """The fraction of the run's time the main thread spent waiting for input."""
        elapsed = self.elapsed_s
        return self.input_wait_s / elapsed if elapsed > 0 else 0.0

    def summary(self) -> str:
        """`input wait NN% | queue q/capacity` (the progress bar's postfix)."""
        capacity = self.queue_capacity * len(self.queued)
        return f"input wait {self.input_wait_share:.0%} | queue {sum(self.queued)}/{capacity}"


class LoaderPasses:
    """The batches of `loader`, pass after pass: when a pass ends the next one starts
    (`iter(loader)` again); a pass that yields no batch at all is an error."""

    def __init__(self, loader):
        self._loader = loader
        self._it = None

    def __iter__(self):
        return self

    def __next__(self):
        fresh = self._it is None
        if fresh:
            self._it = iter(self._loader)
        while True:
            try:
                return next(self._it)
            except StopIteration:
                if fresh:
                    raise RuntimeError(_EMPTY_LOADER) from None
                self._it, fresh = iter(self._loader), True


class _WorkerStream:
    """Exactly `count` batches of one worker's loader, restarting it when a pass ends;
    every pull runs in the worker's streaming context and is counted in `stats`."""

    def __init__(self, loader, rank: int, num_workers: int, count: int, stats: PipelineStats):
        self._passes = LoaderPasses(loader)
        self._rank = rank
        self._context = streaming_worker(rank, num_workers)
        self._left = count
        self._stats = stats
        self.last_pull_s = 0.0  # seconds the last pull spent in the loader

    def __iter__(self):
        return self

    def __next__(self):
        if self._left == 0:
            raise StopIteration
        start = perf_counter()
        try:
            with self._context:
                batch = next(self._passes)
        finally:
            self.last_pull_s = perf_counter() - start
            self._stats.loader_s[self._rank] += self.last_pull_s
        self._left -= 1
        self._stats.produced[self._rank] += 1
        return batch


class _Channel:
    """A bounded FIFO from one producer thread to the main thread.

    `put` waits while the queue is full and returns False once the channel is closed;
    `get` waits for an item. `finish` (the producer has exited) wakes a waiting `get`,
    which then raises instead of waiting forever. The queue length is mirrored into
    `stats.queued[rank]`."""

    def __init__(self, capacity: int, rank: int, stats: PipelineStats):
        self._items: collections.deque = collections.deque()
        self._cond = threading.Condition()
        self._capacity = capacity
        self._rank = rank
        self._stats = stats
        self._closed = False
        self._finished = False

    def put(self, item) -> bool:
        with self._cond:
            while len(self._items) >= self._capacity and not self._closed:
                self._cond.wait()
            if self._closed:
                return False
            self._items.append(item)
            self._stats.queued[self._rank] = len(self._items)
            self._cond.notify_all()
            return True

    def get(self):
        with self._cond:
            while not self._items:
                if self._finished:
                    raise RuntimeError(
                        f"Input worker {self._rank} stopped before producing the batch this step needs. This is a "
                        f"bug in cstorch's input pipeline; set cstorch.backends.csx.performance.prefetch_batches = 0 "
                        f"to run without it."
                    )
                self._cond.wait()
            item = self._items.popleft()
            self._stats.queued[self._rank] = len(self._items)
            self._cond.notify_all()
            return item

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._items.clear()
            self._stats.queued[self._rank] = 0
            self._cond.notify_all()

    def finish(self) -> None:
        with self._cond:
            self._finished = True
            self._cond.notify_all()


_BATCH, _ERROR = "batch", "error"


def _produce(stream: _WorkerStream, channel: _Channel, stage: Optional[Callable[[Any], None]]) -> None:
    """A producer thread's body: every batch of `stream`, staged, into `channel`; the
    first exception instead of its batch; stop when the channel is closed."""
    try:
        for batch in stream:
            if stage is not None:
                stage(batch)
            if not channel.put((_BATCH, batch)):
                return
    except BaseException as e:  # raised again on the main thread, at its step
        channel.put((_ERROR, e))
    finally:
        channel.finish()


class HostPipeline:
    """Global batches `0 .. num_steps-1` of a run, taken round robin from the workers
    of `loader` (a `cstorch.utils.data.DataLoader`), prefetched by one thread per
    worker when `prefetch > 0`, from the start or (`start_when_slow`) once the loader
    is slow. See the module docstring for the contracts."""

    def __init__(self, loader, num_steps: int, prefetch: int, stage: Optional[Callable[[Any], None]],
                 stats: PipelineStats, start_when_slow: bool = False):
        workers = loader.start_stream()
        self._loader = loader
        self._num_workers = len(workers)
        self._stats = stats
        self._streams = [_WorkerStream(inner, w, self._num_workers, share(num_steps, w, self._num_workers), stats)
                         for w, inner in enumerate(workers)]
        self._channels: list[_Channel] = []
        self._threads: list[threading.Thread] = []
        if prefetch > 0:
            self._channels = [_Channel(prefetch, w, stats) for w in range(self._num_workers)]
            self._threads = [threading.Thread(target=_produce, args=(s, c, stage), daemon=True,
                                              name=f"cstorch-input-worker-{w}")
                             for w, (s, c) in enumerate(zip(self._streams, self._channels))]
        #: the main thread pulls the loader itself (no prefetch, or not slow yet)
        self._inline = not self._threads or start_when_slow
        self._recent: collections.deque = collections.deque(maxlen=SLOW_WINDOW)  # seconds of the last pulls

    def start(self) -> None:
        """Start the producer threads (none without prefetch; later when starting when slow)."""
        if not self._inline:
            for t in self._threads:
                t.start()

    def next_batch(self, k: int):
        """Global batch `k` (taken in order, k = 0, 1, ...): from worker `k % W`."""
        start = perf_counter()
        try:
            batch = self._take(k % self._num_workers, k)
        finally:
            self._stats.input_wait_s += perf_counter() - start
        self._loader.record_batch(batch)
        return batch

    def _take(self, w: int, k: int):
        if self._inline:
            try:
                return self._pull(w, k)
            except Exception as e:
                e.add_note(f"[cstorch] raised by input worker {w}'s loader while preparing global batch {k}, "
                           f"pulled on the step thread at step {k}.")
                raise
        kind, value = self._channels[w].get()
        if kind == _BATCH:
            return value
        value.add_note(f"[cstorch] raised by input worker {w}'s producer thread while preparing global batch "
                       f"{k}; re-raised at step {k}, which takes that batch.")
        raise value

    def _pull(self, w: int, k: int):
        """Batch `k` pulled on the main thread; starting when slow, the producers start
        once the loader's median pull time reaches `SLOW_LOADER_S` (module docstring)."""
        stream = self._streams[w]
        batch = next(stream)
        if self._threads and k >= self._num_workers:  # a worker's first pull starts its loader: not counted
            recent = self._recent
            recent.append(stream.last_pull_s)
            if len(recent) == SLOW_WINDOW and (median := statistics.median(recent)) >= SLOW_LOADER_S:
                log.debug("the loader takes %.2f ms per batch: starting the input producer threads", median * 1e3)
                self._inline = False
                for t in self._threads:
                    t.start()
        return batch

    def close(self) -> None:
        """Stop and join the producer threads (idempotent)."""
        for c in self._channels:
            c.close()
        for t in self._threads:
            if t.ident is not None:  # started
                t.join(_JOIN_TIMEOUT_S)
            if t.is_alive():
                log.warning("Input producer thread %s is still inside the dataloader %.0f s after the run stopped; "
                            "it is left running as a daemon thread and exits when that call returns.",
                            t.name, _JOIN_TIMEOUT_S)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class ProgressBar:
    """A tqdm bar of a run on stderr: step/num_steps, steps/s, input-wait share and
    queue fill. `mode` is the `progress` backend flag: True, False or "auto" (a bar
    only when stderr is a terminal). While the bar is shown, log records and warnings are
    written above it (`cstorch.utils._console.above_bar`), never onto its line."""

    def __init__(self, mode, stats: PipelineStats):
        self._stats = stats
        show = mode is True or (mode == "auto" and _stderr_is_terminal())
        self._bar = tqdm(total=stats.num_steps, unit="step", file=sys.stderr, dynamic_ncols=True,
                         desc="cstorch run") if show else None
        self._console = contextlib.ExitStack()
        self._console.enter_context(above_bar(self._bar))

    def step(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(self._stats.summary(), refresh=False)
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(self._stats.summary(), refresh=False)
            self._bar.close()
            self._bar = None
        self._console.close()
