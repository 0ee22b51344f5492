"""`AUCMetric`: area under the ROC or precision-recall curve, approximated on a fixed
grid of thresholds (the TensorFlow `tf.keras.metrics.AUC` method).

For every threshold t the metric accumulates the (weighted) true/false positives and
negatives of the decision `prediction > t`. The thresholds are `num_thresholds` points:
-1e-7, then (i + 1) / (num_thresholds - 1) for i < num_thresholds - 2, then 1 + 1e-7 (or
the given `thresholds`, sorted, between the same two end points). The area is a Riemann
sum over consecutive thresholds:

- ROC: x = false-positive rate, y = recall;  PR: x = recall, y = precision.
- "interpolation": the trapezoid rule (for PR the interpolation of Davis & Goadrich 2006,
  which interpolates true and false positives, not the precision itself);
- "minoring" / "majoring": the smaller / larger of the two heights.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from .metric import Metric, _is_tracing
from .utils import broadcast_weights, divide_no_nan

_CURVES = ("ROC", "PR")
_SUMMATIONS = ("interpolation", "minoring", "majoring")
_EPSILON = 1e-7


def _host_value(t: torch.Tensor):
    """A Python float, except inside a traced step (where only the tensor exists)."""
    return t if _is_tracing() else float(t)


class AUCMetric(Metric):
    """ROC-AUC (default) or PR-AUC of binary predictions in [0, 1]; labels > 0 are
    positives; `weights` (broadcastable to `labels`) weight each example (0 masks).

    Args:
        num_thresholds: the number of thresholds of the grid (an integer > 1), ignored when `thresholds` is
            given.
        curve: "ROC" or "PR".
        name: the name the metric is registered under; None: the class name.
        summation_method: "interpolation", "minoring" or "majoring" (see the module docstring).
        thresholds: the thresholds between the two end points, in [0, 1]; None: the even grid of
            `num_thresholds`.

    Differences from the real system:
        AUC works on CSX too (the real one raises there).
    """

    def __init__(self, num_thresholds: int = 200, curve: str = "ROC", name: Optional[str] = None,
                 summation_method: str = "interpolation", thresholds: Optional[Sequence[float]] = None):
        if curve not in _CURVES:
            raise ValueError(f"Curve must be either ROC or PR. Curve {curve!r} is unknown.")
        if summation_method not in _SUMMATIONS:
            raise ValueError(f"Invalid AUC summation method value: {summation_method!r}. Expected one of "
                             f"{list(_SUMMATIONS)}")
        if thresholds is not None:
            inner = sorted(float(t) for t in thresholds)
            if any(not 0.0 <= t <= 1.0 for t in inner):
                raise ValueError(f"AUCMetric thresholds must lie in [0, 1], got {list(thresholds)}")
        else:
            if isinstance(num_thresholds, bool) or not isinstance(num_thresholds, int) or num_thresholds <= 1:
                raise ValueError(f"num_thresholds must be an int > 1. Got {num_thresholds!r}")
            inner = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        self.curve = curve
        self.summation_method = summation_method
        self.num_thresholds = len(inner) + 2
        # kept as Python numbers: built where used, they are constants of a compiled step
        self._threshold_values = [-_EPSILON, *inner, 1.0 + _EPSILON]
        super().__init__(name=name)

    @property
    def thresholds(self) -> torch.Tensor:
        """The thresholds, end points included, as a float32 [num_thresholds, 1] tensor."""
        return torch.tensor(self._threshold_values, dtype=torch.float32).reshape(-1, 1)

    def reset(self):
        for state in ("true_positive", "true_negative", "false_positive", "false_negative"):
            self.register_state(state, torch.zeros(self.num_thresholds, dtype=torch.float32))

    def update(self, labels, predictions, weights=None):
        labels, predictions = torch.as_tensor(labels), torch.as_tensor(predictions)
        if labels.shape != predictions.shape:
            raise ValueError(f"`labels` and `predictions` have mismatched shapes of {list(labels.shape)} and "
                             f"{list(predictions.shape)} respectively.")
        w = None if weights is None else broadcast_weights(weights, labels.shape).reshape(1, -1).to(torch.float32)
        labels, predictions = labels.reshape(1, -1), predictions.reshape(1, -1).to(torch.float32)
        if not _is_tracing() and labels.numel():
            if float(labels.min()) < 0:
                raise ValueError("Negative values in `labels` tensor are not allowed")
            if float(predictions.min()) < 0 or float(predictions.max()) > 1:
                raise ValueError("Values in `predictions` tensor must be in [0, 1]")
        pred_pos = predictions > self.thresholds  # [num_thresholds, N]
        pred_neg = ~pred_pos
        label_pos = labels > 0
        label_neg = ~label_pos

        def count(mask: torch.Tensor) -> torch.Tensor:
            mask = mask.to(torch.float32)
            return (mask if w is None else mask * w).sum(dim=-1)

        self.true_positive.add_(count(pred_pos & label_pos))
        self.false_positive.add_(count(pred_pos & label_neg))
        self.false_negative.add_(count(pred_neg & label_pos))
        self.true_negative.add_(count(pred_neg & label_neg))

    def _interpolated_pr_auc(self) -> torch.Tensor:
        # TP and P = TP + FP vary linearly between consecutive thresholds A (lower) and B;
        # the precision TP/P integrates in closed form over each interval.
        tp, fn = self.true_positive, self.false_negative
        p = tp + self.false_positive
        d_tp = tp[:-1] - tp[1:]
        d_p = p[:-1] - p[1:]
        slope = divide_no_nan(d_tp, d_p.clamp(min=0))
        intercept = tp[1:] - slope * p[1:]
        both_positive = (p[:-1] > 0) & (p[1:] > 0)
        ratio = torch.where(both_positive, divide_no_nan(p[:-1], p[1:].clamp(min=0)), torch.ones_like(p[1:]))
        area = slope * (d_tp + intercept * torch.log(ratio))
        return divide_no_nan(area, (tp[1:] + fn[1:]).clamp(min=0)).sum()

    interpolate_pr_auc = _interpolated_pr_auc  # the real metric's public name

    def _area(self) -> torch.Tensor:
        if self.curve == "PR" and self.summation_method == "interpolation":
            return self._interpolated_pr_auc()
        tp, fp, fn, tn = self.true_positive, self.false_positive, self.false_negative, self.true_negative
        recall = divide_no_nan(tp, tp + fn)
        if self.curve == "ROC":
            x, y = divide_no_nan(fp, fp + tn), recall
        else:
            x, y = recall, divide_no_nan(tp, tp + fp)
        if self.summation_method == "interpolation":
            heights = (y[:-1] + y[1:]) / 2
        elif self.summation_method == "minoring":
            heights = torch.minimum(y[:-1], y[1:])
        else:
            heights = torch.maximum(y[:-1], y[1:])
        return ((x[:-1] - x[1:]) * heights).sum()

    def compute(self):
        """The area, as a Python float (a tensor inside a traced step)."""
        return _host_value(self._area())
