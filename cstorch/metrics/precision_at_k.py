"""`PrecisionAtKMetric`: the fraction of the top-k predictions that are labels."""
from __future__ import annotations

import torch

from ._at_k import AtKMetric
from .auc import _host_value


class PrecisionAtKMetric(AtKMetric):
    """Precision@K = TP@K / (TP@K + FP@K): per row of `predictions` [batch, classes],
    TP@K counts the labels (`labels` [batch, num_labels] class ids) among the k
    highest-scored classes and FP@K = k - TP@K; rows are weighted by `weights` (a scalar
    or [batch]).

    Args:
        k: the number of highest-scored classes looked at per row.
        name: the name the metric is registered under; None: the class name.

    Differences from the real system:
        It works on CSX too (the real one raises there).
    """

    def reset(self):
        self.register_state("true_positive_at_k", torch.tensor(0.0))
        self.register_state("false_positive_at_k", torch.tensor(0.0))

    def update(self, labels, predictions, weights=None):
        hits, _, weights = self._hits(labels, predictions, weights)
        self.true_positive_at_k.add_(self._weighted_sum(hits, weights))
        self.false_positive_at_k.add_(self._weighted_sum(self.k - hits, weights))

    def compute(self):
        """Precision@K as a Python float (a tensor inside a traced step)."""
        return _host_value(self.true_positive_at_k / (self.true_positive_at_k + self.false_positive_at_k))
