"""Host-side reads and edits of a CSX run's state between steps behave as on the CPU
backend, the reference.

During a CSX run the device holds the newest values of the state a step changes, and
the torch tensors are stale until something syncs them. So:

1. `SyncOnTouch`: after a step is dispatched, a `TorchDispatchMode` is armed on the
   thread that runs the steps. The first torch op there that touches the storage of a
   state tensor the step changed (`p.clone()`, `p.mul_(0.5)`, `model.state_dict()`,
   `print(p)`, ...) first brings the run's state to the host, so reads see the
   device's values and edits start from them. The mode disarms at the next step.
   Where another dispatch mode is already active (it would be popped in our place),
   the state is synced right after each step instead.
2. `StateWatch.check()`, before each step, is the one place that decides what changed
   on the host since the upload:
   - the state tensors the guard saw written (through any alias) are uploaded again;
   - a tensor written in place on the host since host and device last agreed (its
     `_version` moved: `with torch.no_grad(): p.mul_(0.5)`, `load_state_dict` of a
     model, optimizer, scheduler or grad scaler) is uploaded again (`DeviceState`);
   - numbers assigned to `group["lr"]` / `group["weight_decay"]` reach the
     optimizer's tensors (`Optimizer.hyperparameter`), and are uploaded the same way;
   - a tensor whose storage was swapped (`p.data = x`) is uploaded again;
   - an object replaced where the step found a state tensor (a Parameter or buffer on
     a module, in an optimizer's param groups or state, a scheduler's or scaler's
     tensor): the state is collected again, and when every name the compiled step
     reads still resolves consistently (one object per compiled tensor, the same shape,
     dtype and requires_grad) the step is bound to the new objects and their values
     uploaded; the replaced objects first receive the device's last values;
   - anything that would need another graph is a `StaticGraphError` naming the tensor:
     `requires_grad_` flipped, a new shape or dtype, a Parameter replaced on the module
     but not in the optimizer that updates it (on the CPU backend the optimizer would
     go on updating a tensor the model no longer uses), state that no longer exists;
   - a graph constant changed (`StepState.frozen`: a module's train/eval mode, a frozen
     hyper-parameter such as an optimizer's momentum, a scheduler's milestones) is a
     `StaticGraphError` naming it.

   The per-step cost is a few C-level passes over the compiled step's state tensors
   (version, requires_grad, data pointer), the modules' train flags, one identity check
   of the optimizers' param groups (the lists, each group's values and its params) and
   the few graph constants of the schedulers, scalers and metrics, all against one
   snapshot (`StateWatch._snapshot`). The graph constants are compared and the state is
   collected again only when one of those moved: a module registered a new Parameter,
   buffer or submodule (global registration hooks bump a counter), a group's value was
   assigned, a param list or a small object's tensors changed identity.
"""
from __future__ import annotations

from operator import attrgetter, is_
from typing import Optional

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from cstorch_jax import StaticGraphError, TensorSpec

from ..state import StepState

_requires_grad = attrgetter("requires_grad")
_training = attrgetter("training")
_data_ptr = torch.Tensor.data_ptr

# bumped whenever any module registers a Parameter, buffer or submodule (assignment included)
_registrations = [0]
_hooks_installed = False


def _bump(*_args) -> None:
    _registrations[0] += 1


def _install_registration_hooks() -> None:
    global _hooks_installed
    if not _hooks_installed:
        torch.nn.modules.module.register_module_parameter_registration_hook(_bump)
        torch.nn.modules.module.register_module_buffer_registration_hook(_bump)
        torch.nn.modules.module.register_module_module_registration_hook(_bump)
        _hooks_installed = True


def _storage(t) -> Optional[int]:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # tensors without a storage of their own (wrapper subclasses, fakes)
        return None


