"""`AccuracyMetric`: the fraction of predictions equal to their labels."""
from __future__ import annotations

import warnings

import torch

from .metric import Metric
from .utils import broadcast_weights


class AccuracyMetric(Metric):
    """correct / total over every update. With `weights`, each correct prediction adds
    its weight and the total counts the elements whose weight is > 0 (weight 0 masks).

    Args:
        name: the name the metric is registered under (`get_all_metrics()`); None: the class name.
    """

    def reset(self):
        self.register_state("total_correct_predictions", torch.tensor(0.0))
        self.register_state("total_num_tokens", torch.tensor(0.0))
        self._dtype = None

    def update(self, labels, predictions, weights=None, dtype=None):
        labels, predictions = torch.as_tensor(labels), torch.as_tensor(predictions)
        if labels.shape != predictions.shape:
            if labels.numel() != predictions.numel():
                raise ValueError(f"AccuracyMetric: `labels` {list(labels.shape)} and `predictions` "
                                 f"{list(predictions.shape)} have different numbers of elements")
            warnings.warn(f"Shapes mismatch in accuracy metric: labels {list(labels.shape)}, predictions "
                          f"{list(predictions.shape)}; predictions are reshaped to the labels' shape")
            predictions = predictions.reshape(labels.shape)
        correct = (labels == predictions).to(torch.float32)
        if weights is None:
            self.total_correct_predictions.add_(correct.sum())
            self.total_num_tokens.add_(float(correct.numel()))
        else:
            weights = broadcast_weights(weights, labels.shape).to(torch.float32)
            self.total_correct_predictions.add_((correct * weights).sum())
            self.total_num_tokens.add_((weights > 0).to(torch.float32).sum())
        self._dtype = dtype

    def compute(self) -> torch.Tensor:
        result = self.total_correct_predictions / self.total_num_tokens
        return result if self._dtype is None else result.to(self._dtype)
