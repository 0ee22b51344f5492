"""`PerplexityMetric`: exp of the mean loss per token."""
from __future__ import annotations

import torch

from .metric import Metric
from .utils import broadcast_weights


class PerplexityMetric(Metric):
    """exp(sum(loss) / number of tokens) over every update. `loss` is the loss summed
    over the batch's tokens (a tensor of per-token losses is summed). The tokens are
    the elements of `labels`, or with `weights` those whose weight is > 0.

    Args:
        name: the name the metric is registered under; None: the class name.
    """

    def reset(self):
        self.register_state("total_loss", torch.tensor(0.0))
        self.register_state("total_num_tokens", torch.tensor(0.0))
        self._dtype = None

    def update(self, labels, loss, weights=None, dtype=None):
        labels = torch.as_tensor(labels)
        if weights is None:
            num_tokens = float(labels.numel())
        else:
            num_tokens = (broadcast_weights(weights, labels.shape) > 0).to(torch.float32).sum()
        self.total_loss.add_(torch.as_tensor(loss).to(torch.float32).sum())
        self.total_num_tokens.add_(num_tokens)
        self._dtype = dtype

    def compute(self) -> torch.Tensor:
        result = torch.exp(self.total_loss / self.total_num_tokens)
        return result if self._dtype is None else result.to(self._dtype)
