"""An optimizer step kept only where its gradients were finite: the one wrapper.

optax keeps this in one transform (`apply_if_finite`); here it is one module, because the
decision reaches beyond the optimizer (schedulers, counters of the user's own code). The
GradScaler decides (`cstorch.amp`, which also shows this module as `cstorch.amp.skip`);
everything else is here:

* `keep_if_finite(isfinite, tensors, update)` runs `update()` and then sets every tensor t of
  `tensors` to `where(isfinite, t after, t before)`: the update kept or undone, as tensor
  math (no host read), so it runs the same eagerly and inside a traced step (written back
  with `cstorch_jax.write_back.assign`: in a captured step, without a copy op).
* `step_if_finite(optimizer, isfinite, *args)` is that over the optimizer's parameters and
  state with `optimizer.step(*args)` as the update (what `GradScaler.step` does with dynamic
  scaling), and records the decision: `step_applied(optimizer)` answers it for the rest of
  the traced step, so a scheduler does not advance on a skipped step
  (`increment_last_epoch`) and `cstorch.amp.isfinite(optimizer)` reads it.
* `update_if_finite(optimizer, tensor)` marks a tensor whose coming change is to be kept only
  if `optimizer`'s step is; `finite_step(fn)` wraps a step function: it starts the step with
  no record and, when `fn` returns, sets each marked tensor to
  `where(step_applied(optimizer), its value now, its value when marked)`.

A record lives from `step_if_finite` until the optimizer's next `step()` (a step not taken
through it always counts: a step pre-hook forgets it) or the start of the next step
function (`finite_step`, which `@cstorch.trace` puts around every step); records made while
a step is captured hold traced tensors and are dropped when the capture ends.
"""
from __future__ import annotations

import functools
import threading
import weakref
from typing import Callable, Iterable, Optional

import torch

from cstorch_jax.write_back import assign

from .. import _backend

#: optimizer -> the bool 0-d tensor deciding its last step in this traced step
_records: "weakref.WeakKeyDictionary[object, torch.Tensor]" = weakref.WeakKeyDictionary()
#: optimizers whose step() pre-hook forgets their record (a plain step always counts)
_hooked: "weakref.WeakSet[object]" = weakref.WeakSet()
_local = threading.local()


def keep_if_finite(isfinite: torch.Tensor, tensors: Iterable[torch.Tensor], update: Callable):
    """Run `update()`; every tensor of `tensors` keeps its new value where `isfinite` (a bool
    0-d tensor) holds and gets its value from before the update back otherwise. Returns
    what `update` returned."""
    tensors = list(tensors)
    with torch.no_grad():
        before = [t.clone() for t in tensors]
        result = update()
        for t, old in zip(tensors, before):
            assign(t, torch.where(isfinite, t, old))
    return result


def step_if_finite(optimizer, isfinite: torch.Tensor, *args, **kwargs):
    """`optimizer.step(*args, **kwargs)` kept only where `isfinite` (`keep_if_finite` over the
    parameters and every state tensor), the decision recorded for `step_applied`."""
    owned = [p for g in optimizer.param_groups for p in g["params"]]
    owned += [t for p in owned for t in optimizer.state[p].values() if isinstance(t, torch.Tensor)]
    result = keep_if_finite(isfinite, owned, lambda: optimizer.step(*args, **kwargs))
    record_step_applied(optimizer, isfinite)
    return result


def record_step_applied(optimizer, applied: torch.Tensor) -> None:
    """Record `applied` (bool 0-d) as the decision of `optimizer`'s last step."""
    if optimizer not in _hooked:
        optimizer.register_step_pre_hook(_forget)
        _hooked.add(optimizer)
    _records[optimizer] = applied


def _forget(optimizer, args, kwargs) -> None:
    _records.pop(optimizer, None)


def step_applied(optimizer) -> Optional[torch.Tensor]:
    """The bool 0-d tensor deciding `optimizer`'s last step in this traced step, or None
    when no `step_if_finite` decided it (every step counts)."""
    return _records.get(optimizer)


def clear() -> None:
    """Forget every record (the start of a traced step, the end of a capture)."""
    _records.clear()


# -- tensors of the user's own code, kept with an optimizer's step ---------------------------
def _marks() -> list:
    if not hasattr(_local, "marks"):
        _local.marks = []
    return _local.marks


def update_if_finite(optimizer, tensor: torch.Tensor) -> None:
    """Inside a `finite_step` function: keep the coming change of `tensor` only where
    `optimizer`'s step in this step is kept. Elsewhere nothing (there is no step)."""
    marks = _marks()
    if marks:
        with torch.no_grad():
            marks[-1].append((optimizer, tensor, tensor.detach().clone()))


def finite_step(fn: Callable) -> Callable:
    """`fn` (a step function) starting with no record, with its `update_if_finite` marks
    resolved when it returns; the records of a captured step are dropped at its end."""

    @functools.wraps(fn)
    def step(*args, **kwargs):
        clear()
        marks = _marks()
        marks.append([])
        try:
            result = fn(*args, **kwargs)
            with torch.no_grad():
                for optimizer, tensor, before in marks[-1]:
                    applied = step_applied(optimizer)
                    if applied is not None:
                        assign(tensor, torch.where(applied, tensor, before))
            return result
        finally:
            marks.pop()
            b = _backend.backend()
            if b is not None and b.is_tracing:
                clear()

    return step
