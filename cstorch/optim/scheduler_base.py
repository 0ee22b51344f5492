"""The base `Scheduler`: a closed form f(t) of the int64 step tensor `last_epoch`, written
into its param groups in place (see `cstorch.optim.scheduler` for the contract)."""
import abc
import contextlib
import math
import numbers
import warnings
import weakref
from typing import ClassVar, Iterator, List, Mapping, Optional, Union

import torch

from .. import _backend
from ..state import copy_into
from . import if_finite
from .optimizer import Optimizer


#: the real API's annotation of `param_group_tags` (a tag, or a list of tags / None)
TagsType = Optional[Union[str, List[Union[str, None]]]]


def live_schedulers() -> List["Scheduler"]:
    """The run's schedulers that are still referenced and write param groups themselves
    (schedulers owned by a composite scheduler are left out), in creation order."""
    return _backend.run_registry().objects("scheduler")


# --------------------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------------------
def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _argument_name(cls_name: str, name: str) -> str:
    """The argument name the user gave for the generic `name` (`initial_val`) of the
    scheduler class `cls_name`: the parameter-specific name of its `_alias`
    (`initial_learning_rate`), else `name` (for error messages)."""
    pending, seen = [Scheduler], set()
    while pending:
        cls = pending.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if cls.__name__ == cls_name:
            attr = next((vars(k)[name] for k in cls.__mro__ if name in vars(k)), None)
            return attr.storage if isinstance(attr, _Alias) else name
        pending.extend(cls.__subclasses__())
    return name


def _check_number(cls_name: str, name: str, value, *, positive: bool = False, non_negative: bool = False):
    if not _is_number(value):
        raise TypeError(
            f"{cls_name}: `{_argument_name(cls_name, name)}` must be a Python number (it is frozen into the "
            f"schedule's closed form), got {value!r} of type {type(value).__name__}."
        )
    if not math.isfinite(value):
        raise ValueError(f"{cls_name}: `{_argument_name(cls_name, name)}` must be finite, got {value!r}.")
    if positive and value <= 0:
        raise ValueError(f"{cls_name}: `{_argument_name(cls_name, name)}` must be > 0, got {value!r}.")
    if non_negative and value < 0:
        raise ValueError(f"{cls_name}: `{_argument_name(cls_name, name)}` must be >= 0, got {value!r}.")


def _check_int(cls_name: str, name: str, value, *, positive: bool = False, non_negative: bool = False):
    if not _is_int(value):
        raise TypeError(f"{cls_name}: `{_argument_name(cls_name, name)}` must be an integer number of steps, got "
                        f"{value!r} of type {type(value).__name__}.")
    if positive and value <= 0:
        raise ValueError(f"{cls_name}: `{_argument_name(cls_name, name)}` must be a positive number of steps, got "
                         f"{value!r}.")
    if non_negative and value < 0:
        raise ValueError(f"{cls_name}: `{_argument_name(cls_name, name)}` must be >= 0, got {value!r}.")


def _check_int_list(cls_name: str, name: str, value) -> list:
    if hasattr(value, "tolist") and not isinstance(value, torch.Tensor):  # numpy arrays
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{cls_name}: `{name}` must be a list of integer steps, got {type(value).__name__}.")
    bad = [v for v in value if not _is_int(v)]
    if bad:
        raise TypeError(f"{cls_name}: `{name}` must be a list of integer steps; these entries are not "
                        f"integers: {bad!r}.")
    return [int(v) for v in value]


def _normalize_tags(cls_name: str, tags: TagsType):
    if tags is None:
        return None
    if isinstance(tags, str):
        return {tags}
    if isinstance(tags, (list, tuple, set, frozenset)):
        listed = list(tags)
        bad = [t for t in listed if t is not None and not isinstance(t, str)]
        if bad:
            raise TypeError(f"{cls_name}: `param_group_tags` entries must be strings (or None for untagged "
                            f"groups), got {bad!r}.")
        normalized = set(listed)
        if len(normalized) != len(listed):
            dupes = sorted({repr(t) for t in listed if listed.count(t) > 1})
            raise ValueError(f"{cls_name}: `param_group_tags` contains duplicate values {', '.join(dupes)} "
                             f"(tag list: {listed!r}); list each tag once.")
        return normalized
    raise TypeError(f"{cls_name}: `param_group_tags` must be a tag string, a list of tags (None inside the "
                    f"list selects the untagged groups) or None for every group; got {type(tags).__name__}.")


