"""`cstorch.metrics` of the 1.8 API: the 2.x metrics, with 1.8's constructor for
`AccuracyMetric(name, compute_on_system)` and `PerplexityMetric(name,
compute_on_system)`, and `compute_all_metrics()`.

`compute_on_system=True` (the weight-streaming setting) is how every metric works here:
it is updated inside the step (on CSX, in the compiled step) and read after the run
with `float(metric)`. `compute_on_system=False` asked for the host to compute it, a
pipeline-mode feature: accepted on CPU/GPU, where the step already runs on the host,
and a ValueError when the metric is updated on CSX.
"""
from __future__ import annotations

import cstorch
from cstorch.metrics import *  # noqa: F401,F403  (the 2.x metrics)
from cstorch.metrics import __all__ as _metrics_all


class _ComputeOnSystem:
    """The 1.8 constructor `(name, compute_on_system=True)` of a 2.x metric."""

    def __init__(self, name: str, compute_on_system: bool = True):
        if not isinstance(compute_on_system, bool):
            raise TypeError(f"compute_on_system must be True or False, got {compute_on_system!r}")
        super().__init__(name)
        self.compute_on_system = compute_on_system

    def update(self, *args, **kwargs):
        b = cstorch.backend()
        if not self.compute_on_system and b is not None and b.is_csx:
            raise ValueError(f"{type(self).__name__}({self.name!r}, compute_on_system=False): in weight streaming "
                             f"metrics are computed on the system; pass compute_on_system=True.")
        return super().update(*args, **kwargs)


class AccuracyMetric(_ComputeOnSystem, cstorch.metrics.AccuracyMetric):
    """Accuracy (2.x `AccuracyMetric`) with 1.8's constructor `(name,
    compute_on_system=True)`: `metric(labels=..., predictions=...)`, `float(metric)`.

    Args:
        name: the name the metric is registered under.
        compute_on_system: False: 1.8's host computation, refused on CSX when the metric is updated.

    Differences from the real system:
        `compute_on_system=False` (host computation, a pipeline-mode feature) is a
        `ValueError` when the metric is updated on CSX; CPU and GPU accept it.
    """


class PerplexityMetric(_ComputeOnSystem, cstorch.metrics.PerplexityMetric):
    """Perplexity (2.x `PerplexityMetric`) with 1.8's constructor `(name,
    compute_on_system=True)`: `metric(labels=..., loss=...)`, `float(metric)`.

    Args:
        name: the name the metric is registered under.
        compute_on_system: False: 1.8's host computation, refused on CSX when the metric is updated.

    Differences from the real system:
        `compute_on_system=False` (host computation, a pipeline-mode feature) is a
        `ValueError` when the metric is updated on CSX; CPU and GPU accept it.
    """


def compute_all_metrics():
    """(name, float value) of every metric created in this process (2.x
    `get_all_metrics`), as 1.8 evaluation loops iterate them."""
    return [(name, float(metric)) for name, metric in cstorch.metrics.get_all_metrics()]


__all__ = [*_metrics_all, "compute_all_metrics"]
