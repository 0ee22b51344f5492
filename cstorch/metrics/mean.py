"""`MeanMetric`: the weighted mean of a stream of values."""
from __future__ import annotations

import torch

from .metric import Metric


class MeanMetric(Metric):
    """sum(value * weight) / sum(weight) over every update; `weight` (default 1) is
    broadcast to the shape of `value`.

    Args:
        name: the name the metric is registered under; None: the class name.
    """

    def reset(self):
        self.register_state("mean_value", torch.tensor(0.0))
        self.register_state("weight", torch.tensor(0.0))
        self._dtype = None

    def update(self, value, weight=1.0, dtype=None):
        value = torch.as_tensor(value, dtype=torch.float32) if not isinstance(value, torch.Tensor) else value
        weight = torch.as_tensor(weight, dtype=torch.float32) if not isinstance(weight, torch.Tensor) else weight
        try:
            weight = torch.broadcast_to(weight, value.shape)
        except RuntimeError:
            raise ValueError(f"MeanMetric: `weight` of shape {list(weight.shape)} cannot be broadcast to the shape "
                             f"of `value` {list(value.shape)}") from None
        value, weight = value.to(torch.float32), weight.to(torch.float32)
        self.mean_value.add_((value * weight).sum())
        self.weight.add_(weight.sum())
        self._dtype = dtype

    def compute(self) -> torch.Tensor:
        result = self.mean_value / self.weight
        return result if self._dtype is None else result.to(self._dtype)
