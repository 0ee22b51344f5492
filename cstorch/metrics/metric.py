"""`cstorch.metrics.Metric`: the base class of every metric.

A metric is a `torch.nn.Module` whose state is a few buffers (`register_state`).
`update(...)` accumulates into them with in-place tensor ops only, so on the CSX
backend a metric updated inside a `@cstorch.trace` step is part of the compiled step:
its buffers are state of the executable (like parameters and optimizer state), live on
the device during a run and are copied back into the torch tensors at its end.
`compute()` derives the value from the buffers; `float(metric)` reads it.

Instances register with the run (`cstorch.state.registry`) when they are created, by name:
`Metric.registry[name]` is the run's table (a dict of lists holding strong references,
as on the real system; a backend reset starts a new one); `get_all_metrics()` walks
it, and the metrics in it are state of the run's compiled steps.

The instance's `reset`, `update` and `compute` are wrapped at construction:

- `update` runs under `torch.no_grad()` and counts the updates twice: a Python int, and
  an int64 tensor that is state like the buffers. Inside a traced CSX step the body runs
  only once while the compiled step replays it every step, so on CSX (outside a traced
  step) `num_updates` reads the tensor, which counts every replay.
- `compute` caches its result until the next update or reset (eager backends). On CSX
  it is never cached: inside the traced step it returns the traced value; outside a
  step it first brings the host tensors up to the device's values, so it is right both
  during and after a run. With no update at all it raises RuntimeError on CSX.
- `reset` clears the count and the cache. `register_state` called again for an existing
  buffer of the same shape and dtype writes the new value into the existing tensor, so a
  compiled step stays bound to it (reset inside a traced step is captured too).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from types import MethodType
from typing import Any, ClassVar, Iterator, Mapping

import torch

from .. import _backend
from ..state import swap_attributes


class _Empty:
    """Marks 'no cached result'."""

    def __repr__(self) -> str:
        return "<no result>"


_EMPTY = _Empty()


def _csx_backend():
    b = _backend.backend()
    return b if b is not None and b.is_csx else None


def _is_tracing() -> bool:
    """Whether a traced CSX step is being captured now (tensor values are not readable)."""
    b = _csx_backend()
    return b is not None and b.is_tracing


def _wrapped_update(self: "Metric", *args, **kwargs):
    self._cached_result = _EMPTY
    with torch.no_grad():
        result = type(self).update(self, *args, **kwargs)
        self._update_count.add_(1)
    self._num_updates += 1
    return result


def _wrapped_compute(self: "Metric"):
    b = _csx_backend()
    if b is None:
        if self._cached_result is _EMPTY:
            self._cached_result = type(self).compute(self)
        return self._cached_result
    if self.num_updates == 0:
        raise RuntimeError(
            f"Trying to compute metric `{self.name}`, but the metric has not been updated. Computing a metric "
            f"with no update is not supported on CSX: call update() (or the metric itself) in the step first."
        )
    if not b.is_tracing:
        b.run.sync_state_to_host(self.state_tensors().values())  # the device holds the latest state
    return type(self).compute(self)


def _wrapped_reset(self: "Metric", *args, **kwargs):
    b = _csx_backend()
    mid_run = b is not None and not b.is_tracing and b.run.executor is not None
    if mid_run:
        b.run.sync_state_to_host(self.state_tensors().values())
    with torch.no_grad():
        result = type(self).reset(self, *args, **kwargs)
        self._update_count.zero_()
    if mid_run:  # the next step must upload the reset values, not the device's accumulated ones
        b.run.forget_device_copies(list(self.state_tensors().values()))
    self._num_updates = 0
    self._cached_result = _EMPTY
    return result


class _RunMetrics:
    """`Metric.registry`: the current run's metrics by name (`StateRegistry.metrics_by_name`)."""

    def __get__(self, obj, owner) -> "defaultdict[str, list[Metric]]":
        return _backend.run_registry().metrics_by_name


