"""The OpInfo sweeps' outcomes, one compile for all the tests of an op that run together.

`check_cases` compiles the forward and the gradient samples of an op (in the 16-bit sweep:
at both 16-bit dtypes) as one batch and judges each sample on its own slice of the graph,
so these tests of an op share one capture and one XLA compile. The first of them that runs
in a process computes the outcomes of all of them that this session collected (the
scheduler keeps them on one worker: tests/scheduling.py) and leaves the others' for them.
"""
from __future__ import annotations

from typing import Sequence

import torch

from cstorch_jax.coverage.opinfo import Outcome, check_cases
from scheduling import without_group

_LEFT: dict[tuple, Outcome] = {}
_COLLECTED: dict[int, set[str]] = {}


def _collected(session) -> set[str]:
    """The ids of the tests this session runs (without xdist's `@group` suffix)."""
    if id(session) not in _COLLECTED:
        _COLLECTED.clear()
        _COLLECTED[id(session)] = {without_group(item.nodeid) for item in session.items}
    return _COLLECTED[id(session)]


def outcome(request, op, name: str, case: tuple[torch.dtype, str], limit: int | None,
            siblings: Sequence[tuple[tuple[torch.dtype, str], str]]) -> Outcome:
    """The outcome of `op` (op_db entry `name`) in `case` (dtype, mode). `siblings` are the
    op's other cases that may compile with it, each with the id of its test: those this
    session collected are computed together with `case`."""
    key = (name, case, limit)
    if key in _LEFT:
        return _LEFT.pop(key)
    collected = _collected(request.session)
    cases = [case] + [c for c, nodeid in siblings if c != case and nodeid in collected]
    outcomes = check_cases(op, cases, limit)
    for c in cases[1:]:
        _LEFT[(name, c, limit)] = outcomes[c]
    return outcomes[case]
