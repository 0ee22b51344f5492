"""The objects that carry step state, and the run-owned registry that finds them.

A stateful object (a model, optimizer, scheduler, grad scaler or metric) gives the run
one protocol, `Stateful`:

- state tensors in: `step_state()` names the tensors a compiled step reads;
- state tensors out: `bind_step_state(traced)` makes the object read the traced
  tensors while a step is captured, so whatever it writes in place is a new value of
  that state (an output of the compiled step);
- `graph_constants(prefix)`: what a compiled step is specialised on besides tensors
  (changing it later is a `StaticGraphError`);
- `state_dict()` / `load_state_dict()` (loads copy into the existing tensors, whose
  identity a compiled step is bound to).

Each object registers with a `StateRegistry` when it is created (models when
`cstorch.compile` sees them). The registry belongs to the run: the backend holds it,
and `cstorch.state.step.StepState` asks it what a step may touch; nothing else is global.
Objects created before any backend exists register with the *pending* registry, which
the next backend adopts (`cstorch._backend`), so a script may create its model and
optimizer before or after `cstorch.backend(...)`. A backend reset drops its registry
and starts a new pending one: everything registered before is forgotten by
construction.

Optimizers, schedulers and grad scalers are held weakly (an object nobody references
can no longer be touched by a step); models are held until the backend goes. Metrics
are held by name in `metrics_by_name`, which is the real API's `Metric.registry`
(strong references, as on the real system); clearing it forgets them.

The RNG key of the compiled steps is run state as well: it lives in the backend's
`Run.device_state` (`cstorch.random`).
"""
from __future__ import annotations

import contextlib
import weakref
from collections import defaultdict
from typing import ClassVar, ContextManager, Iterable, Iterator, Mapping, Protocol, runtime_checkable

import torch

#: the kinds of stateful objects, in the order their tensors are lifted into a step
KINDS = ("model", "optimizer", "scheduler", "grad_scaler", "metric")


@runtime_checkable
class Stateful(Protocol):
    """What an object that carries step state gives the run (see the module docstring)."""

    state_kind: ClassVar[str]

    def step_state(self) -> Iterable[tuple[str, torch.Tensor]]:
        """The state tensors, each with a name local to the object, in a fixed order."""

    def bind_step_state(self, traced: Mapping[int, torch.Tensor]) -> ContextManager:
        """Within the block the object reads `traced[id(t)]` wherever it holds a state
        tensor `t` (`traced` also maps every traced tensor to itself)."""

    def graph_constants(self, prefix: str) -> dict[str, object]:
        """Values (as reprs or plain values) a compiled step is specialised on."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state_dict: dict) -> None: ...


class ModelState:
    """A model (any `torch.nn.Module`) as a `Stateful`: its parameters and buffers are
    state, bound by reparametrizing the module; its modules' train/eval flags are
    graph constants."""

    state_kind: ClassVar[str] = "model"

    def __init__(self, module: torch.nn.Module):
        self.module = module

    def step_state(self) -> Iterator[tuple[str, torch.Tensor]]:
        yield from self.module.named_parameters()
        yield from self.module.named_buffers()

    def bind_step_state(self, traced: Mapping[int, torch.Tensor]) -> ContextManager:
        return swap_module_tensors(self.module, traced)

    def graph_constants(self, prefix: str) -> dict[str, object]:
        return {f"{prefix}.{n or '<root>'}.training": m.training for n, m in self.module.named_modules()}

    def state_dict(self) -> dict:
        return self.module.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.module.load_state_dict(state_dict)


class StateRegistry:
    """The stateful objects of one run, by kind, in registration order."""

    def __init__(self):
        self._weak: dict[str, dict[int, weakref.ref]] = {k: {} for k in KINDS if k not in ("model", "metric")}
        self._models: list[ModelState] = []
        #: the real API's `Metric.registry`: metric name -> metrics of that name, in creation order
        self.metrics_by_name: defaultdict[str, list] = defaultdict(list)

    def register(self, obj) -> None:
        """Register a `Stateful` object (a model through `register_model`)."""
        kind = obj.state_kind
        if kind == "model":
            raise TypeError("register a model with register_model(module)")
        if kind == "metric":
            self.metrics_by_name[obj.name].append(obj)
            return
        key = id(obj)
        table = self._weak[kind]
        table[key] = weakref.ref(obj, lambda _, key=key, table=table: table.pop(key, None))

    def unregister(self, obj) -> None:
        """Stop treating `obj` as state of this run (e.g. a scheduler a composite now evaluates)."""
        if obj.state_kind == "metric":
            for metrics in self.metrics_by_name.values():
                metrics[:] = [m for m in metrics if m is not obj]
        else:
            self._weak[obj.state_kind].pop(id(obj), None)

    def register_model(self, module: torch.nn.Module) -> None:
        if not any(m.module is module for m in self._models):
            self._models.append(ModelState(module))

    def objects(self, kind: str) -> list:
        """The live objects of `kind` (models as `ModelState`s), in registration order."""
        if kind == "model":
            return list(self._models)
        if kind == "metric":
            seen: dict[int, object] = {}
            for metrics in self.metrics_by_name.values():
                for m in metrics:
                    seen.setdefault(id(m), m)
            return list(seen.values())
        return [obj for obj in (ref() for ref in list(self._weak[kind].values())) if obj is not None]

    def __contains__(self, obj) -> bool:
        return any(o is obj for o in self.objects(obj.state_kind))

    @property
    def models(self) -> list[torch.nn.Module]:
        return [m.module for m in self._models]


@contextlib.contextmanager
def swap_module_tensors(module: torch.nn.Module, traced: Mapping[int, torch.Tensor]) -> Iterator[None]:
    """Within the block every parameter or buffer slot of `module` that holds a tensor
    `t` with `id(t) in traced` holds `traced[id(t)]`; the original tensors are back after.

    Slots are (module object, attribute) pairs, each module visited once however many
    names reach it: a submodule registered under two names (`self.ln_f` and
    `self.dec.norm`), or one tensor held by two modules (tied weights), is swapped once
    per slot and restored exactly. (torch's name-keyed `_reparametrize_module` swaps an
    aliased module's slot twice and restores the traced tensor.)"""
    swapped: list[tuple[dict, str, torch.Tensor]] = []
    try:
        for sub in module.modules():  # each module object once
            for table in (sub._parameters, sub._buffers):
                for attr, t in table.items():
                    if t is not None and id(t) in traced and traced[id(t)] is not t:
                        swapped.append((table, attr, t))
                        table[attr] = traced[id(t)]
        yield
    finally:
        for table, attr, t in reversed(swapped):
            table[attr] = t


@contextlib.contextmanager
def swap_attributes(obj, values: Mapping[str, torch.Tensor]) -> Iterator[None]:
    """Within the block, `obj.<name>` is `values[name]` (restored after)."""
    old = {name: getattr(obj, name) for name in values}
    try:
        for name, value in values.items():
            if old[name] is not value:
                setattr(obj, name, value)
        yield
    finally:
        for name, value in old.items():
            if getattr(obj, name) is not value:
                setattr(obj, name, value)
