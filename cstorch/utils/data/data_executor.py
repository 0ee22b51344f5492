"""`DataExecutor(dataloader, num_steps=None, checkpoint_steps=None, activation_steps=None)`:
the run loop.

Iterating it runs `num_steps` steps (restarting the loader when it is exhausted),
brackets each step for the backend (closures, checkpoints) and, at the end, leaves
every parameter and optimizer tensor holding the device's values.

Checkpoint steps. `checkpoint_steps=N` means the 0-based steps N-1, 2N-1, ... and
always the last step; 0 or None means none; a `Schedule` (0-based) is used as given.
`is_checkpoint_step` is `schedule.match(iteration)`.

Activation steps. On CSX, step closures run only on activation steps: the steps whose
1-based `user_iteration` is a multiple of `activation_steps`, and the final step; on
other steps their values are never fetched from the device. CPU/GPU run closures
every step. `activation_steps` is capped at `num_steps` and reduced (with a warning)
to a divisor of every checkpoint step's `user_iteration`, so that closures can fetch
values on checkpoint steps; checkpoint closures always follow the checkpoint schedule.

Iteration. `iter(executor)` starts the run at once (`Run.start`): until the
first `next()` the run is at its pre-initial step (`iteration == -1`,
`is_pre_initial_step`) and `current_executor()` is this executor. The input pipeline
(`streamer.py`: the loader's data workers, run ahead by producer threads as
`cstorch.backends.csx.performance.prefetch_batches` says) starts with the run; step k
takes global batch k, from worker k % W. The run ends (`Run.end`; the producers
are stopped and joined) when its steps are done, when the loop is left early (`break`
or an exception in the loop body: pending closures still run) or when the run itself
raises (the loader or a closure: pending closures are dropped). `pipeline_stats`
holds the pipeline's live counters, shown as a tqdm bar according to
`cstorch.backends.csx.performance.progress`.

Profiler and artifacts. `profiler` (a `cstorch.utils.profiler.Profiler`, None before the
run and in compile/validate-only runs) is stepped with each batch's size after the step
and before its closures: `executor.profiler.rate_tracker.rate` / `.global_rate` read in a
step closure are the samples/second so far. `artifact_dir` is this run's folder
`<backend.artifact_dir>/executors/<000001, 000002, ...>` (with an `executors/latest` link),
numbered when the run starts and created when first read; reading it before the run
starts is a RuntimeError.
"""
from __future__ import annotations

import logging
import math
import os
import sys
import time
from pathlib import Path
from typing import Optional, Union

from ... import _backend, backends
from ..profiler import Profiler
from .dataloader import DataLoader
from .streamer import HostPipeline, PipelineStats, ProgressBar
from .utils import Schedule

log = logging.getLogger("cstorch")

#: the values of a micro-batch size setting (the real API's name for the type of
#: `cstorch.backends.csx.performance.micro_batch_size`)
MbsSetting = backends.MicroBatchSize


class _StepCountError(ValueError, RuntimeError):
    """A bad or unknown `num_steps`: catchable as the real system's RuntimeError and as
    a ValueError."""


def _check_steps(name: str, value, lowerbound: int) -> None:
    if value is None:
        return
    if not isinstance(value, int):
        raise TypeError(f'Expected {name} to be have "int" or "None" type. Got: "{type(value)}"')
    if value < lowerbound:
        raise RuntimeError(f'Expected {name} to be an integer >= {lowerbound} or "None". Got: {value}')