def _group_tags(group: dict) -> set:
    """A group's tags; an untagged group has the tag None."""
    tags = group.get("tags")
    if tags is None:
        return {None}
    if isinstance(tags, str):
        return {tags}
    tags = set(tags)
    return tags or {None}


# --------------------------------------------------------------------------------------
# closed-form building blocks (float32 tensors in, float32 tensors out)
# --------------------------------------------------------------------------------------
def _steps(t: torch.Tensor) -> torch.Tensor:
    """The step as float32 (exact for steps below 2**24)."""
    return t.to(torch.float32)


def _full(value: float) -> torch.Tensor:
    return torch.full((), float(value), dtype=torch.float32)


def _half_cosine(elapsed: torch.Tensor, remaining: torch.Tensor, span: float) -> torch.Tensor:
    """(1 + cos(pi * elapsed / span)) / 2, where elapsed + remaining == span.

    Written as cos^2(pi*elapsed/(2 span)) in the first half and sin^2(pi*remaining/(2 span))
    in the second, so the value keeps full float32 *relative* precision as it approaches
    zero at the end of a decay (the textbook form loses it to cancellation)."""
    k = math.pi / (2.0 * float(span))
    return torch.where(elapsed <= remaining, torch.cos(elapsed * k) ** 2, torch.sin(remaining * k) ** 2)


# --------------------------------------------------------------------------------------
# base class
# --------------------------------------------------------------------------------------
# attributes that are not part of a scheduler's state dict
_NOT_STATE = frozenset({"optimizer", "_owner_ref"})
# state-dict keys that load_state_dict accepts and ignores (also those of the real library)
_IGNORED_ON_LOAD = frozenset({"_step_count", "_last_value", "device", "_get_called_within_step"})


