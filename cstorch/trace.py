"""`@cstorch.trace`: the training/eval step.

CPU/GPU: the body runs eagerly on every call. CSX: the first call captures the whole
step (forward, backward, optimizer update, closures) into one graph and compiles it
into one immutable XLA executable, a `StepProgram`; every call hands that program to
the backend's run (`Run.dispatch`), which checks the call, replays the executable and
returns at once with deferred outputs. The Python body
never runs again: anything that would change the graph (another batch shape or
dtype, another non-tensor argument, a changed frozen hyper-parameter, train/eval
mode) is a StaticGraphError that names it.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable, Optional

import cstorch_jax
from cstorch_jax import Executable, TensorSpec, compile_cache
from cstorch_jax.call_signature import CallSignature, OutputLayout
from cstorch_jax.capture import decompositions, trace_step
from cstorch_jax.repeated_blocks import trace_repeated_blocks

from . import _backend, amp
from .backends import csx as csx_flags
from .optim import if_finite
from .run import StepProgram
from .run.pending_closures import ClosureRecorder
from .state import StepState


class TracedStep:
    def __init__(self, fn: Callable):
        self.fn = if_finite.finite_step(fn)  # no skip record from an earlier step; update_if_finite resolved
        self.program: Optional[StepProgram] = None
        functools.update_wrapper(self, fn)

    # -- public -------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        b = _backend.backend()
        if b is None:
            return self.fn(*args, **kwargs)
        if not b.is_csx:  # the body runs eagerly: a Ctrl-C during it takes effect when it ends
            with b.run.interrupts.critical():
                return self.fn(*args, **kwargs)
        b.run.enter_step()
        if self.program is None:
            self.program = self._compile(b, args, kwargs)
            b.run.window.start_clock()  # the capture and compile do not make this call late
        if not b.is_e2e_execution:
            return self._not_run(b, self.program)
        return b.run.dispatch(self.program, args, kwargs)

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
        return cstorch_jax.explore.StepReport(executable, self.__name__, self.program.state.names,
                                              self.program.launched)

    # -- CSX ----------------------------------------------------------------------
    def _compile(self, b, args, kwargs, use_cache: bool = True) -> StepProgram:
        """Capture and compile the step for these arguments (or load it from the compile
        cache, `use_cache`)."""
        return self._capture_and_compile(b, args, kwargs, use_cache)

    def _cache_key(self, b, state: StepState, call: CallSignature) -> str | None:
        """The compile-cache lookup key of this step for these inputs
        (`compile_cache.function_key`; None: no caching)."""
        return compile_cache.function_key(self.fn, [
            repr(call.spec), repr(call.static),
            repr([(n, TensorSpec.of(t), t.requires_grad) for n, t in zip(state.names, state.tensors)]),
            repr([TensorSpec.of(t) for t in call.tensors]),
            f"placement={b.run.placement!r}",  # replicated and sharded programs differ
            f"stack_from={self._stack_from()}",  # so do stacked and unstacked ones
        ], b.run.placement.platform)

    def _capture_and_compile(self, b, args, kwargs, use_cache: bool = True) -> StepProgram:
        t0 = time.perf_counter()
        state = StepState(b.registry)
        call = CallSignature.of(args, kwargs)
        recorder = ClosureRecorder()
        out_info: dict[str, Any] = {}

        def step(traced_state, batch):
            a, kw = call.rebuild(batch)
            b.run.capturing = recorder
            try:
                with state.bind(traced_state), amp.precision.capture_autocast(), \
                        trace_repeated_blocks(self._repeated_block_models(state), decompositions()):
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
        executable = Executable.for_step(trace, call.tensor_names, b.run.placement, cache_key=key, windows=True,
                                         stack_from=self._stack_from())
        trace_seconds = time.perf_counter() - t0 - executable.lower_seconds - executable.compile_seconds
        captured = executable.captured
        state.restrict_to({id(state.tensors[i]) for i in (*captured.mutated, *captured.read_only)})
        return StepProgram(executable, state, call, out_info["layout"], out_info["n_user"], recorder, trace_seconds,
                           self.__name__)

    @staticmethod
    def _stack_from() -> int:
        """The shortest run of repeated layers whose state the step holds stacked
        (`performance.stack_repeated_layers_from`; 0 when layers are not traced once)."""
        performance = csx_flags.performance
        return performance.stack_repeated_layers_from if performance.trace_repeated_layers else 0

    @staticmethod
    def _repeated_block_models(state: StepState) -> list:
        """The models whose repeated layers are traced once (`performance.trace_repeated_layers`)."""
        if not csx_flags.performance.trace_repeated_layers:
            return []
        return [m.module for m in state.objects("model")]

    def _not_run(self, b, prog: StepProgram):
        """Compile-only / validate-only: the step's outputs have a shape and a dtype but
        no value; its closures are not queued."""
        mode = "compile_only" if b.compile_only else "validate_only"
        return prog.uncomputed_outputs(
            f"the backend runs in {mode} mode: {self.__name__} was compiled but not run, so its outputs have no "
            f"values. Use step.report to look at the compiled program.")


def _report_view(name: str) -> property:
    return property(lambda self: getattr(self.report, name),
                    doc=f"`step.report.{name}` (see cstorch_jax.explore.StepReport).")


for _name in ("graph", "jaxpr", "stablehlo", "hlo", "cost", "memory", "ops", "summary", "draw"):
    setattr(TracedStep, _name, _report_view(_name))


def trace(step_fn: Callable) -> TracedStep:
    """Decorate the function that runs one training or evaluation step.

    Args:
        step_fn: the step: a function of the batch (and any other arguments) that runs the forward pass,
            `loss.backward()` and the optimizer step, and returns what the loop needs (e.g. the loss).

    Differences from the real system:
        On CSX the body runs once, when the step is captured; later calls replay the
        compiled executable, several calls launched together
        (`cstorch.backends.csx.performance.steps_per_launch`). Its outputs are fresh
        deferred tensors at every step (the real system reuses the first step's
        objects), and reading one outside the step (`.item()`) launches the waiting
        steps and waits for its value instead of raising.
    """
    return TracedStep(step_fn)


compile_step = trace
