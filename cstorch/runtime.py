"""The run lifecycle of a backend: active executors, the step-closure queue and, on
CSX, the device-resident state.

Closure timing. On CPU/GPU the closures of step k run at the end of step k. On CSX a
step call only dispatches work, so running step k's closures at once would wait for
step k and leave the device idle; instead, the end of step k runs the closures of the
steps before k (already finished, or nearly), which keeps one step in flight. Order is
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
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
import torch.utils._pytree as pytree

from cstorch_jax import DeferredTensor, DeviceState, LazyTensor, materialize

from .host_edits import SyncOnTouch
from .run_interrupts import RunInterrupts

log = logging.getLogger("cstorch")


@dataclass
class PendingClosure:
    step: Optional[int]
    fn: Callable
    args: tuple
    kwargs: dict
    checkpoint: bool


def _snapshot(x):
    """Closure arguments are values at queue time: plain tensors are cloned."""
    if isinstance(x, torch.Tensor) and not isinstance(x, LazyTensor):
        return x.detach().clone()
    return x


class ClosureRecorder:
    """Collects the step closures called while a CSX step is captured; their tensor
    arguments become extra outputs of the executable."""

    def __init__(self):
        self.records: list[tuple] = []
        self.tensors: list[torch.Tensor] = []

    def clear(self) -> None:
        """Forget what was recorded (the step's body is about to run again)."""
        self.records.clear()
        self.tensors.clear()

    def record(self, fn, args, kwargs, checkpoint: bool) -> None:
        leaves, spec = pytree.tree_flatten((args, kwargs))
        slots = []
        for x in leaves:
            if isinstance(x, torch.Tensor):
                slots.append(len(self.tensors))
                self.tensors.append(x.detach().clone())
            else:
                slots.append(None)
        self.records.append((fn, spec, leaves, slots, checkpoint))

    def replay(self, run: "RunState", outputs: list) -> None:
        """Queue every recorded closure with this step's output values."""
        for fn, spec, leaves, slots, checkpoint in self.records:
            vals = [leaf if s is None else outputs[s] for leaf, s in zip(leaves, slots)]
            args, kwargs = pytree.tree_unflatten(vals, spec)
            run.queue(fn, args, kwargs, checkpoint=checkpoint)


class StagedBatches:
    """Copies of batch tensors (`Placement.batch_arrays`) made ahead of their step, found
    again by tensor identity. A copy is used only while its tensor is unchanged (same
    `_version`); an entry goes away with its tensor, when it is used, or at the end of
    the run."""

    def __init__(self, placement: Callable):
        self._placement = placement
        self._entries: dict[int, tuple] = {}

    def stage(self, batch) -> None:
        tensors = [t for t in pytree.tree_leaves(batch)
                   if isinstance(t, torch.Tensor) and not isinstance(t, LazyTensor)]
        for t in tensors:
            try:
                (array,) = self._placement().batch_arrays([t], ["batch tensor"])
            except Exception:  # the step that takes it reports the problem with the argument's name
                continue
            key = id(t)
            gone = weakref.ref(t, lambda _, key=key: self._entries.pop(key, None))
            self._entries[key] = (gone, t._version, array)

    def take(self, tensors: list) -> list:
        """The staged copy of each tensor, or None where there is no valid one."""
        out = []
        for t in tensors:
            entry = self._entries.pop(id(t), None)
            ok = entry is not None and entry[0]() is t and entry[1] == t._version
            out.append(entry[2] if ok else None)
        return out

    def clear(self) -> None:
        self._entries.clear()


class RunState:
    def __init__(self, backend):
        self.backend = backend
        self.executors: list = []
        self.pending: list[PendingClosure] = []
        self.capturing: Optional[ClosureRecorder] = None
        #: while a closure runs: the 0-based executor iteration whose values it received
        #: (-1 for a checkpoint closure at the pre-initial step); None otherwise
        self.closure_iteration: Optional[int] = None
        self._device_state: Optional[DeviceState] = None
        self.staged = StagedBatches(lambda: self.placement)
        #: between CSX steps: host code touching state the last step changed syncs it first
        self.host_guard = SyncOnTouch(self)
        #: Ctrl-C and SIGTERM while a run is going (run_interrupts.py)
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
            self._device_state.reset()  # host tensors are the truth between runs
        self._run(lambda p: p.step is None)  # closures queued before the run

    def batch_end(self, executor) -> None:
        k = executor.iteration
        if not self.backend.is_csx or executor.on_final_iteration or any(p.checkpoint for p in self.pending):
            self._run(lambda p: True)
        else:
            self._run(lambda p: p.step is None or p.step < k)

    def end(self, executor, failed: bool) -> None:
        if sys.is_finalizing():  # an unfinished executor collected at interpreter exit
            return
        try:
            if failed:
                self.pending.clear()
            else:
                self._run(lambda p: True)
        finally:
            self.host_guard.clear()
            if self._device_state is not None:
                self._device_state.reset()
            self.staged.clear()
            if self.executors and self.executors[-1] is executor:
                self.executors.pop()
            if not self.executors:
                self.interrupts.uninstall()

    def sync_state_to_host(self, tensors=None) -> None:
        """Bring the torch tensors (all, or only `tensors`) up to the device's latest
        values (waits for the device). This is a read: no host edit for the next step."""
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
        arrays = ds.device_arrays(tensors)
        on_device = {id(a) for a in arrays if a is not None}
        ds.sync_to_host([t for t, a in zip(ds.tensors, ds.device_arrays(ds.tensors)) if id(a) not in on_device])
        return arrays

    def forget_device_copies(self, tensors) -> None:
        """Between steps of a run: make the next step upload these tensors' host values."""
        if self._device_state is not None:
            self._device_state.forget(tensors)

    def stage_batch(self, batch) -> None:
        """Start copying a batch's tensors to the device ahead of the step that takes
        them (called by the input pipeline, from any thread). A no-op off CSX."""
        if self.backend.is_csx:
            self.staged.stage(batch)

    def abandon(self) -> None:
        self.host_guard.clear()
        self.staged.clear()
        self.pending.clear()
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
                self._run(lambda p: True)
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
        args, kwargs = pytree.tree_map(_snapshot, (args, kwargs))
        self.pending.append(PendingClosure(ex.iteration if ex is not None else None, fn, args, kwargs, checkpoint))

    def _run(self, due: Callable[[PendingClosure], bool]) -> None:
        ready = [p for p in self.pending if due(p)]
        self.pending = [p for p in self.pending if not due(p)]
        for p in ready:
            if p.checkpoint:
                self.sync_state_to_host()
            args, kwargs = materialize((p.args, p.kwargs))
            self._call(p.fn, p.step, args, kwargs)

    def _call(self, fn: Callable, iteration: Optional[int], args: tuple, kwargs: dict) -> None:
        self.closure_iteration = iteration
        try:
            fn(*args, **kwargs)
        finally:
            self.closure_iteration = None



def wrap_outputs(arrays: list, specs) -> list[Any]:
    return [DeferredTensor(a, s.dtype) for a, s in zip(arrays, specs)]
