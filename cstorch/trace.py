"""`@cstorch.trace`: the training/eval step.

CPU/GPU: the body runs eagerly on every call. CSX: the first call captures the whole
step (forward, backward, optimizer update, closures) into one graph and compiles it
into one immutable XLA executable; every later call only converts the batch and
replays that executable, returning at once with deferred outputs. The Python body
never runs again: anything that would change the graph (another batch shape or
dtype, another non-tensor argument, a changed frozen hyper-parameter, train/eval
mode) is a StaticGraphError that names it.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable, Optional

import torch

import cstorch_jax
from cstorch_jax import Executable, StaticGraphError, TensorSpec, compile_cache
from cstorch_jax.call_signature import TENSOR, CallSignature, OutputLayout
from cstorch_jax.capture import trace_step

from . import _backend, amp
from .host_edits import StateWatch
from .runtime import ClosureRecorder, wrap_outputs
from .state import StepState


class _Program:
    """The compiled CSX step and everything needed to replay it."""

    def __init__(self, executable: Executable, state: StepState, call: CallSignature,
                 frozen: dict, out_layout: OutputLayout, n_user_outputs: int, recorder: ClosureRecorder,
                 trace_seconds: float):
        self.executable = executable
        self.state = state
        self.call = call  # the compiled call: its structure and non-tensor leaves are frozen
        self.frozen = frozen
        self.out_layout = out_layout
        self.n_user_outputs = n_user_outputs
        self.recorder = recorder
        self.trace_seconds = trace_seconds
        captured = executable.captured
        self.mutated = captured.mutated
        self.kept = executable.kept
        # the state inputs in executable order (mutated first, then read-only), fixed at compile time
        used = self.mutated + self.kept
        self.used_tensors = [state.tensors[i] for i in used]
        self.used_specs = [captured.state_specs[i] for i in used]
        self.used_names = [state.names[i] for i in used]
        #: host edits of the state between calls (rebinding replaces items of used_tensors)
        self.watch = StateWatch(state, self.used_tensors, list(used), self.used_names, self.used_specs,
                                len(self.mutated))

    @property
    def mutated_tensors(self) -> list[torch.Tensor]:
        return self.used_tensors[: len(self.mutated)]


class TracedStep:
    def __init__(self, fn: Callable):
        self.fn = amp.conditional_update.conditional_updates(fn)  # resolves amp.update_if_finite marks
        self.program: Optional[_Program] = None
        functools.update_wrapper(self, fn)

    # -- public -------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        amp.skip.clear()
        b = _backend.backend()
        if b is None:
            return self.fn(*args, **kwargs)
        if not b.is_csx:  # the body runs eagerly: a Ctrl-C during it takes effect when it ends
            with b.run.interrupts.critical():
                return self.fn(*args, **kwargs)
        b.run.host_guard.disarm()
        if b.run.executor is None:
            raise RuntimeError(
                "Detected that a data executor was not used. Please wrap your dataloader in a Cerebras "
                "DataExecutor: `for batch in cstorch.utils.data.DataExecutor(loader, num_steps=...)`."
            )
        if self.program is None:
            self.program = self._compile(b, args, kwargs)
        if not b.is_e2e_execution:
            return self._not_run(b, self.program)
        return self._run(b, self.program, args, kwargs)

    @property
    def executable(self) -> Optional[Executable]:
        return self.program.executable if self.program is not None else None

    # -- exploring the compiled step ---------------------------------------------------
    def lower(self, *args, **kwargs):
        """Capture and compile the step for these arguments without running it (CSX
        backend) and return its `cstorch_jax.explore.StepReport`. The step's own program
        is not replaced: lowering other arguments shows what they would compile to."""
        b = _backend.backend()
        if b is None or not b.is_csx:
            raise RuntimeError(
                "step.lower() compiles the step for the CSX backend; create it first with cstorch.backend(\"CSX\")."
            )
        prog = self._compile(b, args, kwargs, use_cache=False)
        return cstorch_jax.explore.StepReport(prog.executable, self.__name__, prog.state.names)

    @property
    def report(self):
        """The `StepReport` of the program the step runs (after its first call)."""
        if self.program is None:
            raise RuntimeError(
                f"{self.__name__} has not been compiled yet: call it once inside a DataExecutor loop, or use "
                f"{self.__name__}.lower(*example_args) to compile it for exploration without running it."
            )
        # a program loaded from the cache gets its graph and lowering now (its body does not run again)
        executable = self.program.executable.complete()
        return cstorch_jax.explore.StepReport(executable, self.__name__, self.program.state.names)

    # -- CSX ----------------------------------------------------------------------
    def _compile(self, b, args, kwargs, use_cache: bool = True) -> _Program:
        """Capture and compile the step for these arguments (or load it from the compile
        cache, `use_cache`)."""
        try:
            return self._capture_and_compile(b, args, kwargs, use_cache)
        finally:
            amp.skip.clear()  # records made while capturing hold traced tensors

    def _cache_key(self, b, state: StepState, call: CallSignature) -> str | None:
        """The compile-cache lookup key of this step for these inputs (None: no caching
        for multi-process runs). The entry is used only if the step's op signature matches
        as well (cstorch_jax.compile_cache; Executable.for_step)."""
        if not compile_cache.usable():
            return None
        code = getattr(self.fn, "__code__", None)
        parts = [
            f"{getattr(self.fn, '__module__', '')}.{getattr(self.fn, '__qualname__', repr(self.fn))}",
            f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "",
            repr(call.spec), repr(call.static),
            repr([(n, TensorSpec.of(t), t.requires_grad) for n, t in zip(state.names, state.tensors)]),
            repr([TensorSpec.of(t) for t in call.tensors]),
            f"placement={b.run.placement!r}",  # replicated and sharded programs differ
        ]
        platform = b.run.placement.platform
        return compile_cache.entry_key("\n".join(parts), platform, cstorch_jax.xla_options.compiler_options(platform))

    def _capture_and_compile(self, b, args, kwargs, use_cache: bool = True) -> _Program:
        t0 = time.perf_counter()
        state = StepState(b.registry)
        call = CallSignature.of(args, kwargs)
        recorder = ClosureRecorder()
        out_info: dict[str, Any] = {}

        def step(traced_state, batch):
            a, kw = call.rebuild(batch)
            b.run.capturing = recorder
            try:
                with state.bind(traced_state), amp.precision.capture_autocast():
                    result = self.fn(*a, **kw)
            finally:
                b.run.capturing = None
            out_info["layout"], user = OutputLayout.of(result)
            out_info["n_user"] = len(user)
            return [*user, *recorder.tensors]

        batch = call.tensors
        key = self._cache_key(b, state, call) if use_cache else None
        # the body runs here, once, whatever the cache finds: its op signature is the lookup's check
        trace = trace_step(step, state.tensors, batch)
        executable = Executable.for_step(trace, call.tensor_names, b.run.placement, cache_key=key,
                                         inputs=[*state.tensors, *batch])
        trace_seconds = time.perf_counter() - t0 - executable.lower_seconds - executable.compile_seconds
        captured = executable.captured
        state.restrict_to({id(state.tensors[i]) for i in (*captured.mutated, *captured.read_only)})
        return _Program(executable, state, call, state.frozen(), out_info["layout"], out_info["n_user"], recorder,
                        trace_seconds)

    def _check_static(self, prog: _Program, call: CallSignature) -> None:
        if call.spec != prog.call.spec:
            raise StaticGraphError(
                f"the step was compiled for arguments structured as {prog.call.spec} and is now called with "
                f"{call.spec}; every call of a compiled step must pass the same structure."
            )
        for i, (got, want) in enumerate(zip(call.leaves, prog.call.static)):
            if want is TENSOR:
                if not isinstance(got, torch.Tensor):
                    name = call.leaf_names()[i]
                    raise StaticGraphError(f"{name} was a tensor when the step was compiled and is now {got!r}")
            # a NaN that stays NaN is no change (NaN != NaN; `x != x` holds for NaN only)
            elif isinstance(got, torch.Tensor) or (got != want and not (got != got and want != want)):
                name = call.leaf_names()[i]
                raise StaticGraphError(
                    f"{name} was {want!r} when the step was compiled and is now {got!r}. Python values are "
                    f"frozen into the compiled graph; pass a tensor instead if it must change between steps."
                )
        now = prog.state.frozen()
        for key, want in prog.frozen.items():
            if now.get(key) != want:
                raise StaticGraphError(
                    f"{key} was {want} when the step was compiled and is now {now.get(key)}. It is frozen into "
                    f"the compiled graph, so it cannot change during a run."
                )

    @staticmethod
    def _batch_arrays(b, batch: list, names: list) -> list:
        """The batch as the compiled step takes it (`Placement.batch_arrays`): the copies
        the input pipeline staged, the rest made now."""
        arrays = b.run.staged.take(batch)
        missing = [i for i, a in enumerate(arrays) if a is None]
        if missing:
            fresh = b.run.placement.batch_arrays([batch[i] for i in missing], [names[i] for i in missing])
            for i, a in zip(missing, fresh):
                arrays[i] = a
        return arrays

    def _not_run(self, b, prog: _Program):
        """Compile-only / validate-only: the step's outputs have a shape and a dtype but
        no value; its closures are not queued."""
        mode = "compile_only" if b.compile_only else "validate_only"
        reason = (f"the backend runs in {mode} mode: {self.__name__} was compiled but not run, so its outputs have "
                  f"no values. Use step.report to look at the compiled program.")
        specs = prog.executable.captured.output_specs[: prog.n_user_outputs]
        return prog.out_layout.rebuild(cstorch_jax.UncomputedTensor(s.shape, s.dtype, reason) for s in specs)

    def _run(self, b, prog: _Program, args, kwargs):
        call = CallSignature.of(args, kwargs)
        self._check_static(prog, call)
        stale = prog.executable.captured.changed_constants()
        if stale:
            raise StaticGraphError(
                f"tensors from outside the step ({', '.join(stale)}) were compiled into {self.__name__} as constants "
                f"and have been modified in place since. Register such a tensor on the compiled module "
                f"(register_buffer) or pass it to the step as an argument if it changes during the run."
            )
        batch = call.tensors
        names = prog.executable.batch_names
        prog.executable.check_batch([TensorSpec.of(t) for t in batch])
        ds = b.run.device_state
        ds.forget(b.run.host_guard.take_written())  # written on the host between steps: upload again
        prog.watch.check(ds)
        captured = prog.executable.captured
        arrays = ds.arrays(prog.used_tensors, prog.used_specs, prog.used_names)
        batch_arrays = self._batch_arrays(b, batch, names)
        n_mut = len(prog.mutated)
        with b.run.interrupts.critical():  # the state is donated: no Ctrl-C until the new state is recorded
            new_mut, outs, ds.rng_key = prog.executable(arrays[:n_mut], arrays[n_mut:], batch_arrays, ds.rng_key)
            ds.update(prog.mutated_tensors, new_mut)
        b.run.host_guard.arm(prog.watch)  # host code touching this state syncs it first
        deferred = wrap_outputs(list(outs), captured.output_specs)
        user, closure_values = deferred[: prog.n_user_outputs], deferred[prog.n_user_outputs:]
        prog.recorder.replay(b.run, closure_values)
        return prog.out_layout.rebuild(user)


def _report_view(name: str) -> property:
    return property(lambda self: getattr(self.report, name),
                    doc=f"`step.report.{name}` (see cstorch_jax.explore.StepReport).")


for _name in ("graph", "jaxpr", "stablehlo", "hlo", "cost", "memory", "ops", "summary", "draw"):
    setattr(TracedStep, _name, _report_view(_name))


def trace(step_fn: Callable) -> TracedStep:
    """Decorate the function that runs one training or evaluation step.

    Differences from the real system:
        On CSX the body runs once, when the step is captured; later calls replay the
        compiled executable. Its outputs are fresh `DeferredTensor`s at every step (the
        real system reuses the first step's objects), and reading one outside the step
        (`.item()`) waits for its value instead of raising.
    """
    return TracedStep(step_fn)


compile_step = trace