class Scheduler(abc.ABC):
    """Base class: schedules `optimizer.param_groups[i][param_group_key]`.

    Args:
        optimizer: a `cstorch.optim.Optimizer`.
        total_iters: the number of steps the schedule spans (None when it has no end).
        last_epoch: the step before the first one (-1: the schedule starts at step 0).
        param_group_tags: a tag or a list of tags; only param groups carrying one of them
            are scheduled (None inside the list selects the untagged groups). None: every
            group.

    Subclasses define `_value(t)`, the closed form at the int64 0-d step tensor `t`.
    A scheduler registers with the run (`cstorch.state.registry`) when it is created.
    """

    state_kind: ClassVar[str] = "scheduler"

    def __init__(self, optimizer: torch.optim.Optimizer, total_iters: int, last_epoch: int = -1,
                 param_group_tags: TagsType = None):
        name = type(self).__name__
        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"{name} schedules a cstorch.optim.Optimizer, got {type(optimizer).__module__}."
                f"{type(optimizer).__qualname__}; build the optimizer from cstorch.optim (e.g. cstorch.optim.SGD)."
            )
        if not _is_int(last_epoch) or last_epoch < -1:
            raise ValueError(f"{name}: `last_epoch` must be an integer >= -1 (the step before the first one), "
                             f"got {last_epoch!r}.")
        self.optimizer = optimizer
        self.param_group_tags = _normalize_tags(name, param_group_tags)
        self.total_iters = total_iters
        self._owner_ref = None  # weakref to the composite that evaluates this scheduler
        self._validate_tags_apply()
        self._post_init()
        self._attach_groups()
        # the real API's "one initial step": the schedule starts at last_epoch + 1
        self.last_epoch = torch.tensor(int(last_epoch) + 1, dtype=torch.int64)
        self._step_count = 1
        self._write_groups()
        _backend.run_registry().register(self)

    @property
    def _owner(self) -> Optional["Scheduler"]:
        return self._owner_ref() if self._owner_ref is not None else None

    def _adopt(self, child: "Scheduler") -> None:
        """`child` is evaluated by this scheduler from now on: it stops being live."""
        child._owner_ref = weakref.ref(self)
        _backend.run_registry().unregister(child)

    # -- what subclasses provide ---------------------------------------------------
    @property
    @abc.abstractmethod
    def param_group_key(self) -> str:
        """The param-group key this scheduler writes ("lr", "weight_decay")."""

    @abc.abstractmethod
    def _value(self, t: torch.Tensor) -> torch.Tensor:
        """The closed form: a float32 0-d tensor computed with torch ops from the int64
        0-d step tensor `t`."""

    def _post_init(self) -> None:
        """Hook run before the groups are first written (composites check children here)."""

    def _group_values(self, t: torch.Tensor) -> list:
        """Per param group: the value at step `t`, or None where the scheduler does not apply."""
        value = self._value(t).to(torch.float32)
        return [value if self._applies(g) else None for g in self.optimizer.param_groups]

    # -- param groups ----------------------------------------------------------------
    def _applies(self, group: dict) -> bool:
        return self.param_group_tags is None or bool(self.param_group_tags & _group_tags(group))

    def _validate_tags_apply(self) -> None:
        if self.param_group_tags is None:
            return
        available = set()
        for g in self.optimizer.param_groups:
            available |= _group_tags(g)
        missing = self.param_group_tags - available
        if missing:
            shown = sorted(repr(t) for t in missing)
            avail = sorted(repr(t) for t in available)
            raise ValueError(
                f"{type(self).__name__} was created with param_group_tags {sorted(map(repr, self.param_group_tags))} "
                f"but none of the optimizer's param groups carries the tag(s) {', '.join(shown)}, so they would "
                f"never be applied. Available tags (None = untagged groups): {', '.join(avail)}. Fix the tags or "
                f"add them to the param groups (`{{'params': ..., 'tags': ...}}`)."
            )

    def _attach_groups(self) -> None:
        """Each applicable group's value becomes a float32 0-d tensor (kept if it is one)."""
        key = self.param_group_key
        for gi, group in enumerate(self.optimizer.param_groups):
            if not self._applies(group):
                continue
            if key not in group:
                raise ValueError(
                    f"{type(self).__name__} schedules '{key}', but param group {gi} of "
                    f"{type(self.optimizer).__name__} has no '{key}' hyper-parameter."
                )
            v = group[key]
            if isinstance(v, torch.Tensor):
                if v.numel() != 1:
                    raise ValueError(f"param group {gi}'s '{key}' must be a number or a 0-d tensor, got a tensor "
                                     f"of shape {tuple(v.shape)}.")
            elif not _is_number(v):
                raise TypeError(f"param group {gi}'s '{key}' must be a number or a 0-d tensor, got {v!r}.")
            self.optimizer.schedule_hyperparameter(gi, key)

    def _write_groups(self) -> None:
        """group[key] <- the value at last_epoch, in place (construction and loading)."""
        self._write_values(self._group_values(self.last_epoch))

    def _write_values(self, values) -> None:
        """group[key] <- values[i] for every group i whose value is not None, in place."""
        key, groups = self.param_group_key, self.optimizer.param_groups
        name = type(self).__name__
        if not isinstance(values, (list, tuple)) or len(values) != len(groups):
            got = f"{len(values)} values" if isinstance(values, (list, tuple)) else f"a {type(values).__name__}"
            raise ValueError(f"{name}.update_groups() takes one value per param group of the optimizer "
                             f"({len(groups)}; None for a group to leave alone), got {got}.")
        with torch.no_grad():
            for gi, (group, value) in enumerate(zip(groups, values)):
                if value is None:
                    continue
                if not self._applies(group):
                    raise ValueError(f"{name}.update_groups(): param group {gi} is not scheduled by this scheduler "
                                     f"(its param_group_tags leave it out); pass None for it.")
                value = torch.as_tensor(value, dtype=torch.float32)
                if value.numel() != 1:
                    raise ValueError(f"{name}.update_groups(): the value for param group {gi} must be a number or "
                                     f"a one-element tensor, got a tensor of shape {tuple(value.shape)}.")
                group[key].copy_(value.reshape(()))

    # -- public API ------------------------------------------------------------------
    def step(self, *args, **kwargs) -> None:
        """Advance the schedule by one step and write the new value into the param
        groups: `increment_last_epoch()` then `update_last_value()`."""
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.step() takes no arguments: the step comes from `last_epoch`. To resume "
                f"at another step, use load_state_dict()."
            )
        self._check_not_owned("step")
        self._check_step_inside_compiled_step("step")
        self.increment_last_epoch()
        self._step_count += 1
        self.update_last_value()

    def increment_last_epoch(self) -> None:
        """Advance `last_epoch` by one, in place, or by none when the optimizer's last step
        in this step was skipped by a GradScaler (non-finite gradients). The param groups
        are not written (that is `update_last_value()`). Tensor math only: it runs the
        same eagerly and inside a traced step."""
        self._check_not_owned("increment_last_epoch")
        self._check_step_inside_compiled_step("increment_last_epoch")
        applied = if_finite.step_applied(self.optimizer)
        inc = 1 if applied is None else applied.to(torch.int64)
        with torch.no_grad():
            self.last_epoch.add_(inc)

    def update_last_value(self) -> None:
        """Compute the closed form at the current `last_epoch` (`get()`) and write it into
        the param groups this scheduler applies to (`update_groups`); `get_last_value()`
        returns it afterwards. `last_epoch` is not changed."""
        self._check_not_owned("update_last_value")
        self.update_groups(self.get())

    def update_groups(self, values) -> None:
        """Write `values` (one per param group of the optimizer: a number or a one-element
        tensor, None for a group to leave alone) into the groups' float32 0-d tensors, in
        place. A value for a group the scheduler does not apply to is a ValueError.
        (The real system defers this write to the end of the step, where it only mirrors
        the device values; here the groups' tensors are the values the optimizer reads,
        so the write is immediate.)"""
        self._check_not_owned("update_groups")
        self._write_values(values)

    def _check_not_owned(self, member: str) -> None:
        if self._owner is not None:
            raise RuntimeError(
                f"This {type(self).__name__} is part of a {type(self._owner).__name__}, which evaluates it and "
                f"writes the param groups; call {member}() on the {type(self._owner).__name__} instead."
            )

    def _check_step_inside_compiled_step(self, member: str = "step") -> None:
        """During a CSX run the schedule advances inside the compiled step (its counter
        is state of the step); advancing it between steps would advance it twice as fast
        as the script reads on the CPU backend, or not at all where the step has none."""
        b = _backend.backend()
        if b is not None and b.is_csx and b.run.executor is not None and not b.is_tracing:
            raise RuntimeError(
                f"{type(self).__name__}.{member}() was called during a CSX run but outside the @cstorch.trace step. "
                f"On CSX the schedule advances inside the compiled step, so call scheduler.{member}() inside the "
                f"traced step function, after optimizer.step()."
            )

    def get(self) -> list:
        """The closed form at the current `last_epoch` for every param group (None for the
        groups this scheduler does not apply to); new tensors, the groups are untouched."""
        with torch.no_grad():
            return self._group_values(self.last_epoch)

    def get_last_value(self) -> list:
        """The value each param group holds now (None for groups this scheduler does not
        apply to), as new 0-d tensors."""
        key = self.param_group_key
        return [g[key].detach().clone() if self._applies(g) else None for g in self.optimizer.param_groups]

    # -- state dict ------------------------------------------------------------------
    def _children(self) -> list:
        return []

    def state_dict(self) -> dict:
        """Hyper-parameters, `last_epoch` (a tensor), `_last_value`, ...; not the optimizer."""
        state = {}
        for k, v in vars(self).items():
            if k in _NOT_STATE:
                continue
            if k == "_schedulers":
                v = [s.state_dict() for s in v]
            elif isinstance(v, Scheduler):
                v = v.state_dict()
            elif isinstance(v, torch.Tensor):
                v = v.detach().clone()
            state[k] = v
        state["_last_value"] = self.get_last_value()
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore hyper-parameters and the step (copied into `last_epoch` in place) and
        rewrite the param groups. The dict is not modified. During a CSX run the next
        step uploads the loaded values (`cstorch.run.host_edits`)."""
        state = dict(state_dict)
        last_epoch = state.pop("last_epoch", None)
        children = state.pop("_schedulers", None)
        for k in _IGNORED_ON_LOAD:
            state.pop(k, None)
        unknown = []
        for k, v in state.items():
            if k in vars(self) or isinstance(getattr(type(self), k, None), property):
                if k == "param_group_tags":
                    v = _normalize_tags(type(self).__name__, v)
                setattr(self, k, v)
            else:
                unknown.append(k)
        if unknown:
            warnings.warn(f"{type(self).__name__}.load_state_dict: ignoring unknown keys {sorted(unknown)}")
        if children is not None:
            mine = self._children()
            if len(children) != len(mine):
                raise ValueError(f"{type(self).__name__}.load_state_dict: the state dict holds {len(children)} "
                                 f"nested schedulers, this scheduler has {len(mine)}.")
            for child, child_state in zip(mine, children):
                child.load_state_dict(child_state)
        self._validate_tags_apply()
        self._attach_groups()
        if last_epoch is not None:
            copy_into(self.last_epoch, last_epoch, "scheduler last_epoch")
        self._write_groups()

    # -- the run's protocol (cstorch.state.Stateful) --------------------------------
    def step_state(self) -> Iterator[tuple[str, torch.Tensor]]:
        yield "last_epoch", self.last_epoch

    @contextlib.contextmanager
    def bind_step_state(self, traced: Mapping[int, torch.Tensor]) -> Iterator[None]:
        saved = self.last_epoch
        self.last_epoch = traced[id(saved)]
        try:
            yield
        finally:
            self.last_epoch = saved

    def graph_constants(self, prefix: str) -> dict[str, object]:
        return {f"{prefix} ({type(self).__name__}).{k}": v for k, v in self._graph_constants().items()}

    def _graph_constants(self, prefix: str = "") -> dict:
        """Everything (besides `last_epoch`) the closed form is specialised on, as reprs:
        a compiled step must be recompiled if any of it changes."""
        out = {}
        for k, v in vars(self).items():
            if k in _NOT_STATE or k in ("last_epoch", "_step_count"):
                continue
            if k == "_schedulers":
                for i, s in enumerate(v):
                    out.update(s._graph_constants(f"{prefix}{k}[{i}]."))
            elif isinstance(v, Scheduler):
                out.update(v._graph_constants(f"{prefix}{k}."))
            elif not isinstance(v, torch.Tensor):
                out[f"{prefix}{k}"] = repr(sorted(v, key=repr) if isinstance(v, set) else v)
        return out


class _Alias(property):
    """The property of `_alias`; `storage` is the parameter-specific name."""

    storage: str


def _alias(storage: str, doc: str = "") -> property:
    """A generic attribute name stored under a parameter-specific one (e.g. `initial_val`
    kept as `initial_learning_rate`), so state dicts use the specific names."""

    def get(self):
        return getattr(self, storage)

    def set(self, value):
        setattr(self, storage, value)

    prop = _Alias(get, set)
    # set on the instance: a property subclass's own docstring would hide the `doc` argument
    prop.__doc__ = doc or f"The same value as `{storage}` (an alias: setting one sets the other)."
    prop.storage = storage
    return prop
