"""`RecallAtKMetric`: the fraction of the labels found among the top-k predictions."""
from __future__ import annotations

import torch

from ._at_k import AtKMetric
from .auc import _host_value


class RecallAtKMetric(AtKMetric):
    """Recall@K = TP@K / (TP@K + FN@K): per row, TP@K counts the labels among the k
    highest-scored classes and FN@K = num_labels - TP@K; rows are weighted by `weights`
    (a scalar or [batch]).

    Args:
        k: the number of highest-scored classes looked at per row.
        name: the name the metric is registered under; None: the class name.

    Differences from the real system:
        It works on CSX too (the real one raises there).
    """

    def reset(self):
        self.register_state("true_positive_at_k", torch.tensor(0.0))
        self.register_state("false_negative_at_k", torch.tensor(0.0))

    def update(self, labels, predictions, weights=None):
        hits, num_labels, weights = self._hits(labels, predictions, weights)
        self.true_positive_at_k.add_(self._weighted_sum(hits, weights))
        self.false_negative_at_k.add_(self._weighted_sum(num_labels - hits, weights))

    def compute(self):
        """Recall@K as a Python float (a tensor inside a traced step)."""
        return _host_value(self.true_positive_at_k / (self.true_positive_at_k + self.false_negative_at_k))