class SyncOnTouch(TorchDispatchMode):
    """Armed between CSX steps on the thread that runs them: syncs the run's state to the
    host before the first op that touches a stale state tensor, and records the state
    tensors ops write (through any alias: `p.data.mul_()` moves no version counter of
    `p`) so the next step uploads them (see the module docstring)."""

    def __init__(self, run):
        super().__init__()
        self._run = run
        self._stale: set[int] = set()            # storages the device has newer values of
        self._watched: dict[int, list] = {}      # storage -> the state tensors on it
        self._merged: list = []                  # the programs' storage maps merged in
        self._written: dict[int, torch.Tensor] = {}
        self._pushed = False

    def arm(self, watch: "StateWatch") -> None:
        """After a step of `watch`'s program (the state it changed is stale on the host)."""
        if not any(m is watch.storage_map for m in self._merged):
            self._merged.append(watch.storage_map)
            for ptr, tensors in watch.storage_map.items():
                self._watched.setdefault(ptr, []).extend(tensors)
        self._stale |= watch.mutated_storages
        if self._pushed:
            return
        if torch._C._len_torch_dispatch_stack() > 0:  # another mode would pop ours: sync now instead
            self._run.sync_state_to_host()
            return
        torch._C._push_on_torch_dispatch_stack(self)
        self._pushed = True

    def disarm(self) -> None:
        """At a step: host code runs no more until the step has been dispatched."""
        self._stale.clear()
        if not self._pushed:
            return
        self._pushed = False
        depth = torch._C._len_torch_dispatch_stack()
        if depth and torch._C._get_dispatch_stack_at(depth - 1) is self:
            torch._C._pop_torch_dispatch_stack(None)
            return
        stack = [torch._C._get_dispatch_stack_at(i) for i in range(depth)]
        if not any(mode is self for mode in stack):  # popped by someone else's mode exit
            return
        above = []
        while True:  # pop ours from under the modes pushed since (and push those back)
            mode = torch._C._pop_torch_dispatch_stack(None)
            if mode is self:
                break
            above.append(mode)
        for mode in reversed(above):
            torch._C._push_on_torch_dispatch_stack(mode)

    def clear(self) -> None:
        """At the end of a run: disarm and forget the programs' state."""
        self.disarm()
        self._watched.clear()
        self._merged.clear()
        self._written.clear()

    def host_synced(self) -> None:
        """The host holds every value now: nothing is stale until the next step."""
        self._stale.clear()

    def take_written(self) -> list[torch.Tensor]:
        """The state tensors written on the host since the last call."""
        written, self._written = list(self._written.values()), {}
        return written

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self._watched:
            touched = [(a, ptr) for a in _tensor_args(args, kwargs) if (ptr := _storage(a)) in self._watched]
            if touched:
                if self._stale and any(ptr in self._stale for _, ptr in touched):
                    self._run.sync_state_to_host()
                schema = getattr(func, "_schema", None)
                if schema is None or schema.is_mutable:
                    for ptr in _written_storages(func, args, kwargs):
                        for t in self._watched.get(ptr, ()):
                            self._written[id(t)] = t
        return func(*args, **kwargs)


def _tensor_args(args, kwargs) -> list[torch.Tensor]:
    """The tensors among an ATen op's arguments: given directly, or in a list or tuple
    (the only nesting an op schema has; cheaper than a pytree walk, per host op)."""
    out = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(t for t in a if isinstance(t, torch.Tensor))
    return out


