"""`cstorch.optim.Optimizer`: torch.optim.Optimizer whose state exists before the first
step (`preinitialize`) and whose `step()` creates none, so the state can be lifted into
a compiled step.

The built-in optimizers keep their state under torch.optim's keys, and
`state_dict()` / `load_state_dict()` use torch.optim's layout: a state dict saved from
the torch.optim optimizer of the same name loads here, and the other way round.
Loading copies values into the pre-initialized tensors (their identity is what a
compiled step is bound to).

The tensor hyper-parameters (`TENSOR_HYPERPARAMS`: the learning rate and weight decay)
always reach the update as float32 0-d tensors, state of a compiled step like the
optimizer state, so changing them never changes the graph. The param group keeps what
it was given (`group["lr"]` stays a Python number unless a tensor was given or a
scheduler set it, so state dicts keep torch.optim's layout); a number is held by a
tensor of the optimizer's, rewritten when the group's value changes
(`Optimizer.hyperparameter`).

An optimizer registers with the run (`cstorch.state.registry`) when it is created.
"""
import abc
import contextlib
import math
import numbers
import warnings
from collections import OrderedDict
from typing import Any, ClassVar, Dict, Iterator, Mapping, Optional

import torch
from torch.optim.optimizer import ParamsT  # the real API's name for `params` (config builders key on it)
from torch.utils.hooks import RemovableHandle

from .. import _backend
from ..state import copy_into


_UNSET = object()


def live_optimizers() -> list["Optimizer"]:
    """The run's cstorch optimizers that are still referenced, in creation order."""
    return _backend.run_registry().objects("optimizer")


