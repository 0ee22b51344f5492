"""`DataExecutor.profiler`: what a run measured, as its activities.

    rate = executor.profiler.rate_tracker.rate            # inside a step closure, say
    total = executor.profiler.rate_tracker.total_samples

A `Profiler` holds one instance of each `Activity` class it was given (by default
`RateTrackerActivity`, named "rate_tracker"). The executor calls `profiler.step(batch_size)`
once per step, after the step and before its closures. Reading `profiler.<name>` computes
that activity and returns it; its values are then read as attributes, and calling it
returns them all as a dict.

`RateTrackerActivity` values: `total_samples` (samples of the steps so far), `total_time`
(seconds since its clock started), `rate` (smoothed samples/second since the previous read
of `rate`), `global_rate` and `samples_per_sec` (samples/second since the clock started),
`flops_utilization` (None: there is no wafer peak to compare with). The clock starts when
the first step ends, so compiling the step is not counted (the first step's samples are).
Read inside a step closure, the values are those of the closure's step (its samples
and those before, timed when the closure runs), also on CSX where a step's closures run
after the next step was dispatched; elsewhere, those of the last step run.
Each value is a float that may also be called (`rate` and `rate()` give the same number),
for scripts written against either form.
"""
from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import Any, Dict, List, Optional, Type

from .._backend import backend

from .tracker import RateTracker


class Value(float):
    """A measured number, usable as `x` or `x()`."""

    def __call__(self) -> float:
        return float(self)


class Activity(ABC):
    """One quantity a Profiler tracks, updated with each step's batch size."""

    @classmethod
    @abstractmethod
    def name(cls) -> str:
        """The attribute the Profiler serves this activity as."""

    @abstractmethod
    def update(self, batch_size) -> None:
        """Account for one step of `batch_size` samples."""

    @abstractmethod
    def compute(self) -> Any:
        """The current value(s)."""

    def __call__(self) -> Any:
        return self.compute()

    def __str__(self) -> str:
        return str(self.compute())


class RateTrackerActivity(Activity):
    """Samples and samples/second of the run (see the module docstring)."""

    _KEYS = ("total_samples", "total_time", "rate", "global_rate", "samples_per_sec", "flops_utilization")

    def __init__(self):
        self._tracker = RateTracker()
        self._steps: List[int] = []  # each step's batch size, in order
        self._fed = 0  # how many of them the tracker has counted
        self._result: Optional[dict] = None
        self._result_step: Optional[int] = None

    @classmethod
    def name(cls) -> str:
        return "rate_tracker"

    def update(self, batch_size) -> None:
        if not self._steps:  # the clock starts after the first (compiling) step
            self._tracker.reset_time()
        self._steps.append(batch_size or 0)
        self._result = None

    def _as_of(self) -> int:
        """The step whose values are read: the running closure's, else the last one."""

        b = backend()
        step = b.run.closure_iteration if b is not None else None
        last = len(self._steps) - 1
        return last if step is None or step < 0 else min(step, last)

    def compute(self) -> dict:
        step = self._as_of()
        if self._result is None or self._result_step != step:
            while self._fed <= step:
                self._tracker.add(self._steps[self._fed])
                self._fed += 1
            samples, seconds = float(sum(self._steps[:step + 1])), self._tracker.elapsed_seconds()
            overall = samples / seconds if seconds > 0 else 0.0
            self._result = {"total_samples": samples, "total_time": seconds, "rate": self._tracker.rate(),
                            "global_rate": overall, "samples_per_sec": overall, "flops_utilization": None}
            self._result_step = step
        return copy.deepcopy(self._result)

    def _value(self, key: str):
        if self._result is None:
            raise RuntimeError(
                f'Attempting to access "{key}" from {type(self).__name__} before it\'s computed. Compute it by '
                f"calling the activity (`activity()`), or read it through a profiler (`profiler.{self.name()}`), "
                f"which computes it.")
        v = self._result[key]
        return v if v is None else Value(v)

    total_samples = property(lambda self: self._value("total_samples"))
    total_time = property(lambda self: self._value("total_time"))
    rate = property(lambda self: self._value("rate"))
    global_rate = property(lambda self: self._value("global_rate"))
    samples_per_sec = property(lambda self: self._value("samples_per_sec"))
    flops_utilization = property(lambda self: self._value("flops_utilization"))


class Profiler:
    """The activities of one run (see the module docstring). `outdir` is where the
    real system writes `performance.json`; `save()` writes it there on request."""

    def __init__(self, outdir, activities: Optional[List[Type[Activity]]] = None):
        self.outdir = outdir
        classes = list(activities) if activities is not None else [RateTrackerActivity]
        names = set()
        for cls in classes:
            if not (isinstance(cls, type) and issubclass(cls, Activity)):
                raise TypeError(f"Expected activity to be a subclass of Activity, got {type(cls)}")
            name = cls.name()
            if name in names:
                raise ValueError(f'Activity with name "{name}" already exists.')
            if name in ("outdir", "step", "save", "activities"):
                raise ValueError(f'"{name}" is a reserved keyword. Please use a different name for the activity.')
            names.add(name)
        self._activities: Dict[str, Activity] = {cls.name(): cls() for cls in classes}

    def __getattr__(self, name: str):
        activities = self.__dict__.get("_activities") or {}
        if name in activities:
            activity = activities[name]
            activity()  # compute now
            return activity
        raise AttributeError(f"{type(self).__name__} has no activity or attribute {name!r}; its activities are "
                             f"{sorted(activities)}")

    @property
    def activities(self) -> Dict[str, Activity]:
        return dict(self._activities)

    def step(self, batch_size) -> None:
        """Account for one step of `batch_size` samples in every activity."""
        for activity in self._activities.values():
            activity.update(batch_size)

    def save(self) -> None:
        """Write the activities' values to `<outdir>/performance.json`."""
        import json
        import os

        values = {name: a() for name, a in self._activities.items()}
        os.makedirs(self.outdir, exist_ok=True)
        with open(os.path.join(self.outdir, "performance.json"), "w") as f:
            json.dump(values if len(values) > 1 else next(iter(values.values())), f, sort_keys=True, indent=4)


__all__ = ["Profiler", "Activity", "RateTrackerActivity", "Value"]
