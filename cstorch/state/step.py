"""The state a traced step may touch, and how it is bound to traced tensors.

`StepState` asks the run's registry (`cstorch.state.registry.StateRegistry`) for its
stateful objects, kind after kind (models, optimizers, schedulers, grad scalers,
metrics), and collects their state tensors (`Stateful.step_state`), each counted once
(tied weights, and an optimizer's parameters, which are the model's, share one entry).
A tensor is named by its object (`model`, or `model<i>` when there are several,
`optimizer<i>`, `scheduler<i>`, `grad_scaler<i>`, `metric<i>`; i counts the objects of
that kind) and its name in the object: `model.fc.weight`, `optimizer0.state.3.exp_avg`,
`optimizer0.param_groups.0.lr`, `scheduler0.last_epoch`, `grad_scaler0.loss_scale`.

Among them are the optimizers' learning rates and weight decays (float32 0-d tensors,
see `cstorch.optim.Optimizer`), the schedulers' step counters and the scalers' loss
scale, so `scheduler.step()` and `scaler.update()` inside the step advance them on the
device and one executable serves the whole schedule. Everything else an object is
specialised on (`Stateful.graph_constants`: train/eval modes, frozen hyper-parameters)
is frozen into the graph; changing it later is an error.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from .registry import KINDS, StateRegistry


class StepState:
    def __init__(self, registry: StateRegistry):
        #: (name prefix, object) for every stateful object of the run, in lifting order
        self.entries: list[tuple[str, object]] = []
        for kind in KINDS:
            objects = registry.objects(kind)
            for i, obj in enumerate(objects):
                prefix = "model" if kind == "model" and len(objects) == 1 else f"{kind}{i}"
                self.entries.append((prefix, obj))
        self.names: list[str] = []
        self.tensors: list[torch.Tensor] = []
        #: every name (tied weights and an optimizer's parameters have several) -> index in `tensors`
        self.slot_of: dict[str, int] = {}
        seen: dict[int, int] = {}
        for name, t in self.collect():
            if id(t) not in seen:
                seen[id(t)] = len(self.tensors)
                self.names.append(name)
                self.tensors.append(t)
            self.slot_of[name] = seen[id(t)]
        self._constrained = list(self.entries)

    def collect(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, tensor) of every state tensor the objects hold now, aliases included."""
        for prefix, obj in self.entries:
            for name, t in obj.step_state():
                yield f"{prefix}.{name}", t

    def objects(self, kind: str) -> list:
        return [obj for _, obj in self.entries if obj.state_kind == kind]

    def restrict_to(self, used: set[int]) -> None:
        """Only objects whose tensors the compiled step uses (ids in `used`) constrain
        later calls; changing an unrelated model's mode is no graph change."""
        self._constrained = [(prefix, obj) for prefix, obj in self.entries
                             if any(id(t) in used for _, t in obj.step_state())]

    @property
    def constrained(self) -> list[tuple[str, object]]:
        """(name prefix, object) of the objects that constrain later calls (`restrict_to`)."""
        return self._constrained

    def frozen(self) -> dict[str, object]:
        """Everything the graph was specialised on that is not a tensor input."""
        out: dict[str, object] = {}
        for prefix, obj in self._constrained:
            out.update(obj.graph_constants(prefix))
        return out

    @contextlib.contextmanager
    def bind(self, traced: list[torch.Tensor]) -> Iterator[None]:
        """Within the block, every stateful object reads the traced tensors."""
        sub = {id(t): tr for t, tr in zip(self.tensors, traced)}
        # a traced tensor maps to itself: an object may already read it (a metric inside a
        # model has its state swapped with the model's buffers)
        sub.update({id(tr): tr for tr in traced})
        with contextlib.ExitStack() as stack:
            for _, obj in self.entries:
                stack.enter_context(obj.bind_step_state(sub))
            yield


def copy_into(target: torch.Tensor, value, what: str = "state") -> None:
    """target <- value (a number, or a tensor of the same shape; one-element values fit
    any one-element target), in place and outside autograd. Loading state goes through
    here: a compiled step is bound to the tensor objects, so their identity must
    survive a load."""
    value = torch.as_tensor(value, dtype=target.dtype)
    if value.shape != target.shape and not (value.numel() == 1 == target.numel()):
        raise ValueError(f"Cannot load {what}: the checkpoint holds shape {list(value.shape)} but the current tensor "
                         f"has shape {list(target.shape)}. Was the checkpoint written for another model?")
    with torch.no_grad():
        target.copy_(value.reshape(target.shape))