class DataExecutor:
    """Runs the steps of a training or evaluation run over a `DataLoader`: `num_steps`,
    checkpoint steps (`checkpoint_steps`) and activation steps, with the batches
    prepared ahead by a producer thread. `iter(executor)` starts the run at once (the
    pre-initial step, `iteration == -1`).

    Args:
        dataloader: the batches, a `cstorch.utils.data.DataLoader` (a torch DataLoader must be wrapped in
            one).
        num_steps: the number of steps to run (the loader restarts when it is exhausted); None: one pass
            over the loader, `len(dataloader)` (a loader without a length then raises). On a compile-only or
            validate-only CSX backend it is 1.
        checkpoint_steps: N: the checkpoint steps are the 0-based steps N-1, 2N-1, ... and the last step; 0
            or None: none; a Schedule: its 0-based steps.
        activation_steps: on CSX, step closures get values on the steps whose 1-based number is a multiple
            of it, and on the last step; None: 1 (every step). Capped at `num_steps` and reduced to divide
            every checkpoint step.
        profiler_activities: the `cstorch.utils.profiler.Activity` classes the run's profiler measures
            (checked now); None: the rate tracker.
        steps_per_launch: on CSX, how many calls of a compiled step launch together as one
            executable (a loop over their batches whose body is the step; every step
            computes what it would launched alone, bit for bit); None: the backend flag
            `cstorch.backends.csx.performance.steps_per_launch` (16). 1 launches each call
            at once.

    Differences from the real system:
        A background producer thread runs the loader ahead of the step and, on CSX,
        starts each batch's copy to the device; where the step computes on the host's
        own cores it starts only once the loader is slow (`prefetch_batches`). The
        order and number of batches taken from the loader are those of a run without
        prefetch.
        A loader's exception is raised at the step that takes its batch. A loader
        drawing from torch's global RNG (`shuffle=True` without a `generator`)
        interleaves its draws with the main thread's in timing order: give it its
        own generator, or set `prefetch_batches = 0`. On CSX a batch of another size
        is refused by the compiled step (`StaticGraphError`), not by the loader; a
        batch without tensors counts as batch size 1. `profiler.flops_utilization`
        is None and no `performance.json` is written.
    """

    iteration: int  # the 0-based step being run (-1 before the first)

    def __init__(self, dataloader: DataLoader, num_steps: Optional[int] = None,
                 checkpoint_steps: Union[int, Schedule, None] = None, activation_steps: Optional[int] = None,
                 profiler_activities=None, steps_per_launch: Optional[int] = None):
        if not isinstance(dataloader, DataLoader):
            raise TypeError(
                "Detected that dataloader was not wrapped using a cstorch.utils.data.DataLoader: wrap it as "
                "cstorch.utils.data.DataLoader(input_fn, ...) where input_fn builds the loader."
            )
        self.dataloader = dataloader
        self.backend = _backend.current_backend_impl()
        if steps_per_launch is not None and not (isinstance(steps_per_launch, int) and not isinstance(
                steps_per_launch, bool) and steps_per_launch >= 1):
            raise ValueError(f"steps_per_launch must be an integer >= 1 (or None: the backend flag "
                             f"cstorch.backends.csx.performance.steps_per_launch), got {steps_per_launch!r}.")
        self._steps_per_launch = steps_per_launch
        #: how many calls of a compiled CSX step launch together in this run (set when it starts)
        self.steps_per_launch = 1
        self.num_steps = self._resolve_num_steps(dataloader, num_steps)
        num_steps = self.num_steps

        _check_steps("activation_steps", activation_steps, 1)
        activation = min(num_steps, activation_steps or 1)

        if isinstance(checkpoint_steps, int):
            _check_steps("checkpoint_steps", checkpoint_steps, 0)
            if checkpoint_steps:
                schedule = Schedule([Schedule.Range(start=min(checkpoint_steps - 1, num_steps - 1), end=num_steps,
                                                    step=checkpoint_steps, include_last=True)])
            else:
                schedule = Schedule([])
        elif isinstance(checkpoint_steps, Schedule):
            schedule = Schedule(list(checkpoint_steps.intervals))
        elif checkpoint_steps is None:
            schedule = Schedule([])
        else:
            raise ValueError(f"checkpoint_steps must be None, integer, or a Schedule, but got {checkpoint_steps}.")

        # Every checkpoint step must also be an activation step (the final step always is).
        aligned = activation
        for s in schedule:
            if s < num_steps - 1:
                aligned = math.gcd(aligned, s + 1)
        if aligned != activation:
            log.warning(
                "Activation frequency was reduced from %d to %d because of the checkpoint schedule: activations "
                "may be accessed on any of the checkpoint steps %s. To avoid the reduction, make sure that the "
                "activation steps divide every checkpoint step.", activation, aligned, tuple(schedule.range()))
            activation = aligned

        self.checkpoint_steps = checkpoint_steps
        self.checkpoint_schedule = schedule
        self.activation_steps = activation
        self.profiler_activities = profiler_activities
        if profiler_activities is not None:
            Profiler(None, profiler_activities)  # the activities are checked now
        self._profiler: Optional[Profiler] = None
        self._artifact_dir: Optional[Path] = None
        self.iteration = -1
        self.pipeline_stats = PipelineStats(num_steps=num_steps)

    @property
    def profiler(self) -> Optional[Profiler]:
        """The run's Profiler (see the module docstring); None before the run starts and
        in compile-only / validate-only runs."""
        return self._profiler

    @property
    def artifact_dir(self) -> Path:
        """This run's folder under the backend's artifact folder (created on first read).

        Differences from the real system:
            The folder is `<backend.artifact_dir>/executors/00000N` (with a `latest`
            link) and is created when first read; no `performance.json` is written.
        """
        if self._artifact_dir is None:
            raise RuntimeError("DataExecutor must be iterated before having an artifact directory.")
        if not self._artifact_dir.is_dir():
            self._artifact_dir.mkdir(parents=True, exist_ok=True)
            latest = self._artifact_dir.parent / "latest"
            if latest.is_symlink() or not latest.exists():
                tmp = latest.with_name(f".latest.{os.getpid()}")
                if tmp.is_symlink():
                    tmp.unlink()
                tmp.symlink_to(self._artifact_dir.name)
                os.replace(tmp, latest)
        return self._artifact_dir

    def _number_run(self) -> None:
        """Give this run the backend's next executor number (its artifact folder)."""
        count = getattr(self.backend, "executor_counter", 0) + 1
        self.backend.executor_counter = count
        self._artifact_dir = Path(self.backend.artifact_dir) / "executors" / f"{count:06d}"

    def _resolve_num_steps(self, dataloader, num_steps) -> int:
        b = self.backend
        if b is not None and b.is_csx and not b.is_e2e_execution:
            if num_steps and num_steps > 1:
                log.warning("Specified num_steps > 1 when backend was configured for compile/validate only. "
                            "Setting num_steps to 1.")
            return 1
        if num_steps is None:
            try:
                num_steps = len(dataloader)
            except TypeError:
                raise _StepCountError(
                    "Could not infer the number of steps as the length of the dataloader is not known. Please "
                    "provide num_steps to the data executor."
                ) from None
        if not isinstance(num_steps, int) or isinstance(num_steps, bool) or num_steps < 1:
            raise _StepCountError(f"Expected num_steps >= 1, but got {num_steps!r}.")
        return num_steps

    def __len__(self) -> int:
        return self.num_steps

    @property
    def user_iteration(self) -> int:
        return self.iteration + 1

    @property
    def is_pre_initial_step(self) -> bool:
        return self.iteration < 0

    @property
    def is_initial_step(self) -> bool:
        return self.iteration == 0

    @property
    def on_final_iteration(self) -> bool:
        return self.iteration == self.num_steps - 1

    def checkpoint_step(self, step: int) -> bool:
        """Whether 0-based `step` is a checkpoint step."""
        return self.checkpoint_schedule.match(step)

    @property
    def is_checkpoint_step(self) -> bool:
        return self.checkpoint_step(self.iteration)

    def activation_step(self, step: int) -> bool:
        """Whether 0-based `step` is an activation step (`step + 1` a multiple of
        `activation_steps`, or the final step)."""
        return (step + 1) % self.activation_steps == 0 or step == self.num_steps - 1

    @property
    def is_activation_step(self) -> bool:
        return self.activation_step(self.iteration)

    def __iter__(self):
        """Start the run now (its pre-initial step) and return the iterator of its
        batches, one per step."""
        steps = self._run()
        next(steps)  # runs up to the pre-initial step
        return steps

    def _run(self):
        run = self.backend.run
        perf = backends.csx.performance
        self.steps_per_launch = self._steps_per_launch or perf.steps_per_launch
        self.iteration = -1
        self._number_run()  # its folder is created when something reads `artifact_dir` to write there
        self._profiler = Profiler(self._artifact_dir, self.profiler_activities) if self.backend.is_e2e_execution \
            else None
        run.start(self)
        failed = True
        pipeline = progress = None
        try:
            prefetch, start_when_slow = self._prefetch_plan(perf.prefetch_batches)
            stats = self.pipeline_stats = PipelineStats.for_run(self.num_steps, self.dataloader.num_workers, prefetch)
            stage = run.stage_batch if self.backend.is_csx else None
            pipeline = HostPipeline(self.dataloader, self.num_steps, prefetch, stage, stats, start_when_slow)
            progress = ProgressBar(perf.progress, stats)
            pipeline.start()
            yield  # the pre-initial step: `__iter__` returns here
            at_step_boundary, next_batch, loader = run.interrupts.at_step_boundary, pipeline.next_batch, self.dataloader
            profiler, batch_end, progress_step = self._profiler, run.batch_end, progress.step
            for i in range(self.num_steps):
                at_step_boundary()  # SIGTERM: after the step that was running
                batch = next_batch(i)
                at_step_boundary()
                self.iteration = i
                yield batch
                if profiler is not None:
                    profiler.step(loader.batch_size)  # as the loader inferred it when the batch was taken
                batch_end(self)
                stats.steps += 1
                progress_step()
            failed = False
        except GeneratorExit:  # the loop was left early (break): what was queued still runs
            failed = False
            raise
        finally:
            self._stop(pipeline, progress)
            run.end(self, failed)

    def _prefetch_plan(self, setting) -> tuple[int, bool]:
        """(batches prefetched per worker, whether the producers start only once the
        loader is slow) for the `prefetch_batches` flag: "auto" is 2, started when slow
        where the step computes on the host's own cores (`cstorch.utils.data.streamer`)."""
        if setting != "auto":
            return setting, False
        b = self.backend
        on_host_cores = b.backend_type.is_cpu or (b.is_csx and b.run.placement.platform == "cpu")
        return 2, on_host_cores

    def _stop(self, pipeline, progress) -> None:
        if sys.is_finalizing():  # an unfinished executor collected at exit: its threads are daemons
            return
        if pipeline is not None:
            pipeline.close()
        self.pipeline_stats.ended_at = time.perf_counter()
        if progress is not None:
            progress.close()


def current_executor() -> DataExecutor:
    b = _backend.backend()
    ex = b.run.executor if b is not None else None
    if ex is None:
        raise RuntimeError(
            "Detected that a data executor was not used. Please wrap your dataloader in a Cerebras DataExecutor."
        )
    return ex
