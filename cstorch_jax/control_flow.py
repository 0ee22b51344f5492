"""`torch.cond` while a step is captured.

Outside a capture `torch.cond` runs through TorchDynamo. Inside cstorch's capture that path
fails twice: Dynamo skips the frame (cstorch's dispatch modes are active) and caches that
decision, which breaks the user's later eager `torch.cond` ("torch.* op returned
non-Tensor"); and the gradient of a branch that returns one tensor fails in torch's
joint-graph code ("object of type 'bool' has no len()"). So while a step is traced,
`torch.cond` is `captured_cond`, with the same contract:

- it calls the `cond` higher-order op directly, with flat operands and branches that return
  flat tuples, and rebuilds what the branches return;
- the tensors a branch reads without taking them as operands (a module's parameters in
  `lambda x: self.linear(x)`) become operands, as Dynamo would lift them: a run of the
  branch on meta tensors finds them (`_free_tensors`), and in the traced branch every use
  of one is the operand (`_Substitute`), so gradients reach the parameters;
- each branch runs inside `watch()`, which the capture sets to record the branch's ops in
  the step's op signature (a change inside a branch is a change of the step for the compile
  cache) and to refuse host reads there as in the rest of the step.
- a branch may not change the step's state: `write_back.assign` is a plain `copy_` in it.

The graph holds one `torch.ops.higher_order.cond` node with its branches as subgraphs; the
lowering makes it a `jax.lax.cond` (`lowering/control_flow.py`).
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable, ContextManager, Iterator

import torch
import torch.utils._pytree as pytree
from torch._higher_order_ops.cond import cond_op
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import _disable_current_modes

from .errors import CaptureError
from .write_back import assignable


def captured_cond(pred, true_fn: Callable, false_fn: Callable, operands=(), *,
                  watch: Callable[[], ContextManager] = contextlib.nullcontext):
    """`true_fn(*operands)` if `pred` else `false_fn(*operands)`, both branches traced
    (torch.cond's contract: `pred` a one-element bool tensor or a Python bool, operands a
    tuple of tensors, possibly nested; both branches return tensors of the same structure,
    shapes and dtypes)."""
    if isinstance(pred, (bool, int, float)):  # known while tracing: torch runs that branch alone
        return (true_fn if pred else false_fn)(*operands)
    if not isinstance(pred, torch.Tensor) or pred.numel() != 1:
        raise CaptureError(f"torch.cond: the predicate must be a bool or a one-element tensor, got {pred!r}")
    if not isinstance(operands, (tuple, list)):
        raise CaptureError(f"torch.cond: the operands must be a tuple of tensors, got {type(operands).__name__}")
    flat, spec = pytree.tree_flatten(tuple(operands))
    if not all(isinstance(t, torch.Tensor) for t in flat):
        raise CaptureError("torch.cond: every operand must be a tensor (possibly in nested tuples, lists or dicts)")
    free = _free_tensors(true_fn, flat, spec) + _free_tensors(false_fn, flat, spec)
    free = list({id(t): t for t in free}.values())
    returned: dict[str, pytree.TreeSpec] = {}

    def flat_branch(name: str, fn: Callable) -> Callable:
        def branch(*args):
            given, lifted = list(args[:len(flat)]), args[len(flat):]
            with watch(), assignable(None), _Substitute({id(t): v for t, v in zip(free, lifted)}):
                out_flat, out_spec = pytree.tree_flatten(fn(*pytree.tree_unflatten(given, spec)))
            if not all(isinstance(t, torch.Tensor) for t in out_flat):
                raise CaptureError(f"torch.cond: the {name} branch must return tensors")
            returned[name] = out_spec
            return tuple(out_flat)

        branch.__name__ = f"{name}_branch"
        return branch

    from torch._dynamo.exc import CondOpArgsMismatchError  # Dynamo loads with the first capture, not at import

    try:
        out = cond_op(pred.reshape(()).to(torch.bool), flat_branch("true", true_fn), flat_branch("false", false_fn),
                      (*flat, *free))
    except CondOpArgsMismatchError as e:
        raise CaptureError(f"torch.cond: the branches must return tensors of the same number, shapes and dtypes: "
                           f"{e}") from None
    if returned["true"] != returned["false"]:
        raise CaptureError(f"torch.cond: the branches return different structures: {returned['true']} and "
                           f"{returned['false']}")
    return pytree.tree_unflatten(list(out), returned["true"])


class _Discover(TorchFunctionMode):
    """Runs every torch function on meta tensors and records the tensors passed in that
    did not come out of an earlier call: the operands are given as meta tensors, so what
    is recorded is what the code reads from elsewhere. Nothing reaches the tracer."""

    def __init__(self):
        super().__init__()
        self.made: set[int] = set()
        self.alive: list[torch.Tensor] = []  # keeps ids unique while the block runs
        self.free: dict[int, torch.Tensor] = {}

    def meta(self, t: torch.Tensor) -> torch.Tensor:
        m = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
        self.made.add(id(m))
        self.alive.append(m)
        return m

    def _as_meta(self, t: torch.Tensor) -> torch.Tensor:
        if id(t) in self.made:
            return t
        self.free.setdefault(id(t), t)
        return self.meta(t)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        args, kwargs = pytree.tree_map_only(torch.Tensor, self._as_meta, (args, kwargs or {}))
        with torch._C.DisableTorchFunction(), _disable_current_modes():
            out = func(*args, **kwargs)
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.made.add(id(t))
                self.alive.append(t)
        return out


def _free_tensors(fn: Callable, flat: list[torch.Tensor], spec) -> list[torch.Tensor]:
    """The tensors `fn` reads besides its operands, found by running it on meta tensors.
    A branch that cannot run so (it reads a value on the host, or an op has no meta kernel)
    runs once as the step's own code, which raises the capture's error for what it does
    (if it runs, the tensors found up to the failure are the ones lifted)."""
    discover = _Discover()
    operands = [discover.meta(t) for t in flat]  # outside the mode: reading their shapes is no use
    try:
        with torch.no_grad(), discover:
            fn(*pytree.tree_unflatten(operands, spec))
    except Exception:  # noqa: BLE001 - the step's own run says what is wrong, if anything
        with torch.no_grad():
            fn(*pytree.tree_unflatten(list(flat), spec))
    return list(discover.free.values())


class _Substitute(TorchFunctionMode):
    """Every tensor of `swap` (by id) passed to a torch function is replaced by its value."""

    def __init__(self, swap: dict[int, torch.Tensor]):
        super().__init__()
        self.swap = swap

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.swap:
            args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: self.swap.get(id(t), t), (args, kwargs or {}))
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def cond_while_captured(watch: Callable[[], ContextManager]) -> Iterator[None]:
    """`torch.cond` is `captured_cond` (its branches run inside `watch()`) in the block."""
    saved = torch.cond
    torch.cond = functools.partial(captured_cond, watch=watch)
    try:
        yield
    finally:
        torch.cond = saved
