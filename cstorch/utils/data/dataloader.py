"""`cstorch.utils.data.DataLoader(input_fn, *args, **kwargs)`: a lazily built loader,
and the `RestartableDataLoader` protocol that lets a run resume its data stream.

A loader is restartable when it has `state_dict()`, `load_state_dict(sd)`,
`aggregate_state_dict(worker_states)` and `deaggregate_state_dict(sd)` (the last two
join and split per-worker states; with one worker they usually pass the state
through). `DataLoader.state_dict()` is legal before a run, on checkpoint steps and on
the final step (call it from a `@checkpoint_closure`); inside it the inner loader's
`state_dict()` reads `cstorch.distributed.get_worker_state()` to learn how many
batches the run has consumed. `load_state_dict` is legal only before iterating.
"""
from __future__ import annotations

import copy
import inspect
from typing import Any, Callable, Protocol, runtime_checkable

from ..._backend import use_cs
from ...distributed.worker_state import DataLoaderCheckpoint, worker_state
from .utils import infer_batch_size


@runtime_checkable
class RestartableDataLoader(Protocol):
    def state_dict(self) -> dict: ...

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> None: ...

    def aggregate_state_dict(self, worker_states: list) -> dict: ...

    def deaggregate_state_dict(self, aggregated_state_dict: dict, strict: bool = True) -> dict: ...


def _batch_size(batch, previous=None):
    """Dim 0 shared by the batch's tensors (see `utils.infer_batch_size`). Batches that
    differ from the previous one only warn here: on CSX the compiled step refuses them
    with an error that names the argument and both shapes."""
    csx = use_cs()
    return infer_batch_size(batch, None if csx else previous, is_csx=csx)


class DataLoader:
    """Wraps `input_fn(*args, **kwargs)`, which returns a torch DataLoader or any
    iterable of (nested) tensors. The loader is built on first use; the arguments are
    deep-copied so later changes by the caller do not leak in."""

    def __init__(self, input_fn: Callable, *args, **kwargs):
        if not callable(input_fn):
            raise TypeError(f"Expected input_fn to be a callable that returns an iterable, got {type(input_fn)}")
        self.input_fn = input_fn
        self.input_args = copy.deepcopy(args)
        self.input_kwargs = copy.deepcopy(kwargs)
        self._loader = None
        self.batch_size = None
        self._iterating = False

    @property
    def dataloader(self):
        if self._loader is None:
            self._loader = self.input_fn(*self.input_args, **self.input_kwargs)
        return self._loader

    @property
    def is_restartable(self) -> bool:
        return isinstance(self.dataloader, RestartableDataLoader)

    def __iter__(self):
        self._iterating = True
        for batch in self.dataloader:
            self.batch_size = _batch_size(batch, self.batch_size)
            yield batch

    def __len__(self) -> int:
        return len(self.dataloader)

    def __copy__(self) -> "DataLoader":
        return DataLoader(self.input_fn, *self.input_args, **self.input_kwargs)

    # -- restartable state -------------------------------------------------------------
    def _require_restartable(self, what: str) -> None:
        if not self.is_restartable:
            raise RuntimeError(
                f"DataLoader is not configured for {what} state. Please implement RestartableDataLoader "
                f"interface to enable `state_dict()` and `load_state_dict()` methods."
            )

    def _worker_state(self, steps: int) -> DataLoaderCheckpoint:
        return DataLoaderCheckpoint(appliance_step=steps, worker_step=steps,
                                    samples_streamed=steps * (self.batch_size or 0))

    def state_dict(self) -> dict[str, Any]:
        """The aggregated state of the inner loader, as of the current step."""
        self._require_restartable("getting")
        from ..._backend import backend

        b = backend()
        ex = b.run.executor if b is not None else None
        steps = 0
        if ex is not None and ex.iteration >= 0:
            if not (ex.is_checkpoint_step or ex.on_final_iteration):
                raise RuntimeError(
                    "DataLoader state can only be requested at a checkpoint step. Please ensure that `state_dict` "
                    "is called on the `cstorch.utils.DataLoader` at a checkpoint step. If you're calling it inside "
                    "of a method, please decorate it with the `cstorch.checkpoint_closure` method decorator."
                )
            steps = ex.iteration + 1
        with worker_state(self._worker_state(steps)):
            return copy.deepcopy(self.dataloader.aggregate_state_dict([self.dataloader.state_dict()]))

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:
        """Restore the inner loader's position (before iterating)."""
        self._require_restartable("setting")
        from ..._backend import backend

        b = backend()
        if self._iterating and b is not None and b.run.executor is not None:
            raise RuntimeError(
                "DataLoader state can only be loaded onto before execution. Please make sure to call "
                "`load_state_dict()` only before iterating the data executor."
            )
        inner = self.dataloader
        takes = [("strict" in inspect.signature(m).parameters) for m in (inner.load_state_dict,
                                                                         inner.deaggregate_state_dict)]
        if takes[0] != takes[1]:
            raise TypeError(
                "A RestartableDataLoader's load_state_dict and deaggregate_state_dict must either both take a "
                "`strict` argument or neither."
            )
        kwargs = {"strict": strict} if takes[0] else {}
        with worker_state(self._worker_state(0)):
            inner.load_state_dict(inner.deaggregate_state_dict(state_dict, **kwargs), **kwargs)
