"""`cstorch.optim.Optimizer`: torch.optim.Optimizer whose state exists before the first
step (`preinitialize`) and whose `step()` creates none, so the state can be lifted into
a compiled step.

The built-in optimizers keep their state under torch.optim's keys, and
`state_dict()` / `load_state_dict()` use torch.optim's layout: a state dict saved from
the torch.optim optimizer of the same name loads here, and the other way round.
Loading copies values into the pre-initialized tensors (their identity is what a
compiled step is bound to).
"""
from __future__ import annotations

import abc
import math
import warnings
import weakref
from collections import OrderedDict
from typing import Optional, Sequence

import torch
from torch.utils.hooks import RemovableHandle

from cstorch_jax.optim.update_op import call_update

from ..amp import skip
from ..state import copy_into

_LIVE: "weakref.WeakSet[Optimizer]" = weakref.WeakSet()


def live_optimizers() -> list["Optimizer"]:
    """Every cstorch optimizer still referenced, in creation order."""
    return sorted(_LIVE, key=lambda o: o._creation_index)


def forget_optimizers() -> None:
    """Stop treating the existing optimizers as live (their state is no longer lifted)."""
    _LIVE.clear()


_counter = 0


def as_tensor(value) -> torch.Tensor:
    """A hyper-parameter as a float32 0-d tensor (it may already be one)."""
    return value if isinstance(value, torch.Tensor) else torch.tensor(float(value), dtype=torch.float32)


def check_hyperparameter(name: str, value, low: float = 0.0, *, high: float | None = None,
                         label: str | None = None) -> None:
    """ValueError "Invalid <label>: <value>" unless low <= value (< high); 0-d tensors pass."""
    if isinstance(value, torch.Tensor):
        return
    if value is None or value < low or (high is not None and value >= high):
        raise ValueError(f"Invalid {label or name}: {value}")


def check_adam_hyperparameters(lr, betas, eps, weight_decay) -> None:
    """The checks every Adam-like optimizer makes: lr, eps, weight_decay >= 0 and
    0 <= beta < 1 for each beta."""
    check_hyperparameter("lr", lr, label="learning rate")
    check_hyperparameter("eps", eps, label="epsilon value")
    for i, beta in enumerate(betas):
        check_hyperparameter("beta", beta, high=1.0, label=f"beta parameter at index {i}")
    check_hyperparameter("weight_decay", weight_decay, label="weight_decay value")


