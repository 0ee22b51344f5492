"""`StepProgram`: a compiled CSX step as `@cstorch.trace` hands it to the run.

It holds the executable and what replaying it needs: the state tensors it reads and
changes (in executable order), how a call's arguments were structured and which of their
leaves were frozen into the graph, the result's layout and the closures the capture
recorded. `batch_of(args, kwargs)` checks a later call against the compiled one and
returns its tensors; everything else about the host between steps (state edited or
replaced, graph constants changed) is checked by the program's `StateWatch`.

The lean path. A step is usually called with the same positional tensors every time; for
such a call the check is one pass over the arguments comparing the type, shape and dtype
of each with the compiled batch (no pytree flattening). Any other call, or a mismatch,
takes the full check, which names what differs.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Optional

import torch

from cstorch_jax import Executable, StaticGraphError, StepsExecutable, TensorSpec, UncomputedTensor
from cstorch_jax.call_signature import TENSOR, CallSignature, OutputLayout

from ..state import StepState
from .pending_closures import ClosureRecorder
from .host_edits import StateWatch

_Tensor = torch.Tensor

#: the most counts of calls per launch one program compiles (`StepProgram.steps`): the
#: full window's and two for windows cut short; other counts launch their calls one by one
MAX_LAUNCH_SIZES = 3


class StepProgram:
    """The compiled CSX step and everything needed to replay it (module docstring)."""

    def __init__(self, executable: Executable, state: StepState, call: CallSignature,
                 out_layout: OutputLayout, n_user_outputs: int, recorder: ClosureRecorder,
                 trace_seconds: float, name: str):
        self.executable = executable
        self.state = state
        self.call = call  # the compiled call: its structure and non-tensor leaves are frozen
        self.out_layout = out_layout
        self.n_user_outputs = n_user_outputs
        self.recorder = recorder
        self.trace_seconds = trace_seconds
        self.name = name
        captured = executable.captured
        self.mutated = captured.mutated
        self.n_mutated = len(captured.mutated)
        self.kept = executable.kept
        self.output_dtypes = [s.dtype for s in captured.output_specs]
        # the state inputs in executable order (mutated first, then read-only), fixed at compile time
        used = self.mutated + self.kept
        self.used_tensors = [state.tensors[i] for i in used]
        self.used_specs = [captured.state_specs[i] for i in used]
        self.used_names = [state.names[i] for i in used]
        #: host edits of the state and changed graph constants between calls (rebinding
        #: replaces items of used_tensors)
        self.watch = StateWatch(state, self.used_tensors, list(used), self.used_names, self.used_specs,
                                self.n_mutated)
        #: the lean path's form of the compiled call: n positional plain tensors (None: another form)
        plain = (not call.kwargs and len(call.leaves) == len(call.args)
                 and all(type(a) is _Tensor for a in call.args))
        self._positional = len(call.args) if plain else None
        self._batch_specs = [(s.shape, s.dtype) for s in captured.batch_specs]
        self._steps: dict[int, StepsExecutable] = {}
        self._asked: Counter = Counter()  # launches of each count of calls asked for
        #: how many launches ran each number of calls of this program (the report shows it)
        self.launched: Counter = Counter()
        #: whether several calls can launch as one executable (`steps`): where the step is
        #: compiled as a loop's body (`Executable.loop_penalty` says why not)
        self.launches_many = executable.loops

    def steps(self, k: int) -> Optional[StepsExecutable]:
        """The executable of `k` calls launched together, or None: launch them one by one.
        A count is compiled (once) when it comes a second time, so a short run, or a count
        that comes once (a window cut short by a read, a checkpoint, the last step), costs
        no compile; at most MAX_LAUNCH_SIZES counts are compiled per program."""
        found = self._steps.get(k)
        if not self.launches_many:  # every call launches alone (the report says 1 step per launch)
            return None
        if found is None and len(self._steps) < MAX_LAUNCH_SIZES and self._asked[k]:
            found = self._steps[k] = StepsExecutable(self.executable, k)
        self._asked[k] += 1
        return found

    def prepare_steps(self, k: int) -> float:
        """Compile now the executable of `k` calls launched together, as if the count had
        come before (a warm-up before timed steps: nothing runs); returns the seconds its
        compile took (0.0 where it was compiled before, or where `steps` launches the calls
        one by one)."""
        if k < 2 or not self.launches_many or k in self._steps:
            return 0.0
        self._asked[k] += 1
        found = self.steps(k)
        return found.compile_seconds if found is not None else 0.0

    @property
    def mutated_tensors(self) -> list[torch.Tensor]:
        return self.used_tensors[: self.n_mutated]

    # -- a call ---------------------------------------------------------------------------
    def batch_of(self, args: tuple, kwargs: dict) -> list[torch.Tensor]:
        """The batch tensors of a call, after checking it is the compiled call: the same
        structure, the same non-tensor leaves, tensors of the same shapes and dtypes, and
        no outside tensor compiled in as a constant modified since (StaticGraphError
        naming what differs)."""
        if self._positional is not None and not kwargs and len(args) == self._positional:
            for a, (shape, dtype) in zip(args, self._batch_specs):
                if type(a) is not _Tensor or a.shape != shape or a.dtype is not dtype:
                    break
            else:
                self._check_constants()
                return list(args)
        call = CallSignature.of(args, kwargs)
        self._check_call(call)
        batch = call.tensors
        self.executable.check_batch([TensorSpec.of(t) for t in batch])
        self._check_constants()
        return batch

    def _check_call(self, call: CallSignature) -> None:
        want_call = self.call
        if call.spec != want_call.spec:
            raise StaticGraphError(
                f"the step was compiled for arguments structured as {want_call.spec} and is now called with "
                f"{call.spec}; every call of a compiled step must pass the same structure."
            )
        for i, (got, want) in enumerate(zip(call.leaves, want_call.static)):
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

    def _check_constants(self) -> None:
        stale = self.executable.captured.changed_constants()
        if stale:
            raise StaticGraphError(
                f"tensors from outside the step ({', '.join(stale)}) were compiled into {self.name} as constants "
                f"and have been modified in place since. Register such a tensor on the compiled module "
                f"(register_buffer) or pass it to the step as an argument if it changes during the run."
            )

    # -- its result -------------------------------------------------------------------------
    def split(self, tensors: list) -> tuple[Any, list]:
        """(the user's result made of the first of the executable's output tensors, the
        values the recorded closures receive)."""
        n = self.n_user_outputs
        return self.out_layout.rebuild(tensors[:n]), tensors[n:]

    def uncomputed_outputs(self, reason: str) -> Any:
        """The result of a compiled step that did not run: shapes and dtypes, no values."""
        specs = self.executable.captured.output_specs[: self.n_user_outputs]
        return self.out_layout.rebuild(UncomputedTensor(s.shape, s.dtype, reason) for s in specs)

