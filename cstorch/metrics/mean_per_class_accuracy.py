"""`MeanPerClassAccuracyMetric`: the accuracy of each class, averaged over classes."""
from __future__ import annotations

from typing import Optional

import torch

from .metric import Metric, _is_tracing
from .utils import _check_num_classes, broadcast_weights, check_class_values, divide_no_nan


class MeanPerClassAccuracyMetric(Metric):
    """For each true class c: (weighted) correct predictions of c / (weighted) examples
    of c; the result is the mean over all `num_classes` classes (a class never seen
    counts as 0, as in tf.metrics.mean_per_class_accuracy).

    Args:
        num_classes: the number of classes (class ids are 0 .. num_classes - 1).
        name: the name the metric is registered under; None: the class name.
    """

    def __init__(self, num_classes: int, name: Optional[str] = None):
        self.num_classes = _check_num_classes(num_classes, type(self).__name__)
        super().__init__(name=name)

    def reset(self):
        self.register_state("total_per_class_correct_predictions", torch.zeros(self.num_classes, dtype=torch.float32))
        self.register_state("total_per_class_tokens", torch.zeros(self.num_classes, dtype=torch.float32))
        self._dtype = None

    def update(self, labels, predictions, weights=None, dtype=None):
        labels, predictions = torch.as_tensor(labels), torch.as_tensor(predictions)
        if labels.shape != predictions.shape:
            raise ValueError(f"`labels` and `predictions` have mismatched shapes of {list(labels.shape)} and "
                             f"{list(predictions.shape)} respectively.")
        ones = torch.ones(labels.shape, dtype=torch.float32)
        w = ones if weights is None else broadcast_weights(weights, labels.shape).to(torch.float32)
        if not _is_tracing():
            check_class_values(labels, labels, self.num_classes)
        labels, predictions, w = labels.reshape(-1), predictions.reshape(-1), w.reshape(-1)
        correct = (labels == predictions).to(torch.float32) * w
        index = labels.long()
        zeros = torch.zeros(self.num_classes, dtype=torch.float32)
        self.total_per_class_correct_predictions.add_(zeros.scatter_add(0, index, correct))
        self.total_per_class_tokens.add_(zeros.scatter_add(0, index, w))
        self._dtype = dtype

    def compute(self) -> torch.Tensor:
        per_class = divide_no_nan(self.total_per_class_correct_predictions, self.total_per_class_tokens)
        result = per_class.mean()
        return result if self._dtype is None else result.to(self._dtype)