class Optimizer(torch.optim.Optimizer, abc.ABC):
    #: param-group keys that are tensor inputs of a compiled step (never frozen into it)
    TENSOR_HYPERPARAMS: tuple[str, ...] = ("lr", "weight_decay")

    def __init__(self, params, defaults: dict, enable_global_step: bool = False):
        global _counter
        super().__init__(params, defaults)
        for group in self.param_groups:
            if "tags" in group:
                tags = group["tags"]
                group["tags"] = {tags} if isinstance(tags, str) else set(tags or ())
        self.enable_global_step = enable_global_step
        self.preinitialize()
        if enable_global_step:
            for group in self.param_groups:
                for p in group["params"]:
                    self.state[p]["step"] = torch.zeros((), dtype=torch.float32)
        self._optimizer_zero_grad_pre_hooks: OrderedDict = OrderedDict()
        self._optimizer_zero_grad_post_hooks: OrderedDict = OrderedDict()
        # a step not taken through a GradScaler always counts for the schedulers
        self.register_step_pre_hook(lambda opt, args, kwargs: skip.forget(opt))
        _counter += 1
        self._creation_index = _counter
        _LIVE.add(self)

    @abc.abstractmethod
    def preinitialize(self) -> None:
        """Create every state tensor the optimizer will ever use."""

    @abc.abstractmethod
    def step(self, closure=None):
        """Update the parameters from their gradients; must create no new state."""

    def increment_global_step(self, p: torch.Tensor) -> torch.Tensor:
        if "step" not in self.state[p]:
            raise RuntimeError(
                "No global step in the optimizer state; build the optimizer with enable_global_step=True "
                "to have one."
            )
        self.state[p]["step"].add_(1.0)
        return self.state[p]["step"]

    # -- zero_grad and its hooks ------------------------------------------------------
    def register_zero_grad_pre_hook(self, hook) -> RemovableHandle:
        """`hook(optimizer, args, kwargs)` runs before zero_grad and may return new (args, kwargs)."""
        handle = RemovableHandle(self._optimizer_zero_grad_pre_hooks)
        self._optimizer_zero_grad_pre_hooks[handle.id] = hook
        return handle

    def register_zero_grad_post_hook(self, hook) -> RemovableHandle:
        """`hook(optimizer, args, kwargs)` runs after zero_grad."""
        handle = RemovableHandle(self._optimizer_zero_grad_post_hooks)
        self._optimizer_zero_grad_post_hooks[handle.id] = hook
        return handle

    def zero_grad(self, *args, **kwargs) -> None:
        for hook in self._optimizer_zero_grad_pre_hooks.values():
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"zero_grad pre-hook {hook} must return None or (args, kwargs), got {result!r}")
                args, kwargs = result
        set_to_none = kwargs.get("set_to_none", args[0] if args else True)
        if not set_to_none:
            warnings.warn("zero_grad(set_to_none=False) is slower and gives the same result; prefer the default")
        super().zero_grad(*args, **kwargs)
        for hook in self._optimizer_zero_grad_post_hooks.values():
            hook(self, args, kwargs)

    # -- visiting ---------------------------------------------------------------------
    def apply(self, f):
        """`f(self)`; an object with an `.apply` method is applied as `f.apply(self)`."""
        if callable(f):
            return f(self)
        if callable(getattr(f, "apply", None)):
            return f.apply(self)
        raise TypeError(f"Expected a callable (or an object with .apply) as the argument to apply, got {type(f)}")

    def visit_state(self, fn) -> None:
        """Replace each state value v by fn(v) where fn returns something other than None."""
        for st in self.state.values():
            for k, v in list(st.items()):
                new = fn(v)
                if new is not None:
                    st[k] = new

    # -- state dict ---------------------------------------------------------------------
    def convert_state_dict(self, state_dict: dict) -> dict:
        """Hook for subclasses: rewrite a foreign layout (e.g. the real system's Adam
        `beta1_power`) into this optimizer's keys. The default returns it unchanged."""
        return state_dict

    def load_state_dict(self, state_dict: dict) -> None:
        """Load torch.optim's layout. Hyper-parameters this optimizer does not have
        (torch's `foreach`, `fused`, ...) are ignored; state a checkpoint lacks (torch
        creates it lazily) keeps its pre-initialized value; values are copied into the
        existing tensors."""
        state_dict = self.convert_state_dict(state_dict)
        old_state = {p: dict(st) for p, st in self.state.items()}
        old_groups = [dict(g) for g in self.param_groups]
        super().load_state_dict(state_dict)
        loaded_state = self.state
        self.state = type(loaded_state)(dict)
        index = {p: i for i, p in enumerate(p for g in old_groups for p in g["params"])}
        for p, st in old_state.items():
            self.state[p] = st
            new = loaded_state.get(p, {})
            unknown = [k for k in new if k not in st]
            if unknown:
                warnings.warn(f"load_state_dict: ignoring optimizer state {unknown} that {type(self).__name__} "
                              f"does not keep")
            for k, v in new.items():
                if k in st and v is not None:
                    _assign(st, k, v, f"optimizer state {k!r} of parameter {index.get(p, '?')}")
        loaded_groups = self.param_groups
        self.param_groups = [dict(g) for g in old_groups]
        for gi, (group, loaded) in enumerate(zip(self.param_groups, loaded_groups)):
            for k, v in loaded.items():
                if k != "params" and k in group:
                    _assign(group, k, v, f"param group {gi} {k!r}")

    # -- helpers for preinitialize() and step() implementations --------------------------
    def _init_state(self, *zeros: str, step: bool = True, when: Optional[dict] = None) -> None:
        """For every parameter: a float32 0-d `step` (torch.optim's counter) when `step`,
        a zero tensor shaped like the parameter under each name in `zeros`, then one under
        each name of `when` whose predicate holds for the parameter's group."""
        for group in self.param_groups:
            keys = [*zeros, *(k for k, holds in (when or {}).items() if holds(group))]
            for p in group["params"]:
                st = self.state[p]
                if step:
                    st["step"] = torch.zeros((), dtype=torch.float32)
                for key in keys:
                    st[key] = torch.zeros_like(p)

    @staticmethod
    def _call_closure(closure):
        """Re-evaluate the model with grad enabled, as torch.optim does."""
        if closure is None:
            return None
        with torch.enable_grad():
            return closure()

    def _groups_with_grads(self):
        """(group, params that have a gradient) for every group with at least one."""
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                yield group, params

    def _apply_update(self, op, group: dict, params: Sequence[torch.Tensor], static: dict,
                      hparams: Sequence[str] = ("lr", "weight_decay")) -> None:
        """One call of an update op (cstorch_jax.optim) for `params` of `group`: the
        group's `hparams` go in as 0-d tensors, `static` is frozen into the graph; the
        new values are written back into the parameters and their state in place."""
        states = [self.state[p] for p in params]
        new_params, new_states = call_update(
            op, params, [p.grad for p in params], states, {k: as_tensor(group[k]) for k in hparams}, static,
        )
        with torch.no_grad():
            for p, v in zip(params, new_params):
                p.copy_(v)
            for st, new in zip(states, new_states):
                for k, v in new.items():
                    st[k].copy_(v)


def steps_from_beta_powers(state_dict: dict) -> dict:
    """The real system's Adam-family optimizers keep beta1^(t+1) after t steps as
    `beta1_power` (and beta2's as `beta2_power`) where torch keeps `step` = t: rewrite
    such a state dict into torch's layout. Other state dicts are returned unchanged."""
    if not any("beta1_power" in st for st in state_dict.get("state", {}).values()):
        return state_dict
    beta1_of = {i: g.get("betas", (0.9, 0.999))[0] for g in state_dict["param_groups"] for i in g["params"]}
    converted = {}
    for i, st in state_dict["state"].items():
        st = dict(st)
        power = st.pop("beta1_power", None)
        st.pop("beta2_power", None)
        if power is not None and "step" not in st:
            beta1, power = float(beta1_of.get(i, 0.9)), float(power)
            t = 0
            if 0 < beta1 < 1 and power > 0:
                t = max(round(math.log(power) / math.log(beta1)) - 1, 0)
            st["step"] = torch.tensor(float(t))
        converted[i] = st
    return {**state_dict, "state": converted}


def _assign(d: dict, key, value, what: str) -> None:
    """d[key] = value, copied in place when d[key] is a tensor (its identity is kept)."""
    old = d[key]
    if isinstance(old, torch.Tensor):
        copy_into(old, value, what)
    else:
        d[key] = value.item() if isinstance(value, torch.Tensor) and isinstance(old, (int, float)) and \
            not isinstance(old, bool) else value
