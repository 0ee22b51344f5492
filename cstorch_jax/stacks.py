"""Arrays a traced program holds stacked: row i of an `[L, ...]` array standing for one
layer's tensor.

A program whose repeated layers keep their state stacked (`cstorch_jax.stacked_state`)
takes each kind of state of a run of L layers (a weight, its Adam moments) as one
`[L, ...]` array. While it is traced, a `Stacks` records which arrays are which row of
which stacked array, so that the lowerings that can work on a whole run at once (a run
of layer calls as one `lax.scan`, `lowering/layer_scan.py`; an optimizer update over every
layer's parameter at once, `optim.update_op`) take the stacked array itself, and every
other op takes the row.

A row is read at an index XLA cannot see (`dynamic_index_in_dim` at an index behind an
optimization barrier): XLA:CPU compiles identical kernels once, and a static row index
fused into a consumer makes that consumer's kernel differ from layer to layer (measured:
16 layers compiled 721 kernels instead of 201, 2.4x the compile time).
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Optional, Sequence

import jax
import jax.numpy as jnp


class Stacks:
    """Which traced arrays are rows of which stacked arrays (module docstring)."""

    def __init__(self):
        # id(row) -> (stacked array, row index, the row: kept alive so that its id stays its own)
        self._rows: dict[int, tuple[jax.Array, int, jax.Array]] = {}

    def rows(self, stacked: jax.Array) -> list[jax.Array]:
        """The rows of `stacked` along its first axis, each read at an index XLA cannot
        see (module docstring), recorded as rows of `stacked`."""
        n = stacked.shape[0]
        index = jax.lax.optimization_barrier(tuple(jnp.int32(i) for i in range(n)))
        rows = [jax.lax.dynamic_index_in_dim(stacked, index[i], keepdims=False) for i in range(n)]
        for i, row in enumerate(rows):
            self._rows[id(row)] = (stacked, i, row)
        return rows

    def stacked(self, values: Sequence) -> Optional[jax.Array]:
        """The stacked array whose rows 0, 1, ... are exactly `values` (the recorded rows,
        in order, and all of them), or None."""
        owners = [self._rows.get(id(v)) for v in values]
        if not owners or owners[0] is None:
            return None
        stacked = owners[0][0]
        if stacked.shape[0] != len(values):
            return None
        for i, (owner, v) in enumerate(zip(owners, values)):
            if owner is None or owner[0] is not stacked or owner[1] != i or owner[2] is not v:
                return None
        return stacked

    def groups(self, values: Sequence) -> list[list[int]]:
        """Positions in `values` of every stacked array's rows, all of them, in row order
        (one list per stacked array whose every row is among `values`)."""
        by_stacked: dict[int, tuple[jax.Array, dict[int, int]]] = {}
        for pos, v in enumerate(values):
            owner = self._rows.get(id(v))
            if owner is not None and owner[2] is v:
                by_stacked.setdefault(id(owner[0]), (owner[0], {}))[1][owner[1]] = pos
        return [[rows[i] for i in range(len(rows))] for stacked, rows in by_stacked.values()
                if len(rows) == stacked.shape[0]]

    def stack(self, values: Sequence) -> jax.Array:
        """`values` stacked along a new first axis: the recorded stacked array when they
        are its rows, else a new one."""
        found = self.stacked(values)
        return found if found is not None else jnp.stack(list(values))


_CURRENT: contextvars.ContextVar[Optional[Stacks]] = contextvars.ContextVar("cstorch_stacks", default=None)


def current() -> Optional[Stacks]:
    """The `Stacks` of the program being traced, or None (its state is not stacked)."""
    return _CURRENT.get()


@contextlib.contextmanager
def holding(stacks: Stacks) -> Iterator[Stacks]:
    """Trace with `stacks` as `current()`."""
    token = _CURRENT.set(stacks)
    try:
        yield stacks
    finally:
        _CURRENT.reset(token)
