"""`Run`: the run of a backend, the one owner of a step's execution.

`start` (an executor's `iter()`), `dispatch` (one compiled CSX step), `batch_end` (the
step's closures), `sync_state_to_host` and `end`. It holds the active executors, the
step-closure queue and, on CSX, the device-resident state (`DeviceState`), the host
guard and the batches staged ahead of their step.

A CSX step's path (`dispatch`): the program checks the call (`StepProgram.batch_of`);
the program's `StateWatch` decides what the host changed since the last step (the
tensors the host guard saw written, replaced objects, swapped storages, changed graph
constants) and has the device state forget those copies, after launching the steps
called before the edit; the batch arrays are the ones staged by the input pipeline, or
made now; the call joins the window of steps waiting to launch (window.py), its outputs
deferred; the window launches when `launch_size` calls wait, when the call came late (the
host is slower than a launch: `StepWindow.SLOW_CALL_S`), at a checkpoint step and at the
last step (and whenever the host needs a value or the state before); the host guard
is armed for the host code until the next step; the recorded closures are queued with
their outputs.

Closure timing. On CPU/GPU the closures of step k run at the end of step k. On CSX a
step call only dispatches work, so running step k's closures at once would wait for
step k and leave the device idle; instead, the end of step k runs the closures of the
steps before k whose launch has run (already finished, or nearly), which keeps one
step, or one window of steps, in flight. Order is
always preserved. A checkpoint step, the last step and the end of a run flush every
pending closure; checkpoint closures first copy the device state into the torch
tensors so `model.state_dict()` reads that step's values. A checkpoint closure called
at the pre-initial step (after `iter(executor)`, before the first batch) runs at once
on the initial state: an initial checkpoint.

Activation steps. On CSX the step closures of a step that is not an activation step
of the executor (see `DataExecutor`) are dropped when queued, so their values are
never fetched; checkpoint closures follow the checkpoint schedule only.
"""
from __future__ import annotations

import logging
import sys
from typing import Any, Callable, Optional
from time import perf_counter

import torch

from cstorch_jax import DeviceState, materialize
from cstorch_jax.lazy_tensor import map_leaves

from .pending_closures import ClosureRecorder, PendingClosure, snapshot
from .host_edits import SyncOnTouch
from .interrupts import RunInterrupts
from .program import StepProgram
from .staging import StagedBatches
from .window import StepWindow

log = logging.getLogger("cstorch")


