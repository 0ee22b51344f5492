"""`StepWindow`: the calls of a compiled CSX step that the run launches together.

The real system runs the training loop on the device: the host streams batches and
receives what the step closures asked for. The run does the same with windows: it adds
each call of a compiled step (its batch arrays) to the window and hands back the call's
outputs at once, as `WindowTensor`s; the window launches its calls as one executable (K
steps: a loop whose body is the step, `cstorch_jax.StepsExecutable`, compiled once per K, when
K comes a second time; one step, or a count not compiled: the step's own executable, call
by call) when the run says so (`Run.dispatch`: the window is full, or the executor
reached a step after which the host needs the state), and whenever the
host needs something the window would compute: a read of an output (`float(loss)`,
`.item()`, a step closure's values), the state (the host guard, a checkpoint, the end of
the run), an edit of the state, a call of another compiled step.

Each call computes what it computes launched alone, bit for bit: the same program, the
same state carried from call to call, the same RNG key split per step.
"""
from __future__ import annotations

from time import perf_counter
from typing import Optional

from cstorch_jax import LaunchValues, WindowTensor


class StepWindow:
    """The calls of one compiled step waiting for their launch (module docstring)."""

    #: a call that comes more than this many seconds after the previous one (or the latest
    #: launch) launches at once (`slow_call`): the host (a slow loader, host work between the
    #: steps) takes longer than a launch costs, so holding the call back would only leave
    #: the device idle. Time the host spends waiting for launched values does not count.
    SLOW_CALL_S = 0.005

    def __init__(self, run):
        self.run = run
        self.program = None
        self.batches: list[list] = []
        self.iterations: list[Optional[int]] = []  # the executor iteration of each call
        self.values: Optional[LaunchValues] = None
        #: the latest launch: the executor iteration of its first call and its outputs
        self.last_launch: Optional[tuple[Optional[int], LaunchValues]] = None
        #: whether the last call came more than SLOW_CALL_S after the one before
        self.slow_call = False
        self._last_call = float("-inf")

    def __len__(self) -> int:
        return len(self.batches)

    @property
    def first_iteration(self) -> Optional[int]:
        """The executor iteration of the first call waiting for its launch (None: no call waits)."""
        return self.iterations[0] if self.iterations else None

    @property
    def computing_from(self) -> Optional[int]:
        """The executor iteration of the first call of the latest launch while its values are
        still being computed (None: that launch is done, or there was none). The host reads
        nothing of it before it has to, so that it prepares the next window meanwhile."""
        if self.last_launch is None:
            return None
        first, values = self.last_launch
        if first is None or values.ready:
            self.last_launch = None
            return None
        return first

    def start_clock(self) -> None:
        """The next call is late only if it comes SLOW_CALL_S after now (a run starts, a
        step was captured and compiled)."""
        self._last_call = perf_counter()

    def waited(self, seconds: float) -> None:
        """The host spent `seconds` waiting for values of launched calls: the device was
        busy meanwhile, so that time does not make the next call late."""
        self._last_call += seconds

    def add(self, program, batch_arrays: list, iteration: Optional[int]) -> list[WindowTensor]:
        """Add a call of `program` with these batch arrays; its outputs, to be computed.
        The calls of another program waiting launch first (the two may share state)."""
        now = perf_counter()
        self.slow_call, self._last_call = now - self._last_call > self.SLOW_CALL_S, now
        if self.batches and program is not self.program:
            self.launch()
        if not self.batches:
            self.program = program
            self.values = LaunchValues(self.launch)
        row = len(self.batches)
        self.batches.append(batch_arrays)
        self.iterations.append(iteration)
        return [WindowTensor(self.values, row, i, s.shape, s.dtype)
                for i, s in enumerate(program.executable.captured.output_specs)]

    def launch(self) -> None:
        """Run the waiting calls as one launch: the state they use (`DeviceState.arrays`,
        uploading what the host changed), the step's executable for one call or
        `StepsExecutable` for several, and `DeviceState.update` with the new state, all
        inside `RunInterrupts.critical` (a Ctrl-C waits until the calls taken from the
        window have run and their state and outputs are recorded); their outputs are
        computed from then on. Nothing is launched twice: the window is empty when the
        launch starts."""
        if not self.batches:
            return
        run = self.run
        # from taking the calls to recording their state and outputs, no Ctrl-C: a call
        # taken from the window is launched, and the state is donated
        with run.interrupts.critical():
            program, batches, values = self.program, self.batches, self.values
            self.last_launch = (self.iterations[0], values)
            self.program, self.batches, self.iterations, self.values = None, [], [], None
            ds = run.device_state
            arrays = ds.arrays(program.used_tensors, program.used_specs, program.used_names)
            n_mut, n = program.n_mutated, len(batches)
            steps = program.steps(n) if n > 1 else None
            if steps is not None:
                mutated, outs, ds.rng_key = steps(arrays[:n_mut], arrays[n_mut:], batches, ds.rng_key)
            else:  # one by one, each call on the state the one before left
                mutated, kept, each = arrays[:n_mut], arrays[n_mut:], []
                for batch in batches:
                    mutated, outs, ds.rng_key = program.executable(mutated, kept, batch, ds.rng_key)
                    each.append(outs)
            ds.update(program.mutated_tensors, mutated)
            if steps is not None:
                values.set(outs)
                program.launched[n] += 1
            else:
                values.set_each(each)
                program.launched[1] += n
        self.start_clock()  # launching (a compile, say) does not make the next call late

    def drop(self) -> None:
        """Forget the waiting calls (a run abandoned)."""
        self.program, self.batches, self.iterations, self.values = None, [], [], None
        self.last_launch = None
