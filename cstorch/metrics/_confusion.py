"""The state and update shared by the metrics computed from a confusion matrix."""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from .metric import Metric, _is_tracing
from .utils import _check_num_classes, compute_confusion_matrix, compute_mask


class ConfusionMatrixMetric(Metric):
    """Accumulates a float32 [num_classes, num_classes] confusion matrix (rows: labels,
    columns: predictions), weighted by `weights` when given."""

    def __init__(self, num_classes: int, ignore_classes: Optional[Sequence[int]] = None,
                 name: Optional[str] = None):
        self.num_classes = _check_num_classes(num_classes, type(self).__name__)
        self._mask_values = compute_mask(num_classes, ignore_classes).tolist()
        if not any(self._mask_values):
            raise ValueError(f"{type(self).__name__}: every one of the {num_classes} classes is ignored")
        super().__init__(name=name)

    @property
    def mask(self) -> torch.Tensor:
        """float32 [num_classes]: 1 for the classes that count, 0 for the ignored ones
        (built where used from Python numbers, so a compiled step holds it as a constant)."""
        return torch.tensor(self._mask_values, dtype=torch.float32)

    def reset(self):
        self.register_state("confusion_matrix", torch.zeros(self.num_classes, self.num_classes, dtype=torch.float32))
        self._dtype = None

    def _accumulate(self, labels, predictions, weights=None, dtype=None) -> None:
        labels, predictions = torch.as_tensor(labels), torch.as_tensor(predictions)
        if labels.shape != predictions.shape:
            raise ValueError(f"`labels` and `predictions` have mismatched shapes of {list(labels.shape)} and "
                             f"{list(predictions.shape)} respectively.")
        self.confusion_matrix.add_(compute_confusion_matrix(labels, predictions, self.num_classes, weights,
                                                            on_device=_is_tracing()))
        self._dtype = dtype

    def _cast(self, result: torch.Tensor) -> torch.Tensor:
        return result if self._dtype is None else result.to(self._dtype)


def mean_over_valid_classes(numerator: torch.Tensor, denominator: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """mean of numerator / denominator over the classes that are not masked out and whose
    denominator is not 0 (classes absent from labels and predictions); 0 if there is none."""
    numerator, denominator = numerator * mask, denominator * mask
    valid = (denominator != 0).to(torch.float32)
    per_class = numerator / torch.where(denominator > 0, denominator, torch.ones_like(denominator))
    count = valid.sum()
    return torch.where(count > 0, per_class.sum() / count.clamp(min=1), torch.zeros_like(count))