class Run:
    """The run machinery of one backend (module docstring)."""

    def __init__(self, backend):
        self.backend = backend
        self.executors: list = []
        #: queued closures in the order they were queued; `_pending_checkpoints` counts
        #: the checkpoint closures among them
        self.pending: list[PendingClosure] = []
        self._pending_checkpoints = 0
        self.capturing: Optional[ClosureRecorder] = None
        #: while a closure runs: the 0-based executor iteration whose values it received
        #: (-1 for a checkpoint closure at the pre-initial step); None otherwise
        self.closure_iteration: Optional[int] = None
        self._device_state: Optional[DeviceState] = None
        self.staged = StagedBatches(lambda: self.placement)
        #: CSX calls waiting to launch together (window.py); `dispatch` decides when they launch
        self.window = StepWindow(self)
        #: between CSX steps: host code touching state the last step changed syncs it first
        self.host_guard = SyncOnTouch(self)
        #: Ctrl-C and SIGTERM while a run is going (interrupts.py)
        self.interrupts = RunInterrupts()

    @property
    def placement(self):
        """Where the CSX run's arrays live (one device or a data-parallel mesh), chosen
        when the CSX backend was created."""
        return self.backend.placement

    @property
    def device_state(self) -> DeviceState:
        if self._device_state is None:
            self._device_state = DeviceState(seed=torch.initial_seed() % (2**32), placement=self.placement)
        return self._device_state

    @property
    def executor(self):
        return self.executors[-1] if self.executors else None

    # -- lifecycle ------------------------------------------------------------------
    def start(self, executor) -> None:
        self.host_guard.clear()
        if not self.executors:
            self.interrupts.install()
        self.executors.append(executor)
        if self._device_state is not None:
            self.sync_state_to_host()
            self._device_state.reset()  # host tensors are the truth between runs
        self._run_before(None, unstepped_only=True)  # closures queued before the run
        self.window.start_clock()

    def batch_end(self, executor) -> None:
        if not self.pending:
            return
        if not self.backend.is_csx or executor.on_final_iteration or self._pending_checkpoints:
            self._run_before(None)
        else:  # the closures of the steps before k whose values exist, or whose launch came before the latest
            done = executor.iteration
            for first in (self.window.first_iteration, self.window.computing_from):
                if first is not None and first < done:
                    done = first
            self._run_before(done)

    def end(self, executor, failed: bool) -> None:
        if sys.is_finalizing():  # an unfinished executor collected at interpreter exit
            return
        try:
            if failed:
                self._clear_pending()
            else:
                self._run_before(None)
        finally:  # the steps called before the run ended (or failed) complete: syncing launches them
            self.host_guard.clear()
            if self._device_state is not None:
                self.sync_state_to_host()
                self._device_state.reset()
            self.staged.clear()
            if self.executors and self.executors[-1] is executor:
                self.executors.pop()
            if not self.executors:
                self.interrupts.uninstall()

    def enter_step(self) -> None:
        """A CSX step was called: the host code between steps is over (the host guard
        disarms; the step's capture, if it is the first call, touches the state). A step
        outside an executor's loop is an error."""
        self.host_guard.disarm()
        if self.executor is None:
            raise RuntimeError(
                "Detected that a data executor was not used. Please wrap your dataloader in a Cerebras "
                "DataExecutor: `for batch in cstorch.utils.data.DataExecutor(loader, num_steps=...)`."
            )

    def dispatch(self, program: StepProgram, args: tuple, kwargs: dict) -> Any:
        """Run one step of a compiled CSX program on these arguments (module docstring);
        returns at once, its tensors deferred. The call joins the window (window.py),
        which launches when `launch_size` calls wait or the host needs the state after
        this step (a checkpoint step, the last step)."""
        batch = program.batch_of(args, kwargs)
        window = self.window
        guard = self.host_guard
        program.watch.check(self.device_state, guard.take_written(), window.launch)  # host edits since the last step
        batch_arrays = self._batch_arrays(batch, program.executable.batch_names)
        outputs = window.add(program, batch_arrays, self.executor.iteration)
        ex = self.executor
        if (len(window) >= self.launch_size(program) or window.slow_call or ex.is_checkpoint_step
                or ex.on_final_iteration):
            window.launch()
        guard.arm(program.watch)  # host code touching this state syncs it first
        result, closure_values = program.split(outputs)
        if program.recorder.records:
            program.recorder.replay(self, closure_values)
        return result

    def launch_size(self, program: StepProgram) -> int:
        """How many calls of `program` launch together: the executor's `steps_per_launch`
        on one device, 1 on a mesh (each step launches alone)."""
        return self.executor.steps_per_launch if program.launches_many else 1

    def _batch_arrays(self, batch: list, names: list) -> list:
        """The batch as the compiled step takes it (`Placement.batch_arrays`): the copies
        the input pipeline staged, the rest made now."""
        arrays = self.staged.take(batch)
        missing = [i for i, a in enumerate(arrays) if a is None]
        if missing:
            fresh = self.placement.batch_arrays([batch[i] for i in missing], [names[i] for i in missing])
            for i, a in zip(missing, fresh):
                arrays[i] = a
        return arrays

    def sync_state_to_host(self, tensors=None) -> None:
        """Bring the torch tensors (all, or only `tensors`) up to the device's latest
        values (launches the waiting steps and waits for the device). This is a read: no
        host edit for the next step."""
        self.window.launch()
        if tensors is None:
            self.host_guard.host_synced()
        if self._device_state is not None:
            self._device_state.sync_to_host(tensors)

    def device_copies_for_writing(self, tensors) -> list:
        """For a checkpoint written from the devices: the device copy of each tensor
        (or of the state tensor it views; None where the device holds none), after
        bringing every other state tensor on the host up to date, so the writer stores
        the host values of the rest. Collective in a multi-process run."""
        ds = self._device_state
        if ds is None:
            return [None] * len(tensors)
        self.window.launch()
        arrays = ds.device_arrays(tensors)
        on_device = {id(a) for a in arrays if a is not None}
        ds.sync_to_host([t for t, a in zip(ds.tensors, ds.device_arrays(ds.tensors)) if id(a) not in on_device])
        return arrays

    def forget_device_copies(self, tensors) -> None:
        """Between steps of a run: make the next step upload these tensors' host values."""
        self.window.launch()  # the steps called before the host wrote them run on the old values
        if self._device_state is not None:
            self._device_state.forget(tensors)

    def stage_batch(self, batch) -> None:
        """Start copying a batch's tensors to the device ahead of the step that takes
        them (called by the input pipeline, from any thread). A no-op off CSX."""
        if self.backend.is_csx:
            self.staged.stage(batch)

    def abandon(self) -> None:
        self.window.drop()
        self.host_guard.clear()
        self.staged.clear()
        self._clear_pending()
        self.executors.clear()
        self._device_state = None

    # -- closures -------------------------------------------------------------------
    def queue(self, fn: Callable, args: tuple, kwargs: dict, checkpoint: bool = False) -> None:
        if self.capturing is not None:
            self.capturing.record(fn, args, kwargs, checkpoint)
            return
        if not self.backend.is_e2e_execution:  # compile/validate only: no step produces values
            log.debug("skipping closure %s: the backend only compiles", getattr(fn, "__name__", fn))
            return
        ex = self.executor
        if checkpoint:
            if ex is None:
                raise RuntimeError(
                    "Cannot fetch a checkpoint outside of an execution context. Please make all calls to any "
                    "checkpoint closures inside the training loop (inside `for batch in DataExecutor(...)`)."
                )
            if ex.is_pre_initial_step:  # an initial checkpoint: nothing is in flight, the host holds the state
                self._run_before(None)
                args, kwargs = materialize((args, kwargs))
                self._call(fn, ex.iteration, args, kwargs)
                return
            if not ex.is_checkpoint_step:
                log.debug("skipping checkpoint closure %s on step %d", getattr(fn, "__name__", fn), ex.iteration)
                return
        elif ex is not None and self.backend.is_csx and not ex.is_activation_step:
            # CSX fetches step values only on activation steps; the closure is dropped unfetched
            log.debug("skipping step closure %s on step %d: not an activation step",
                      getattr(fn, "__name__", fn), ex.iteration)
            return
        args, kwargs = map_leaves(snapshot, (args, kwargs))
        self.pending.append(PendingClosure(ex.iteration if ex is not None else None, fn, args, kwargs, checkpoint))
        self._pending_checkpoints += checkpoint

    def _run_before(self, done: Optional[int], unstepped_only: bool = False) -> None:
        """Run, in queue order, the pending closures queued outside a step (step None) and,
        unless `unstepped_only`, those of the steps before `done` (None: of every step).
        Closures queued while these run wait for the next call."""
        ready, keep = [], []
        for p in self.pending:
            step = p.step
            if step is None or not (unstepped_only or (done is not None and step >= done)):
                ready.append(p)
            else:
                keep.append(p)
        if not ready:
            return
        self.pending = keep
        self._pending_checkpoints -= sum(p.checkpoint for p in ready)
        for p in ready:
            if p.checkpoint:
                self.sync_state_to_host()
            fetch_start = perf_counter()
            args, kwargs = materialize((p.args, p.kwargs))
            self.window.waited(perf_counter() - fetch_start)
            self._call(p.fn, p.step, args, kwargs)

    def _clear_pending(self) -> None:
        self.pending.clear()
        self._pending_checkpoints = 0

    def _call(self, fn: Callable, iteration: Optional[int], args: tuple, kwargs: dict) -> None:
        self.closure_iteration = iteration
        try:
            fn(*args, **kwargs)
        finally:
            self.closure_iteration = None


