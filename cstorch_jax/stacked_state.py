"""Repeated layers' state held stacked: each kind of state of a run of L identical layers
(a weight, its gradient's moments, its step count) as one `[L, ...]` array.

A program that takes the state tensor by tensor holds the run's layers L times, and its
optimizer update parameter by parameter: its size, and so its lowering and XLA compile,
grow with depth. Holding the run's state stacked lets the program take the run as one
`lax.scan` over the stacked arrays (`lowering/layer_scan.py`) and update each kind of
parameter once for all layers (`optim.update_op.apply_rule_stacked`), so its size stops
growing with depth. Measured on the benchmark GPT (`benchmarks/cold_start.py`, AdamW,
2-core CPU): 32 layers compiled in 2.2 s against 5.3 s, 16 layers alike, 8 layers slower
(~2 s against ~1.4 s), hence `stack_from`, the shortest run stacked; but each step at 32
layers ran 13 % longer (77 against 68 ms: the loop copies each layer's saved activations
into and out of the stacked arrays), so it is off unless asked for
(`performance.stack_repeated_layers_from`).

`plan(gm, mutated, stack_from)` finds, in the graph the program lowers, the runs of at
least `stack_from` repeated-layer calls (`layer_runs.chains`) and the per-layer operands
that are state the step updates through an optimizer update op (`update_op.ALGORITHMS`),
with the state of that update (the moments, the step count): each such column becomes a
*stack*, the positions of its tensors in the mutated state, in layer order.

The stacked program (`StackPlan.program`) takes and returns the mutated state packed:
every stack as one array, then the other tensors. Between launches the device keeps
the packed arrays: a stack's tensors are `Row`s of one array, which the next launch
passes as it is (`pack`); a tensor written on the host since, or uploaded, is stacked
again with the others. A row is fetched alone (`Row.value`) only where one tensor's
value is needed (a sync to the host, a checkpoint).

The numbers agree with the unstacked program's within rounding, not bit for bit: a scan
step computes the same jitted layer function a call does, but XLA:CPU compiles a loop's
body on its own and may contract a product and a sum into one multiply-add there that
the inlined calls compute apart (`step_loop.py`). Measured (`tests/engine/
test_repeated_blocks.py`, 3 steps): SGD 7e-7 of each tensor's largest value; AdamW, which
divides by the root of the squared gradient's average and so enlarges a last-bit
difference in a small gradient, 5.5e-5. The optimizer's vmapped update is exact for an
elementwise rule; a rule that reduces over each parameter (LAMB's norms, Adafactor's
factored moments) may sum in another order (LAMB: one element in 24 one ulp apart).
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import torch

from .layer_runs import chains, source
from .optim.update_op import parameter_states
from .stacks import Stacks, holding


@dataclass(frozen=True)
class Row:
    """Row `index` of the stacked array `stacked`: one state tensor's device value."""

    stacked: jax.Array
    index: int

    @property
    def dtype(self):
        return self.stacked.dtype

    def value(self) -> jax.Array:
        """The row as an array of its own (a device computation)."""
        return _take(self.stacked, self.index)


@jax.jit
def _take(stacked, index):
    """Row `index` of `stacked` (one compile per shape: the index is an argument)."""
    return jax.lax.dynamic_index_in_dim(stacked, index, keepdims=False)


def value(entry) -> jax.Array:
    """A device value held by the state: an array, or a `Row`'s own array."""
    return entry.value() if isinstance(entry, Row) else entry


