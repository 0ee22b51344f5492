"""`DiceCoefficientMetric`: mean Dice coefficient over classes, for segmentation."""
from __future__ import annotations

import torch

from ._confusion import ConfusionMatrixMetric, mean_over_valid_classes
from .utils import diagonal


def dice_from_confusion_matrix(confusion_matrix: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the counted classes of 2 TP / (2 TP + FP + FN) = 2 TP / (row + column sum)."""
    true_pos = diagonal(confusion_matrix)
    denominator = confusion_matrix.sum(dim=0) + confusion_matrix.sum(dim=1)
    return mean_over_valid_classes(2 * true_pos, denominator, mask)


class DiceCoefficientMetric(ConfusionMatrixMetric):
    """Dice = 2 TP / (2 TP + FP + FN) per class, from the accumulated (weighted)
    confusion matrix, averaged over the classes that appear in labels or predictions
    and are not in `ignore_classes`.

    Args:
        num_classes: the number of classes (class ids are 0 .. num_classes - 1).
        ignore_classes: class ids left out of the average.
        name: the name the metric is registered under; None: the class name.
    """

    def update(self, labels, predictions, weights=None, dtype=None):
        self._accumulate(labels, predictions, weights, dtype)

    def compute(self) -> torch.Tensor:
        return self._cast(dice_from_confusion_matrix(self.confusion_matrix, self.mask))