class Metric(torch.nn.Module, ABC):
    """Base class of the metrics: subclasses implement `reset` (create the state with
    `register_state`), `update` (accumulate with in-place tensor ops) and `compute`.

    Args:
        name: the name the metric is registered under (`get_all_metrics()`); None: the class name.
    """

    registry = _RunMetrics()
    state_kind: ClassVar[str] = "metric"

    def __init__(self, name: str | None = None):
        super().__init__()
        if name is not None and not isinstance(name, str):
            raise TypeError(f"A metric's name must be a string, got {type(name).__name__}")
        self.name = name or type(self).__name__
        self._num_updates = 0
        # the update count as step state (a plain attribute, not a buffer)
        self._update_count = torch.zeros((), dtype=torch.int64)
        self._cached_result: Any = _EMPTY
        self.reset = MethodType(_wrapped_reset, self)
        self.update = MethodType(_wrapped_update, self)
        self.compute = MethodType(_wrapped_compute, self)
        self.reset()
        _backend.run_registry().register(self)

    @property
    def num_updates(self) -> int:
        """How many times the metric was updated since it was created or last reset
        (on CSX, outside a traced step, every replay of a compiled update counts)."""
        b = _csx_backend()
        if b is None or b.is_tracing:
            return self._num_updates
        b.run.sync_state_to_host([self._update_count])  # during a run the device holds the count
        return int(self._update_count)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The tensors a compiled step is bound to, by attribute name: the state buffers
        and the update count."""
        out = {name: t for name, t in self._buffers.items() if t is not None}
        out["_update_count"] = self._update_count
        return out

    # -- the run's protocol (cstorch.state.Stateful) -----------------------------------
    def step_state(self) -> Iterator[tuple[str, torch.Tensor]]:
        for attr, t in self.state_tensors().items():
            yield f"{self.name}.{attr.lstrip('_')}", t

    def bind_step_state(self, traced: Mapping[int, torch.Tensor]):
        return swap_attributes(self, {attr: traced[id(t)] for attr, t in self.state_tensors().items()})

    def graph_constants(self, prefix: str) -> dict[str, object]:
        return {}

    @abstractmethod
    def reset(self) -> None:
        """(Re)create the metric state with `register_state`."""

    @abstractmethod
    def update(self, *args, **kwargs) -> None:
        """Accumulate one batch into the state (in-place tensor ops only)."""

    @abstractmethod
    def compute(self) -> Any:
        """The metric's value from the current state."""

    def register_state(self, name: str, tensor: torch.Tensor, persistent: bool = False) -> None:
        """Register `tensor` as the state buffer `name` (in `state_dict()` only when
        `persistent`). An existing buffer of the same shape and dtype is overwritten in
        place, keeping its identity."""
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"Metric state {name!r} must be a tensor, got {type(tensor).__name__}")
        current = self._buffers.get(name)
        if current is not None and current.shape == tensor.shape and current.dtype == tensor.dtype:
            with torch.no_grad():
                current.copy_(tensor)
            if persistent:
                self._non_persistent_buffers_set.discard(name)
            else:
                self._non_persistent_buffers_set.add(name)
            return
        self.register_buffer(name, tensor, persistent=persistent)

    def forward(self, *args, **kwargs) -> Any:
        """Update with one batch, then return the computed value."""
        self.update(*args, **kwargs)
        return self.compute()

    def __float__(self) -> float:
        return float(self.compute())

    def extra_repr(self) -> str:
        return f"name={self.name!r}"


def get_all_metrics() -> Iterator[tuple[str, Metric]]:
    """Every registered metric as (name, metric); names shared by several metrics get a
    `.i` suffix (their index in creation order)."""
    for name, metrics in list(Metric.registry.items()):
        for i, metric in enumerate(list(metrics)):
            yield (f"{name}.{i}" if len(metrics) > 1 else name), metric


def live_metrics() -> list[Metric]:
    """The run's metrics, each once, in registry order (their state is step state)."""
    return _backend.run_registry().objects("metric")
