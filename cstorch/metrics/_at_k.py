"""What Precision@K and Recall@K share: the hits of the top-k predictions."""
from __future__ import annotations

from typing import Optional

import torch

from .metric import Metric


def _check_k(k, who: str) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"{who}: k must be a positive int, got {k!r}")
    return k


class AtKMetric(Metric):
    def __init__(self, k: int, name: Optional[str] = None):
        self.k = _check_k(k, type(self).__name__)
        super().__init__(name=name)

    def _hits(self, labels, predictions, weights):
        """Per row: how many of the row's labels are among its top-k predictions, the
        number of labels per row, and the row weights (None, or [batch])."""
        labels, predictions = torch.as_tensor(labels), torch.as_tensor(predictions)
        who = type(self).__name__
        if predictions.dim() != 2:
            raise ValueError(f"{who}: `predictions` must be [batch_size, num_classes] scores, got shape "
                             f"{list(predictions.shape)}")
        if labels.dim() == 1:
            labels = labels.unsqueeze(-1)
        if labels.dim() != 2 or labels.shape[0] != predictions.shape[0]:
            raise ValueError(f"{who}: `labels` must be [batch_size, num_labels] class ids with the batch size of "
                             f"`predictions` {list(predictions.shape)}, got shape {list(labels.shape)}")
        if self.k > predictions.shape[-1]:
            raise ValueError(f"{who}: k={self.k} is larger than the number of classes {predictions.shape[-1]}")
        if weights is not None:
            weights = torch.as_tensor(weights)
            if weights.dim() != 0 and weights.numel() != labels.shape[0]:
                raise ValueError(f"{who}: `labels`={list(labels.shape)} and `weights`={list(weights.shape)}: "
                                 f"`weights` must be a scalar or a vector of size {labels.shape[0]}")
            weights = weights.to(torch.float32).reshape(-1)
        top = torch.topk(predictions, self.k, dim=-1).indices  # [batch, k]
        hits = (labels.long().unsqueeze(-1) == top.unsqueeze(1)).to(torch.float32).sum(dim=(1, 2))
        return hits, labels.shape[-1], weights

    @staticmethod
    def _weighted_sum(x: torch.Tensor, weights) -> torch.Tensor:
        return (x if weights is None else x * weights).sum()
