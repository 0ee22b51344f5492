"""`compile_step`, `step_closure`, `checkpoint_closure`, `save` and `load` of the 1.8
API, and its rule that weights can be fetched only on checkpoint steps.

    1.8 name             2.x call it makes
    -------------------  ----------------------------------------------------------------
    compile_step(fn)     cstorch.trace(fn), called inside a 1.8 DataLoader loop
    step_closure(fn)     called inside the compile_step, in the loop: cstorch.step_closure
                         (repeats every step with that step's values, cannot fetch weights);
                         called in the loop on a checkpoint step: cstorch.checkpoint_closure
                         (runs at the end of that step, after the model and optimizer
                         tensors were updated with its values); on another step:
                         cstorch.step_closure; outside the loop: runs at once
    checkpoint_closure   cstorch.checkpoint_closure (runs on checkpoint steps only);
                         outside the loop: runs at once
    save(sd, path)       cstorch.save, after the weight-fetch check below
    load(path, ...)      cstorch.load

Weight fetches. While a 1.8 DataLoader is iterated, `save` and `state_dict()` of a
model compiled with the 1.8 `compile` are allowed on checkpoint steps and the run's
last step (`DataLoader.is_checkpoint_step`): in a step closure called in the loop on
such a step, or directly in the loop body on it. Elsewhere (another step, or a step
closure called inside the compile_step) they raise a RuntimeError that says which
steps can fetch. Outside the loop the host holds the weights: always allowed.
"""
from __future__ import annotations

import contextvars
import dataclasses
import functools
from typing import Callable, Optional

import torch

import cstorch

from .run_config import current_config
from .utils.data import DataLoader, active_pass

load = cstorch.load

_IN_STEP: contextvars.ContextVar = contextvars.ContextVar("inside a 1.8 compile_step body", default=False)
_CLOSURE: contextvars.ContextVar = contextvars.ContextVar("the 1.8 closure running", default=None)


@dataclasses.dataclass(frozen=True)
class _Where:
    """Where a closure was called: the run step (None: outside the loop or unknown),
    whether it may fetch weights, and whether it was called inside the compile_step."""

    step: Optional[int]
    fetch: bool
    in_step: bool = False


class _Bound:
    """`fn` that runs knowing where it was called (for the weight-fetch check)."""

    def __init__(self, fn: Callable, where: _Where):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.where = where

    def __call__(self, *args, **kwargs):
        token = _CLOSURE.set(self.where)
        try:
            return self.fn(*args, **kwargs)
        finally:
            _CLOSURE.reset(token)


def compile_step(fn: Callable) -> Callable:
    """The training/evaluation step: `cstorch.trace(fn)`. On CSX it runs inside
    `for batch in dataloader:` over a 1.8 DataLoader (a `RuntimeError` otherwise), and
    takes the batch (not the DataLoader).

    Args:
        fn: the step: a function of the batch.

    Differences from the real system:
        Given the DataLoader instead of the batch (a typo of the porting guide's
        example), it raises a `TypeError`.
    """
    traced = cstorch.trace(fn)

    @functools.wraps(fn)
    def step(*args, **kwargs):
        for value in (*args, *kwargs.values()):
            if isinstance(value, DataLoader):
                raise TypeError(
                    f"{fn.__name__} was given the DataLoader itself; a compile_step takes the batch: "
                    f"`for batch in dataloader: loss = {fn.__name__}(batch)`."
                )
        b = cstorch.backend()
        if b is not None and b.is_csx and active_pass() is None:
            raise RuntimeError(
                f"{fn.__name__} is a compile_step: on the Cerebras system it runs inside the loop over a "
                f"cstorch.utils.data.DataLoader (`for batch in dataloader: {fn.__name__}(batch)`)."
            )
        token = _IN_STEP.set(True)
        try:
            return traced(*args, **kwargs)
        finally:
            _IN_STEP.reset(token)

    step.traced = traced  # the 2.x TracedStep (`.report`, `.lower`, ...)
    return step