class Optimizer(torch.optim.Optimizer, abc.ABC):
    """The base of cstorch's optimizers and of your own, written with torch ops
    (`preinitialize`, `step`). It may be made before or after `cstorch.backend(...)`.

    Args:
        params: the parameters to optimize: an iterable of tensors, of (name, tensor) pairs, or of
            param-group dicts (a "tags" entry of a group, a tag or a list of tags, selects it for tagged
            schedulers).
        defaults: the default value of every hyper-parameter of a param group.
        enable_global_step: keep a float32 0-d "step" state per parameter, created at zero.

    Differences from the real system:
        State dicts use torch.optim's layout: a torch.optim checkpoint loads, and the
        other way round; the real system's Adam/Adamax `beta1_power` layout is converted
        on load.
    """

    #: param-group keys that are float32 0-d state tensors (never frozen into a compiled step)
    TENSOR_HYPERPARAMS: ClassVar[tuple[str, ...]] = ("lr", "weight_decay")
    state_kind: ClassVar[str] = "optimizer"

    def __init__(self, params: ParamsT, defaults: Dict[str, Any], enable_global_step: bool = False):
        # per param group: the tensor that holds each tensor hyper-parameter given as a number,
        # and the value last written into it (see `hyperparameter`)
        self._hyper_tensors: list[dict[str, torch.Tensor]] = []
        self._hyper_values: list[dict[str, object]] = []
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
        _backend.run_registry().register(self)

    # -- tensor hyper-parameters -------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        check_finite_hyperparameters({**self.defaults, **param_group})
        super().add_param_group(param_group)
        self._hyper_tensors.append({})
        self._hyper_values.append({})

    def hyperparameter(self, group_index: int, key: str) -> Optional[torch.Tensor]:
        """The float32 0-d tensor that holds `param_groups[group_index][key]` (a tensor
        hyper-parameter; None when the group's value is None): the group's own tensor
        when it holds a float32 0-d one, else a tensor of the optimizer's, refreshed here
        when the group's value changed."""
        value = self.param_groups[group_index].get(key)
        if value is None:
            return None
        if isinstance(value, torch.Tensor) and value.dtype == torch.float32 and value.dim() == 0:
            return value
        owned = self._hyper_tensors[group_index].get(key)
        if owned is None:
            owned = self._hyper_tensors[group_index][key] = torch.zeros((), dtype=torch.float32)
            self._hyper_values[group_index][key] = _UNSET
        last = self._hyper_values[group_index][key]
        if isinstance(value, torch.Tensor) or last is _UNSET or (value != last and not _both_nan(value, last)):
            copy_into(owned, value, f"param group {group_index} {key!r}")
            self._hyper_values[group_index][key] = value
        return owned

    def hyperparameters(self) -> Iterator[tuple[int, str, torch.Tensor]]:
        """(group index, key, tensor) for every tensor hyper-parameter of every group,
        each tensor refreshed from its group (see `hyperparameter`)."""
        for gi, group in enumerate(self.param_groups):
            for key in self.TENSOR_HYPERPARAMS:
                t = self.hyperparameter(gi, key) if key in group else None
                if t is not None:
                    yield gi, key, t

    def schedule_hyperparameter(self, group_index: int, key: str) -> torch.Tensor:
        """A scheduler sets `key` of this group from now on: the group holds the float32
        0-d tensor of `hyperparameter` (with the group's value), written in place."""
        t = self.hyperparameter(group_index, key)
        self.param_groups[group_index][key] = t
        return t

    # -- the run's protocol (cstorch.state.Stateful) --------------------------------
    def step_state(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The parameters, the tensor hyper-parameters and the optimizer state."""
        index = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        hyper = {(gi, key): t for gi, key, t in self.hyperparameters()}
        for gi, group in enumerate(self.param_groups):
            for p in group["params"]:
                yield f"param{index[id(p)]}", p
            for key in self.TENSOR_HYPERPARAMS:
                if (gi, key) in hyper:
                    yield f"param_groups.{gi}.{key}", hyper[gi, key]
        for p, st in self.state.items():
            for k, v in st.items():
                if isinstance(v, torch.Tensor):
                    yield f"state.{index.get(id(p), '?')}.{k}", v

    @contextlib.contextmanager
    def bind_step_state(self, traced: Mapping[int, torch.Tensor]) -> Iterator[None]:
        saved_params = [g["params"] for g in self.param_groups]
        saved_hyper = [{k: g[k] for k in self.TENSOR_HYPERPARAMS if k in g} for g in self.param_groups]
        hyper = list(self.hyperparameters())
        saved_state = self.state
        try:
            for g in self.param_groups:
                g["params"] = [traced[id(p)] for p in g["params"]]
            for gi, key, t in hyper:
                self.param_groups[gi][key] = traced[id(t)]
            new_state = type(saved_state)(dict) if hasattr(saved_state, "default_factory") else {}
            for p, st in saved_state.items():
                new_state[traced[id(p)]] = {k: traced[id(v)] if isinstance(v, torch.Tensor) else v
                                            for k, v in st.items()}
            self.state = new_state
            yield
        finally:
            self.state = saved_state
            for g, params, values in zip(self.param_groups, saved_params, saved_hyper):
                g["params"] = params
                g.update(values)

    def graph_constants(self, prefix: str) -> dict[str, object]:
        """Every param-group value other than the parameters and the tensor
        hyper-parameters (momentum, betas, ...), as a repr."""
        out = {}
        for gi, group in enumerate(self.param_groups):
            for k, v in group.items():
                if k != "params" and k not in self.TENSOR_HYPERPARAMS and not isinstance(v, torch.Tensor):
                    out[f"{prefix}.param_groups[{gi}][{k!r}]"] = repr(v)
        return out

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

    # -- helpers for step() implementations ----------------------------------------------
    @staticmethod
    def _call_closure(closure):
        """Re-evaluate the model with grad enabled, as torch.optim does."""
        if closure is None:
            return None
        with torch.enable_grad():
            return closure()


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _both_nan(a, b) -> bool:
    """Whether `a` and `b` are both NaN numbers (NaN != NaN, but a NaN that stays NaN is
    no change of the value)."""
    return _is_number(a) and _is_number(b) and math.isnan(a) and math.isnan(b)


#: how torch.optim's "Invalid ...: <value>" errors name a param-group key
_LABELS = {"lr": "learning rate", "eps": "epsilon value"}


def check_finite_hyperparameters(group: Mapping) -> None:
    """ValueError, in torch.optim's words ("Invalid learning rate: nan"), for a NaN or
    infinite number among a param group's values (`params` aside; a number, or an item of
    a tuple or list such as `betas`). torch.optim lets some through (`SGD(lr=nan)`); here
    a non-finite hyper-parameter is refused before anything uses it."""
    for key, value in group.items():
        if key == "params":
            continue
        items = enumerate(value) if isinstance(value, (tuple, list)) else [(None, value)]
        for index, v in items:
            if _is_number(v) and not math.isfinite(v):
                if index is None:
                    label = _LABELS.get(key, f"{key} value")
                elif key == "betas":
                    label = f"beta parameter at index {index}"
                else:
                    label = f"{key} value at index {index}"
                raise ValueError(f"Invalid {label}: {v} (a hyper-parameter must be a finite number)")


def _assign(d: dict, key, value, what: str) -> None:
    """d[key] = value, copied in place when d[key] is a tensor (its identity is kept)."""
    old = d[key]
    if isinstance(old, torch.Tensor):
        copy_into(old, value, what)
    else:
        d[key] = value.item() if isinstance(value, torch.Tensor) and isinstance(old, (int, float)) and \
            not isinstance(old, bool) else value
