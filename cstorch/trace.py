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
import torch.utils._pytree as pytree

import cstorch_jax
from cstorch_jax import Executable, StaticGraphError, TensorSpec, compile_cache
from cstorch_jax.capture import trace_step

from . import _backend, amp
from .host_edits import StateWatch
from .runtime import ClosureRecorder, wrap_outputs
from .state import StepState


def _leaf_names(args, kwargs) -> list[str]:
    paths = pytree.tree_flatten_with_path((args, kwargs))[0]
    names = []
    for path, _ in paths:
        where, rest = path[0], path[1:]
        head = "argument" if where.idx == 0 else "keyword argument"
        names.append(f"{head} {pytree.keystr(rest)}" if rest else head)
    return names


class _TensorSlot:
    """Marks where a tensor sits among a call's (or a result's) non-tensor leaves."""

    def __repr__(self) -> str:
        return "<tensor>"


TENSOR = _TensorSlot()


class _Program:
    """The compiled CSX step and everything needed to replay it."""

    def __init__(self, executable: Executable, state: StepState, in_spec, static_leaves: list,
                 frozen: dict, out_spec, out_static: list, n_user_outputs: int, recorder: ClosureRecorder,
                 trace_seconds: float):
        self.executable = executable
        self.state = state
        self.in_spec = in_spec
        self.static_leaves = static_leaves
        self.frozen = frozen
        self.out_spec = out_spec
        self.out_static = out_static
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

    def _cache_key(self, b, state: StepState, batch, in_spec, static_leaves) -> str | None:
        """The compile-cache lookup key of this step for these inputs (None: no caching
        for multi-process runs). The entry is used only if the step's op signature matches
        as well (cstorch_jax.compile_cache; Executable.for_step)."""
        if not compile_cache.usable():
            return None
        code = getattr(self.fn, "__code__", None)
        parts = [
            f"{getattr(self.fn, '__module__', '')}.{getattr(self.fn, '__qualname__', repr(self.fn))}",
            f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "",
            repr(in_spec), repr(static_leaves),
            repr([(n, TensorSpec.of(t), t.requires_grad) for n, t in zip(state.names, state.tensors)]),
            repr([TensorSpec.of(t) for t in batch]),
            f"placement={b.run.placement!r}",  # replicated and sharded programs differ
        ]
        platform = b.run.placement.platform
        return compile_cache.entry_key("\n".join(parts), platform, cstorch_jax.xla_options.compiler_options(platform))

    def _capture_and_compile(self, b, args, kwargs, use_cache: bool = True) -> _Program:
        t0 = time.perf_counter()
        state = StepState(b.registry)
        leaves, in_spec = pytree.tree_flatten((args, kwargs))
        tensor_pos = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        static_leaves = [TENSOR if isinstance(x, torch.Tensor) else x for x in leaves]
        recorder = ClosureRecorder()
        out_info: dict[str, Any] = {}

        def step(traced_state, batch):
            full = list(leaves)
            for pos, t in zip(tensor_pos, batch):
                full[pos] = t
            a, kw = pytree.tree_unflatten(full, in_spec)
            b.run.capturing = recorder
            try:
                with state.bind(traced_state), amp.precision.capture_autocast():
                    result = self.fn(*a, **kw)
            finally:
                b.run.capturing = None
            out_leaves, out_info["spec"] = pytree.tree_flatten(result)
            out_info["static"] = [TENSOR if isinstance(o, torch.Tensor) else o for o in out_leaves]
            user = [o for o in out_leaves if isinstance(o, torch.Tensor)]
            out_info["n_user"] = len(user)
            return [*user, *recorder.tensors]

        batch = [leaves[i] for i in tensor_pos]
        names = [n for n, x in zip(_leaf_names(args, kwargs), leaves) if isinstance(x, torch.Tensor)]
        key = self._cache_key(b, state, batch, in_spec, static_leaves) if use_cache else None
        # the body runs here, once, whatever the cache finds: its op signature is the lookup's check
        trace = trace_step(step, state.tensors, batch)
        executable = Executable.for_step(trace, names, b.run.placement, cache_key=key, inputs=[*state.tensors, *batch])
        trace_seconds = time.perf_counter() - t0 - executable.lower_seconds - executable.compile_seconds
        captured = executable.captured
        state.restrict_to({id(state.tensors[i]) for i in (*captured.mutated, *captured.read_only)})
        return _Program(executable, state, in_spec, static_leaves, state.frozen(), out_info["spec"],
                        out_info["static"], out_info["n_user"], recorder, trace_seconds)

    def _check_static(self, prog: _Program, leaves, in_spec, args, kwargs) -> None:
        if in_spec != prog.in_spec:
            raise StaticGraphError(
                f"the step was compiled for arguments structured as {prog.in_spec} and is now called with "
                f"{in_spec}; every call of a compiled step must pass the same structure."
            )
        for i, (got, want) in enumerate(zip(leaves, prog.static_leaves)):
            if want is TENSOR:
                if not isinstance(got, torch.Tensor):
                    name = _leaf_names(args, kwargs)[i]
                    raise StaticGraphError(f"{name} was a tensor when the step was compiled and is now {got!r}")
            # a NaN that stays NaN is no change (NaN != NaN; `x != x` holds for NaN only)
            elif isinstance(got, torch.Tensor) or (got != want and not (got != got and want != want)):
                name = _leaf_names(args, kwargs)[i]
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
        it = iter(cstorch_jax.UncomputedTensor(s.shape, s.dtype, reason) for s in specs)
        return pytree.tree_unflatten([next(it) if s is TENSOR else s for s in prog.out_static], prog.out_spec)

    def _run(self, b, prog: _Program, args, kwargs):
        leaves, in_spec = pytree.tree_flatten((args, kwargs))
        self._check_static(prog, leaves, in_spec, args, kwargs)
        stale = prog.executable.captured.changed_constants()
        if stale:
            raise StaticGraphError(
                f"tensors from outside the step ({', '.join(stale)}) were compiled into {self.__name__} as constants "
                f"and have been modified in place since. Register such a tensor on the compiled module "
                f"(register_buffer) or pass it to the step as an argument if it changes during the run."
            )
        batch = [x for x in leaves if isinstance(x, torch.Tensor)]
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
        it = iter(user)
        out_leaves = [next(it) if s is TENSOR else s for s in prog.out_static]
        return pytree.tree_unflatten(out_leaves, prog.out_spec)


def _report_view(name: str) -> property:
    return property(lambda self: getattr(self.report, name),
                    doc=f"`step.report.{name}` (see cstorch_jax.explore.StepReport).")


for _name in ("graph", "jaxpr", "stablehlo", "hlo", "cost", "memory", "ops", "summary", "draw"):
    setattr(TracedStep, _name, _report_view(_name))


def trace(step_fn: Callable) -> TracedStep:
    """Decorate the function that runs one training or evaluation step."""
    return TracedStep(step_fn)


compile_step = trace