def _written_storages(func, args, kwargs) -> set:
    """Storages of the arguments `func` writes (its schema's mutable arguments; every
    tensor argument of an op without a schema)."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return {_storage(t) for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
    out = set()
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = args[i] if i < len(args) else kwargs.get(arg.name)
        for t in pytree.tree_leaves(value):
            if isinstance(t, torch.Tensor):
                out.add(_storage(t))
    return out


class StateWatch:
    """Finds host edits of a compiled step's state before each call (see the module
    docstring). `tensors` is the program's list of state tensors in executable order
    (rebinding replaces its items); `used` gives each one's index in `state.tensors`."""

    def __init__(self, state: StepState, tensors: list[torch.Tensor], used: list[int], names: list[str],
                 specs: list[TensorSpec], n_mutated: int):
        _install_registration_hooks()
        self.state = state
        self.tensors = tensors
        self.used = used
        self.n_mutated = n_mutated
        self.names = names
        self.specs = specs
        by_slot: dict[int, list[str]] = {}
        for name, slot in state.slot_of.items():
            by_slot.setdefault(slot, []).append(name)
        #: per compiled tensor, every name the step found it under
        self.aliases = [by_slot[i] for i in used]
        self.requires_grad = list(map(_requires_grad, tensors))
        #: the compiled tensors that are a model's parameters or buffers (where `requires_grad_`
        #: and `p.data = x` apply), by position
        self.model_positions = [i for i, names in enumerate(self.aliases) if any(n.startswith("model") for n in names)]
        #: what the graph was specialised on besides its tensors (`StepState.frozen`)
        self.frozen = state.frozen()
        self._snapshot()

    def _snapshot(self) -> None:
        """What `_moved` and the per-step passes of `check` compare with: the registration
        counter, the model tensors' requires_grad flags and data pointers, the storages of
        the state, the constrained models' modules and their train flags, every
        optimizer's param groups (each group's values and its params, as objects), the
        small objects' tensors and the graph constants of the other constrained objects."""
        self.registrations = _registrations[0]
        self.model_tensors = [self.tensors[i] for i in self.model_positions]
        self.model_requires_grad = [self.requires_grad[i] for i in self.model_positions]
        self.data_ptrs = list(map(_data_ptr, self.model_tensors))
        #: storages of the tensors the step changes (stale on the host after a step; see SyncOnTouch)
        self.mutated_storages = frozenset(filter(None, map(_storage, self.tensors[: self.n_mutated])))
        #: storage -> the step's state tensors on it
        self.storage_map: dict[int, list] = {}
        for t in self.tensors:
            ptr = _storage(t)
            if ptr is not None:
                self.storage_map.setdefault(ptr, []).append(t)
        constrained = self.state.constrained
        self.modules = [m for _, obj in constrained if obj.state_kind == "model" for m in obj.module.modules()]
        self.training = list(map(_training, self.modules))
        #: per optimizer: its param groups and, per group, its values and its params, as objects
        self.optimizers = [(opt, list(opt.param_groups),
                            [(list(g.values()), list(g["params"])) for g in opt.param_groups])
                           for opt in self.state.objects("optimizer")]
        self.small = [(obj, [t for _, t in obj.step_state()]) for _, obj in self.state.entries
                      if obj.state_kind in ("scheduler", "grad_scaler", "metric")]
        self.other_constants = [(prefix, obj, obj.graph_constants(prefix)) for prefix, obj in constrained
                                if obj.state_kind not in ("model", "optimizer")]

    # -- per step -----------------------------------------------------------------------
    def check(self, device_state, written: list, before_edit=lambda: None) -> None:
        """Before a step: raise StaticGraphError for an edit that changes the graph; make
        the other edits reach the device at the next upload (`written`: the state tensors
        the host guard saw written since the last step; the device state re-uploads a
        tensor whose `_version` moved by itself). `before_edit()` is called before an
        edit changes what the device state holds (the run launches the steps called
        before the edit)."""
        if written:
            before_edit()
            device_state.forget(written)
        if self._moved():
            self._check_frozen()  # a graph constant changed: StaticGraphError
            before_edit()
            self._rebind(device_state)  # an object replaced, a value assigned: collected again
        if list(map(_requires_grad, self.model_tensors)) != self.model_requires_grad:
            for i in self.model_positions:
                t, want = self.tensors[i], self.requires_grad[i]
                if t.requires_grad != want:
                    raise StaticGraphError(
                        f"{self.names[i]} had requires_grad={want} when the step was compiled and now has "
                        f"requires_grad={t.requires_grad}. Whether a tensor is trained is frozen into the compiled "
                        f"step: set requires_grad before the first step (or compile another step for the new setting)."
                    )
        ptrs = list(map(_data_ptr, self.model_tensors))
        if ptrs != self.data_ptrs:  # `t.data = other`: new values without a version change
            before_edit()
            device_state.forget([t for t, old, new in zip(self.model_tensors, self.data_ptrs, ptrs) if old != new])
            self._snapshot()

    def _moved(self) -> bool:
        """Whether anything `_snapshot` holds by identity may have changed since: a
        registration on any module, a constrained module's train flag, an optimizer's
        param groups (the list, a group's values, a group's params), a small object's
        tensors or another object's graph constants. Then `check` compares the graph
        constants (`_check_frozen`) and collects the state again (`_rebind`)."""
        if self.registrations != _registrations[0]:
            return True
        if list(map(_training, self.modules)) != self.training:
            return True
        for opt, groups, contents in self.optimizers:
            now = opt.param_groups
            if len(now) != len(groups) or not all(map(is_, now, groups)):
                return True
            for group, (values, params) in zip(now, contents):
                if len(group) != len(values) or not all(map(is_, group.values(), values)):
                    return True  # a value assigned (`group["lr"] = 0.1` reaches the optimizer's tensor)
                current = group["params"]
                if len(current) != len(params) or not all(map(is_, current, params)):
                    return True
        for obj, tensors in self.small:
            if not all(map(is_, (t for _, t in obj.step_state()), tensors)):
                return True
        return any(obj.graph_constants(prefix) != want for prefix, obj, want in self.other_constants)

    def _check_frozen(self) -> None:
        now = self.state.frozen()
        for key, want in self.frozen.items():
            if now.get(key) != want:
                raise StaticGraphError(
                    f"{key} was {want} when the step was compiled and is now {now.get(key)}. It is frozen into "
                    f"the compiled graph, so it cannot change during a run."
                )

    # -- when an object was replaced ------------------------------------------------------
    def _rebind(self, device_state) -> None:
        current = dict(self.state.collect())
        new_tensors = []
        for names, old, spec, want_grad in zip(self.aliases, self.tensors, self.specs, self.requires_grad):
            missing = [n for n in names if n not in current]
            if missing:
                raise StaticGraphError(
                    f"{missing[0]} is state of the compiled step but no longer exists (a parameter removed from its "
                    f"module or its optimizer, or optimizer state left under a replaced parameter: optimizer state is "
                    f"keyed by the parameter object). The compiled step cannot follow; copy new values into the "
                    f"existing tensors instead."
                )
            found = {id(current[n]): current[n] for n in names}
            if len(found) > 1:
                holders = {id(t): n for n, t in ((n, current[n]) for n in names)}
                shown = " and ".join(sorted(holders.values()))
                raise StaticGraphError(
                    f"{shown} were one tensor when the step was compiled and are now different objects (a "
                    f"Parameter replaced on a module but not in the optimizer that updates it, or the other way "
                    f"round). On the CPU backend the optimizer would then update a tensor the model no longer uses; "
                    f"the compiled step cannot follow. Copy the new values into the existing parameter instead "
                    f"(`with torch.no_grad(): param.copy_(new_values)`), or replace it everywhere it is held."
                )
            new = next(iter(found.values()))
            if new is not old:
                got = TensorSpec.of(new)
                if got != spec:
                    raise StaticGraphError(
                        f"{names[0]} was compiled as {spec} and is now a tensor of {got}; a compiled step cannot "
                        f"change the shape or dtype of its state."
                    )
                if new.requires_grad != want_grad:
                    raise StaticGraphError(
                        f"{names[0]} had requires_grad={want_grad} when the step was compiled and was replaced by a "
                        f"tensor with requires_grad={new.requires_grad}; whether a tensor is trained is frozen into "
                        f"the compiled step."
                    )
            new_tensors.append(new)
        if len({id(t) for t in new_tensors}) != len(new_tensors):
            seen: dict[int, str] = {}
            for names, t in zip(self.aliases, new_tensors):
                if id(t) in seen:
                    raise StaticGraphError(
                        f"{seen[id(t)]} and {names[0]} were two tensors when the step was compiled and are now one "
                        f"object; the compiled step cannot tie them."
                    )
                seen[id(t)] = names[0]
        replaced = [(i, old, new) for i, (old, new) in enumerate(zip(self.tensors, new_tensors)) if new is not old]
        if replaced:  # the replaced objects keep their last values, as they would on the CPU backend
            device_state.sync_to_host([old for _, old, _ in replaced])
            device_state.forget([old for _, old, _ in replaced])
            for i, _, new in replaced:
                self.tensors[i] = new
                self.state.tensors[self.used[i]] = new
        self._snapshot()
