"""`get_worker_state()`: where the data stream stands, for a restartable loader's
`state_dict`.

A checkpoint may be taken while the loader has already produced batches the device
has not consumed yet, so a loader cannot count its own batches; it asks the runtime
instead. Counts are for the current run (since its DataExecutor started): a loader
resumed from a state adds what it loaded.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class DataLoaderCheckpoint:
    """Where one data worker's stream stands, as `get_worker_state()` gives it to a
    restartable loader's `state_dict()` and `load_state_dict()`.

    Args:
        local_worker_id: the data worker's index, 0 .. num_workers_per_csx - 1.
        num_workers_per_csx: the run's number of data workers.
        num_csx: the real system's number of systems (cstorch gives 1: every worker streams the whole
            run's batches).
        wse_id: the real system's system the worker streams to (cstorch gives 0).
        appliance_step: the steps the run has completed.
        worker_step: the batches of this worker that steps consumed (never those prefetched).
        samples_streamed: `worker_step` times the batch size.
        user_state_dict: the real system's slot for the loader's own state (cstorch gives None: the loader's
            state reaches it as the argument of `load_state_dict`).
    """

    local_worker_id: int = 0
    num_workers_per_csx: int = 1
    num_csx: int = 1
    wse_id: int = 0
    appliance_step: int = 0  # steps the run has completed
    worker_step: int = 0  # batches this worker has streamed that were consumed
    samples_streamed: int = 0  # worker_step * batch size
    user_state_dict: Optional[Any] = None


_current: Optional[DataLoaderCheckpoint] = None


@contextmanager
def worker_state(state: DataLoaderCheckpoint):
    global _current
    old, _current = _current, state
    try:
        yield
    finally:
        _current = old


def get_worker_state() -> DataLoaderCheckpoint:
    """Where the data stream stands (see the module docstring).

    Differences from the real system:
        `worker_step` counts the batches of this worker that steps consumed, never
        those prefetched; the counts are for the current run.
    """
    if _current is None:
        raise RuntimeError(
            "get_worker_state() is only available inside the state_dict() or load_state_dict() method of a "
            "RestartableDataLoader, which cstorch.utils.data.DataLoader calls at checkpoint steps."
        )
    return _current