def step_closure(fn: Callable) -> Callable:
    """Host code on a step's values (the module's table says when it runs).

    Args:
        fn: the host function to run on the step's values.

    Differences from the real system:
        Called outside the DataLoader loop, it runs at once. Called inside the
        compile_step in the loop, it cannot fetch weights (`save` and `state_dict()`
        raise a `RuntimeError`).
    """

    @functools.wraps(fn)
    def closure(*args, **kwargs):
        in_step, p = _IN_STEP.get(), active_pass()
        if p is None or (p.step is None and not in_step):  # outside the loop: nothing is in flight
            return _Bound(fn, _Where(None, fetch=not in_step, in_step=in_step))(*args, **kwargs)
        if in_step:
            return cstorch.step_closure(_Bound(fn, _Where(None, fetch=False, in_step=True)))(*args, **kwargs)
        step = p.step
        if p.is_checkpoint_step(step):
            return cstorch.checkpoint_closure(_Bound(fn, _Where(step, fetch=True)))(*args, **kwargs)
        return cstorch.step_closure(_Bound(fn, _Where(step, fetch=False)))(*args, **kwargs)

    closure.is_step_closure = True
    return closure


def checkpoint_closure(fn: Callable) -> Callable:
    """A step closure that runs only on checkpoint steps (and the last step), with the
    weights of that step.

    Args:
        fn: the host function to run on checkpoint steps (typically one that calls `save`).

    Differences from the real system:
        Called outside the DataLoader loop, it runs at once. The checkpoint steps are
        those of `DataLoader.is_checkpoint_step`: two per interval where the real
        system has one.
    """

    @functools.wraps(fn)
    def closure(*args, **kwargs):
        in_step, p = _IN_STEP.get(), active_pass()
        if p is None or (p.step is None and not in_step):  # outside the loop: the host holds the weights
            return _Bound(fn, _Where(None, fetch=True))(*args, **kwargs)
        step = None if in_step else p.step
        return cstorch.checkpoint_closure(_Bound(fn, _Where(step, fetch=True)))(*args, **kwargs)

    closure.is_step_closure = True
    closure.is_checkpoint_closure = True
    return closure


def _not_fetchable(what: str, step: Optional[int], p) -> RuntimeError:
    n = current_config().checkpoint_steps
    last = p.loader.total_steps - 1
    steps = (f"checkpoint_steps={n}: the steps i with i % {n} == 0 or (i + 1) % {n} == 0, and the last step {last}"
             if n else f"no checkpoint_steps were configured: only the last step {last}")
    return RuntimeError(
        f"{what} fetches the model's weights from the system, which is possible only on the checkpoint steps set "
        f"with cstorch.configure(checkpoint_steps=N) and on the run's last step ({steps}; steps count from 0). "
        f"Step {step} is not one: fetch the weights on a checkpoint step, e.g. "
        f"`if i % checkpoint_steps == 0: save_checkpoint(i)`."
    )


def check_fetch(what: str) -> None:
    """RuntimeError unless the weights can be fetched now (module doc)."""
    p = active_pass()
    if p is None:
        return
    where: Optional[_Where] = _CLOSURE.get()
    if where is None:
        if p.step is None or p.is_checkpoint_step(p.step):
            return
        raise _not_fetchable(what, p.step, p)
    if where.in_step:
        raise RuntimeError(
            f"{what} was called in a step closure that the compile_step itself called; such a closure repeats "
            f"every step and cannot fetch weights. Call the closure after the step, in the loop, on a checkpoint "
            f"step (as the guide's save_checkpoint)."
        )
    if not where.fetch:
        raise _not_fetchable(what, where.step, p)


def save(state_dict, checkpoint_file) -> None:
    """`cstorch.save` (H5 checkpoint), on a step where weights can be fetched: while a
    1.8 DataLoader is iterated, a checkpoint step or the run's last step (in the loop
    body, or in a step closure called in the loop on such a step); elsewhere a
    `RuntimeError` that names the steps. Outside the loop it always saves.
    `model.state_dict()` of a model given to 1.8 `compile` follows the same rule.

    Args:
        state_dict: the state to write (as for `cstorch.save`).
        checkpoint_file: the path of the new H5 file.

    Differences from the real system:
        The checkpoint steps are those of `DataLoader.is_checkpoint_step`: two per
        interval where the real system has one. A step closure called inside the
        compile_step cannot fetch weights.
    """
    check_fetch("cstorch.save")
    cstorch.save(state_dict, checkpoint_file)


def _state_dict_hook(module, prefix, keep_vars) -> None:
    if not prefix:
        check_fetch(f"{type(module).__name__}.state_dict()")


def guard_weights(model: torch.nn.Module) -> None:
    """Make `model.state_dict()` follow the weight-fetch rule (once per model)."""
    if not getattr(model, "_legacy18_weights_guarded", False):
        model.register_state_dict_pre_hook(_state_dict_hook)
        model._legacy18_weights_guarded = True


__all__ = ["compile_step", "step_closure", "checkpoint_closure", "save", "load", "check_fetch"]
