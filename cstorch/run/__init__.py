"""The run: what happens between `iter(DataExecutor(...))` and the loop's end.

- `run.Run`: the one owner of a step's execution (start, dispatch, closures, sync, end);
- `program.StepProgram`: a compiled CSX step as `@cstorch.trace` hands it over;
- `host_edits`: the host's reads and edits of the state between CSX steps (`SyncOnTouch`,
  `StateWatch`);
- `closures`: queued step closures and what a capture records of them;
- `staging`: batches copied to the device ahead of their step;
- `interrupts`: Ctrl-C and SIGTERM during a run.
"""
from .program import StepProgram
from .run import Run

__all__ = ["Run", "StepProgram"]
