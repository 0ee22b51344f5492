"""`DataExecutor(dataloader, num_steps=None, checkpoint_steps=None)`: the run loop.

Iterating it runs `num_steps` steps (restarting the loader when it is exhausted),
brackets each step for the backend (closures, checkpoints) and, at the end, leaves
every parameter and optimizer tensor holding the device's values.

Checkpoint steps for `checkpoint_steps=N` are the 0-based steps N-1, 2N-1, ... and
always the last step; 0 or None means no checkpoint step.
"""
from __future__ import annotations

from typing import Optional

from ... import _backend
from .dataloader import DataLoader


class DataExecutor:
    def __init__(self, dataloader: DataLoader, num_steps: Optional[int] = None,
                 checkpoint_steps: Optional[int] = None, activation_steps: Optional[int] = None,
                 profiler_activities=None):
        if not isinstance(dataloader, DataLoader):
            raise TypeError(
                "Detected that dataloader was not wrapped using a cstorch.utils.data.DataLoader: wrap it as "
                "cstorch.utils.data.DataLoader(input_fn, ...) where input_fn builds the loader."
            )
        self.dataloader = dataloader
        self.backend = _backend.current_backend_impl()
        if num_steps is None:
            try:
                num_steps = len(dataloader)
            except TypeError:
                raise ValueError(
                    "Could not infer the number of steps from the dataloader (it has no length); provide num_steps."
                ) from None
        if not isinstance(num_steps, int) or num_steps < 1:
            raise ValueError(f"Expected num_steps >= 1, got {num_steps!r}")
        self.num_steps = num_steps
        if checkpoint_steps is not None and (not isinstance(checkpoint_steps, int) or isinstance(checkpoint_steps, bool)):
            raise ValueError("checkpoint_steps must be None, integer, or a Schedule")
        if checkpoint_steps is not None and checkpoint_steps < 0:
            raise RuntimeError(f"checkpoint_steps must be >= 0, got {checkpoint_steps}")
        self.checkpoint_steps = checkpoint_steps or 0
        if activation_steps not in (None, 1):
            raise NotImplementedError("activation_steps other than 1 is not implemented yet")
        self.activation_steps = 1
        self.iteration = -1

    def __len__(self) -> int:
        return self.num_steps

    @property
    def user_iteration(self) -> int:
        return self.iteration + 1

    @property
    def is_initial_step(self) -> bool:
        return self.iteration == 0

    @property
    def on_final_iteration(self) -> bool:
        return self.iteration == self.num_steps - 1

    def checkpoint_step(self, step: int) -> bool:
        """Whether 0-based `step` is a checkpoint step."""
        n = self.checkpoint_steps
        if n <= 0:
            return False
        return (step + 1) % n == 0 or step == self.num_steps - 1

    @property
    def is_checkpoint_step(self) -> bool:
        return self.checkpoint_step(self.iteration)

    def _batches(self):
        produced = 0
        while True:
            empty = True
            for batch in self.dataloader:
                empty = False
                yield batch
                produced += 1
                if produced >= self.num_steps:
                    return
            if empty:
                raise RuntimeError(
                    "Iterating the dataloader did not return any values. Check its batch_size and drop_last settings."
                )

    def __iter__(self):
        run = self.backend.run
        run.start(self)
        failed = True
        try:
            for i, batch in enumerate(self._batches()):
                self.iteration = i
                yield batch
                run.batch_end(self)
            failed = False
        except GeneratorExit:  # the loop was left early (break): what was queued still runs
            failed = False
            raise
        finally:
            run.end(self, failed)


def current_executor() -> DataExecutor:
    b = _backend.backend()
    ex = b.run.executor if b is not None else None
    if ex is None:
        raise RuntimeError(
            "Detected that a data executor was not used. Please wrap your dataloader in a Cerebras DataExecutor."
        )
    return ex