@dataclass(frozen=True)
class StackPlan:
    """Which mutated state tensors a program takes stacked (module docstring)."""

    stacks: tuple[tuple[int, ...], ...]  # per stack: positions in the mutated state, in layer order
    n_mutated: int

    @functools.cached_property  # read at every launch (`pack`, `unpack`)
    def rest(self) -> tuple[int, ...]:
        """The mutated state positions in no stack, in order."""
        stacked = {p for s in self.stacks for p in s}
        return tuple(p for p in range(self.n_mutated) if p not in stacked)

    def avals(self, mutated_avals: Sequence) -> tuple:
        """The packed mutated state's abstract values."""
        return (*(jax.ShapeDtypeStruct((len(s),) + tuple(mutated_avals[s[0]].shape), mutated_avals[s[0]].dtype)
                  for s in self.stacks),
                *(mutated_avals[p] for p in self.rest))

    def pack(self, mutated: Sequence) -> tuple:
        """The program's packed state from the state's entries (arrays or `Row`s)."""
        packed = []
        for positions in self.stacks:
            entries = [mutated[p] for p in positions]
            first = entries[0]
            whole = isinstance(first, Row) and first.stacked.shape[0] == len(entries) and all(
                isinstance(e, Row) and e.stacked is first.stacked and e.index == i for i, e in enumerate(entries))
            packed.append(first.stacked if whole else jnp.stack([value(e) for e in entries]))
        return (*packed, *(mutated[p] for p in self.rest))

    def unpack(self, packed: Sequence) -> list:
        """The state's entries (`Row`s of the stacked arrays, arrays) from the program's
        packed state."""
        out = [None] * self.n_mutated
        for positions, stacked in zip(self.stacks, packed):
            for i, p in enumerate(positions):
                out[p] = Row(stacked, i)
        for p, array in zip(self.rest, packed[len(self.stacks):]):
            out[p] = array
        return out

    def call(self, compiled: Callable, mutated: Sequence, *rest):
        """`compiled(packed mutated state, *rest)` -> (new state's entries, outputs, key)."""
        new, outs, key = compiled(self.pack(mutated), *rest)
        return self.unpack(new), outs, key

    def program(self, program: Callable) -> Callable:
        """`program(mutated, kept, batch, key)` taking and returning the mutated state packed."""
        n_stacks = len(self.stacks)

        def stacked_program(packed, kept_state, batch, rng_key):
            with holding(Stacks()) as held:
                mutated = [None] * self.n_mutated
                for positions, stacked in zip(self.stacks, packed):
                    for p, row in zip(positions, held.rows(stacked)):
                        mutated[p] = row
                for p, array in zip(self.rest, packed[n_stacks:]):
                    mutated[p] = array
                new, outs, key = program(tuple(mutated), kept_state, batch, rng_key)
                stacks = tuple(held.stack([new[p] for p in positions]) for positions in self.stacks)
            return (*stacks, *(new[p] for p in self.rest)), outs, key

        return stacked_program


def plan(gm: torch.fx.GraphModule, n_state: int, mutated: Sequence[int], stack_from: int) -> Optional[StackPlan]:
    """The stacks of the program of graph `gm` (module docstring), or None; `n_state`: its
    state inputs (its first placeholders), `mutated`: the state indices it returns."""
    if stack_from < 2:
        return None

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"][:n_state]
    position = {placeholders[i]: p for p, i in enumerate(mutated)}  # a mutated state node -> its position
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    new_values = list(out_node.args[0])[:len(mutated)]
    states, updaters = {}, {}
    for node in gm.graph.nodes:
        for param, state in parameter_states(node) or ():
            param = source(param, gm)
            states[param], updaters[param] = state, node
    taken: set = set()
    stacks: list[tuple[int, ...]] = []
    for chain in chains(gm):
        if len(chain.calls) < stack_from:
            continue
        for j in chain.per_layer:
            column = chain.column(j)
            if not _stackable(column, position, states, updaters, new_values, taken):
                continue
            taken.update(column)
            taken.update(s for n in column for s in states[n])
            stacks.append(tuple(position[n] for n in column))
            for f in range(len(states[column[0]])):
                stacks.append(tuple(position[states[n][f]] for n in column))
    return StackPlan(tuple(stacks), len(mutated)) if stacks else None


def _stackable(column, position, states, updaters, new_values, taken) -> bool:
    """Whether a per-layer operand column is parameters of one update op, mutated state,
    each updated (with its state) by that op, of one shape and dtype and layout."""
    if any(n in taken or n not in position or n not in states for n in column) or len(set(column)) != len(column):
        return False
    op = updaters[column[0]]
    first = column[0].meta["val"]
    for n in column:
        v = n.meta["val"]
        if updaters[n] is not op or tuple(v.shape) != tuple(first.shape) or v.dtype != first.dtype:
            return False
        if len(states[n]) != len(states[column[0]]) or any(s not in position or s in taken for s in states[n]):
            return False
        if not _updated_by(new_values[position[n]], op) or not all(
                _updated_by(new_values[position[s]], op) for s in states[n]):
            return False
    for f in range(len(states[column[0]])):
        vals = [states[n][f].meta["val"] for n in column]
        if any(tuple(v.shape) != tuple(vals[0].shape) or v.dtype != vals[0].dtype for v in vals):
            return False
    return True


def _updated_by(node, op) -> bool:
    """Whether a new state value is one of the update op's results."""
    return isinstance(node, torch.fx.Node) and node.target is operator.getitem and node.args[0] is op
