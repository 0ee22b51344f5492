"""`FBetaScoreMetric`: micro- or macro-averaged F-beta score of multi-class predictions."""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from ._confusion import ConfusionMatrixMetric
from .utils import diagonal, divide_no_nan

_AVERAGES = ("micro", "macro")


def _fbeta(precision: torch.Tensor, recall: torch.Tensor, beta2: float) -> torch.Tensor:
    return divide_no_nan((1.0 + beta2) * precision * recall, beta2 * precision + recall)


def fbeta_from_confusion_matrix(confusion_matrix: torch.Tensor, mask: torch.Tensor, beta: float = 1.0,
                                average_type: str = "micro") -> torch.Tensor:
    """F-beta = (1 + b^2) P R / (b^2 P + R) over the classes of `mask`.

    micro: P and R from the true positives, predictions and labels summed over the
    counted classes. macro: the mean over the counted classes of the per-class scores
    (a class with no support and no prediction scores 0)."""
    true_pos = diagonal(confusion_matrix)
    predicted = confusion_matrix.sum(dim=0)
    actual = confusion_matrix.sum(dim=1)
    beta2 = float(beta) ** 2
    if average_type == "micro":
        tp = (true_pos * mask).sum()
        return _fbeta(divide_no_nan(tp, (predicted * mask).sum()), divide_no_nan(tp, (actual * mask).sum()), beta2)
    per_class = _fbeta(divide_no_nan(true_pos, predicted), divide_no_nan(true_pos, actual), beta2)
    return (per_class * mask).sum() / mask.sum()


class FBetaScoreMetric(ConfusionMatrixMetric):
    """F-beta score, "micro" (default) or "macro" averaged; `ignore_labels` are left out
    of both averages.

    Args:
        num_classes: the number of classes (class ids are 0 .. num_classes - 1).
        beta: the weight of recall relative to precision (> 0; 1: the F1 score).
        average_type: "micro" (from the counts summed over the classes) or "macro" (the mean of the
            per-class scores).
        ignore_labels: class ids left out of both averages.
        name: the name the metric is registered under; None: the class name.
    """

    def __init__(self, num_classes: int, beta: float = 1.0, average_type: str = "micro",
                 ignore_labels: Optional[Sequence[int]] = None, name: Optional[str] = None):
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not beta > 0:
            raise ValueError(f"'beta' should be a positive number, got {beta!r}")
        if average_type not in _AVERAGES:
            raise ValueError(f"The average_type has to be one of {list(_AVERAGES)}, got {average_type!r}.")
        self.beta = float(beta)
        self.average_type = average_type
        super().__init__(num_classes, ignore_labels, name=name)

    def update(self, labels, predictions, dtype=None):
        self._accumulate(labels, predictions, None, dtype)

    def compute(self) -> torch.Tensor:
        return self._cast(fbeta_from_confusion_matrix(self.confusion_matrix, self.mask, self.beta, self.average_type))
